"""Asking a live run to stop, and saying who asked.

A viewer's ``s`` and ``gputui stop`` write who asks into ``NAME.stop`` in the live folder,
then send the run's process SIGUSR1; the run reads the file and stops with that reason,
so its outcome says who stopped it.  SIGTERM and SIGINT to the run stop it too ("received
SIGTERM").  No socket: the kernel already lets only the run's user (or root) signal it,
and the folder, 0700, lets no one else read or write the request.

The signal goes through a pidfd opened before the run's start time is checked, so a pid
reused since the run ended is never signalled.
"""

from __future__ import annotations

import errno
import json
import os
import signal
from pathlib import Path

from gputui.errors import UserError
from gputui.live.registry import LiveRun, Registry
from gputui.safe_write import write_atomic

STOP_SIGNAL = signal.SIGUSR1  # "read NAME.stop": SIGTERM is left meaning "stopped by a signal"


def asked_by(face: str) -> str:
    """Who asks, as the run's outcome will say it: "by gputui stop (pid 4242 on /dev/pts/3)"."""
    try:
        where = f" on {os.ttyname(0)}"
    except OSError:
        where = ""
    return f"by {face} (pid {os.getpid()}{where})"


def request_path(registry: Registry, name: str) -> Path:
    return registry.folder / f"{name}.stop"


def request_stop(run: LiveRun, reason: str, registry: Registry | None = None) -> None:
    """Ask ``run`` to stop, for ``reason``; returns at once (the run stops its process group:
    TERM, then KILL after its grace).  A UserError when the run has ended or is not ours."""
    registry = registry or Registry()
    path = request_path(registry, run.name)
    try:
        write_atomic(path, json.dumps({"reason": reason}) + "\n", private=True)
    except OSError as exc:
        raise UserError(f"{run.name}: cannot ask it to stop: {registry.folder}: {exc.strerror or exc}") from None
    try:
        _signal_if_same_process(run, STOP_SIGNAL)
    except BaseException:
        try:
            path.unlink()
        except OSError:
            pass
        raise


def _signal_if_same_process(run: LiveRun, sig: signal.Signals) -> None:
    try:
        pidfd = os.pidfd_open(run.pid)
    except ProcessLookupError:
        raise UserError(f"{run.name}: has ended (process {run.pid} is gone)") from None
    except OSError as exc:
        if exc.errno not in (errno.ENOSYS, errno.EINVAL):
            raise UserError(f"{run.name}: cannot reach process {run.pid}: {exc.strerror or exc}") from None
        pidfd = None  # a kernel before 5.3: the start-time check alone guards the pid
    try:
        if not run.alive():
            raise UserError(f"{run.name}: has ended (process {run.pid} is another process now)")
        try:
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, sig)
            else:
                os.kill(run.pid, sig)
        except ProcessLookupError:
            raise UserError(f"{run.name}: has ended (process {run.pid} is gone)") from None
        except PermissionError:
            raise UserError(f"{run.name}: not yours to stop (process {run.pid} belongs to another user)") from None
    finally:
        if pidfd is not None:
            os.close(pidfd)


def take_stop_request(registry: Registry, name: str) -> str | None:
    """The reason a stop was asked for (the request is then removed), or None."""
    path = request_path(registry, name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    finally:
        try:
            path.unlink()
        except OSError:
            pass
    reason = data.get("reason") if isinstance(data, dict) else None
    return str(reason) if reason else None

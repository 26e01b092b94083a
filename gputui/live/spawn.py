"""Starting a run in a process of its own, apart from any terminal.

``python -m gputui.live`` (gputui.live.host.main) gets the run's :class:`HostSpec` pickled
on its stdin, in a session of its own (setsid: no controlling terminal, so no SIGHUP when
the terminal closes), forks once so that it is no one's child to wait for, and answers on
its stdout with one line: ``ready`` and the run's live entry once the run's header is
written, or ``error`` and why the run could not start (a --record file that cannot be
written, a GPU the preset pins that is not there).  The run's child and its recording are
then that process's.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import subprocess
import sys
import time
from pathlib import Path

from gputui.errors import UserError
from gputui.live.host import FAILED, READY, HostSpec
from gputui.live.registry import LiveRun

START_TIMEOUT_S = 120.0  # NVML's start and the first sample; a cold import of gputui on a busy box


def start_detached(spec: HostSpec, timeout: float = START_TIMEOUT_S) -> LiveRun:
    """Start ``spec``'s run detached; its live entry once it has started, else a
    UserError saying why (the run's own words where it gave some)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gputui.live"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        process.stdin.write(pickle.dumps(spec))
        process.stdin.close()
    except BrokenPipeError:
        pass  # it ended before reading: its stderr says why
    answer, timed_out = _first_line(process.stdout, timeout)
    process.wait()  # the first process forks and leaves at once: reap it
    complaint = process.stderr.read().decode(errors="replace").strip()
    process.stdout.close()
    process.stderr.close()
    word, _, rest = answer.partition(" ")
    if word == READY:
        return LiveRun.from_json(json.loads(rest))
    if word == FAILED:
        raise UserError(rest.strip())
    if timed_out:
        raise UserError(f"the run's process said nothing within {timeout:.0f} s: it may still start (gputui runs lists the live runs)")
    last = complaint.splitlines()[-1] if complaint else "no word from it"
    raise UserError(f"the run's process ended before the run started: {last}")


def _first_line(stream, timeout: float) -> tuple[str, bool]:
    """The first line ``stream`` gives within ``timeout`` s ("" at its end or past the
    time), and whether the time ran out."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([stream], [], [], left)[0]:
            return "", True
        chunk = stream.read1(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0].decode(errors="replace"), False


def start_tune(
    argv: list[str], folder: Path, stamp: str, *, env: dict[str, str] | None = None, cwd: str | None = None
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """``gputui tune -- ARGV`` in a session of its own (a closed terminal or a quit dashboard
    stops nothing), its output to ``tune-STAMP.log`` and its report to ``tune-STAMP.html``
    in ``folder``, both readable by their owner alone (the command line may hold secrets),
    with a preset's ``env`` and ``cwd``: (the process, the log, the report)."""
    from gputui.record.history import make_private_folder

    make_private_folder(folder)
    log, report = folder / f"tune-{stamp}.log", folder / f"tune-{stamp}.html"
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "gputui", "tune", "--report", str(report), "--", *argv],
            stdin=subprocess.DEVNULL,
            stdout=descriptor,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},  # its lines in the log in the order said
            cwd=cwd,
        )
    finally:
        os.close(descriptor)
    return process, log, report

"""The zero-code PyTorch probe, gputui's side: a channel the probe reports on, and the
environment that injects it into a user's Python command.

The user's training script stays untouched.  gputui puts :data:`SITE_DIR` first on the
child's ``PYTHONPATH``; Python's ``site`` then imports its ``sitecustomize``, which (only
when ``GPUTUI_PROBE_SOCKET`` is set) waits for the script to import torch and hooks the
optimizer step and the DataLoader (see ``site/_gputui_probe.py``).  The probe sends one
protocol line (gputui.protocol's format) per datagram to a Unix socket of this process::

    @gputui {"event":"probe_status","state":"armed","pid":4242,"torch":"2.5.1","hooks":["optimizer_step","dataloader"]}
    @gputui {"event":"probe","v":1,"steps":31,"seconds":1.02,"batches":31,"samples":496,"data_wait_s":0.61,"workers":0,"pid":4242}

A socket, not the child's stdout: the probe must never change what the script prints,
and a datagram that no one reads is dropped instead of blocking the training loop.
Lines come from the user's process: read them with gputui.protocol.decode, as untrusted.

This module imports no torch and little else: the core imports it to start any run.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

SITE_DIR = str(Path(__file__).resolve().parent / "site")
# What gputui says when it writes to a job's environment (the CLI once per user, the
# dashboard in the run's output pane).
NOTICE = "the PyTorch probe is on: PYTHONPATH gets gputui's sitecustomize, which times the DataLoader and optimizer steps (--no-probe switches it off)"
SOCKET_ENV = "GPUTUI_PROBE_SOCKET"
MAX_DATAGRAM = 64 * 1024
# What other packages may import; tests/whole/test_package_faces.py holds them to it.
__all__ = ["NOTICE", "SITE_DIR", "SOCKET_ENV", "ProbeChannel", "is_python_command"]
_SUN_PATH_MAX = 107  # sockaddr_un.sun_path is 108 bytes on Linux (104 on macOS), one of them the NUL
_PYTHON_NAME = re.compile(r"(python|pypy)[0-9.]*t?(-dbg)?(\.exe)?")


class ProbeChannel:
    """A Unix datagram socket in a private (0700) temp directory that the child's probe
    sends its lines to.  ``start`` reads them on a daemon thread; ``close`` ends it."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="gputui-probe-")
        if len(os.fsencode(os.path.join(self.directory, "s"))) > _SUN_PATH_MAX:  # a long $TMPDIR (macOS's)
            os.rmdir(self.directory)
            self.directory = tempfile.mkdtemp(prefix="gputui-probe-", dir="/tmp")
        self.path = os.path.join(self.directory, "s")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._sock.bind(self.path)
        except OSError:
            self._sock.close()
            shutil.rmtree(self.directory, ignore_errors=True)
            raise
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._lock = threading.Lock()

    def env(self, base_env: Mapping[str, str]) -> dict[str, str]:
        """The variables to add to the child's environment (``base_env`` is what it gets
        otherwise; its PYTHONPATH, else this process's, follows the probe's directory)."""
        existing = base_env["PYTHONPATH"] if "PYTHONPATH" in base_env else os.environ.get("PYTHONPATH", "")
        return {"PYTHONPATH": os.pathsep.join([SITE_DIR, existing]) if existing else SITE_DIR, SOCKET_ENV: self.path}

    def start(self, on_line: Callable[[str], None]) -> None:
        """Call ``on_line`` with each line received, from a daemon thread: it must be quick
        and thread-safe; what it raises is logged and swallowed."""
        with self._lock:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(target=self._receive, args=(on_line,), name="gputui-probe", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop the thread (after it has read what was already sent), close the socket and
        remove the directory.  Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        self._stopping.set()
        if thread is not None:
            try:  # wake the thread's recv(): it drains what is queued, then ends
                with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as waker:
                    waker.setblocking(False)
                    waker.sendto(b"", self.path)
            except OSError:
                pass  # the thread's 0.5 s timeout ends it anyway
            thread.join(timeout=5.0)
        self._sock.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _receive(self, on_line: Callable[[str], None]) -> None:
        self._sock.settimeout(0.5)
        while True:
            if self._stopping.is_set():
                self._sock.setblocking(False)
            try:
                data = self._sock.recv(MAX_DATAGRAM + 1)
            except TimeoutError:
                continue
            except (BlockingIOError, OSError):
                return  # drained after close(), or the socket is gone
            if not data or len(data) > MAX_DATAGRAM:
                continue
            try:
                line = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            try:
                on_line(line)
            except Exception:
                log.exception("probe on_line callback failed")


# Programs that run the command after them: ``uv run python train.py``.  Their own
# options (``conda run -n env``) are skipped; those that take a value are named.
_RUNNERS = {"uv": "run", "poetry": "run", "pipenv": "run", "conda": "run", "mamba": "run", "micromamba": "run", "pixi": "run", "hatch": "run"}
_RUNNER_VALUE_OPTIONS = {"-n", "--name", "-p", "--prefix", "--with", "--python", "--project", "--directory", "-e", "--environment", "--manifest-path"}
_SHELLS = {"sh", "bash", "dash", "zsh"}


def is_python_command(argv: list[str], _depth: int = 0) -> bool:
    """Whether ``argv`` runs Python: an interpreter (``python3``, ``python3.12``), or a
    script whose shebang names one (``torchrun``, ``accelerate``, ``deepspeed``, a
    project's entry point).  ``env python3 ...``, ``uv run python ...`` (and poetry's,
    conda's, pixi's ``run``) and ``sh -c "python ..."`` look at the program they run."""
    try:
        args = list(argv)
        if args and os.path.basename(args[0]) == "env":  # the program env runs, past its options and NAME=value
            args = args[1:]
            while args and (args[0].startswith("-") or "=" in args[0]):
                option = args.pop(0)
                if option in ("-u", "--unset", "-C", "--chdir") and args:
                    args.pop(0)
                elif option in ("-S", "--split-string") and args:
                    args = shlex.split(args[0]) + args[1:]
                elif option.startswith(("-S", "--split-string=")):
                    args = shlex.split(option.split("=", 1)[1] if option.startswith("--") else option[2:]) + args
        while args and "=" in args[0] and not args[0].startswith(("-", "/", ".")):  # a shell's NAME=value prefix
            args = args[1:]
        if not args:
            return False
        program = args[0]
        name = os.path.basename(program)
        if _depth < 4 and _RUNNERS.get(name) is not None and len(args) > 1 and args[1] == _RUNNERS[name]:
            rest = args[2:]
            while rest and rest[0].startswith("-"):
                option = rest.pop(0)
                if option in _RUNNER_VALUE_OPTIONS and rest:
                    rest.pop(0)
            return is_python_command(rest, _depth + 1)
        if _depth < 4 and name in _SHELLS and len(args) > 2 and args[1] == "-c":
            return is_python_command(shlex.split(args[2]), _depth + 1)
        if _PYTHON_NAME.fullmatch(name):
            return True
        resolved = shutil.which(program)
        if resolved is None:
            return False
        if _PYTHON_NAME.fullmatch(os.path.basename(os.path.realpath(resolved))):
            return True
        with open(resolved, "rb") as fh:
            head = fh.read(256)
        return head.startswith(b"#!") and b"python" in head.split(b"\n", 1)[0]
    except Exception:
        return False

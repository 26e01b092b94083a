"""The zero-code PyTorch probe, gputui's side: a channel the probe reports on, and the
environment that injects it into a user's Python command.

The user's training script stays untouched.  gputui puts :data:`SITE_DIR` first on the
child's ``PYTHONPATH``; Python's ``site`` then imports its ``sitecustomize``, which (only
when ``GPUTUI_PROBE_SOCKET`` is set) waits for the script to import torch and hooks the
optimizer step, the backward pass, the DataLoader and the model's mode switches (see
``site/_gputui_probe.py``).
The probe sends one protocol line (gputui.protocol's format) per datagram to a Unix
socket of this process::

    @gputui {"event":"probe_status","state":"armed","pid":4242,"torch":"2.5.1","hooks":["optimizer_step","backward","dataloader","train_mode"]}
    @gputui {"event":"probe","v":2,"phase":"training","steps":31,"seconds":1.02,"batches":31,"samples":496,"data_wait_s":0.61,"workers":0,"pid":4242}

A socket, not the child's stdout: the probe must never change what the script prints,
and a datagram that no one reads is dropped instead of blocking the training loop.
Lines come from the user's process: read them with gputui.protocol.decode, as untrusted.
The channel bounds what it passes on: datagrams of at most :data:`MAX_DATAGRAM` bytes,
:data:`RATE_PER_S` a second (bursts of :data:`BURST`), and once :meth:`ProbeChannel.watch`
names the run's process, only from it and its descendants (Linux: the kernel's
``SCM_CREDENTIALS`` name each sender).  What it drops it says once per reason, as a
``probe_status`` line of state ``dropped`` that the recording keeps.  Its folder is
named after this process; one left behind by a gputui that was killed (its process gone,
its socket answered by no one) is removed when the next channel is made.

This module imports no torch and little else: the core imports it to start any run.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from gputui import protocol

log = logging.getLogger(__name__)

SITE_DIR = str(Path(__file__).resolve().parent / "site")
# What gputui says when it writes to a job's environment (the CLI once per user, the
# dashboard in the run's output pane).
NOTICE = "the PyTorch probe is on: PYTHONPATH gets gputui's sitecustomize, which times the DataLoader and optimizer steps (--no-probe switches it off)"
SOCKET_ENV = "GPUTUI_PROBE_SOCKET"
MAX_DATAGRAM = 16 * 1024  # a probe line is a few hundred bytes
RATE_PER_S = 100.0  # a probed process sends a few lines a second; torchrun's ranks each do
BURST = 200.0
# What other packages may import; tests/whole/test_package_faces.py holds them to it.
__all__ = ["NOTICE", "SITE_DIR", "SOCKET_ENV", "ProbeChannel", "is_python_command"]
_SUN_PATH_MAX = 107  # sockaddr_un.sun_path is 108 bytes on Linux (104 on macOS), one of them the NUL
_PYTHON_NAME = re.compile(r"(python|pypy)[0-9.]*t?(-dbg)?(\.exe)?")
_PREFIX = "gputui-probe-"
_FOLDER = re.compile(_PREFIX + r"(?:(\d+)-)?[A-Za-z0-9_]+")  # gputui-probe-<pid>-<random>; older ones lack the pid
_PASSCRED = getattr(socket, "SO_PASSCRED", None)
_CREDENTIALS = getattr(socket, "SCM_CREDENTIALS", None)
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_TREE_DEPTH = 64  # parents looked at from a sender up to the run's process


class ProbeChannel:
    """A Unix datagram socket in a private (0700) temp directory that the child's probe
    sends its lines to.  ``start`` reads them on a daemon thread; ``close`` ends it."""

    def __init__(self) -> None:
        prefix = f"{_PREFIX}{os.getpid()}-"
        remove_stale_folders()
        self.directory = tempfile.mkdtemp(prefix=prefix)
        if len(os.fsencode(os.path.join(self.directory, "s"))) > _SUN_PATH_MAX:  # a long $TMPDIR (macOS's)
            os.rmdir(self.directory)
            self.directory = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
        self.path = os.path.join(self.directory, "s")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._sock.bind(self.path)
            if _PASSCRED is not None and _CREDENTIALS is not None:
                self._sock.setsockopt(socket.SOL_SOCKET, _PASSCRED, 1)  # each datagram then says who sent it
        except OSError:
            self._sock.close()
            shutil.rmtree(self.directory, ignore_errors=True)
            raise
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._root: int | None = None  # the run's process, once watch() names it
        self._tree: set[int] = set()  # senders found in its tree (kept: a process may end before its last line is read)
        self._tokens = BURST
        self._refilled = time.monotonic()
        self._noted: set[str] = set()

    def env(self, base_env: Mapping[str, str]) -> dict[str, str]:
        """The variables to add to the child's environment (``base_env`` is what it gets
        otherwise; its PYTHONPATH, else this process's, follows the probe's directory)."""
        existing = base_env["PYTHONPATH"] if "PYTHONPATH" in base_env else os.environ.get("PYTHONPATH", "")
        return {"PYTHONPATH": os.pathsep.join([SITE_DIR, existing]) if existing else SITE_DIR, SOCKET_ENV: self.path}

    def watch(self, pid: int) -> None:
        """From now on, pass on only what ``pid`` (the run's process) and its descendants
        send, where the system says who sent a datagram (Linux); before, or elsewhere,
        the private folder is the only gate."""
        self._root = pid
        self._tree = {pid}

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
        ancillary = socket.CMSG_SPACE(_UCRED.size) if _PASSCRED is not None and _CREDENTIALS is not None else 0
        while True:
            if self._stopping.is_set():
                self._sock.setblocking(False)
            try:
                data, anc, _flags, _address = self._sock.recvmsg(MAX_DATAGRAM + 1, ancillary)
            except TimeoutError:
                continue
            except (BlockingIOError, OSError):
                return  # drained after close(), or the socket is gone
            line = self._admit(data, _sender(anc))
            if line is None:
                continue
            try:
                on_line(line)
            except Exception:
                log.exception("probe on_line callback failed")

    def _admit(self, data: bytes, sender: int | None) -> str | None:
        """The datagram's line, or None when it is dropped (said once per reason, through
        the note that takes its place)."""
        if not data:
            return None  # close()'s wake-up
        if self._root is not None and sender is not None and not self._in_tree(sender):
            return self._drop("sender", f"datagrams from processes outside the run (pid {sender}) were dropped")
        if len(data) > MAX_DATAGRAM:
            return self._drop("size", f"datagrams over {MAX_DATAGRAM} bytes were dropped")
        now = time.monotonic()
        self._tokens = min(BURST, self._tokens + (now - self._refilled) * RATE_PER_S)
        self._refilled = now
        if self._tokens < 1.0:
            return self._drop("rate", f"datagrams beyond {RATE_PER_S:g} a second were dropped")
        self._tokens -= 1.0
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def _drop(self, reason: str, note: str) -> str | None:
        if reason in self._noted:
            return None
        self._noted.add(reason)
        log.warning("probe channel: %s", note)
        return protocol.encode("probe_status", state="dropped", reason=reason, note=f"{note} (the first of them; no more such notes)")

    def _in_tree(self, pid: int) -> bool:
        """Whether ``pid`` is the run's process or a descendant (its parents, read from
        /proc, lead to it)."""
        if pid in self._tree:
            return True
        seen = pid
        for _ in range(_TREE_DEPTH):
            parent = _parent(seen)
            if parent is None or parent <= 1:
                return False
            if parent in self._tree:
                self._tree.add(pid)
                return True
            seen = parent
        return False


def _sender(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The sending process's pid from SCM_CREDENTIALS, where the system gave them."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == _CREDENTIALS and len(data) >= _UCRED.size:
            return int(_UCRED.unpack_from(data)[0])
    return None


def _parent(pid: int) -> int | None:
    """``pid``'s parent, from /proc (Linux); None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read past its last ")"
        return int(stat[stat.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's: alive
    return True


def remove_stale_folders() -> list[str]:
    """Remove the probe folders a killed gputui of this user left behind (in the temp
    directory and in /tmp): each one this user owns whose gputui process is gone and
    whose socket no one answers.  Returns the folders removed."""
    removed: list[str] = []
    roots = {tempfile.gettempdir(), "/tmp"}
    uid = os.getuid() if hasattr(os, "getuid") else None
    for root in roots:
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in names:
            match = _FOLDER.fullmatch(name)
            if match is None:
                continue
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not os.path.isdir(path) or os.path.islink(path) or (uid is not None and st.st_uid != uid):
                continue
            if _stale(path, int(match.group(1)) if match.group(1) else None):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def _stale(path: str, pid: int | None) -> bool:
    """Whether the probe folder at ``path`` (made by ``pid``, where its name says) has no
    owner left: that process is gone (or is not named) and its socket refuses."""
    if pid is not None and _alive(pid):
        return False
    sock = os.path.join(path, "s")
    if not os.path.exists(sock):
        return pid is not None  # its gputui died between making the folder and binding the socket
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:
            probe.connect(sock)  # no datagram sent: a live channel hears nothing
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False


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

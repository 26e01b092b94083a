"""Run one benchmark command as an owned child process group and stream its output.

The command never runs directly under gputui.  It runs under a tiny guard process
(:mod:`gputui._guard`), the leader of a new session and process group, which starts
the command in that same group, reports the command's pid back through a private pipe
and waits for it.  The guard makes the group die with gputui even when gputui is
SIGKILLed (PR_SET_PDEATHSIG on Linux, plus polling ``os.getppid()`` every 0.5 s, which
also covers a spawning thread that ends before the run does, and non-Linux systems).
Stopping signals the whole group: SIGTERM, then SIGKILL after ``grace`` seconds; the
guard's descendants that left the group (``setsid()``) get the same signals, and the
guard, a child subreaper, adopts them when their parent dies so they stay findable.

Threads.  :meth:`Runner.start` spawns the guard from the calling thread, which may be
any thread and need not outlive the run (see above).  One reader thread reads both
pipes, in arrival order, and calls ``on_line``; one monitor thread waits for the guard,
enforces the timeout and the KILL deadline, and classifies the outcome.  **``on_line``
is called from the reader thread: it must be quick and thread-safe.**
Exceptions it raises are logged and swallowed; they never stop the reader.

Typical use by the session::

    runner = Runner(argv, env=..., timeout=..., on_line=handle)
    runner.start()
    try:
        outcome = runner.wait()
    finally:
        runner.close()          # idempotent: TERM/KILL the group if still running
"""

from __future__ import annotations

import codecs
import logging
import os
import re
import select
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gputui import _guard

log = logging.getLogger(__name__)

READ_CHUNK = 64 * 1024
LINE_CAP = 64 * 1024  # characters kept of one line; the rest up to the newline is dropped
TRUNCATION_MARK = "…"
TAIL_LINES = 200
REPORT_TIMEOUT_S = 10.0  # how long start() waits for the guard to report the pid
CR_SETTLE_S = 0.05  # a '\r' at the end of a read waits this long for a '\n' (CRLF)
_POLL_S = 0.1
_MESSAGE_CAP = 300


@dataclass
class OutputLine:
    text: str  # one line, ANSI escape codes stripped, no trailing newline/CR
    stream: str  # "stdout" or "stderr"
    progress: bool  # the segment ended with '\r': a redraw that the next one overwrites


@dataclass
class Outcome:
    # "exited" (code 0 or not), "signaled", "timeout", "oom", "stopped", "failed_to_start"
    kind: str
    exit_code: int | None = None
    signal: str | None = None  # e.g. "SIGKILL"
    message: str | None = None  # a human one-liner
    duration_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "exited" and self.exit_code == 0


# --- text --------------------------------------------------------------------------

_ANSI_RE = re.compile(
    r"""
      \x1b\][^\x07\x1b]*(?:\x07|\x1b\\|$)     # OSC ... (BEL | ST), e.g. titles, hyperlinks
    | \x1b[P^_X][^\x1b]*(?:\x1b\\|$)          # DCS / PM / APC / SOS strings
    | \x1b\[[0-?]*[ -/]*[@-~]                 # CSI, e.g. colours, cursor moves
    | \x1b\[[0-?]*[ -/]*$                     # CSI cut off by the end of the line
    | \x1b[ -/]*[0-~]                         # other escapes: ESC ( B, ESC 7, ESC =
    | \x1b                                    # a lone ESC
    | \x9b[0-?]*[ -/]*[@-~]                   # 8-bit CSI
    | [\x00-\x08\x0b-\x1f\x7f]                # other C0 controls (keep tab)
    """,
    re.VERBOSE,
)


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences (CSI, OSC, DCS, simple ESC) and control characters."""
    if "\x1b" not in text and "\x9b" not in text and text.isprintable():
        return text
    return _ANSI_RE.sub("", text)


_EOL_RE = re.compile(r"[\r\n]")


class LineSplitter:
    """Cut a text stream into lines on '\\n', '\\r' and '\\r\\n' (one newline).

    ``emit(text, progress, truncated)`` is called per segment; ``progress`` is True for
    a segment ended by a lone '\\r'.  At most ``cap`` characters of a line are kept; the
    rest, up to its end, is dropped and ``truncated`` is True, so memory stays bounded
    whatever the line length.  A '\\r' at the very end of the fed text is held back
    (``pending_cr``) until the next text shows whether a '\\n' follows; the owner may
    settle it earlier with :meth:`settle_cr`.
    """

    def __init__(self, emit: Callable[[str, bool, bool], None], cap: int = LINE_CAP) -> None:
        self._emit = emit
        self._cap = cap
        self._parts: list[str] = []
        self._len = 0
        self._truncated = False
        self.pending_cr = False
        self._swallow_lf = False

    def _append(self, s: str) -> None:
        if not s:
            return
        room = self._cap - self._len
        if room <= 0:
            self._truncated = True
            return
        if len(s) > room:
            s = s[:room]
            self._truncated = True
        self._parts.append(s)
        self._len += len(s)

    def _end(self, progress: bool) -> None:
        text = "".join(self._parts)
        truncated = self._truncated
        self._parts.clear()
        self._len = 0
        self._truncated = False
        self._emit(text, progress, truncated)

    def settle_cr(self) -> None:
        """No '\\n' came soon after a trailing '\\r': end the segment as progress now.
        A '\\n' arriving first in the next text is then the rest of a slow CRLF."""
        if self.pending_cr:
            self.pending_cr = False
            self._swallow_lf = True
            self._end(progress=True)

    def feed(self, text: str) -> None:
        if not text:
            return
        i = 0
        if self._swallow_lf:
            self._swallow_lf = False
            if text[0] == "\n":
                i = 1
        if self.pending_cr:
            self.pending_cr = False
            if text[0] == "\n":
                self._end(progress=False)
                i = 1
            else:
                self._end(progress=True)
        n = len(text)
        while i < n:
            m = _EOL_RE.search(text, i)
            if m is None:
                self._append(text[i:])
                return
            j = m.start()
            self._append(text[i:j])
            if text[j] == "\n":
                self._end(progress=False)
                i = j + 1
            elif j + 1 == n:
                self.pending_cr = True
                return
            elif text[j + 1] == "\n":
                self._end(progress=False)
                i = j + 2
            else:
                self._end(progress=True)
                i = j + 1

    def close(self) -> None:
        """End of stream: deliver what is left (a final line without newline)."""
        if self.pending_cr:
            self.pending_cr = False
            self._end(progress=True)
        elif self._parts or self._truncated:
            self._end(progress=False)


# --- OOM ---------------------------------------------------------------------------

_OOM_RE = re.compile(
    r"CUDA out of memory"
    r"|CUDA error: out of memory"
    r"|OutOfMemoryError"  # torch.OutOfMemoryError, torch.cuda.OutOfMemoryError
    r"|ResourceExhaustedError"
    r"|OOM when allocating"
    r"|RESOURCE_EXHAUSTED: Out of memory"  # XLA
    r"|CUBLAS_STATUS_ALLOC_FAILED"
    r"|cudaErrorMemoryAllocation"
)
# Host memory: Python's MemoryError (as under an RLIMIT_AS), C++'s bad_alloc, ENOMEM.
_HOST_OOM_RE = re.compile(r"^\s*MemoryError\b|std::bad_alloc|Cannot allocate memory")
_EXC_PREFIX_RE = re.compile(r"^\s*[\w.]*(?:Error|Exception)\s*:\s*")


def _short(text: str, cap: int = _MESSAGE_CAP) -> str:
    text = text.strip()
    return text if len(text) <= cap else text[: cap - 1] + TRUNCATION_MARK


def _oom_detail(line: str) -> str:
    """'torch.OutOfMemoryError: CUDA out of memory. ...' -> 'CUDA out of memory. ...'"""
    detail = _EXC_PREFIX_RE.sub("", line, count=1).strip()
    return _short(detail or line)


def _cgroup_oom_kill_count() -> int | None:
    """The kernel OOM killer's ``oom_kill`` counter for our cgroup, or None.

    cgroup v2: ``<cgroup2 mount>/<path from /proc/self/cgroup "0::">/memory.events``;
    cgroup v1 (hybrid hosts): ``<memory mount>/<path>/memory.oom_control``.  Inside a
    container the recorded path may not exist under the mount (no cgroup namespace),
    so the mount's root is tried as well.  Anything missing or unreadable: None.
    """
    try:
        with open("/proc/self/cgroup") as f:
            cgroup_lines = f.read().splitlines()
        with open("/proc/self/mounts") as f:
            mounts = [line.split() for line in f.read().splitlines()]
    except OSError:
        return None
    v2_mount = v1_memory_mount = None
    for fields in mounts:
        if len(fields) < 4:
            continue
        if fields[2] == "cgroup2" and v2_mount is None:
            v2_mount = fields[1]
        elif fields[2] == "cgroup" and "memory" in fields[3].split(",") and v1_memory_mount is None:
            v1_memory_mount = fields[1]
    candidates: list[str] = []
    for line in cgroup_lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        rel = path.lstrip("/")
        if controllers == "" and v2_mount:
            candidates += [os.path.join(v2_mount, rel, "memory.events"), os.path.join(v2_mount, "memory.events")]
        elif "memory" in controllers.split(",") and v1_memory_mount:
            candidates += [
                os.path.join(v1_memory_mount, rel, "memory.oom_control"),
                os.path.join(v1_memory_mount, "memory.oom_control"),
            ]
    for path in candidates:
        try:
            with open(path) as f:
                for row in f:
                    key, _, value = row.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


# --- the runner ----------------------------------------------------------------------


class Runner:
    """One run of ``argv`` in its own process group; see the module docstring."""

    def __init__(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        grace: float = 5.0,
        on_line: Callable[[OutputLine], None] | None = None,
    ) -> None:
        self.argv = [str(a) for a in argv]
        self.env = dict(env or {})
        self.cwd = cwd
        self.timeout = timeout
        self.grace = grace
        self.on_line = on_line

        self._lock = threading.RLock()  # short critical sections only; never held while waiting
        self._done = threading.Event()
        self._started = False
        self._proc: subprocess.Popen | None = None
        self._pgid: int | None = None
        self._group_gone = False
        self._pid: int | None = None
        self._start_error: str | None = None
        self._t0: float | None = None
        self._stop_reason: str | None = None
        self._kill_at: float | None = None
        self._killed = False
        self._outcome: Outcome | None = None
        self._oom_mark: str | None = None
        self._oom_line: str | None = None
        self._oom_kills_before: int | None = None
        self._tail: deque[OutputLine] = deque(maxlen=TAIL_LINES)
        self._readers: list[threading.Thread] = []
        self._callback_errors = 0

    # -- public API -----------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """Pid of the user's command itself (not of the guard), once started."""
        return self._pid

    @property
    def pgid(self) -> int | None:
        """The run's process group id (the guard's pid), once started."""
        return self._pgid

    @property
    def outcome(self) -> Outcome | None:
        return self._outcome

    @property
    def tail(self) -> list[OutputLine]:
        """The last ~200 non-progress lines of both streams, oldest first."""
        return list(self._tail)

    def start(self) -> None:
        """Start the command.  Raises nothing: a failure to start becomes the outcome
        ``failed_to_start`` (available at once from :meth:`wait`)."""
        with self._lock:
            if self._started:
                return
            self._started = True
            self._t0 = time.monotonic()
            if self._stop_reason is not None:  # stopped before it started
                self._finish(self._stopped_outcome(self._stop_reason, None, None, 0.0))
                return
        try:
            self._spawn()
        except Exception as exc:  # never raise from start()
            log.exception("runner: cannot start %r", self.argv)
            self._cleanup_after_spawn_failure()
            self._finish(Outcome("failed_to_start", message=_short(f"cannot start {self._name()}: {exc}"), duration_s=0.0))

    def wait(self, timeout: float | None = None) -> Outcome | None:
        """Block until the run has ended (process group gone, output drained) and
        return its outcome; None when ``timeout`` seconds pass first.  An exception
        while waiting (KeyboardInterrupt) stops the group before it propagates."""
        try:
            if not self._started:
                return self._outcome
            if not self._done.wait(timeout):
                return None
            return self._outcome
        except BaseException:
            self.stop("interrupted")
            raise

    def stop(self, reason: str = "stopped") -> None:
        """SIGTERM the whole group now, SIGKILL it after ``grace`` seconds if anything
        in it is still alive.  Returns at once; idempotent; thread-safe; does not wait
        on locks held by other threads for long, so a signal handler may call it.
        ``reason`` "timeout" reports the outcome as a timeout; any other as stopped."""
        with self._lock:
            if self._stop_reason is not None or self._done.is_set():
                return
            self._stop_reason = reason
            self._kill_at = time.monotonic() + self.grace
        self._signal_group(signal.SIGTERM)

    def close(self, timeout: float | None = None) -> Outcome | None:
        """Stop the run if it is still going and wait until the group is gone.
        Safe to call any number of times, e.g. from ``finally``."""
        if not self._started or self._done.is_set():
            return self._outcome
        self.stop()
        return self.wait(self.grace + 5.0 if timeout is None else timeout)

    def mark_oom(self, message: str) -> None:
        """The workload reported an out-of-memory error through its own protocol."""
        self._oom_mark = message

    def __enter__(self) -> Runner:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- starting -------------------------------------------------------------------

    def _name(self) -> str:
        return self.argv[0] if self.argv else "(empty command)"

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _spawn(self) -> None:
        if not self.argv or not self.argv[0]:
            self._finish(Outcome("failed_to_start", message="empty command", duration_s=0.0))
            return
        if self.cwd is not None and not os.path.isdir(self.cwd):
            self._finish(Outcome("failed_to_start", message=f"working directory not found: {self.cwd}", duration_s=0.0))
            return
        env = self._child_env()
        cmd = self.argv[0]
        if os.sep not in cmd and shutil.which(cmd, path=env.get("PATH", os.defpath)) is None:
            self._finish(Outcome("failed_to_start", message=f"command not found: {cmd}", duration_s=0.0))
            return

        self._oom_kills_before = _cgroup_oom_kill_count()
        report_r, report_w = os.pipe()
        guard_cmd = [
            sys.executable or "python3",
            "-I",  # isolated: no script dir / PYTHON* vars / user site; works from any cwd
            "-S",
            os.path.abspath(_guard.__file__),
            "--report-fd", str(report_w),
            "--parent", str(os.getpid()),
            "--grace", repr(float(self.grace)),
            "--",
            *self.argv,
        ]  # fmt: skip
        try:
            # Popen in the calling thread.  PR_SET_PDEATHSIG fires when this *thread*
            # exits; the guard then sees its parent process is still alive and ignores
            # it, and notices a real gputui death by polling getppid() as well.
            proc = subprocess.Popen(
                guard_cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=(report_w,),
                env=env,
                cwd=self.cwd,
            )
        except BaseException:
            os.close(report_r)
            os.close(report_w)
            raise
        os.close(report_w)
        with self._lock:
            self._proc = proc
            self._pgid = proc.pid  # the guard leads the new session and group
            stop_early = self._stop_reason is not None
        t = threading.Thread(target=self._read, args=([(proc.stdout, "stdout"), (proc.stderr, "stderr")],),
                             name=f"gputui-runner-output-{proc.pid}", daemon=True)
        t.start()
        self._readers.append(t)
        if stop_early:
            self._signal_group(signal.SIGTERM)
        self._read_report(report_r)
        threading.Thread(target=self._monitor, name=f"gputui-runner-monitor-{proc.pid}", daemon=True).start()

    def _read_report(self, fd: int) -> None:
        data = b""
        deadline = time.monotonic() + REPORT_TIMEOUT_S
        try:
            while b"\n" not in data:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not _readable(fd, remaining):
                    log.warning("runner: the guard did not report the command's pid in time")
                    break
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(fd)
        line = data.decode("utf-8", "replace").strip()
        if line.startswith("pid "):
            try:
                self._pid = int(line[4:])
            except ValueError:
                pass
        elif line.startswith("error "):
            _, _kind, message = (line.split(" ", 2) + ["", ""])[:3]
            self._start_error = message or f"cannot start {self._name()}"

    def _cleanup_after_spawn_failure(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            self._signal_group(signal.SIGKILL)
            try:
                proc.wait(5)
            except Exception:
                pass

    # -- output -----------------------------------------------------------------------

    def _read(self, pipes: list[tuple[Any, str]]) -> None:
        """Read both pipes in one thread, in the order their bytes become readable: with
        a thread per pipe, a stderr line could overtake the stdout line printed before
        it whenever the stdout thread waited (for the GIL, or on a slow ``on_line``)."""
        sel = selectors.DefaultSelector()
        settle_at: dict[int, float] = {}  # fd -> when its trailing '\r' counts as progress
        try:
            for pipe, stream in pipes:
                decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                splitter = LineSplitter(self._emitter(stream))
                sel.register(pipe.fileno(), selectors.EVENT_READ, (pipe, stream, decoder, splitter))
            while sel.get_map():
                timeout = max(0.0, min(settle_at.values()) - time.monotonic()) if settle_at else None
                ready = sel.select(timeout)
                for key, _ in ready:
                    pipe, stream, decoder, splitter = key.data
                    settle_at.pop(key.fd, None)
                    chunk = os.read(key.fd, READ_CHUNK)
                    if chunk:
                        splitter.feed(decoder.decode(chunk))
                    else:
                        sel.unregister(key.fd)
                        splitter.feed(decoder.decode(b"", final=True))
                        splitter.close()
                        continue
                    if splitter.pending_cr:
                        settle_at[key.fd] = time.monotonic() + CR_SETTLE_S
                now = time.monotonic()
                for fd, due in list(settle_at.items()):
                    if due <= now:  # no '\n' came soon after the '\r'
                        del settle_at[fd]
                        sel.get_key(fd).data[3].settle_cr()
        except Exception:
            log.exception("runner: reading the output failed")
        finally:
            sel.close()
            for pipe, _ in pipes:
                try:
                    pipe.close()
                except OSError:
                    pass

    def _emitter(self, stream: str) -> Callable[[str, bool, bool], None]:
        """What a stream's LineSplitter calls with each line."""
        def emit(text: str, progress: bool, truncated: bool) -> None:
            self._deliver(text, stream, progress, truncated)
        return emit

    def _deliver(self, text: str, stream: str, progress: bool, truncated: bool) -> None:
        text = strip_ansi(text)
        if truncated:
            text += TRUNCATION_MARK
        if progress and not text:
            return  # e.g. the empty segment before tqdm's leading '\r'
        line = OutputLine(text, stream, progress)
        if _OOM_RE.search(text):
            self._oom_line = text
        elif _HOST_OOM_RE.search(text):
            self._oom_line = f"host memory ({text.strip()})"
        if not progress:
            self._tail.append(line)
        callback = self.on_line
        if callback is None:
            return
        try:
            callback(line)
        except Exception:
            self._callback_errors += 1
            if self._callback_errors == 1:
                log.exception("runner: on_line raised; further errors are logged at debug level")
            else:
                log.debug("runner: on_line raised again", exc_info=True)

    # -- process group --------------------------------------------------------------

    def _signal_group(self, sig: int) -> None:
        pgid = self._pgid
        if pgid is None or self._group_gone or pgid <= 1 or pgid == os.getpgrp():
            return  # never our own group, whatever happened
        # Descendants that left the group with setsid() first: a KILL of the group ends
        # the guard, and with it the only process that could still find them.
        _guard.signal_pids(_guard.descendants(pgid, outside_group=pgid), sig)
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        if sig == signal.SIGKILL:
            self._killed = True

    def _group_alive(self) -> bool:
        """Whether anything but zombies is left in the group (after the guard is reaped)."""
        pgid = self._pgid
        if pgid is None:
            return False
        members = _guard.group_members(pgid)
        if members is not None:
            return bool(members)
        try:  # no /proc: kill(0) also counts unreaped zombies, which is the safe side
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def _monitor(self) -> None:
        proc = self._proc
        assert proc is not None and self._t0 is not None
        returncode = None
        try:
            returncode = self._wait_guard(proc)
            ended = time.monotonic()
            # A stop() that comes after the command ended does not change its outcome.
            reason = self._stop_reason
            self._reap_group()
            self._finish(self._classify(returncode, ended - self._t0, reason))
        except BaseException as exc:  # keep the promise: the group dies, wait() returns
            log.exception("runner: monitor failed")
            self._signal_group(signal.SIGKILL)
            self._finish(Outcome("signaled" if returncode is None or returncode < 0 else "exited",
                                 exit_code=returncode if returncode is not None and returncode >= 0 else None,
                                 message=_short(f"runner error: {exc}"),
                                 duration_s=time.monotonic() - self._t0))  # fmt: skip

    def _wait_guard(self, proc: subprocess.Popen) -> int:
        assert self._t0 is not None  # set by start(), before anything waits
        deadline = None if self.timeout is None else self._t0 + self.timeout
        while True:
            try:
                return proc.wait(timeout=_POLL_S)
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if deadline is not None and now >= deadline and self._stop_reason is None:
                self.stop("timeout")
            kill_at = self._kill_at
            if kill_at is not None and now >= kill_at and not self._killed:
                self._signal_group(signal.SIGKILL)

    def _reap_group(self) -> None:
        """The guard has exited: make sure nothing is left in the group and that the
        readers have drained the pipes (the guard normally cleared the group already;
        this covers a guard that was killed, and systems without /proc)."""
        end = time.monotonic() + 0.5
        while any(t.is_alive() for t in self._readers) and time.monotonic() < end:
            self._join_readers(0.05)
        if self._group_alive():
            with self._lock:
                if self._stop_reason is None:
                    self._kill_at = time.monotonic() + self.grace
                kill_at = self._kill_at
            self._signal_group(signal.SIGTERM)
            while self._group_alive() and time.monotonic() < (kill_at or 0):
                time.sleep(0.05)
            for _ in range(20):
                if not self._group_alive():
                    break
                self._signal_group(signal.SIGKILL)
                time.sleep(0.05)
        self._group_gone = True
        # Something outside the group (a process that called setsid) may still hold
        # the pipes; don't wait for it forever.
        self._join_readers(1.0)
        if any(t.is_alive() for t in self._readers):
            log.warning("runner: output pipes still open after the run ended (a detached process holds them)")

    def _join_readers(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        for t in self._readers:
            t.join(max(0.0, end - time.monotonic()))

    # -- outcome --------------------------------------------------------------------

    def _last_error_line(self) -> str | None:
        lines = list(self._tail)
        for stream in ("stderr", "stdout"):
            for line in reversed(lines):
                if line.stream == stream and line.text.strip():
                    return _short(line.text)
        return None

    def _stopped_outcome(self, reason: str | None, exit_code: int | None, sig: str | None, duration: float) -> Outcome:
        reason = reason or "stopped"
        if reason == "timeout":
            return Outcome("timeout", exit_code, sig, f"timed out after {self.timeout:g} s", duration)
        message = "stopped by user" if reason == "stopped" else f"stopped: {reason}"
        return Outcome("stopped", exit_code, sig, message, duration)

    def _classify(self, returncode: int, duration: float, stop_reason: str | None) -> Outcome:
        exit_code = returncode if returncode >= 0 else None
        sig = _signal_name(-returncode) if returncode < 0 else None

        if self._start_error is not None:
            return Outcome("failed_to_start", exit_code, sig, self._start_error, duration)
        if self._pid is None and stop_reason is None and returncode != 0:
            detail = self._last_error_line()
            message = f"the guard process failed ({f'exit code {exit_code}' if sig is None else sig})"
            return Outcome("failed_to_start", exit_code, sig, message + (f": {detail}" if detail else ""), duration)

        succeeded = returncode == 0 and stop_reason is None
        if not succeeded:
            oom = None
            if self._oom_mark is not None:
                oom = _short(self._oom_mark)
            elif self._oom_line is not None:
                oom = _oom_detail(self._oom_line)
            elif sig == "SIGKILL" and not self._killed and self._oom_kills_before is not None:
                after = _cgroup_oom_kill_count()
                if after is not None and after > self._oom_kills_before:
                    oom = "killed by the kernel OOM killer (host memory)"
            if oom is not None:
                message = oom if oom.lower().startswith("out of memory") else f"out of memory: {oom}"
                if stop_reason is not None:
                    message += "; then " + (self._stopped_outcome(stop_reason, None, None, 0).message or "")
                return Outcome("oom", exit_code, sig, message, duration)

        if stop_reason is not None:
            return self._stopped_outcome(stop_reason, exit_code, sig, duration)
        if sig is not None:
            detail = self._last_error_line()
            return Outcome("signaled", None, sig, f"killed by signal {sig}" + (f": {detail}" if detail else ""), duration)
        message = f"exited with code {exit_code}"
        if exit_code != 0:
            detail = self._last_error_line()
            if detail:
                message += f": {detail}"
        return Outcome("exited", exit_code, None, message, duration)

    def _finish(self, outcome: Outcome) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self._outcome = outcome
            self._group_gone = True
            self._done.set()


def _readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` has data (or EOF) within ``timeout`` seconds (poll: any fd number)."""
    if hasattr(select, "poll"):
        p = select.poll()
        p.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        return bool(p.poll(max(0, int(timeout * 1000))))
    r, _, _ = select.select([fd], [], [], timeout)
    return bool(r)

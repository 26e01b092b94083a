"""Run one benchmark command as an owned child process group and stream its output.

The command never runs directly under gputui.  It runs under a tiny guard process
(:mod:`gputui.run.guard`), the leader of a new session and process group, which starts
the command in that same group, reports the command's pid back through a private pipe
and waits for it.  The guard makes the group die with gputui even when gputui is
SIGKILLed (PR_SET_PDEATHSIG on Linux, plus polling ``os.getppid()`` every 0.5 s, which
also covers a spawning thread that ends before the run does, and non-Linux systems).
Stopping signals the whole group: SIGTERM, then SIGKILL after ``grace`` seconds; the
guard's descendants that left the group (``setsid()``) get the same signals, and the
guard, a child subreaper, adopts them when their parent dies so they stay findable.

Every process of the run carries a tag of its own in its environment
(``GPUTUI_RUN_TAG``), which every descendant inherits.  Should the guard die before
the run does (someone SIGKILLs it), its adoptees fall to init, out of the group and
out of reach by parentage: the runner then finds them by the tag, stops them (TERM,
KILL after ``grace``) and says in the outcome that the guard was killed.

Threads.  :meth:`Runner.start` spawns the guard from the calling thread, which may be
any thread and need not outlive the run (see above).  One reader thread reads both
pipes, in arrival order, and calls ``on_line``; one monitor thread waits for the guard,
enforces the timeout and the KILL deadline, and classifies the outcome.  **``on_line``
is called from the reader thread: it must be quick and thread-safe.**
Exceptions it raises are logged and swallowed; they never stop the reader.

Its jobs are owning the process and keeping to the thread rules above: the output
pipes are cut into lines by :mod:`gputui.run.output_stream`, and what the run's end means
is decided by :mod:`gputui.run.outcome` from the facts gathered here.

Typical use by the session::

    runner = Runner(argv, env=..., timeout=..., on_line=handle)
    runner.start()
    try:
        outcome = runner.wait()
    finally:
        runner.close()          # idempotent: TERM/KILL the group if still running
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import IO, BinaryIO

from gputui.run import guard as _guard
from gputui.run.outcome import Outcome, RunEnd, cgroup_oom_kill_count, classify, oom_evidence, short_message, stopped_outcome
from gputui.run.output_stream import OutputLine, read_pipes, readable_within
from gputui.run.pseudo_terminal import open_pseudo_terminal, resize
from gputui.run.wakeup import Wakeup

log = logging.getLogger(__name__)

TAIL_LINES = 200
RUN_TAG_VARIABLE = "GPUTUI_RUN_TAG"  # in every process of a run: see the module docstring
REPORT_TIMEOUT_S = 10.0  # how long start() waits for the guard to report the pid
_POLL_S = 0.1  # without a pidfd (Popen's own wait): how often the monitor looks at the run's deadlines
# With one, it sleeps until the next deadline (the run's timeout, the SIGKILL after a
# stop's grace), woken by stop(); at most this long, should a deadline slip past it.
_LONGEST_WAIT_S = 5.0


# --- the run's processes, by tag --------------------------------------------------------


def processes_tagged(marker: bytes) -> list[int]:
    """Live (non-zombie) processes whose environment holds ``marker`` (``NAME=value``),
    read from ``/proc``; empty where it is unavailable."""
    found = []
    for pid in _guard.live_pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return found


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
        terminal: tuple[int, int] | None = None,
        on_bytes: Callable[[bytes], None] | None = None,
    ) -> None:
        self.argv = [str(a) for a in argv]
        # (columns, rows): the command writes to a pseudo-terminal of that size, not to
        # pipes (gputui.run.pseudo_terminal says what that changes).
        self.terminal = terminal
        self.on_bytes = on_bytes  # each chunk of output as read, on the reader thread: quick, never raising
        self._master: BinaryIO | None = None  # the pseudo-terminal's side gputui reads, while open
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
        self._report_fd: int | None = None  # the guard's report pipe, read to its end once the guard exits
        self._report_rest = b""  # what came through it after the pid line
        self._child_exited_at: float | None = None  # time.monotonic() as the guard saw its child exit
        self._leftovers: list[tuple[int, str]] = []  # what the guard stopped after the child exited
        self._leftover_count = 0
        self._t0: float | None = None
        self._stop_reason: str | None = None
        self._kill_at: float | None = None
        self._killed = False
        self._wake_monitor: Wakeup | None = None  # stop() set a deadline: the monitor looks again
        self._outcome: Outcome | None = None
        self._oom_mark: str | None = None
        self._oom_line: str | None = None
        self._oom_kills_before: int | None = None
        self._tail: deque[OutputLine] = deque(maxlen=TAIL_LINES)
        self._readers: list[threading.Thread] = []
        self._callback_errors = 0
        self._tag = f"{RUN_TAG_VARIABLE}={uuid.uuid4().hex}"

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
                self._finish(stopped_outcome(self._stop_reason, None, None, 0.0, self.timeout))
                return
        try:
            self._spawn()
        except Exception as exc:  # never raise from start()
            if isinstance(exc, (OSError, ValueError)):  # not found, not executable, a NUL: the outcome says so
                log.info("runner: cannot start %r: %s", self.argv, exc)
            else:  # anything else is a bug worth its traceback
                log.exception("runner: cannot start %r", self.argv)
            self._cleanup_after_spawn_failure()
            self._finish(Outcome("failed_to_start", message=short_message(f"cannot start {self._name()}: {exc}"), duration_s=0.0))

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
            wake = self._wake_monitor
        if wake is not None:
            wake.set()
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

    # -- starting -------------------------------------------------------------------

    def _name(self) -> str:
        return self.argv[0] if self.argv else "(empty command)"

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env)
        env["PYTHONUNBUFFERED"] = "1"
        if self.terminal is not None:  # its terminal's size, which follows gputui's, says how wide
            env.pop("COLUMNS", None)
            env.pop("LINES", None)
        name, _, value = self._tag.partition("=")
        env[name] = value
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

        self._oom_kills_before = cgroup_oom_kill_count()
        output: int = subprocess.PIPE
        errors: int = subprocess.PIPE
        master = slave = None
        if self.terminal is not None:
            master, slave = open_pseudo_terminal(*self.terminal)
            output = errors = slave
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
                stdout=output,
                stderr=errors,
                start_new_session=True,
                pass_fds=(report_w,),
                env=env,
                cwd=self.cwd,
            )
        except BaseException:
            for fd in (report_r, report_w, master, slave):
                if fd is not None:
                    os.close(fd)
            raise
        os.close(report_w)
        if slave is not None:
            os.close(slave)  # the child holds it now: its last close is the master's EOF
        with self._lock:
            self._proc = proc
            self._pgid = proc.pid  # the guard leads the new session and group
            self._master = os.fdopen(master, "rb", buffering=0) if master is not None else None
            stop_early = self._stop_reason is not None
        if self._master is not None:
            pipes: list[tuple[BinaryIO | IO[bytes] | None, str]] = [(self._master, "stdout")]
        else:
            pipes = [(proc.stdout, "stdout"), (proc.stderr, "stderr")]
        t = threading.Thread(
            target=read_pipes, args=(pipes, self._deliver, self._pass_bytes if self.on_bytes else None), name=f"gputui-runner-output-{proc.pid}", daemon=True
        )
        t.start()
        self._readers.append(t)
        if stop_early:
            self._signal_group(signal.SIGTERM)
        self._read_report(report_r)
        with self._lock:
            self._wake_monitor = Wakeup()
        threading.Thread(target=self._monitor, name=f"gputui-runner-monitor-{proc.pid}", daemon=True).start()

    def _read_report(self, fd: int) -> None:
        data = b""
        deadline = time.monotonic() + REPORT_TIMEOUT_S
        keep = False
        try:
            while b"\n" not in data:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not readable_within(fd, remaining):
                    log.warning("runner: the guard did not report the command's pid in time")
                    break
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                data += chunk
            first, _, rest = data.partition(b"\n")
            line = first.decode("utf-8", "replace").strip()
            keep = line.startswith("pid ")
        finally:
            if keep:  # the guard says more on it once the command exits: read by the monitor
                self._report_fd, self._report_rest = fd, rest
            else:
                os.close(fd)
        if line.startswith("pid "):
            try:
                self._pid = int(line[4:])
            except ValueError:
                pass
        elif line.startswith("error "):
            _, _kind, message = (line.split(" ", 2) + ["", ""])[:3]
            self._start_error = message or f"cannot start {self._name()}"

    def _read_rest_of_report(self) -> None:
        """The guard has exited: what it said after the pid (when its command exited, the
        leftovers it stopped), read to the pipe's end, which its exit closed."""
        fd, data = self._report_fd, self._report_rest
        if fd is None:
            return
        deadline = time.monotonic() + 1.0  # only the guard held the other end; bounded all the same
        try:
            while time.monotonic() < deadline and readable_within(fd, deadline - time.monotonic()):
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        finally:
            self._close_report()
        for raw in data.decode("utf-8", "replace").splitlines():
            word, _, rest = raw.partition(" ")
            try:
                if word == "exited":
                    self._child_exited_at = float(rest)
                elif word == "leftover":
                    pid, _, name = rest.partition(" ")
                    self._leftovers.append((int(pid), name))
                elif word == "leftovers":
                    self._leftover_count = int(rest)
            except ValueError:
                continue
        self._leftover_count = max(self._leftover_count, len(self._leftovers))

    def _close_report(self) -> None:
        with self._lock:
            fd, self._report_fd = self._report_fd, None
        if fd is not None:
            os.close(fd)

    def _cleanup_after_spawn_failure(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            self._signal_group(signal.SIGKILL)
            try:
                proc.wait(5)
            except Exception:
                pass

    # -- output -----------------------------------------------------------------------

    def _deliver(self, line: OutputLine) -> None:
        """Each output line, on the reader thread: kept for the outcome, then ``on_line``."""
        oom = oom_evidence(line.text)
        if oom is not None:
            self._oom_line = oom
        if not line.progress:
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

    def _pass_bytes(self, chunk: bytes) -> None:
        """Each chunk, on the reader thread, to ``on_bytes``; its failure never stops the reading."""
        callback = self.on_bytes
        if callback is None:
            return
        try:
            callback(chunk)
        except Exception:
            log.debug("runner: on_bytes raised", exc_info=True)

    def resize_terminal(self, columns: int, rows: int) -> None:
        """The user's terminal changed size: so does the command's, and it is told (SIGWINCH)."""
        with self._lock:
            master = self._master
            if master is None or master.closed or self._done.is_set():
                return
            try:
                resize(master.fileno(), columns, rows)
            except ValueError:  # the reader closed it just now: the run has ended
                return
        self._signal_group(signal.SIGWINCH)

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

    def _tagged(self) -> list[int]:
        """Live processes of this run found by its tag, wherever they were re-parented."""
        return processes_tagged(self._tag.encode())

    def _run_alive(self) -> bool:
        return self._group_alive() or bool(self._tagged())

    def _signal_run(self, sig: int) -> None:
        """``sig`` to the group and to every process carrying the run's tag."""
        _guard.signal_pids(self._tagged(), sig)
        self._signal_group(sig)

    def _guard_lost(self) -> bool:
        """The guard has exited: it does so only once the run is over, so anything of
        the run still alive (and not being KILLed by us) means it was killed first."""
        return not self._killed and self._run_alive()

    def _monitor(self) -> None:
        proc = self._proc
        assert proc is not None and self._t0 is not None
        returncode = None
        try:
            returncode = self._wait_guard(proc)
            ended = time.monotonic()
            self._read_rest_of_report()
            exited_at = self._child_exited_at
            if exited_at is not None and self._t0 <= exited_at <= ended:
                ended = exited_at  # the run lasted as long as its command, not its leftovers' grace
            # A stop() that comes after the command ended does not change its outcome.
            reason = self._stop_reason
            guard_lost = self._guard_lost()
            self._reap_group()
            self._finish(self._classify(returncode, ended - self._t0, reason, guard_lost))
        except BaseException as exc:  # keep the promise: the group dies, wait() returns
            log.exception("runner: monitor failed")
            self._signal_group(signal.SIGKILL)
            self._finish(Outcome("signaled" if returncode is None or returncode < 0 else "exited",
                                 exit_code=returncode if returncode is not None and returncode >= 0 else None,
                                 message=short_message(f"runner error: {exc}"),
                                 duration_s=time.monotonic() - self._t0))  # fmt: skip

    def _wait_guard(self, proc: subprocess.Popen) -> int:
        assert self._t0 is not None  # set by start(), before anything waits
        deadline = None if self.timeout is None else self._t0 + self.timeout
        exited = _guard.exit_fd(proc.pid)
        wake = self._wake_monitor
        assert wake is not None  # made before the monitor starts
        try:
            while True:
                wait = _POLL_S if exited is None else self._until_next_deadline(deadline)
                returncode = _guard.wait_for_exit(proc, exited, wait, wake.fileno())
                if returncode is not None:
                    return returncode
                wake.clear()
                self._enforce_deadlines(deadline)
        finally:
            wake.close()
            if exited is not None:
                os.close(exited)

    def _until_next_deadline(self, deadline: float | None) -> float:
        now = time.monotonic()
        due = [at - now for at in (deadline if self._stop_reason is None else None, None if self._killed else self._kill_at) if at is not None]
        return max(0.01, min([_LONGEST_WAIT_S, *due]))  # a deadline just past: acted on at the next look

    def _enforce_deadlines(self, deadline: float | None) -> None:
        """Between waits: stop a run past its --timeout, kill one past its stop's grace."""
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
        if self._run_alive():
            with self._lock:
                if self._stop_reason is None:
                    self._kill_at = time.monotonic() + self.grace
                kill_at = self._kill_at
            self._signal_run(signal.SIGTERM)
            while self._run_alive() and time.monotonic() < (kill_at or 0):
                time.sleep(0.05)
            for _ in range(20):
                if not self._run_alive():
                    break
                self._signal_run(signal.SIGKILL)
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

    def _classify(self, returncode: int, duration: float, stop_reason: str | None, guard_lost: bool = False) -> Outcome:
        return classify(
            RunEnd(
                returncode,
                duration,
                stop_reason,
                guard_lost=guard_lost,
                timeout=self.timeout,
                start_error=self._start_error,
                pid=self._pid,
                killed=self._killed,
                oom_mark=self._oom_mark,
                oom_line=self._oom_line,
                oom_kills_before=self._oom_kills_before,
                oom_kill_count=cgroup_oom_kill_count,  # read through this module, as at the start
                tail=list(self._tail),
                leftovers=tuple(self._leftovers),
                leftover_count=self._leftover_count,
            )
        )

    def _finish(self, outcome: Outcome) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self._outcome = outcome
            self._group_gone = True
            self._done.set()
        self._close_report()

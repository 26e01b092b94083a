"""The guard: a tiny process between gputui and the user's command.

    python -m gputui._guard [--report-fd N] [--parent PID] [--grace SECONDS] -- CMD [ARG...]

The runner starts the guard as the leader of a new session and process group; the
guard starts ``CMD`` as its child in that same group and waits for it.  Its one job is
to make sure the group dies with gputui, even when gputui is SIGKILLed:

* It sets ``PR_SET_PDEATHSIG(SIGTERM)`` on itself (Linux), then checks that its parent
  is still the process that started it (else it exits at once: gputui already died).
  PDEATHSIG fires when the parent *thread* that forked us exits, not the parent
  process, so a SIGTERM is only taken as "gputui died" when ``os.getppid()`` changed.
  The guard also polls ``os.getppid()`` every 0.5 s, which covers the thread case and
  systems without prctl.
* When gputui is gone, the guard sends SIGTERM to the whole group, waits up to
  ``--grace`` seconds, then SIGKILLs the group (itself included).
* A SIGTERM/SIGHUP while gputui is alive is the runner stopping the group (or a
  spurious PDEATHSIG from a finished thread): the guard ignores it and keeps waiting
  for its child, which got the same signal.
* When the child ends, processes it left behind in the group get SIGTERM, then SIGKILL
  after the grace period (Linux, where ``/proc`` lists them), so that "the guard
  exited" means "the run is over".
* The guard exits with the child's exit code, or, when the child died of a signal,
  re-raises that signal on itself so the runner sees the same signal.

The child's pid (or why it could not be started) is written as one line to
``--report-fd``, an inherited pipe, never to stdout/stderr, which belong to the user's
command: ``pid 1234`` or ``error notfound|permission|oserror <message>``.  Exit codes for
start failures follow the shell: 127 command not found, 126 not executable.

The runner starts this file by path with ``python -I -S`` (isolated: no script
directory on ``sys.path``, no PYTHON* variables, no site) so that it works from any
working directory without importing the ``gputui`` package; it must therefore import
only the standard library.  ``gputui.runner`` imports :func:`group_members` from here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

PARENT_POLL_S = 0.5
_TERMINATING = (signal.SIGTERM, signal.SIGHUP)


def set_pdeathsig(sig: int) -> bool:
    """``prctl(PR_SET_PDEATHSIG, sig)`` on Linux; False where unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except Exception:
        return False


def group_members(pgid: int, exclude: int | None = None) -> list[int] | None:
    """Live (non-zombie) pids in process group ``pgid``, read from ``/proc``.

    ``None`` where ``/proc`` is unavailable (the caller must then assume that members
    may remain).  Zombies are left out: they are dead, only not yet reaped (possibly by
    an init that never reaps), and signals cannot touch them anyway.
    """
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    members = []
    for name in entries:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == exclude:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        # "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 3:
            continue
        if fields[0] in (b"Z", b"X"):
            continue
        try:
            if int(fields[2]) == pgid:
                members.append(pid)
        except ValueError:
            continue
    return members


class _Guard:
    def __init__(self, parent: int, grace: float) -> None:
        self.parent = parent
        self.grace = grace
        self.pgid = os.getpgrp()
        self.me = os.getpid()
        # Only a guard that leads its own group (as the runner starts it) may signal the
        # group; started by hand inside someone else's group, it signals its child only.
        self.owns_group = self.pgid == self.me
        self.child: int | None = None
        self.orphaned = False
        self.kill_at: float | None = None

    # -- signals ------------------------------------------------------------------

    def parent_gone(self) -> bool:
        return os.getppid() != self.parent

    def on_signal(self, signum, frame) -> None:  # noqa: ARG002
        # SIGTERM/SIGHUP: only act when gputui itself is gone.  A TERM sent by the
        # runner to the group reaches the child too; we just keep waiting for it.
        if not self.orphaned and self.parent_gone():
            self.orphan()

    def orphan(self) -> None:
        """gputui died: TERM the whole group now, KILL it after the grace period."""
        if self.orphaned:
            return
        self.orphaned = True
        self.kill_at = time.monotonic() + self.grace
        self.killpg(signal.SIGTERM)  # we get it too; on_signal ignores it now

    def killpg(self, sig: int) -> None:
        try:
            if self.owns_group:
                os.killpg(self.pgid, sig)
            elif self.child is not None:
                os.kill(self.child, sig)
        except (ProcessLookupError, PermissionError):
            pass

    # -- main loop ----------------------------------------------------------------

    def wait_child(self, proc: subprocess.Popen) -> int:
        while True:
            try:
                return proc.wait(timeout=0.1 if self.orphaned else PARENT_POLL_S)
            except subprocess.TimeoutExpired:
                pass
            if not self.orphaned and self.parent_gone():
                self.orphan()
            if self.orphaned and self.kill_at is not None and time.monotonic() >= self.kill_at:
                self.killpg(signal.SIGKILL)  # the guard dies here too

    def clear_leftovers(self) -> None:
        """The child is gone; make sure whatever it left in the group follows."""
        if not self.owns_group:
            return
        others = group_members(self.pgid, exclude=self.me)
        if others is None:
            if self.orphaned:
                # No /proc: we cannot tell, so give them the grace period and KILL.
                time.sleep(max(0.0, (self.kill_at or 0) - time.monotonic()))
                self.killpg(signal.SIGKILL)
            return
        if not others:
            return
        if self.kill_at is None:
            self.kill_at = time.monotonic() + self.grace
            self.killpg(signal.SIGTERM)
        while others and time.monotonic() < self.kill_at:
            time.sleep(0.05)
            if not self.orphaned and self.parent_gone():
                self.orphan()
            others = group_members(self.pgid, exclude=self.me) or []
        if self.orphaned:
            self.killpg(signal.SIGKILL)  # nobody waits for our status any more
        for _ in range(10):  # KILL one by one so our own exit status survives
            if not others:
                return
            for pid in others:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)
            others = group_members(self.pgid, exclude=self.me) or []


def _report(fd: int | None, line: str) -> None:
    if fd is None:
        if not line.startswith("pid "):
            sys.stderr.write(f"gputui guard: {line.split(' ', 2)[-1]}\n")
            sys.stderr.flush()
        return
    data = (line.replace("\n", " ") + "\n").encode("utf-8", "replace")
    try:
        os.write(fd, data)
    except OSError:
        pass
    try:
        os.close(fd)
    except OSError:
        pass


def _exit_like(returncode: int) -> None:
    """Exit with the child's code, or die of the signal that killed it."""
    if returncode >= 0:
        os._exit(returncode & 0xFF)
    sig = -returncode
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file of the guard
    except Exception:
        pass
    if sig != signal.SIGKILL:  # SIGKILL's disposition cannot (and need not) be set
        try:
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        except (OSError, ValueError):
            pass
    try:
        os.kill(os.getpid(), sig)
        time.sleep(0.5)  # delivery may lag a little
    except OSError:
        pass
    os._exit(128 + sig)


def _parse(argv: list[str]) -> tuple[int | None, int | None, float, list[str]]:
    report_fd = parent = None
    grace = 5.0
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return report_fd, parent, grace, argv[i + 1 :]
        if arg in ("--report-fd", "--parent", "--grace") and i + 1 < len(argv):
            value = argv[i + 1]
            if arg == "--report-fd":
                report_fd = int(value)
            elif arg == "--parent":
                parent = int(value)
            else:
                grace = float(value)
            i += 2
            continue
        return report_fd, parent, grace, argv[i:]
    return report_fd, parent, grace, []


def main(argv: list[str] | None = None) -> int:
    try:
        report_fd, parent, grace, cmd = _parse(list(sys.argv[1:] if argv is None else argv))
    except ValueError as exc:
        sys.stderr.write(f"gputui guard: bad arguments: {exc}\n")
        return 2
    if not cmd:
        _report(report_fd, "error oserror no command given")
        return 2
    if parent is None:
        parent = os.getppid()
    set_pdeathsig(signal.SIGTERM)
    if os.getppid() != parent:
        return 1  # gputui died before the prctl took effect: start nothing
    guard = _Guard(parent, grace)
    for sig in _TERMINATING:
        signal.signal(sig, guard.on_signal)
    # Handlers are reset to SIG_DFL by exec, so the command starts with default
    # dispositions; stdin/stdout/stderr are inherited, every other fd is closed.
    try:
        proc = subprocess.Popen(cmd, close_fds=True)
    except FileNotFoundError:
        _report(report_fd, f"error notfound command not found: {cmd[0]}")
        return 127
    except PermissionError:
        _report(report_fd, f"error permission permission denied: {cmd[0]}")
        return 126
    except OSError as exc:
        _report(report_fd, f"error oserror cannot start {cmd[0]}: {exc.strerror or exc}")
        return 126
    guard.child = proc.pid
    _report(report_fd, f"pid {proc.pid}")
    returncode = guard.wait_child(proc)
    if not guard.orphaned and guard.parent_gone():
        guard.orphan()
    guard.clear_leftovers()
    _exit_like(returncode)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())

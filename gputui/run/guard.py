"""The guard: a tiny process between gputui and the user's command.

    python -m gputui.run.guard [--report-fd N] [--parent PID] [--grace SECONDS] -- CMD [ARG...]

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
* It makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``, Linux): a grandchild
  that calls ``setsid()`` leaves the process group but, once its parent dies, is
  re-parented to the guard instead of init, so it stays findable as a descendant.
  Every signal the guard sends to the group also goes to such descendants.
* When the child ends, processes it left behind in the group, or below the guard
  outside it, get SIGTERM, then SIGKILL after the grace period (Linux, where ``/proc``
  lists them), so that "the guard exited" means "the run is over".
* The guard exits with the child's exit code, or, when the child died of a signal,
  re-raises that signal on itself so the runner sees the same signal.

The child's pid (or why it could not be started) is written as one line to
``--report-fd``, an inherited pipe, never to stdout/stderr, which belong to the user's
command: ``pid 1234`` or ``error notfound|permission|oserror <message>``.  Exit codes for
start failures follow the shell: 127 command not found, 126 not executable.  The pipe
stays open for the run: ``exited <time.monotonic()>`` when the child exits (so the run's
duration is the child's, not the leftovers' grace), then one ``leftover <pid> <name>``
for each process the guard had to stop after it (at most :data:`NAMED_LEFTOVERS`, then
``leftovers <count>``), so that the outcome can name them.

The runner starts this file by path with ``python -I -S`` (isolated: no script
directory on ``sys.path``, no PYTHON* variables, no site) so that it works from any
working directory without importing the ``gputui`` package; it must therefore import
only the standard library.  ``gputui.run.runner`` imports :func:`group_members` from here.
"""

from __future__ import annotations

import math
import os
import select
import signal
import subprocess
import sys
import time

PARENT_POLL_S = 0.5
NAMED_LEFTOVERS = 20  # the report pipe must never fill: a guard blocked on it would hang the run
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


def set_child_subreaper() -> bool:
    """``prctl(PR_SET_CHILD_SUBREAPER, 1)`` on Linux: orphaned descendants are
    re-parented to us, not to init.  False where unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_CHILD_SUBREAPER = 36
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except Exception:
        return False


def _live_processes() -> dict[int, tuple[int, int]] | None:
    """pid -> (ppid, pgrp) of every live (non-zombie) process, from ``/proc``; None
    where ``/proc`` is unavailable."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    table: dict[int, tuple[int, int]] = {}
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        # "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 3 or fields[0] in (b"Z", b"X"):
            continue  # zombies are dead, only not yet reaped; signals cannot touch them
        try:
            table[int(name)] = (int(fields[1]), int(fields[2]))
        except ValueError:
            continue
    return table


def live_pids() -> list[int]:
    """Every live (non-zombie) process; empty where ``/proc`` is unavailable."""
    return list(_live_processes() or {})


def descendants(root: int, outside_group: int | None = None) -> list[int] | None:
    """Live descendants of ``root`` (children, their children, ...), whatever their
    process group or session (only those not in ``outside_group``, when given); None
    where ``/proc`` is unavailable."""
    table = _live_processes()
    if table is None:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _pgrp) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    if outside_group is not None:
        found = [pid for pid in found if table[pid][1] != outside_group]
    return found


def signal_pids(pids: list[int] | None, sig: int) -> None:
    for pid in pids or []:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def group_members(pgid: int, exclude: int | None = None) -> list[int] | None:
    """Live (non-zombie) pids in process group ``pgid``, read from ``/proc``.

    ``None`` where ``/proc`` is unavailable (the caller must then assume that members
    may remain).  Zombies are left out: they are dead, only not yet reaped (possibly by
    an init that never reaps), and signals cannot touch them anyway.
    """
    table = _live_processes()
    if table is None:
        return None
    return [pid for pid, (_ppid, pgrp) in table.items() if pgrp == pgid and pid != exclude]


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
        self.stopped: dict[int, str] = {}  # leftovers stopped after the child exited: pid -> name

    # -- signals ------------------------------------------------------------------

    def parent_gone(self) -> bool:
        return os.getppid() != self.parent

    def on_signal(self, signum, frame) -> None:  # noqa: ARG002
        # SIGTERM/SIGHUP: only act when gputui itself is gone.  A TERM sent by the
        # runner to the group reaches the child too; we just keep waiting for it.
        if not self.orphaned and self.parent_gone():
            self.orphan()
        elif self.owns_group:
            # The runner signalled the group: pass it on to descendants that left it.
            signal_pids(self.outsiders(), signum)

    def outsiders(self) -> list[int] | None:
        """Descendants that left our group (``setsid()``), adopted or not."""
        return descendants(self.me, outside_group=self.pgid)

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
                signal_pids(self.outsiders(), sig)  # first: a KILL of the group ends us too
                os.killpg(self.pgid, sig)
            elif self.child is not None:
                os.kill(self.child, sig)
        except (ProcessLookupError, PermissionError):
            pass

    # -- main loop ----------------------------------------------------------------

    def wait_child(self, proc: subprocess.Popen) -> int:
        exited = exit_fd(proc.pid)
        try:
            while True:
                returncode = wait_for_exit(proc, exited, 0.1 if self.orphaned else PARENT_POLL_S)
                if returncode is not None:
                    return returncode
                self.check_parent()
        finally:
            if exited is not None:
                os.close(exited)

    def check_parent(self) -> None:
        """Between waits: orphaned, stop the run; past the grace, kill it."""
        if not self.orphaned and self.parent_gone():
            self.orphan()
        if self.orphaned and self.kill_at is not None and time.monotonic() >= self.kill_at:
            self.killpg(signal.SIGKILL)  # the guard dies here too

    def leftovers(self) -> list[int] | None:
        """What is still alive in our group or below us, the child being gone; each
        one's name is kept on first sight, since it cannot be read once it is dead."""
        _reap_adopted()
        members = group_members(self.pgid, exclude=self.me)
        below = descendants(self.me)
        if members is None or below is None:
            return None
        found = sorted(set(members) | set(below))
        for pid in found:
            if pid not in self.stopped:
                self.stopped[pid] = process_name(pid)
        return found

    def clear_leftovers(self) -> None:
        """The child is gone; make sure whatever it left in the group (or below us,
        outside it) follows."""
        if not self.owns_group:
            return
        others = self.leftovers()
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
            others = self.leftovers() or []
        if self.orphaned:
            self.killpg(signal.SIGKILL)  # nobody waits for our status any more
        for _ in range(10):  # KILL one by one so our own exit status survives
            if not others:
                return
            signal_pids(others, signal.SIGKILL)
            time.sleep(0.02)
            others = self.leftovers() or []


def process_name(pid: int) -> str:
    """The kernel's name for ``pid`` (``/proc/PID/comm``), or "?" once it is gone."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read().decode("utf-8", "replace").strip() or "?"
    except OSError:
        return "?"


def exit_fd(pid: int) -> int | None:
    """A pidfd that turns readable when child ``pid`` exits (Linux 5.3+), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux, an old kernel, or a seccomp filter refusing it
        return None


def wait_for_exit(proc: subprocess.Popen, exited: int | None, seconds: float, wake: int | None = None) -> int | None:
    """``proc``'s exit code if it ends within ``seconds``, else None; blocked in the kernel
    on ``exited`` (exit_fd) where there is one, and back early (None) once ``wake`` is
    readable.  Popen.wait(timeout) polls waitpid up to 20 times a second (Python's busy
    loop): a seventh of a headless session's CPU (docs/performance.md#figures-behind-the-codes-choices).  Used
    here and by gputui.run.runner."""
    if exited is None:
        try:
            return proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None
    poller = select.poll()
    poller.register(exited, select.POLLIN)
    if wake is not None:
        poller.register(wake, select.POLLIN)
    ready = {fd for fd, _ in poller.poll(max(0, math.ceil(seconds * 1000)))}
    if exited not in ready:
        return None
    return proc.wait()  # it has exited: this reaps it at once


def _reap_adopted() -> None:
    """Reap adopted descendants that died (we are their subreaper); only called once
    our own child has been waited for, so its status is never taken from Popen."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _report(fd: int | None, line: str, *, close: bool = True) -> None:
    if fd is None:
        if line.startswith("error "):
            sys.stderr.write(f"gputui guard: {line.split(' ', 2)[-1]}\n")
            sys.stderr.flush()
        return
    data = (line.replace("\n", " ") + "\n").encode("utf-8", "replace")
    try:
        os.write(fd, data)
    except OSError:
        pass  # full (never, with the cap on names) or the runner is gone: nothing to tell
    if close:
        try:
            os.close(fd)
        except OSError:
            pass


def _report_leftovers(fd: int | None, stopped: dict[int, str]) -> None:
    """One line per leftover the guard stopped, the names capped (the pipe must not fill)."""
    for pid, name in sorted(stopped.items())[:NAMED_LEFTOVERS]:
        _report(fd, f"leftover {pid} {name}", close=False)
    if len(stopped) > NAMED_LEFTOVERS:
        _report(fd, f"leftovers {len(stopped)}", close=False)


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
    set_child_subreaper()
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
    if report_fd is not None:
        os.set_blocking(report_fd, False)  # a runner that stopped reading never blocks the guard
    _report(report_fd, f"pid {proc.pid}", close=False)
    returncode = guard.wait_child(proc)
    _report(report_fd, f"exited {time.monotonic()!r}", close=False)
    if not guard.orphaned and guard.parent_gone():
        guard.orphan()
    guard.clear_leftovers()
    _report_leftovers(report_fd, guard.stopped)
    _exit_like(returncode)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())

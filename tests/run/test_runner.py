"""Runner and guard, against real subprocesses (no mocks)."""

from __future__ import annotations

import os
import queue
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

import gputui
from gputui.run.outcome import Outcome
from gputui.run.output_stream import LINE_CAP, TRUNCATION_MARK, LineSplitter, OutputLine, strip_ansi
from gputui.run.runner import Runner
from tests.support.leftovers import no_leftovers  # noqa: F401  (the fixture)

PY = sys.executable
REPO_ROOT = str(Path(gputui.__file__).resolve().parent.parent)

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process-group tests are written for Linux"),
    pytest.mark.usefixtures("no_leftovers"),  # every test: nothing it started survives it
]


# --- helpers -------------------------------------------------------------------------


def py(code: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code)]


def run(code: str, **kwargs) -> tuple[Outcome, list[OutputLine], Runner]:
    lines: list[OutputLine] = []
    kwargs.setdefault("grace", 0.5)
    runner = Runner(py(code), on_line=lines.append, **kwargs)
    runner.start()
    try:
        outcome = runner.wait(30)
    finally:
        runner.close()
    assert outcome is not None, "run did not finish in 30 s"
    return outcome, lines, runner


def texts(lines: list[OutputLine], stream: str | None = None) -> list[str]:
    return [line.text for line in lines if stream is None or line.stream == stream]


def is_gone(pid: int) -> bool:
    """Dead, or a zombie nobody reaped yet (init in a container may never reap)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pids, timeout: float = 5.0) -> list[int]:
    """Pids still alive after ``timeout`` seconds (empty when all are gone)."""
    end = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < end:
        alive = [pid for pid in alive if not is_gone(pid)]
        if alive:
            time.sleep(0.05)
    return alive


class LineWaiter:
    """on_line callback that lets a test wait for a line with a given prefix."""

    def __init__(self) -> None:
        self.lines: list[OutputLine] = []
        self._cond = threading.Condition()

    def __call__(self, line: OutputLine) -> None:
        with self._cond:
            self.lines.append(line)
            self._cond.notify_all()

    def wait_for(self, prefix: str, timeout: float = 10.0) -> str:
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if line.text.startswith(prefix):
                        return line.text
                remaining = end - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no line starting with {prefix!r}; got {[x.text for x in self.lines]}")
                self._cond.wait(remaining)


# Child that starts a sleeping grandchild in its own group, prints both pids, sleeps.
SPAWNS_GRANDCHILD = """
    import os, subprocess, sys, time
    g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print("pids", os.getpid(), g.pid, flush=True)
    time.sleep(60)
"""


# --- exit codes and signals ------------------------------------------------------------


def test_exit_code_zero_is_ok():
    outcome, lines, _ = run("print('hello')")
    assert outcome.kind == "exited"
    assert outcome.exit_code == 0
    assert outcome.ok
    assert outcome.signal is None
    assert outcome.message == "exited with code 0"
    assert outcome.duration_s is not None and 0 < outcome.duration_s < 10
    assert texts(lines) == ["hello"]


def test_the_monitor_waits_for_the_run_in_the_kernel_not_by_polling(monkeypatch):
    """Popen.wait(timeout) asks waitpid up to 20 times a second; a run of a second and
    a half is waited for in a handful of calls (where the kernel has pidfds), and its
    exit is seen at once."""
    if not hasattr(os, "pidfd_open"):
        pytest.skip("no os.pidfd_open here: the monitor polls, as Popen.wait does")
    asked: list[int] = []
    try_wait = subprocess.Popen._try_wait
    monkeypatch.setattr(subprocess.Popen, "_try_wait", lambda self, flags: asked.append(flags) or try_wait(self, flags))
    outcome, _, _ = run("import time; time.sleep(1.5)")
    assert outcome.kind == "exited" and outcome.exit_code == 0
    assert outcome.duration_s is not None and outcome.duration_s < 2.5
    assert len(asked) <= 5, f"waitpid asked {len(asked)} times"


def test_wait_for_exit_blocks_until_the_child_ends_and_says_none_before(monkeypatch):
    """The guard and the runner wait on a pidfd: None while the child runs, its exit code
    as soon as it ends, and waitpid asked only for that."""
    from gputui.run.guard import exit_fd, wait_for_exit

    child = subprocess.Popen([PY, "-c", "import time, sys; time.sleep(0.6); sys.exit(4)"])
    exited = exit_fd(child.pid)
    if exited is None:
        child.wait()
        pytest.skip("no pidfd here: the wait polls, as Popen.wait does")
    asked: list[int] = []
    try_wait = subprocess.Popen._try_wait
    monkeypatch.setattr(subprocess.Popen, "_try_wait", lambda self, flags: asked.append(flags) or try_wait(self, flags))
    try:
        assert wait_for_exit(child, exited, 0.05) is None
        began = time.monotonic()
        code = None
        while code is None and time.monotonic() - began < 10:
            code = wait_for_exit(child, exited, 1.0)
        assert code == 4 and time.monotonic() - began < 2.0
        assert len(asked) <= 1, f"waitpid asked {len(asked)} times"
    finally:
        os.close(exited)


def test_exit_code_three():
    outcome, _, _ = run("import sys; sys.stderr.write('ValueError: bad input\\n'); sys.exit(3)")
    assert outcome.kind == "exited"
    assert outcome.exit_code == 3
    assert not outcome.ok
    assert outcome.message == "exited with code 3: ValueError: bad input"


@pytest.mark.parametrize("signame", ["SIGSEGV", "SIGKILL"])
def test_child_killed_by_signal_is_signaled(signame):
    outcome, _, runner = run(
        f"""
        import os, resource, signal
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.kill(os.getpid(), signal.{signame})
        """
    )
    assert outcome.kind == "signaled"
    assert outcome.signal == signame
    assert outcome.exit_code is None
    assert not outcome.ok
    assert signame in outcome.message
    assert is_gone(runner.pid)


# --- timeout and stop -------------------------------------------------------------------


def test_timeout_kills_the_whole_group_including_grandchild():
    waiter = LineWaiter()
    # 3 s: on a loaded 2-core machine the child may need over a second just to start.
    runner = Runner(py(SPAWNS_GRANDCHILD), timeout=3.0, grace=0.5, on_line=waiter)
    t0 = time.monotonic()
    runner.start()
    try:
        _, child, grandchild = waiter.wait_for("pids ").split()
        child, grandchild = int(child), int(grandchild)
        assert child == runner.pid
        assert not is_gone(grandchild)
        outcome = runner.wait(15)
    finally:
        runner.close()
    elapsed = time.monotonic() - t0
    assert outcome is not None
    assert outcome.kind == "timeout"
    assert outcome.message == "timed out after 3 s"
    assert 2.9 < elapsed < 12
    assert wait_gone([child, grandchild, runner.pgid], 3) == []


def test_stop_kills_a_child_that_ignores_sigterm_after_grace():
    waiter = LineWaiter()
    code = """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
    """
    runner = Runner(py(code), grace=0.7, on_line=waiter)
    runner.start()
    try:
        waiter.wait_for("ready")
        t0 = time.monotonic()
        runner.stop()
        runner.stop()  # idempotent
        assert runner.wait(0.3) is None, "a TERM-ignoring child must survive until the grace period ends"
        outcome = runner.wait(10)
        elapsed = time.monotonic() - t0
    finally:
        runner.close()
    assert outcome is not None
    assert outcome.kind == "stopped"
    assert outcome.message == "stopped by user"
    assert outcome.signal == "SIGKILL"
    assert 0.6 < elapsed < 5
    assert wait_gone([runner.pid, runner.pgid], 3) == []


def test_stop_with_cooperative_child_ends_quickly_and_reports_stopped():
    waiter = LineWaiter()
    runner = Runner(py("import time\nprint('ready', flush=True)\ntime.sleep(60)"), grace=5.0, on_line=waiter)
    runner.start()
    try:
        waiter.wait_for("ready")
        t0 = time.monotonic()
        runner.stop()
        outcome = runner.wait(10)
        elapsed = time.monotonic() - t0
    finally:
        runner.close()
    assert outcome.kind == "stopped"
    assert outcome.signal == "SIGTERM"  # the guard re-raised the child's signal
    assert elapsed < 2.5, "TERM alone ended it; no need to wait for the grace period"


def test_close_is_idempotent_and_kills_the_group():
    waiter = LineWaiter()
    runner = Runner(py(SPAWNS_GRANDCHILD), grace=0.5, on_line=waiter)
    runner.start()
    _, child, grandchild = waiter.wait_for("pids ").split()
    outcome = runner.close()
    assert outcome is not None and outcome.kind == "stopped"
    assert runner.close() is outcome
    assert runner.wait() is outcome
    assert wait_gone([int(child), int(grandchild)], 3) == []


def test_keyboard_interrupt_in_wait_stops_the_group():
    waiter = LineWaiter()
    runner = Runner(py(SPAWNS_GRANDCHILD), grace=0.5, on_line=waiter)
    runner.start()
    _, child, grandchild = waiter.wait_for("pids ").split()
    # Deliver a real SIGINT to this (main) thread while it blocks in wait().  Install
    # Python's handler explicitly: a shell starts background jobs with SIGINT ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.2, os.kill, args=(os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            runner.wait(10)
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
        runner.close()
    outcome = runner.wait(10)
    assert outcome is not None and outcome.kind == "stopped"
    assert wait_gone([int(child), int(grandchild)], 3) == []


def test_leftover_grandchild_is_cleared_when_the_command_exits():
    code = """
        import subprocess, sys
        g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print("grandchild", g.pid, flush=True)
    """
    t0 = time.monotonic()
    outcome, lines, _ = run(code, grace=0.5)
    assert outcome.ok
    assert time.monotonic() - t0 < 5
    grandchild = int(texts(lines)[0].split()[1])
    assert wait_gone([grandchild], 3) == []


# A child that double-forks a daemon (which ignores SIGTERM, as daemons often do), waits
# half a second and exits 0; the daemon prints its own pid before it becomes `sleep`.
DOUBLE_FORKS_A_DAEMON = """
    import os, sys, time
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(1, f"daemon {os.getpid()}\\n".encode())
            os.execvp("sh", ["sh", "-c", "trap '' TERM; exec sleep 60"])
        os._exit(0)
    os.waitpid(middle, 0)
    time.sleep(0.5)
"""


def test_a_daemon_left_behind_is_named_in_the_outcome_and_the_duration_is_the_childs():
    """The run's end kills what the command left running; the outcome says so, and its
    duration ends when the command exited, not when the leftovers were gone (the grace)."""
    outcome, lines, _ = run(DOUBLE_FORKS_A_DAEMON, grace=3.0)
    daemon = int(next(text for text in texts(lines) if text.startswith("daemon ")).split()[1])
    assert outcome.ok, outcome
    assert outcome.message == f"exited with code 0; stopped 1 leftover process: sleep (pid {daemon})"
    assert outcome.duration_s is not None and 0.4 < outcome.duration_s < 2.5  # the grace alone is 3 s
    assert wait_gone([daemon], 3) == []


def test_a_run_gputui_stopped_names_no_leftovers():
    """Stopping kills every process of the run alike: nothing in it is a leftover."""
    waiter = LineWaiter()
    runner = Runner(py(DOUBLE_FORKS_A_DAEMON.replace("time.sleep(0.5)", "time.sleep(60)")), on_line=waiter, grace=0.5)
    runner.start()
    try:
        waiter.wait_for("daemon ")
        runner.stop()
        outcome = runner.wait(30)
    finally:
        runner.close()
    assert outcome is not None and outcome.kind == "stopped"
    assert outcome.message == "stopped by user"


def test_start_from_a_short_lived_thread_keeps_the_child_alive():
    """PR_SET_PDEATHSIG fires when the spawning *thread* ends; the guard must not take
    that for gputui's death."""
    waiter = LineWaiter()
    runner = Runner(py("import time\nprint('ready', flush=True)\ntime.sleep(60)"), grace=0.5, on_line=waiter)
    t = threading.Thread(target=runner.start)
    t.start()
    t.join()
    try:
        waiter.wait_for("ready")
        time.sleep(1.0)  # > the guard's getppid poll
        assert runner.wait(0) is None
        assert not is_gone(runner.pid)
        assert not is_gone(runner.pgid)
    finally:
        outcome = runner.close()
    assert outcome.kind == "stopped"


# --- identity and environment ------------------------------------------------------------


def test_pid_is_the_commands_own_pid_in_a_new_session_and_group():
    outcome, lines, runner = run("import os; print(os.getpid(), os.getpgid(0), os.getsid(0))")
    assert outcome.ok
    pid, pgid, sid = map(int, texts(lines)[0].split())
    assert runner.pid == pid
    assert runner.pgid == pgid == sid  # the guard leads the new session and group
    assert runner.pid != runner.pgid  # ... and it is not the command
    assert pgid != os.getpgrp()
    assert sid != os.getsid(0)


def test_env_is_added_to_os_environ_and_python_is_unbuffered(monkeypatch):
    monkeypatch.setenv("GPUTUI_OUTER", "outer")
    monkeypatch.setenv("PYTHONUNBUFFERED", "0")
    outcome, lines, _ = run(
        "import os, sys; print(os.environ['GPUTUI_OUTER'], os.environ['GPUTUI_ADDED'], os.environ['PYTHONUNBUFFERED'], sys.stdout.write_through)",
        env={"GPUTUI_ADDED": "added"},
    )
    assert outcome.ok
    assert texts(lines) == ["outer added 1 True"]


def test_unbuffered_output_streams_before_the_child_ends():
    waiter = LineWaiter()
    # No flush=True: only PYTHONUNBUFFERED=1 gets this line out while the child sleeps.
    runner = Runner(py("import time\nprint('early')\ntime.sleep(60)"), grace=0.5, on_line=waiter)
    runner.start()
    try:
        waiter.wait_for("early", timeout=5)
    finally:
        runner.close()


def test_cwd_is_used(tmp_path):
    outcome, lines, _ = run("import os; print(os.getcwd())", cwd=str(tmp_path))
    assert outcome.ok
    assert os.path.realpath(texts(lines)[0]) == os.path.realpath(tmp_path)


# --- start failures -------------------------------------------------------------------------


def test_command_not_found_is_failed_to_start_without_spawning():
    runner = Runner(["gputui-no-such-command-xyz", "--flag"])
    runner.start()
    outcome = runner.wait(5)
    assert outcome.kind == "failed_to_start"
    assert outcome.message == "command not found: gputui-no-such-command-xyz"
    assert runner.pid is None and runner.pgid is None  # nothing was spawned
    assert not outcome.ok


def test_missing_path_is_failed_to_start_via_the_guard(tmp_path):
    missing = str(tmp_path / "nope")
    runner = Runner([missing])
    runner.start()
    outcome = runner.wait(5)
    assert outcome.kind == "failed_to_start"
    assert outcome.message == f"command not found: {missing}"
    assert outcome.exit_code == 127


def test_not_executable_is_failed_to_start(tmp_path):
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    runner = Runner([str(script)])
    runner.start()
    outcome = runner.wait(5)
    assert outcome.kind == "failed_to_start"
    assert outcome.message == f"permission denied: {script}"
    assert outcome.exit_code == 126


def test_missing_cwd_is_failed_to_start(tmp_path):
    runner = Runner([PY, "-c", "pass"], cwd=str(tmp_path / "missing"))
    runner.start()
    outcome = runner.wait(5)
    assert outcome.kind == "failed_to_start"
    assert "working directory not found" in outcome.message


# --- streaming -------------------------------------------------------------------------------


def test_progress_segments_are_flagged():
    outcome, lines, _ = run(
        r"""
        import sys, time
        for text in ["10%\r", "20%\r", "30%\n", "done\n", "\r 1/3\r 2/3\r 3/3\n", "crlf\r\n", "next\n"]:
            sys.stdout.write(text); sys.stdout.flush(); time.sleep(0.01)
        """
    )
    assert outcome.ok
    got = [(line.text, line.progress) for line in lines]
    assert got == [
        ("10%", True),
        ("20%", True),
        ("30%", False),
        ("done", False),
        (" 1/3", True),
        (" 2/3", True),
        (" 3/3", False),
        ("crlf", False),
        ("next", False),
    ]


def test_ansi_escape_sequences_are_stripped():
    outcome, lines, _ = run(
        r"""
        import sys
        sys.stdout.write("\x1b[1;31mred\x1b[0m plain\n")
        sys.stdout.write("\x1b]0;window title\x07titled\n")
        sys.stdout.write("\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\\n")
        sys.stdout.write("\x1b[2K\x1b[1Gbar \x1b(Bdone\x1b7\x1b8\n")
        sys.stderr.write("\x1b[33mWARNING\x1b[0m: careful\n")
        """
    )
    assert outcome.ok
    assert texts(lines, "stdout") == ["red plain", "titled", "link", "bar done"]
    assert texts(lines, "stderr") == ["WARNING: careful"]


def test_invalid_utf8_and_split_multibyte_characters():
    outcome, lines, _ = run(
        r"""
        import os, time
        os.write(1, b"bad \xff\xfe end\n")
        euro = "€".encode()  # 3 bytes
        os.write(1, b"price " + euro[:1]); time.sleep(0.1)
        os.write(1, euro[1:2]); time.sleep(0.1)
        os.write(1, euro[2:] + " ok\n".encode())
        os.write(1, "héllo wörld\n".encode())
        """
    )
    assert outcome.ok
    assert texts(lines) == ["bad \ufffd\ufffd end", "price € ok", "héllo wörld"]


def test_a_five_megabyte_line_is_truncated_and_the_next_line_arrives():
    outcome, lines, _ = run(
        """
        import sys
        sys.stdout.write("x" * 5_000_000 + "\\n")
        sys.stdout.write("after\\n")
        """
    )
    assert outcome.ok
    assert len(lines) == 2
    assert lines[0].text == "x" * LINE_CAP + TRUNCATION_MARK
    assert lines[1].text == "after"


def test_output_without_final_newline_is_delivered():
    outcome, lines, _ = run("import sys; sys.stdout.write('first\\nno newline at the end')")
    assert outcome.ok
    assert [(line.text, line.progress) for line in lines] == [("first", False), ("no newline at the end", False)]


def test_stdout_and_stderr_are_told_apart_and_stdin_is_devnull():
    outcome, lines, _ = run("import sys; print('out'); print('err', file=sys.stderr); print(repr(sys.stdin.read()))")
    assert outcome.ok
    assert texts(lines, "stderr") == ["err"]
    assert texts(lines, "stdout") == ["out", "''"]


def test_a_raising_callback_does_not_stop_the_reader():
    seen: list[str] = []

    def on_line(line: OutputLine) -> None:
        seen.append(line.text)
        if line.text == "one":
            raise RuntimeError("callback bug")

    runner = Runner(py("print('one'); print('two'); print('three')"), on_line=on_line, grace=0.5)
    runner.start()
    outcome = runner.wait(10)
    assert outcome.ok
    assert seen == ["one", "two", "three"]


def test_tail_is_bounded_and_skips_progress():
    outcome, _, runner = run(
        r"""
        import sys
        for i in range(1000): print(f"line {i}")
        for i in range(50): sys.stdout.write(f"bar {i}\r")
        """
    )
    assert outcome.ok
    tail = runner.tail
    assert len(tail) == 200
    assert tail[-1].text == "line 999" and tail[0].text == "line 800"


# --- OOM ---------------------------------------------------------------------------------------


def test_oom_detected_from_torch_message_on_stderr():
    outcome, _, _ = run(
        """
        import sys
        print("step 1", flush=True)
        sys.stderr.write("Traceback (most recent call last):\\n  File \\"train.py\\", line 3\\n")
        sys.stderr.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\\n")
        sys.exit(1)
        """
    )
    assert outcome.kind == "oom"
    assert outcome.exit_code == 1
    assert outcome.message == "out of memory: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert not outcome.ok


def test_oom_detected_from_tensorflow_message():
    outcome, _, _ = run(
        "import sys; sys.stderr.write('tensorflow.python.framework.errors_impl.ResourceExhaustedError: "
        "OOM when allocating tensor with shape[8192,8192]\\n'); sys.exit(1)"
    )
    assert outcome.kind == "oom"
    assert outcome.message == "out of memory: OOM when allocating tensor with shape[8192,8192]"


def test_handled_oom_with_exit_zero_is_a_success():
    # e.g. a batch-size finder that catches the OOM and carries on
    outcome, _, _ = run("print('CUDA out of memory, retrying with a smaller batch')")
    assert outcome.kind == "exited" and outcome.ok


def test_mark_oom_from_the_protocol():
    waiter = LineWaiter()
    runner = Runner(py("import sys, time\nprint('ready', flush=True)\ntime.sleep(0.3)\nsys.exit(2)"), on_line=waiter, grace=0.5)
    runner.start()
    waiter.wait_for("ready")
    runner.mark_oom("GPU 0: 139.8 GiB in use")
    outcome = runner.wait(10)
    assert outcome.kind == "oom"
    assert outcome.exit_code == 2
    assert outcome.message == "out of memory: GPU 0: 139.8 GiB in use"


def test_sigkill_with_a_rising_cgroup_oom_kill_counter_is_oom(monkeypatch):
    """The kernel OOM killer cannot be provoked safely in a test; fake its counter
    (read once at start, once at the end) around a child that really dies of SIGKILL."""
    from gputui.run import runner as runner_module

    counts = iter([4, 5])
    monkeypatch.setattr(runner_module, "cgroup_oom_kill_count", lambda: next(counts))
    outcome, _, _ = run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert outcome.kind == "oom"
    assert outcome.signal == "SIGKILL"
    assert "kernel OOM killer" in outcome.message


def test_sigkill_without_oom_kills_is_signaled(monkeypatch):
    from gputui.run import runner as runner_module

    monkeypatch.setattr(runner_module, "cgroup_oom_kill_count", lambda: 4)
    outcome, _, _ = run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert outcome.kind == "signaled"


def test_cgroup_oom_kill_counter_reads_as_int_or_none():
    from gputui.run.outcome import cgroup_oom_kill_count

    count = cgroup_oom_kill_count()
    assert count is None or (isinstance(count, int) and count >= 0)


# --- the guard: children die with gputui ------------------------------------------------------

PARENT = """
import sys, time
from gputui.run.runner import Runner

def on_line(line):
    print(line.text, flush=True)

runner = Runner([sys.executable, "-c", sys.argv[1]], grace=0.5, on_line=on_line)
runner.start()
print("guard", runner.pgid, flush=True)
time.sleep(60)
"""

GRANDCHILD_IGNORING_TERM = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the grandchild too
g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("pids", os.getpid(), g.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("child_code", [textwrap.dedent(SPAWNS_GRANDCHILD), GRANDCHILD_IGNORING_TERM], ids=["cooperative", "ignores-sigterm"])
def test_children_die_when_gputui_is_sigkilled(child_code):
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    parent = subprocess.Popen([PY, "-c", PARENT, child_code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [out.put(line) for line in parent.stdout], daemon=True).start()
    pids: dict[str, list[int]] = {}
    try:
        end = time.monotonic() + 15
        while not {"guard", "pids"} <= pids.keys():
            line = out.get(timeout=max(0.01, end - time.monotonic()))
            name, *values = line.split()
            if name in ("guard", "pids"):
                pids[name] = [int(v) for v in values]
        guard, (child, grandchild) = pids["guard"][0], pids["pids"]
        assert all(not is_gone(p) for p in (guard, child, grandchild))

        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(5)

        assert wait_gone([child, grandchild, guard], timeout=5.0) == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for p in pids.get("pids", []) + pids.get("guard", []):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_guard_notices_a_dead_parent_by_polling_without_pdeathsig():
    """Where prctl is unavailable (or PDEATHSIG went to a finished thread), the guard
    still sees gputui die because its getppid() changes."""
    fake_guard = f"import sys; sys.path.insert(0, {REPO_ROOT!r}); from gputui.run import guard; guard.set_pdeathsig = lambda sig: False; sys.exit(guard.main())"
    child = "import os, time; print('pid', os.getpid(), flush=True); time.sleep(60)"
    intermediate = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", {fake_guard!r}, "--parent", str(os.getpid()), "--grace", "0.5",
                          "--", sys.executable, "-c", {child!r}], start_new_session=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([PY, "-c", intermediate], stdout=subprocess.PIPE, text=True)
    pid = None
    try:
        line = parent.stdout.readline()
        assert line.startswith("pid "), line
        pid = int(line.split()[1])
        assert not is_gone(pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(5)
        assert wait_gone([pid], timeout=4.0) == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if pid is not None and not is_gone(pid):
            os.kill(pid, signal.SIGKILL)


def test_guard_exits_at_once_when_started_for_a_parent_that_is_gone():
    from gputui.run import guard as _guard

    proc = subprocess.run(
        [PY, "-I", "-S", _guard.__file__, "--parent", "1", "--", PY, "-c", "print('should not run')"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert proc.returncode == 1
    assert "should not run" not in proc.stdout


def test_guard_runs_as_a_module_and_passes_the_exit_code_through():
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    proc = subprocess.run(
        [PY, "-m", "gputui.run.guard", "--", PY, "-c", "print('hi'); raise SystemExit(7)"],
        capture_output=True,
        text=True,
        timeout=10,
        env=env,
    )
    assert proc.returncode == 7
    assert proc.stdout == "hi\n"


# --- the line splitter and ANSI stripping, directly ----------------------------------------------


def split(*chunks: str, cap: int = LINE_CAP) -> list[tuple[str, bool, bool]]:
    out: list[tuple[str, bool, bool]] = []
    s = LineSplitter(lambda text, progress, truncated: out.append((text, progress, truncated)), cap=cap)
    for chunk in chunks:
        s.feed(chunk)
    s.close()
    return out


def test_splitter_crlf_split_across_chunks_is_one_newline():
    assert split("a\r", "\nb\n") == [("a", False, False), ("b", False, False)]
    assert split("a\r", "b\n") == [("a", True, False), ("b", False, False)]
    assert split("a\r") == [("a", True, False)]


def test_splitter_settled_cr_swallows_a_late_lf():
    out = []
    s = LineSplitter(lambda *args: out.append(args))
    s.feed("50%\r")
    s.settle_cr()
    s.feed("\nnext\n")
    s.close()
    assert out == [("50%", True, False), ("next", False, False)]


def test_splitter_caps_long_lines_across_chunks():
    assert split("abc", "defgh", "ij\nk", cap=4) == [("abcd", False, True), ("k", False, False)]
    assert split("abcd\n", cap=4) == [("abcd", False, False)]


def test_strip_ansi_leaves_plain_text_and_tabs():
    assert strip_ansi("a\tb — ü") == "a\tb — ü"
    assert strip_ansi("\x1b[38;5;208morange\x1b[m\x07") == "orange"
    assert strip_ansi("cut \x1b[3") == "cut "


def test_the_monitor_sleeps_until_a_deadline_and_a_stop_wakes_it(monkeypatch):
    """The monitor blocks on the run's exit until the next deadline it keeps (none: a
    few seconds at a time), not ten times a second; stop() wakes it to keep the
    SIGKILL after the grace."""
    from gputui.run import guard

    waits: list[float] = []
    real_wait = guard.wait_for_exit

    def recorded(proc, exited, seconds, wake=None):
        waits.append(seconds)
        return real_wait(proc, exited, seconds, wake)

    monkeypatch.setattr(guard, "wait_for_exit", recorded)
    if guard.exit_fd(os.getpid()) is None:
        pytest.skip("no pidfd here: the monitor polls, as Popen.wait does")
    waiter = LineWaiter()
    code = """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
    """
    runner = Runner(py(code), timeout=30.0, grace=0.7, on_line=waiter)
    runner.start()
    try:
        waiter.wait_for("ready")
        time.sleep(0.5)
        assert len(waits) == 1 and waits[0] == pytest.approx(5.0), f"no deadline near: one long wait, not {waits}"
        runner.stop()
        outcome = runner.wait(10)
    finally:
        runner.close()
    assert outcome is not None and outcome.signal == "SIGKILL"
    assert 0.5 < waits[1] <= 0.7, f"woken by stop(): it sleeps until the SIGKILL is due ({waits})"
    assert len(waits) <= 4, f"{len(waits)} waits"

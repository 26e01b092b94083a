"""Processes and streams (issue 26, class 6), through gputui as a user runs it, with
``no_leftovers``: a watched job that is a zombie has ended; gputui's stderr reader
going away stops the printing, not the run; the guard SIGKILLed by someone else
mid-run leaves nothing behind, and the outcome says so."""

from __future__ import annotations

import errno
import io
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from gputui.console import LineWriter
from gputui.record import events as ev
from gputui.record.recording import read_recording
from tests.support.leftovers import no_leftovers  # noqa: F401  (the fixture)
from tests.support.presets import write_preset
from tests.support.process import gputui_env, start_gputui, try_read, wait_for

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
    pytest.mark.usefixtures("no_leftovers"),
]

# --- a zombie is an ended job ---------------------------------------------------------------

# A parent that starts a short child and never reaps it: the child stays a zombie.
UNREAPED_CHILD = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep({child_s})"])
print(child.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("child_s", [0, 2], ids=["zombie-already", "zombie-while-watched"])
def test_watching_a_job_that_becomes_a_zombie_ends_with_a_summary(tmp_path, child_s):
    parent = subprocess.Popen([sys.executable, "-c", UNREAPED_CHILD.format(child_s=child_s)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        if child_s == 0:
            wait_for(lambda: psutil.Process(child).status() == psutil.STATUS_ZOMBIE)
        out = tmp_path / "w.jsonl"
        done = subprocess.run(
            [sys.executable, "-m", "gputui", "--headless", "--record", str(out), "--pid", str(child), "--interval", "0.2", "--no-history"],
            cwd=tmp_path,
            env=gputui_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=30,  # before: still watching the zombie after 15 s
        )
        assert psutil.Process(child).status() == psutil.STATUS_ZOMBIE  # what was watched
        assert done.returncode == 0, done.stderr
        rec = read_recording(out)
        assert rec.cut is None and rec.summary is not None
        stopping = [e.data for e in rec.events if e.kind == ev.STOPPING]
        assert stopping and f"process {child} ended" in str(stopping[-1])
    finally:
        parent.kill()
        parent.wait()


# --- stderr goes away ------------------------------------------------------------------------

SHORT_RUN = """
import time
for step in range(4):
    print("step", step, flush=True)
    time.sleep(0.5)
"""


def start_with_stderr_read_once(tmp_path: Path, args: list[str]) -> tuple[subprocess.Popen, str]:
    """gputui with its stderr on a pipe that is closed after the first line (``2>&1 | head -1``)."""
    proc = start_gputui(args, tmp_path)
    assert proc.stderr is not None and proc.stdout is not None
    first = proc.stderr.readline()
    proc.stderr.close()  # the reader is gone: later writes get EPIPE
    return proc, first


def test_closing_stderr_mid_run_still_finishes_the_run_and_the_recording_with_exit_0(tmp_path):
    presets = write_preset(tmp_path, SHORT_RUN)
    out = tmp_path / "r.jsonl"
    args = ["--presets", str(presets), "--headless", "--record", str(out), "--preset", "fault", "--interval", "0.1", "--no-history"]
    proc, first = start_with_stderr_read_once(tmp_path, args)
    assert first.startswith("gputui:")
    assert proc.wait(timeout=60) == 0
    # stdout holds the command's own output, passed through, and nothing of gputui's
    assert proc.stdout is not None and proc.stdout.read() == "".join(f"step {i}\n" for i in range(4))
    rec = read_recording(out)
    assert rec.cut is None and rec.summary is not None
    assert rec.summary.outcome.ok is True
    assert [e.data["text"] for e in rec.events_of(ev.OUTPUT)] == [f"step {i}" for i in range(4)]


def test_a_recording_that_cannot_be_written_still_exits_74_when_stderr_is_gone(tmp_path):
    """The one error line hits a closed stderr: the exit status stays the error's (was 0)."""
    presets = write_preset(tmp_path, SHORT_RUN)
    args = ["--presets", str(presets), "--headless", "--record", "/dev/full", "--force", "--preset", "fault", "--no-history"]
    proc = start_gputui(args, tmp_path)
    assert proc.stderr is not None
    proc.stderr.close()
    assert proc.wait(timeout=60) == 74


class BrokenPipe(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def test_the_line_writer_stops_at_the_first_broken_pipe_and_never_raises():
    stream = BrokenPipe()
    writer = LineWriter(stream)
    writer.line("one")
    writer.line("two")
    assert writer.broken and stream.writes == 1


# --- the guard killed -------------------------------------------------------------------------

# The child and a grandchild that left the group with setsid() both ignore SIGTERM.
STUBBORN_TREE = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
code = "import os, signal, time; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN); print('detached', os.getpid(), flush=True); time.sleep(600)"
subprocess.Popen([sys.executable, "-c", code])
time.sleep(600)
"""


def guard_of(gputui_pid: int) -> int:
    for child in psutil.Process(gputui_pid).children():
        if any(arg.endswith("gputui/run/guard.py") for arg in child.cmdline()):
            return child.pid
    raise AssertionError("no guard process under gputui")


def test_a_guard_sigkilled_mid_run_leaves_nothing_and_the_outcome_says_so(tmp_path):
    presets = write_preset(tmp_path, textwrap.dedent(STUBBORN_TREE))
    out = tmp_path / "r.jsonl"
    proc = start_gputui(["--presets", str(presets), "--headless", "--record", str(out), "--preset", "fault", "--interval", "0.2", "--no-history"], tmp_path)
    try:
        wait_for(lambda: (rec := try_read(out)) is not None and any(e.data["text"].startswith("detached") for e in rec.events_of(ev.OUTPUT)), timeout=60)
        os.kill(guard_of(proc.pid), signal.SIGKILL)
        started = time.monotonic()
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, stderr
    assert time.monotonic() - started < 30  # the 5 s grace for what ignores SIGTERM, then KILL
    rec = read_recording(out)
    assert rec.cut is None and rec.summary is not None
    outcome = rec.summary.outcome
    assert outcome.kind == "signaled" and outcome.signal == "SIGKILL"
    assert "guard process was killed" in outcome.message
    # no_leftovers fails the test if the child or the detached grandchild still runs.

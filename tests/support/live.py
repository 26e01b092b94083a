"""Live runs in tests: a loop that prints throughput for as long as it is let, the
runs a test left going (found in its own live folder, tests/conftest.py stops them), and
waits on a run's recording."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil

from gputui.live.registry import LiveRun, Registry
from tests.support.process import try_read, wait_for

# A training loop in miniature: a tqdm-like line every 0.2 s, forever (tests stop it).
# The line is the HF-style "N samples/s" that the generic parser reads.
LOOP = """\
import itertools, sys, time
for step in itertools.count(1):
    time.sleep(0.2)
    print(f"step {step} | 160.0 samples/s", flush=True)
"""


def write_loop(folder: Path) -> Path:
    path = folder / "loop.py"
    path.write_text(LOOP)
    return path


def live_runs(state_home: Path) -> list[LiveRun]:
    """The runs going under this XDG_STATE_HOME."""
    return Registry(state_home / "gputui" / "live").runs()


def wait_live(state_home: Path, timeout: float = 60.0) -> LiveRun:
    """The one run going under this XDG_STATE_HOME, once there is one."""
    runs = wait_for(lambda: live_runs(state_home), timeout=timeout)
    assert len(runs) == 1, runs
    return runs[0]


def readings(path: Path) -> int:
    """How many throughput readings the recording holds so far."""
    recording = try_read(path)
    return 0 if recording is None else len(recording.events_of("throughput"))


def wait_readings(path: Path, at_least: int, timeout: float = 60.0) -> int:
    return wait_for(lambda: (n := readings(path)) >= at_least and n, timeout=timeout)


def run_processes(live: LiveRun) -> list[int]:
    """The run's own process and everything under it (the guard, the command)."""
    try:
        host = psutil.Process(live.pid)
        return [host.pid, *(child.pid for child in host.children(recursive=True))]
    except psutil.Error:
        return []


def stop_leftovers(state_home: Path, grace: float = 10.0) -> list[LiveRun]:
    """SIGTERM every run still going under this XDG_STATE_HOME (SIGKILL after ``grace``);
    the runs that were going.  A run's command dies with its process (the guard's
    PR_SET_PDEATHSIG)."""
    left = [live for live in live_runs(state_home) if live.pid != os.getpid()]  # never the test's own process
    for live in left:
        _signal(live.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(live.alive() for live in left) and time.monotonic() < deadline:
        time.sleep(0.1)
    for live in left:
        if live.alive():
            _signal(live.pid, signal.SIGKILL)
    return left


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass

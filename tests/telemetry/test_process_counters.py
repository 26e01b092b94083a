"""A process's counters read from /proc/<pid>/stat and io: the figures psutil gives."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

import psutil
import pytest

from gputui.telemetry import host as host_module
from gputui.telemetry import process_counters
from gputui.telemetry.host import HostTelemetry
from gputui.telemetry.process_counters import ProcessGone, full_name, read_counters

pytestmark = pytest.mark.skipif(not process_counters.HAS_PROC_STAT, reason="no /proc here: psutil reads the counters")


def test_the_counters_are_psutil_s_figures():
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import threading, time; [threading.Thread(target=time.sleep, args=(30,), daemon=True).start() for _ in range(3)]; sum(range(10**7)); time.sleep(30)",
        ]
    )
    try:
        proc = psutil.Process(child.pid)
        deadline = time.monotonic() + 20
        while proc.num_threads() < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        counters = read_counters(proc)
        with proc.oneshot():
            times = proc.cpu_times()
            expected = (proc.name(), proc.ppid(), proc.num_threads(), proc.memory_info().rss, proc.io_counters())
        assert (counters.name, counters.ppid, counters.threads) == expected[:3] == (expected[0], os.getpid(), 4)
        assert counters.rss == pytest.approx(expected[3], rel=0.05)
        assert counters.cpu_s == pytest.approx(times.user + times.system, abs=0.05) and counters.cpu_s > 0.05
        assert counters.io == (expected[4].read_bytes, expected[4].write_bytes)
    finally:
        child.kill()
        child.wait()


def test_a_zombie_or_an_ended_process_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    proc = psutil.Process(child.pid)
    deadline = time.monotonic() + 20
    while proc.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.02)
    with pytest.raises(ProcessGone):
        read_counters(proc)  # ended, not yet reaped
    child.wait()
    with pytest.raises(ProcessGone):
        read_counters(proc)


def test_the_command_line_is_read_once_and_again_after_an_exec(monkeypatch):
    script = f"sleep 0.6; exec {sys.executable} -c 'import time; time.sleep(30)' busy-worker"
    child = subprocess.Popen(["/bin/sh", "-c", script])
    telemetry = HostTelemetry()
    reads: list[int] = []
    real = process_counters.read_cmdline
    monkeypatch.setattr(host_module, "read_cmdline", lambda proc: reads.append(proc.pid) or real(proc))
    try:
        first = telemetry.sample([child.pid]).processes[0]
        telemetry.sample([child.pid])
        assert first.name == "sh" and reads.count(child.pid) == 1, "read when first seen, not every tick"
        deadline = time.monotonic() + 20
        while psutil.Process(child.pid).name() == "sh" and time.monotonic() < deadline:
            time.sleep(0.05)
        after = telemetry.sample([child.pid]).processes[0]
        assert after.name.startswith("python") and reads.count(child.pid) == 2
        assert telemetry._procs[child.pid].cmdline[-1] == "busy-worker"
    finally:
        child.kill()
        child.wait()


def test_a_name_the_kernel_cut_is_made_whole_from_the_command_line():
    assert full_name("pt_data_worker_", ["/usr/bin/pt_data_worker_long"]) == "pt_data_worker_long"
    assert full_name("pt_data_worker_", ["/usr/bin/python3"]) == "pt_data_worker_"
    assert full_name("python3", ["/usr/bin/python3.12"]) == "python3"


def test_a_pid_reused_by_another_process_is_read_as_a_new_one(monkeypatch):
    """A tracked process's psutil object keeps its first create time, so it cannot tell
    that its pid now belongs to another process; the start time in /proc/<pid>/stat can.
    The newcomer's command line is read, and it has no CPU share until its second reading."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    telemetry = HostTelemetry()
    reads: list[int] = []
    real_cmdline, real_counters = process_counters.read_cmdline, process_counters.read_counters
    monkeypatch.setattr(host_module, "read_cmdline", lambda proc: reads.append(proc.pid) or real_cmdline(proc))
    try:
        telemetry.sample([child.pid])
        assert telemetry.sample([child.pid]).processes[0].cpu_percent is not None
        reused = lambda proc: dataclasses.replace(real_counters(proc), started=real_counters(proc).started + 1)  # noqa: E731
        monkeypatch.setattr(host_module, "read_counters", reused)
        again = telemetry.sample([child.pid]).processes[0]
        assert again.cpu_percent is None, "a share against the other process's CPU time"
        assert reads.count(child.pid) == 2, "the newcomer's command line"
    finally:
        child.kill()
        child.wait()

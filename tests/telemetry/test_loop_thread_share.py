"""The training loop's share of a core: the main thread with PyTorch's autograd device
threads, which run a CUDA backward while the thread that called ``backward()`` waits
(torch/csrc/autograd/engine.cpp names them ``pt_autograd_<device>``).  On a GPU a
Lightning loop's work split so: the busiest thread at about 50 %, the process at 100 %."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from gputui.telemetry import host as host_module
from gputui.telemetry.host import HostTelemetry, ThreadNames

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread names are read from Linux's /proc")


def test_the_main_thread_and_the_autograd_threads_count_as_one_loop():
    prev = {100: 10.0, 101: 5.0, 102: 1.0, 103: 0.0}
    cur = {100: 10.5, 101: 5.45, 102: 1.3, 104: 9.0}  # 103 ended, 104 is new: neither counts
    assert host_module._top_thread_pct(prev, cur, 1.0) == 50.0  # each thread alone
    assert host_module._top_thread_pct(prev, cur, 1.0, loop={100, 101}) == 95.0
    assert host_module._top_thread_pct(prev, cur, 1.0, loop={100}) == 50.0  # no autograd thread: as before
    assert host_module._top_thread_pct(prev, cur, 1.0, loop={102, 103}) == 50.0  # a busier lone thread still wins


def test_autograd_threads_are_told_by_name_read_at_their_first_two_readings_and_forgotten_when_they_end(tmp_path):
    def name(tid: str, text: str) -> None:
        (tmp_path / "100" / "task" / tid).mkdir(parents=True, exist_ok=True)
        (tmp_path / "100" / "task" / tid / "comm").write_text(text + "\n")

    for tid, text in {"100": "python3", "101": "pt_autograd_0", "102": "pt_autograd_1", "103": "python3"}.items():
        name(tid, text)
    names = ThreadNames()
    assert names.autograd_threads(100, [100, 101, 102, 103, 105], tmp_path) == {101, 102}  # 105: gone before its name was read
    name("103", "pt_autograd_2")  # a thread read before it named itself
    name("102", "renamed")
    assert names.autograd_threads(100, [100, 101, 102, 103], tmp_path) == {101, 102, 103}  # read again; an autograd name is kept
    name("100", "pt_autograd_9")
    assert names.autograd_threads(100, [100, 101, 102, 103], tmp_path) == {101, 102, 103}  # read twice as another name: settled
    assert names.autograd_threads(100, [100, 101], tmp_path) == {101}  # the ended threads are forgotten
    assert names.autograd == {101} and set(names.others) == {100}


TURNS = textwrap.dedent(
    """
    import ctypes, sys, threading, time
    libc = ctypes.CDLL(None)
    turn, done, named = threading.Event(), threading.Event(), threading.Event()

    def spin(seconds):
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    def helper():
        libc.prctl(15, sys.argv[1].encode(), 0, 0, 0)  # PR_SET_NAME: as the autograd engine names its threads
        named.set()
        while True:
            turn.wait(); turn.clear()
            spin(0.005)  # the backward
            done.set()

    threading.Thread(target=helper, daemon=True).start()
    named.wait()
    print("ready", flush=True)
    while True:
        spin(0.005)  # the forward and the optimizer step
        turn.set(); done.wait(); done.clear()  # backward() waits for the engine's thread
    """
)


def loop_share(helper_name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[float, float]:
    """(the sampler's busiest-thread share, the process's CPU share) of a process whose main
    thread and a helper thread named ``helper_name`` take turns at equal work."""
    monkeypatch.setattr(host_module, "THREADS_FROM_PCT", 0.0)  # its threads read however little CPU a loaded machine gives it
    proc = subprocess.Popen([sys.executable, "-c", TURNS, helper_name], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        telemetry = HostTelemetry()
        telemetry.sample([proc.pid])
        time.sleep(1.0)
        telemetry.sample([proc.pid])  # busy now: its threads are read from here
        time.sleep(1.5)
        main = telemetry.sample([proc.pid]).processes[0]
        assert main.top_thread_pct is not None and main.cpu_percent, main
        return main.top_thread_pct, main.cpu_percent
    finally:
        proc.kill()
        proc.wait()


def test_a_loop_whose_backward_runs_on_an_autograd_thread_reads_as_one_busy_loop(monkeypatch):
    top, process = loop_share("pt_autograd_0", monkeypatch)
    assert top >= 0.85 * process, (top, process)  # the process's whole work is the loop's


def test_a_helper_thread_of_another_name_is_not_counted_with_the_main_thread(monkeypatch):
    top, process = loop_share("pt_thread_pool", monkeypatch)
    assert top <= 0.7 * process, (top, process)  # each thread about half

"""Cheaper sampling, same data (issue 11): cumulative counters read on a slow cadence
and at a window's exact ends, exact throttle shares from the driver's clock-event
time counters, and the run's process tree walked from its own descendants."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import psutil
import pytest

from gputui.model import GpuSample, Sample
from gputui.presets.preset import load_file
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.observer import Observer
from gputui.session.options import RunOptions
from gputui.session.session import DISPATCH_BATCH_S, Session
from gputui.session.summary import SummaryBuilder
from gputui.telemetry import host as host_module
from gputui.telemetry.gpu import GpuTelemetry
from gputui.telemetry.host import HostTelemetry, child_pids
from tests.support.fake_nvml import FakeGpu, FakeNvml

ENERGY = "nvmlDeviceGetTotalEnergyConsumption"
FIELDS = "nvmlDeviceGetFieldValues"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def opened(fake: FakeNvml, clock: Clock) -> GpuTelemetry:
    telemetry = GpuTelemetry(fake, clock=clock, counter_interval_s=10.0)
    telemetry.open()
    return telemetry


# --- GPU counters -----------------------------------------------------------------------


def test_energy_and_clock_event_times_are_read_every_ten_seconds_not_every_tick():
    fake, clock = FakeNvml(), Clock()
    telemetry = opened(fake, clock)
    got = []
    for tick in range(25):  # 2.5 s at 10 Hz
        clock.now = tick * 0.1
        got.append(telemetry.sample()[0])
    assert fake.calls[ENERGY] == 1 and fake.calls[FIELDS] == 1  # the first tick only
    assert got[0].energy_mj == 9_000_000
    assert got[0].throttle_time_ns == {"SwPowerCap": 5_000_000_000, "SyncBoost": 0, "SwThermalSlowdown": 0, "HwThermalSlowdown": 0, "HwPowerBrakeSlowdown": 0}
    assert all(s.energy_mj is None and s.throttle_time_ns is None for s in got[1:])
    assert all(s.power_w == 312.5 for s in got)  # the cheap per-tick values stay per tick
    clock.now = 10.0
    assert telemetry.sample()[0].energy_mj == 9_000_000
    assert fake.calls[ENERGY] == 2


def test_by_default_energy_and_clock_event_times_wait_thirty_seconds_and_the_fault_counters_ten():
    """Energy and the clock-event times cost 4.3 ms of CPU a reading on an H200; the
    failing-hardware rule's counters are cheap and read three times as often."""
    fake, clock = FakeNvml(), Clock()
    telemetry = GpuTelemetry(fake, clock=clock)
    telemetry.open()
    read_at: dict[str, list[float]] = {"energy": [], "ecc": []}
    for tick in range(61):  # a minute at 1 Hz
        clock.now = float(tick)
        (s,) = telemetry.sample()
        if s.energy_mj is not None:
            read_at["energy"].append(clock.now)
        if s.ecc_uncorrected is not None:
            read_at["ecc"].append(clock.now)
    assert read_at == {"energy": [0.0, 30.0, 60.0], "ecc": [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0]}
    assert fake.calls[ENERGY] == fake.calls[FIELDS] == 3 and fake.calls["nvmlDeviceGetPcieReplayCounter"] == 7


def test_an_exact_sample_reads_the_counters_at_once():
    fake, clock = FakeNvml(), Clock()
    telemetry = opened(fake, clock)
    telemetry.sample()
    clock.now = 0.5
    fake.gpus[0].energy_mj += 1234
    s = telemetry.sample(exact=True)[0]
    assert s.energy_mj == 9_001_234 and s.throttle_time_ns is not None
    assert fake.calls[ENERGY] == 2


def test_clock_event_times_keep_the_fields_the_driver_counts_and_none_without_any():
    partial = FakeGpu(field_values={74: 7, 270: 9})  # the others answer NOT_SUPPORTED
    none = FakeGpu(unsupported={FIELDS})
    samples = opened(FakeNvml([partial, none]), Clock()).sample()
    assert samples[0].throttle_time_ns == {"SwPowerCap": 7, "HwThermalSlowdown": 9}
    assert samples[1].throttle_time_ns is None
    assert samples[1].throttle_reasons == ["SwPowerCap", "SwThermalSlowdown"]  # the mask stays


# --- The summary ------------------------------------------------------------------------


def gpu(energy=None, power=400.0, reasons=(), ns=None):
    return GpuSample(index=0, power_w=power, energy_mj=energy, throttle_reasons=list(reasons), throttle_time_ns=ns)


def test_throttle_share_comes_from_the_time_counters_where_the_driver_has_them():
    # 1 Hz samples never caught the power cap active, but the counter says it held
    # the clocks for 2.5 s of the 10 s window; thermal slowdown was only sampled.
    b = SummaryBuilder()
    b.on_sample(Sample(t=0.0, gpus=[gpu(ns={"SwPowerCap": 1_000_000_000, "HwThermalSlowdown": 0})]))
    for t in range(1, 10):
        b.on_sample(Sample(t=float(t), gpus=[gpu(reasons=["SwThermalSlowdown"] if t < 6 else [])]))
    b.on_sample(Sample(t=10.0, gpus=[gpu(ns={"SwPowerCap": 3_500_000_000, "HwThermalSlowdown": 0})]))
    g = b.build().gpus[0]
    assert g.throttle_share == {"SwPowerCap": 0.25, "SwThermalSlowdown": round(5 / 11, 4)}
    assert g.throttle_share_counted == ["HwThermalSlowdown", "SwPowerCap"]


def test_energy_is_exact_from_sparse_counter_readings():
    b = SummaryBuilder()
    b.on_sample(Sample(t=0.0, gpus=[gpu(energy=1_000_000, power=100.0)]))
    for t in range(1, 20):  # the power readings say nothing of the true energy
        b.on_sample(Sample(t=t * 0.5, gpus=[gpu(power=999.0)]))
    b.on_sample(Sample(t=10.0, gpus=[gpu(energy=1_000_000 + 4_321_000, power=100.0)]))
    s = b.build()
    assert s.energy_j == 4321.0
    assert s.gpus[0].energy_seconds == 10.0


def test_energy_is_power_integrated_where_the_counter_is_absent():
    b = SummaryBuilder()
    for t, watts in [(0.0, 100.0), (1.0, 300.0), (3.0, 300.0)]:
        b.on_sample(Sample(t=t, gpus=[gpu(power=watts)]))
    s = b.build()
    assert s.energy_j == 200.0 + 600.0  # trapezoids: 1 s at 200 W mean, 2 s at 300 W
    assert s.gpus[0].energy_seconds == 3.0


# --- The session: exact readings at a phase change and at the end -------------------------


def test_the_session_reads_the_counters_when_a_phase_starts_and_at_the_run_end(tmp_path):
    script = (
        "import time, json\n"
        "time.sleep(0.4)\n"
        "print('@gputui ' + json.dumps({'event': 'step', 'phase': 'measure', 'step': 1, 'samples': 8, 'seconds': 0.1}), flush=True)\n"
        "time.sleep(2.0)\n"
    )
    (tmp_path / "w.py").write_text(script)
    (tmp_path / "p.toml").write_text(f"[presets.w]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(tmp_path / 'w.py'))}]\n")
    preset = load_file(tmp_path / "p.toml")["w"]
    fake = FakeNvml()
    counter_reads: list[float] = []

    class Recording(SummaryBuilder):
        def on_sample(self, sample: Sample) -> None:
            if sample.gpus and sample.gpus[0].energy_mj is not None:
                counter_reads.append(sample.t)
            super().on_sample(sample)

    session = Session(RunOptions(interval=0.1).session_config(preset), gpu=GpuTelemetry(fake))
    session.summary_builder = Recording()
    phases: list[float] = []

    class Phases(Observer):
        def on_event(self, event: Event) -> None:
            if event.kind == ev.PHASE:
                phases.append(event.t)

    session.add_observer(Phases())
    summary = session.run()
    assert len(phases) == 1
    # The first tick, the tick after the phase change was handled (the session handles
    # news in batches, DISPATCH_BATCH_S apart), and the run's end: 30 s apart otherwise,
    # so nothing in between.
    assert len(counter_reads) == 3, counter_reads
    assert counter_reads[1] >= phases[0] and counter_reads[1] - phases[0] < DISPATCH_BATCH_S + 0.5
    assert counter_reads[2] == max(s for s in counter_reads)
    assert summary.window == "measure" and summary.gpus[0].energy_seconds > 0


# --- The process tree -------------------------------------------------------------------


CHILDREN = "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="Linux /proc only")
def test_the_tree_is_walked_from_the_run_not_from_a_scan_of_every_process(monkeypatch):
    root = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {CHILDREN!r}]); time.sleep(30)"])
    try:
        deadline = time.monotonic() + 20
        while len(psutil.Process(root.pid).children(recursive=True)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)

        def whole_host_scan(*args, **kwargs):
            raise AssertionError("scanned every process on the host")

        # psutil's children() builds its parent map from every /proc/<pid>/stat
        monkeypatch.setattr(psutil._pslinux, "ppid_map", whole_host_scan)
        asked_parent: list[int] = []  # psutil's ppid() re-reads the process to rule out pid reuse
        real_ppid = psutil.Process.ppid

        @functools.wraps(real_ppid)  # keeps the memoizing hooks oneshot() calls
        def counted_ppid(self):
            asked_parent.append(self.pid)
            return real_ppid(self)

        monkeypatch.setattr(psutil.Process, "ppid", counted_ppid)
        telemetry = HostTelemetry()
        first = telemetry.sample([root.pid])
        second = telemetry.sample([root.pid])
        pids = [p.pid for p in second.processes]
        assert pids[0] == root.pid and len(pids) == 3 and len(first.processes) == 3
        child = next(p for p in second.processes if p.ppid == root.pid)
        assert any(p.ppid == child.pid for p in second.processes)  # the grandchild too
        assert all(p.cpu_percent is not None for p in second.processes)  # tracked across ticks
        assert set(asked_parent) <= {root.pid}  # the walk knows the descendants' parents (the root's is in its own stat)
    finally:
        for proc in psutil.Process(root.pid).children(recursive=True):
            proc.kill()
        root.kill()
        root.wait()


def test_a_busy_worker_s_threads_are_not_read_the_main_process_s_are(monkeypatch):
    """The Python-bound rule looks for the busiest thread outside the data-loader workers;
    reading a dozen busy workers' threads every second was work for nothing."""
    monkeypatch.setattr(host_module, "THREADS_FROM_PCT", 0.0)  # every process counts as busy: no spinning needed
    read: list[int] = []
    real_thread_times = host_module._thread_times
    monkeypatch.setattr(host_module, "_thread_times", lambda proc: read.append(proc.pid) or real_thread_times(proc))
    root = subprocess.Popen([sys.executable, "-c", "import os, time; os.fork(); time.sleep(30)"])  # the fork: a worker
    try:
        deadline = time.monotonic() + 20
        while not psutil.Process(root.pid).children() and time.monotonic() < deadline:
            time.sleep(0.05)
        telemetry = HostTelemetry()
        telemetry.sample([root.pid])
        time.sleep(0.2)
        second = telemetry.sample([root.pid])
        roles = {p.role: p for p in second.processes}
        assert set(roles) == {"main", "worker"}
        assert root.pid in read and roles["worker"].pid not in read
        assert roles["main"].top_thread_pct is not None and roles["worker"].top_thread_pct is None
    finally:
        for proc in psutil.Process(root.pid).children(recursive=True):
            proc.kill()
        root.kill()
        root.wait()


def test_a_busy_process_s_threads_are_read_for_its_first_share_then_every_few_seconds(monkeypatch):
    monkeypatch.setattr(host_module, "THREADS_FROM_PCT", 0.0)  # every process counts as busy: no spinning needed
    read: list[int] = []
    real_thread_times = host_module._thread_times
    monkeypatch.setattr(host_module, "_thread_times", lambda proc: read.append(proc.pid) or real_thread_times(proc))
    clock = [1000.0]
    # host.py's own clock only (its one use of the time module): not the whole process's
    monkeypatch.setattr(host_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    root = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        telemetry = HostTelemetry()
        shares = []
        for _ in range(8):  # a tick a second
            shares.append(telemetry.sample([root.pid]).processes[0].top_thread_pct)
            clock[0] += 1.0
        # read on ticks 1 and 2 (the first share), then once THREADS_EVERY_S (5 s) has passed
        assert len(read) == 3 and host_module.THREADS_EVERY_S == 5.0
        assert shares[0] is None and None not in shares[1:]  # carried between readings
        assert shares[1] == shares[2] == shares[5]  # the share of the tick-2 reading, until tick 7 reads again
    finally:
        root.kill()
        root.wait()


def test_child_pids_reads_every_threads_children_file(tmp_path):
    for tid, text in (("10", "11 12\n"), ("13", "14\n"), ("15", "")):
        (tmp_path / "10" / "task" / tid).mkdir(parents=True)
        (tmp_path / "10" / "task" / tid / "children").write_text(text)
    assert sorted(child_pids(10, tmp_path)) == [11, 12, 14]
    assert child_pids(99, tmp_path) == []  # gone


def test_child_pids_of_the_main_thread_alone_read_its_file_only(tmp_path):
    for tid, text in (("10", "11 12\n"), ("13", "14\n")):
        (tmp_path / "10" / "task" / tid).mkdir(parents=True)
        (tmp_path / "10" / "task" / tid / "children").write_text(text)
    assert sorted(child_pids(10, tmp_path, every_thread=False)) == [11, 12]


# A process whose child is forked by a thread that stays alive (its children file lists
# it, not the main thread's); a second such child once the file named on its command line
# appears.
FORKS_FROM_A_THREAD = """
import os, subprocess, sys, threading, time
def fork_and_stay():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    time.sleep(30)
threading.Thread(target=fork_and_stay, daemon=True).start()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
threading.Thread(target=fork_and_stay, daemon=True).start()
time.sleep(30)
"""


def test_a_child_forked_by_another_thread_is_found_by_the_next_scan_of_every_thread_and_kept(tmp_path, monkeypatch):
    go = tmp_path / "fork-again"
    root = subprocess.Popen([sys.executable, "-c", FORKS_FROM_A_THREAD, str(go)])
    try:

        def children() -> int:
            return len(psutil.Process(root.pid).children())

        wait_until(lambda: children() == 1)
        telemetry = HostTelemetry()
        first = telemetry.sample([root.pid])  # the first tick reads every thread's file
        assert len(first.processes) == 2
        go.touch()
        wait_until(lambda: children() == 2)
        between = telemetry.sample([root.pid])  # the main thread's file, and the child found before
        assert [p.pid for p in between.processes] == [p.pid for p in first.processes]
        assert between.processes[1].cpu_percent is not None  # still tracked
        monkeypatch.setattr(host_module, "CHILDREN_SCAN_S", 0.0)
        scanned = telemetry.sample([root.pid])
        assert len(scanned.processes) == 3
    finally:
        for proc in psutil.Process(root.pid).children(recursive=True):
            proc.kill()
        root.kill()
        root.wait()


def wait_until(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_without_children_files_the_tree_falls_back_to_psutil(monkeypatch):
    monkeypatch.setattr(host_module, "_HAS_CHILDREN_FILES", False)
    assert child_pids(1) is None
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        sample = HostTelemetry().sample([os.getpid()])
        assert proc.pid in [p.pid for p in sample.processes]
    finally:
        proc.kill()
        proc.wait()


# --- The host on a slower cadence ---------------------------------------------------------


class CountingHost(HostTelemetry):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def sample(self, root_pids=()):
        self.reads += 1
        return super().sample(root_pids)


def test_at_ten_hertz_the_host_is_read_every_host_interval_and_the_gpus_every_tick(tmp_path):
    from gputui.session.session import HOST_INTERVAL_S

    (tmp_path / "p.toml").write_text(f"[presets.w]\ncommand = [{json.dumps(sys.executable)}, '-c', 'import time; time.sleep(4.5)']\n")
    preset = load_file(tmp_path / "p.toml")["w"]
    host = CountingHost()
    samples: list[Sample] = []

    class Keep(SummaryBuilder):
        def on_sample(self, sample: Sample) -> None:
            samples.append(sample)
            super().on_sample(sample)

    session = Session(RunOptions(interval=0.1).session_config(preset), gpu=GpuTelemetry(FakeNvml()), host=host)
    session.summary_builder = Keep()
    session.run()
    with_host = [s for s in samples if s.host is not None]
    assert len(samples) >= 30 and all(s.gpus for s in samples)  # every tick reads the GPUs
    assert host.reads == len(with_host)
    # ~4.5 s of run: the first tick, one every HOST_INTERVAL_S (2 s), and the run's exact last sample
    assert 2 <= len(with_host) <= 5, [s.t for s in with_host]
    gaps = [b.t - a.t for a, b in zip(with_host, with_host[1:-1])]
    assert gaps and all(gap >= HOST_INTERVAL_S - 0.1 for gap in gaps), gaps
    assert samples[-1].host is not None  # the final sample is whole


def test_without_gpus_the_host_is_the_sample_and_comes_once_a_second(tmp_path):
    from gputui.session.session import HOST_ONLY_INTERVAL_S

    (tmp_path / "p.toml").write_text(f"[presets.w]\ncommand = [{json.dumps(sys.executable)}, '-c', 'import time; time.sleep(3.5)']\n")
    preset = load_file(tmp_path / "p.toml")["w"]
    samples: list[Sample] = []

    class Keep(SummaryBuilder):
        def on_sample(self, sample: Sample) -> None:
            samples.append(sample)
            super().on_sample(sample)

    session = Session(RunOptions(interval=0.1).session_config(preset), gpu=GpuTelemetry(FakeNvml([])), host=CountingHost())
    session.summary_builder = Keep()
    session.run()
    assert samples and all(s.gpus == [] and s.host is not None for s in samples)
    gaps = [b.t - a.t for a, b in zip(samples, samples[1:-1])]
    assert len(gaps) >= 2 and all(HOST_ONLY_INTERVAL_S - 0.1 <= gap < 1.5 for gap in gaps), gaps


def test_the_diagnosis_keeps_the_run_processes_between_host_readings():
    from gputui.diagnosis.context import Context
    from gputui.diagnosis_settings import Settings
    from gputui.model import HostSample, ProcessSample

    ctx = Context(Settings())
    workers = [ProcessSample(pid=10 + i, role="worker", cpu_percent=95.0) for i in range(4)]
    ctx.on_sample(Sample(t=0.0, gpus=[GpuSample(index=0)], host=HostSample(cpu_percent=80.0, swap_used=0, processes=workers)))
    ctx.on_sample(Sample(t=0.1, gpus=[GpuSample(index=0)]))
    assert ctx.host is not None and ctx.host.cpu_percent == 80.0
    assert len(ctx.derived.workers) == 4 and ctx.derived.run_cpu == 380.0
    assert len(ctx.swap) == 1  # windows of host readings grow only on real readings


def test_the_progress_line_comes_once_a_second_and_keeps_the_last_cpu_reading():
    import io

    from gputui.model import HostSample
    from gputui.session.progress import ProgressPrinter

    stream = io.StringIO()
    printer = ProgressPrinter(SummaryBuilder(), stream)
    for tick in range(25):
        host = HostSample(cpu_percent=42.0) if tick % 10 == 0 else None
        printer.on_sample(Sample(t=tick * 0.1, gpus=[GpuSample(index=0, util_gpu=90.0)], host=host))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3, lines  # t = 0, 1.0, 2.0
    assert all("CPU 42%" in line for line in lines)


def test_the_slow_gpu_fields_are_read_once_a_second_and_repeated_between():
    fake, clock = FakeNvml(), Clock()
    telemetry = opened(fake, clock)
    fake.calls.clear()  # opening reads some of them for the header
    got = []
    for tick in range(15):  # 1.5 s at 10 Hz
        clock.now = tick * 0.1
        got.append(telemetry.sample()[0])
    assert fake.calls["nvmlDeviceGetEnforcedPowerLimit"] == 2  # at 0 s and at 1.0 s
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 2
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 15  # what moves is still read every tick
    assert all(s.power_limit_w == got[0].power_limit_w is not None for s in got)
    # the processes go only into the samples of the ticks that read them (docs/record-format.md)
    assert [tick for tick, s in enumerate(got) if s.processes is not None] == [0, 10]
    assert got[0].processes == got[10].processes
    telemetry.sample(exact=True)  # a window's end reads them at once
    assert fake.calls["nvmlDeviceGetEnforcedPowerLimit"] == 3


def test_the_dispatch_loop_waits_for_news_up_to_a_second_or_until_its_duration_ends(tmp_path):
    """No timed wake-ups five times a second for nothing: the loop waits for the next
    item up to DISPATCH_WAIT_S, or until the session's duration is up (it ends on time)."""
    from gputui.session.session import DISPATCH_WAIT_S

    (tmp_path / "p.toml").write_text(f"[presets.w]\ncommand = [{json.dumps(sys.executable)}, '-c', 'import time; time.sleep(30)']\n")
    preset = load_file(tmp_path / "p.toml")["w"]
    session = Session(RunOptions(interval=1.0, duration=1.6).session_config(preset), gpu=GpuTelemetry(FakeNvml(gpus=[])))
    waits: list[float] = []
    get = session._queue.get

    def recorded_get(block=True, timeout=None):
        if block:  # not the drain's get_nowait
            waits.append(timeout)
        return get(block, timeout)

    session._queue.get = recorded_get
    began = time.monotonic()
    session.run()
    assert time.monotonic() - began < 4.0
    assert waits and all(w is not None and w <= DISPATCH_WAIT_S for w in waits), waits
    long_enough = [w for w in waits if w >= 0.5]
    assert len(long_enough) >= len(waits) - 2, f"waits of 0.2 s: {waits}"  # the last ones end at the duration

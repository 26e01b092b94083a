"""Who is on the GPU: every GPU process attributed to the run or to someone else, and
what the recording, the summary, the co_tenant rule, the exporter and the dashboard
make of it (issue 28).  psutil is replaced by a table of processes, so the tests do not
depend on the pids of this machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.core import GaugeMetricFamily

from gputui.diagnosis import Diagnoser
from gputui.diagnosis.rules import CoTenant
from gputui.diagnosis_settings import Settings
from gputui.metrics.families import PROCESSES_PER_GPU, metric_families
from gputui.metrics.live import LiveMetrics
from gputui.model import HIDDEN, OTHER, RUN, UNMATCHED, GpuInfo, GpuProcess, GpuSample, Sample, Throughput, co_runners, to_dict
from gputui.record import events as ev
from gputui.record.recorder import Recorder
from gputui.record.recording import read_recording
from gputui.session.summary import SummaryBuilder
from gputui.telemetry.gpu import PROCESS_UTIL_EVERY_S, GpuTelemetry
from gputui.telemetry.gpu_processes import NvmlProcess, ProcessAttributor, ProcessFacts, merge_lists, short_command
from gputui.tui.screens.processes_screen import processes_text
from gputui.tui.widgets.gpu_owners import ownership
from gputui.view import state as st
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.records import make_header

GIB = 1024**3
RUN_PID, WORKER_PID, ALICE_PID, HIDDEN_PID = 1000, 1001, 2000, 999_999


class Procs:
    """psutil as a table: pid -> facts; a pid missing is one this namespace does not show."""

    def __init__(self) -> None:
        self.table = {
            RUN_PID: ProcessFacts(1.0, "python", "me", "python train.py", (1,)),
            WORKER_PID: ProcessFacts(2.0, "python", "me", "python train.py", (RUN_PID, 1)),
            ALICE_PID: ProcessFacts(3.0, "python3", "alice", "python3 hog.py", (1,)),
        }
        self.lookups = 0

    def lookup(self, pid: int) -> ProcessFacts | None:
        self.lookups += 1
        return self.table.get(pid)

    def start_time(self, pid: int) -> float | None:
        facts = self.table.get(pid)
        return facts.create_time if facts else None


def attributor(procs: Procs, own_namespace: bool = False) -> ProcessAttributor:
    return ProcessAttributor(own_pid_namespace=own_namespace, lookup=procs.lookup, start_time=procs.start_time)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def telemetry(gpu: FakeGpu, procs: Procs, run_pids, own_namespace: bool = False, nvml: FakeNvml | None = None) -> tuple[GpuTelemetry, Clock]:
    clock = Clock()
    t = GpuTelemetry(nvml or FakeNvml([gpu]), clock=clock, use_gpm=False)
    t.open()
    t._attributor = attributor(procs, own_namespace)
    t.follow_run(run_pids)
    return t, clock


def owners(processes: list[GpuProcess] | None) -> dict[int, str | None]:
    return {p.pid: p.owner for p in processes or ()}


# --- attribution (the four cases of the issue) ----------------------------------------


def test_the_runs_own_processes_are_ours_including_a_child_the_host_walk_has_not_seen_yet():
    procs = Procs()
    gpu = FakeGpu(processes=[(RUN_PID, 10 * GIB), (WORKER_PID, 2 * GIB)])
    t, _ = telemetry(gpu, procs, lambda: frozenset({RUN_PID}))  # the worker is new: only its ancestry says it is ours
    (sample,) = t.sample()
    assert owners(sample.processes) == {RUN_PID: RUN, WORKER_PID: RUN}
    assert sample.processes[0].user == "me" and sample.processes[0].command == "python train.py"
    assert ownership(sample.processes) == "ours 12.0 GiB · no others"


def test_another_users_process_is_named_with_its_user_command_memory_and_sm_share():
    procs = Procs()
    gpu = FakeGpu(processes=[(RUN_PID, 10 * GIB), (ALICE_PID, 20 * GIB)], process_util=[(ALICE_PID, 10, 80), (ALICE_PID, 20, 90), (RUN_PID, 20, 5)])
    t, clock = telemetry(gpu, procs, lambda: frozenset({RUN_PID}))
    (sample,) = t.sample()
    alice = next(p for p in sample.processes if p.pid == ALICE_PID)
    assert (alice.owner, alice.user, alice.command, alice.used_memory, alice.sm_util) == (OTHER, "alice", "python3 hog.py", 20 * GIB, 85.0)
    assert alice.label() == f"pid {ALICE_PID} alice python3 hog.py"
    assert ownership(sample.processes) == "ours 10.0 GiB · others 1 (20.0 GiB)"
    # per-process utilization is asked from the last sample seen: nothing new, nothing claimed
    clock.now = PROCESS_UTIL_EVERY_S
    (again,) = t.sample()
    assert all(p.sm_util is None for p in again.processes)


def test_process_shares_are_read_every_few_seconds_and_carried_until_the_process_list_changes():
    procs = Procs()
    gpu = FakeGpu(processes=[(RUN_PID, 10 * GIB), (ALICE_PID, 20 * GIB)], process_util=[(ALICE_PID, 10, 80), (RUN_PID, 10, 40)])
    nvml = FakeNvml([gpu])
    t, clock = telemetry(gpu, procs, lambda: frozenset({RUN_PID}), nvml=nvml)
    shares = lambda sample: {p.pid: p.sm_util for p in sample.processes}  # noqa: E731
    assert shares(t.sample()[0]) == {RUN_PID: 40.0, ALICE_PID: 80.0}
    for second in range(1, int(PROCESS_UTIL_EVERY_S) - 1):  # the costly call is not made: the shares are carried
        clock.now = float(second)
        assert shares(t.sample()[0]) == {RUN_PID: 40.0, ALICE_PID: 80.0}
    assert nvml.calls["nvmlDeviceGetProcessUtilization"] == 1
    # a newcomer on the GPU: read at once, its share shown on the tick it is listed
    gpu.processes.append((WORKER_PID, 1 * GIB))
    gpu.process_util.append((WORKER_PID, 30, 60))
    clock.now = PROCESS_UTIL_EVERY_S - 1  # not due
    assert shares(t.sample()[0]) == {RUN_PID: None, ALICE_PID: None, WORKER_PID: 60.0}
    assert nvml.calls["nvmlDeviceGetProcessUtilization"] == 2
    gpu.process_util.append((RUN_PID, 40, 50))
    clock.now = 2 * PROCESS_UTIL_EVERY_S - 1  # due again
    assert shares(t.sample()[0]) == {RUN_PID: 50.0, ALICE_PID: None, WORKER_PID: None}


def test_a_pid_our_namespace_does_not_show_is_another_container_once_nvml_pids_match_ours():
    procs = Procs()
    gpu = FakeGpu(processes=[(HIDDEN_PID, 4 * GIB)])
    t, clock = telemetry(gpu, procs, lambda: frozenset({RUN_PID}), own_namespace=True)
    (before,) = t.sample()
    assert owners(before.processes) == {HIDDEN_PID: UNMATCHED}  # the host's pids? ours or not, nobody can say
    assert ownership(before.processes) == "ours none · no others · unmatched 1 (4.0 GiB)"
    gpu.processes = [(RUN_PID, 10 * GIB), (HIDDEN_PID, 4 * GIB)]
    clock.now = 1.0
    (after,) = t.sample()  # the run's pid matched: NVML speaks our namespace
    assert owners(after.processes) == {RUN_PID: RUN, HIDDEN_PID: HIDDEN}
    assert next(p for p in after.processes if p.pid == HIDDEN_PID).label() == f"pid {HIDDEN_PID} (another container)"


def test_a_process_that_ends_mid_run_disappears_and_is_forgotten():
    procs = Procs()
    gpu = FakeGpu(processes=[(RUN_PID, 10 * GIB), (ALICE_PID, 2 * GIB)])
    t, clock = telemetry(gpu, procs, lambda: frozenset({RUN_PID}))
    (first,) = t.sample()
    assert owners(first.processes) == {RUN_PID: RUN, ALICE_PID: OTHER}
    # it ends between NVML's list and our read: no user, never an exception, still someone else's
    del procs.table[ALICE_PID]
    clock.now = 1.0
    (racing,) = t.sample()
    gone = next(p for p in racing.processes if p.pid == ALICE_PID)
    assert (gone.owner, gone.user, gone.command) == (OTHER, None, None)
    gpu.processes = [(RUN_PID, 10 * GIB)]
    clock.now = 2.0
    (last,) = t.sample()
    assert owners(last.processes) == {RUN_PID: RUN}
    assert set(t._attributor._facts) == {RUN_PID}  # nothing kept of the ended one


def test_processes_are_read_on_the_slow_cadence_only_and_attributed_once_the_run_is_known():
    procs = Procs()
    run_pids: frozenset[int] | None = None
    t, clock = telemetry(FakeGpu(processes=[(RUN_PID, GIB)], graphics_processes=[(RUN_PID, GIB), (ALICE_PID, GIB // 2)]), procs, lambda: run_pids)
    got = []
    for tick in range(11):
        clock.now = tick * 0.1
        if tick == 5:
            run_pids = frozenset({RUN_PID})
        got.append(t.sample()[0])
    assert [i for i, s in enumerate(got) if s.processes is not None] == [0, 10]
    assert owners(got[0].processes) == {RUN_PID: None, ALICE_PID: None}  # the run not known yet: no guess
    assert owners(got[10].processes) == {RUN_PID: RUN, ALICE_PID: OTHER}
    assert [p.kind for p in got[10].processes] == ["compute+graphics", "graphics"]
    assert procs.lookups == 2  # psutil read once per process, then cached by its start time


def test_nvml_entries_without_memory_and_short_commands():
    raw = [type("E", (), {"pid": 7, "usedGpuMemory": None})(), type("E", (), {"pid": 8, "usedGpuMemory": (1 << 64) - 1})()]
    assert merge_lists(raw, None) == [NvmlProcess(7, None, "compute"), NvmlProcess(8, None, "compute")]
    assert short_command("python3", ["/usr/bin/python3", "-u", "train.py", "--token", "s3cret"]) == "python3 train.py"
    assert short_command("python", ["python", "-m", "torch.distributed.run", "--nproc", "8"]) == "python -m torch.distributed.run"
    assert short_command("hog", ["./hog", "--api-key", "s3cret"]) == "hog"


# --- recording and summary ----------------------------------------------------------------


def shared_samples(others: bool, seconds: int = 40) -> list[Sample]:
    samples = []
    for i in range(seconds * 2):  # 2 Hz; processes read once a second
        t = i * 0.5
        procs = None
        if i % 2 == 0:
            procs = [GpuProcess(pid=RUN_PID, used_memory=10 * GIB, owner=RUN, user="me", command="python train.py")]
            if others:
                procs.append(GpuProcess(pid=ALICE_PID, used_memory=20 * GIB, owner=OTHER, user="alice", command="python3 hog.py", sm_util=85.0))
        samples.append(Sample(t=t, gpus=[GpuSample(index=0, util_gpu=99.0, sm_active=60.0, memory_used=30 * GIB, memory_total=141 * GIB, processes=procs)]))
    return samples


def test_processes_round_trip_through_a_recording_and_old_recordings_still_read(tmp_path: Path):
    path = tmp_path / "run.jsonl"
    recorder = Recorder(path)
    recorder.on_header(make_header({"schema": 1, "gpus": [to_dict(GpuInfo(index=0, name="NVIDIA H200"))]}))
    samples = shared_samples(others=True, seconds=2)
    for sample in samples:
        recorder.on_sample(sample)
    recorder.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert sum("processes" in line["gpus"][0] for line in lines if line.get("type") == "sample") == 2  # slow cadence only
    assert read_recording(path).samples == samples
    # a recording from before attribution: pid and memory only
    old = tmp_path / "old.jsonl"
    old.write_text(
        json.dumps({"type": "header", "schema": 1})
        + "\n"
        + json.dumps({"type": "sample", "t": 0, "gpus": [{"index": 0, "processes": [{"pid": 5, "used_memory": 1}]}]})
        + "\n"
    )
    assert read_recording(old).samples[0].gpus[0].processes == [GpuProcess(pid=5, used_memory=1)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"type": "header", "schema": 1})
        + "\n"
        + json.dumps({"type": "sample", "t": 0, "gpus": [{"index": 0, "processes": [{"pid": 5, "sm_util": "x"}]}]})
        + "\n"
    )
    with pytest.raises(Exception, match="sm_util"):
        read_recording(bad)


def test_the_summary_reports_the_peak_memory_of_others_and_how_long_they_were_present():
    builder = SummaryBuilder()
    samples = shared_samples(others=False, seconds=10) + [Sample(t=10.0 + s.t, gpus=s.gpus) for s in shared_samples(others=True, seconds=10)]
    for sample in samples:
        builder.on_sample(sample)
    (gpu,) = builder.build().gpus
    assert gpu.others_peak_memory == 20 * GIB
    assert gpu.others_max == 1
    assert gpu.others_seconds == pytest.approx(9.0)  # read from 10 s to 19 s, once a second
    quiet = SummaryBuilder()
    for sample in shared_samples(others=False, seconds=5):
        quiet.on_sample(sample)
    (alone,) = quiet.build().gpus
    assert (alone.others_max, alone.others_seconds, alone.others_peak_memory) == (0, 0.0, None)


# --- the co_tenant rule -----------------------------------------------------------------------


def diagnose(others: bool, rate: float, ceiling: float | None = 2000.0) -> list[ev.Finding]:
    settings = Settings(ceiling_samples_per_sec=ceiling, open_after_s=5.0)
    diagnoser = Diagnoser(settings)
    diagnoser.on_header(make_header({"schema": 1, "gpus": [to_dict(GpuInfo(index=0, name="NVIDIA H200", memory_total=141 * GIB))], "preset": {"name": "x"}}))
    diagnoser.on_event(ev.Event(t=0.0, kind=ev.PHASE, payload=ev.PhaseChange("measure")))
    found: list[ev.Finding] = []
    for sample in shared_samples(others):
        diagnoser.on_event(ev.Event(t=sample.t, kind=ev.THROUGHPUT, payload=Throughput(samples_per_sec=rate, source="gputui", phase="measure")))
        found += diagnoser.on_sample(sample)
    return [f for f in found if f.kind == "co_tenant"]


def test_co_tenant_opens_when_another_process_holds_the_gpu_while_throughput_is_below_the_ceiling():
    found = diagnose(others=True, rate=1200.0)
    assert found and found[0].severity == "warning"
    evidence = found[0].evidence
    assert evidence["processes"][0] == {
        "pid": ALICE_PID,
        "owner": OTHER,
        "user": "alice",
        "command": "python3 hog.py",
        "memory_max": 20 * GIB,
        "sm_util_max_pct": 85.0,
    }
    assert evidence["ceiling_samples_per_sec"] == 2000.0
    assert found[0].title.startswith(f"GPU0 shared: pid {ALICE_PID} alice python3 hog.py holds 20.0 GiB, SM 85%; throughput 1200/s is 60%")


def test_co_tenant_stays_closed_without_another_process_or_at_the_ceiling_and_is_info_without_one():
    assert diagnose(others=False, rate=1200.0) == []
    assert diagnose(others=True, rate=1990.0) == []  # the run reaches its ceiling: the neighbour costs nothing
    unknown = diagnose(others=True, rate=1200.0, ceiling=None)
    assert unknown and unknown[0].severity == "info"


def test_co_tenant_is_registered_and_check_names_co_runners_with_the_same_selection():
    assert any(isinstance(rule, CoTenant) for rule in Diagnoser().rules)
    procs = [
        GpuProcess(pid=1, used_memory=8 * GIB, owner=RUN),
        GpuProcess(pid=2, used_memory=20 * 1024**2, owner=OTHER, command="Xorg"),  # a display server's few MiB
        GpuProcess(pid=3, used_memory=GIB, owner=HIDDEN),
        GpuProcess(pid=4, used_memory=9 * GIB, owner=UNMATCHED),
    ]
    assert [p.pid for p in co_runners(procs, 256 * 1024**2, 5.0)] == [3]

    from gputui.check.stage_context import GpuUnderTest
    from gputui.check.under_load import LoadWatcher, load_results

    watcher = LoadWatcher()
    watcher.begin()
    watcher.on_sample(Sample(t=0.0, gpus=[GpuSample(index=0, temp_c=60.0, processes=procs)]))
    gpu = GpuUnderTest(info=GpuInfo(index=0, name="NVIDIA H200"), model=None)
    result = next(r for r in load_results(watcher, [gpu]) if r.id == "gpu0.co_runners")
    assert (result.status, result.value, result.detail) == ("warn", 1, "pid 3 (another container) 1.0 GiB")


# --- the exporter -----------------------------------------------------------------------------


def test_exporter_gives_each_process_memory_by_owner_bounded_per_gpu():
    live = LiveMetrics()
    live.on_header(
        make_header({"schema": 1, "gputui": "t", "host": {"hostname": "box", "os": "Linux"}, "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-0"}]})
    )
    procs = [GpuProcess(pid=RUN_PID, used_memory=10 * GIB, owner=RUN)]
    procs += [GpuProcess(pid=3000 + i, used_memory=(i + 1) * 2**20, owner=OTHER) for i in range(PROCESSES_PER_GPU + 4)]
    live.on_sample(Sample(t=0.0, gpus=[GpuSample(index=0, processes=procs)]))
    live.on_sample(Sample(t=0.5, gpus=[GpuSample(index=0)]))  # between process reads: the last list stays
    (family,) = [f for f in metric_families(live.snapshot) if f.name == "gputui_gpu_process_memory_bytes"]
    assert isinstance(family, GaugeMetricFamily)
    rows = {(s.labels["pid"], s.labels["owner"]): s.value for s in family.samples}
    assert len(rows) == PROCESSES_PER_GPU
    assert rows[(str(RUN_PID), "run")] == 10 * GIB
    assert family.samples[0].labels["gpu"] == "0" and family.samples[0].labels["UUID"] == "GPU-0"


# --- the dashboard ----------------------------------------------------------------------------


def dashboard_state() -> st.DashboardState:
    state = st.DashboardState()
    history = state.gpus.setdefault(0, st.GpuHistory(0))
    history.info = GpuInfo(index=0, name="NVIDIA H200", memory_total=141 * GIB)
    procs = [
        GpuProcess(pid=RUN_PID, used_memory=int(12.3 * GIB), owner=RUN, user="me", command="python train.py"),
        GpuProcess(pid=ALICE_PID, used_memory=3 * GIB, owner=OTHER, user="alice", command="python3 hog.py", sm_util=40.0),
        GpuProcess(pid=HIDDEN_PID, used_memory=int(1.1 * GIB), owner=HIDDEN),
    ]
    history.add(GpuSample(index=0, util_gpu=97.0, memory_used=int(16.4 * GIB), memory_total=141 * GIB, processes=procs))
    history.add(GpuSample(index=0, util_gpu=97.0, memory_used=int(16.4 * GIB), memory_total=141 * GIB))  # between reads
    return state


def test_the_panel_line_and_the_drill_down_list():
    state = dashboard_state()
    history = state.gpus[0]
    assert ownership(history.processes) == "ours 12.3 GiB · others 2 (4.1 GiB)"
    assert ownership(history.processes, short=True) == "ours 12.3G · others 2 (4.1G)"
    # an 80-column GPU row has room for the co-tenants only (H200, 2026-11-26: "ours none · other…" was cut)
    assert ownership(history.processes, short=True, narrow=True) == "others 2 (4.1G)"
    assert ownership([p for p in history.processes if p.owner == RUN], short=True, narrow=True) is None
    listing = processes_text(state).plain.splitlines()
    assert listing[0] == "GPU0  ours 12.3 GiB · others 2 (4.1 GiB)"
    assert "python3 hog.py" in listing[3] and "other" in listing[3] and "40%" in listing[3]
    assert "another container" in listing[4]
    assert all(len(line) <= 76 for line in listing)  # the modal's 90% of 80 columns


def test_the_dashboard_shows_ownership_at_80x24_and_p_opens_the_process_list(tmp_path: Path):
    from gputui.tui.screens.processes_screen import GpuProcessesScreen
    from gputui.tui.widgets.gpu_panel import GpuPanel
    from tests.support.dashboard import make_dashboard
    from tests.support.tui import demo_preset, run_async, scripted_factory, wait_until

    preset = demo_preset()

    async def scenario() -> tuple[str, bool]:
        app = make_dashboard(
            {preset.name: preset},
            session_factory=scripted_factory(gpus=[FakeGpu()]),
            start_preset=preset.name,
            clock=lambda: 1000.0,
            settings_file=tmp_path / "settings.toml",
            user_themes_dir=tmp_path / "none",
        )
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: app.state.run is not None and 0 in app.state.gpus and len(app.state.gpus[0].util) == 24, what="script played")
            app.state.gpus[0].processes = dashboard_state().gpus[0].processes
            await wait_until(pilot, lambda: bool(app.dashboard.query(GpuPanel)), what="GPU panel")
            panel = app.dashboard.query_one(GpuPanel)
            line = panel.build().plain
            await pilot.press("p")
            await wait_until(pilot, lambda: isinstance(app.screen, GpuProcessesScreen), what="process list")
            listing = str(app.screen.query_one("#gpu-processes").render())
            await pilot.press("escape")
            await pilot.press("q", "q")
            return line, "python3 hog.py" in listing

    line, listed = run_async(scenario())
    assert "ours 12.3G · others 2 (4.1G)" in line and len(line) <= 80
    assert listed

"""The check's orchestrator, under-load grading, cost and rendering, with a test double
of NVML and stages replaced by functions that report fixed results."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.check.check_run import CheckListener, CheckRun
from gputui.check.cost import cost_per_million, cost_per_pflop_hour, cost_results
from gputui.check.result import AT_LEAST, AT_MOST, COST, FAIL, INFO, MICRO, OK, PREFLIGHT, SKIPPED, WARN, WORKLOAD, CheckResult
from gputui.check.stage_context import CheckOptions, GpuUnderTest, StageContext
from gputui.check.under_load import LoadWatcher, load_results
from gputui.check.verdict_text import markdown, progress_line, progress_lines, verdict_line
from gputui.gpus.models import find_model
from gputui.model import GpuInfo, GpuSample, Sample
from gputui.record.recording import read_recording
from gputui.record.schema import Header
from gputui.telemetry.gpu import GpuTelemetry
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.records import check_of, make_header


def _h200(index: int = 0) -> GpuUnderTest:
    info = GpuInfo(index=index, name="NVIDIA H200", memory_total=150754820096, temp_slowdown_c=89.0)
    return GpuUnderTest(info=info, model=find_model(info.name, info.memory_total))


class _Collect(CheckListener):
    def __init__(self) -> None:
        self.stages: list[tuple[str, str]] = []
        self.results: list[CheckResult] = []

    def on_stage(self, stage, state):
        self.stages.append((stage, state))

    def on_result(self, result):
        self.results.append(result)


def _stage(*results: CheckResult):
    def run(ctx: StageContext) -> None:
        for result in results:
            ctx.report(result)

    return run


def test_a_check_is_a_recording_with_one_event_per_result_and_the_verdict(tmp_path):
    from gputui.record.recorder import Recorder

    path = tmp_path / "check.jsonl"
    listener = _Collect()

    def micro(ctx):
        ctx.report(CheckResult(id="micro.gpu0.matmul_bf16", group=MICRO, name="matmul", status=OK, value=790.0, unit="TFLOP/s", gpu=0))
        deadline = time.monotonic() + 20  # the load lasts until the sampler has seen it
        while time.monotonic() < deadline and sum(t.samples for t in check.load.tallies.values()) < 2:
            time.sleep(0.05)

    stages = {
        "preflight": _stage(CheckResult(id="host.shm", group=PREFLIGHT, name="/dev/shm", status=FAIL, value=64, unit="MB")),
        "micro": micro,
    }
    check = CheckRun(
        CheckOptions(interval=0.1, price_per_hour=2.0),
        observers=[Recorder(path)],
        listener=listener,
        gpu=GpuTelemetry(FakeNvml([FakeGpu(throttle_mask=0x4)])),
        nvml_module=FakeNvml([FakeGpu()]),
        stages=stages,
    )
    report = check.run()
    assert report.exit_code == 1  # one check failed
    assert listener.stages == [("preflight", "start"), ("preflight", "end"), ("micro", "start"), ("micro", "end")]
    recording = read_recording(path)
    assert recording.cut is None
    assert recording.header.check is not None and recording.header.check.price_per_hour == 2.0
    checks = [e.data for e in recording.events if e.kind == "check"]
    ids = [c["id"] for c in checks]
    assert ids[:2] == ["host.shm", "micro.gpu0.matmul_bf16"]
    assert "gpu0.throttle_under_load" in ids  # graded from the samples taken while loaded
    assert "cost.pflop_hour_bf16" in ids  # a price turns the matmul into a cost
    assert [c["id"] for c in (CheckResult.from_dict(c).to_dict() for c in checks)] == ids  # round trip
    verdict = check_of(recording)
    assert verdict.verdict == "fail"
    assert (verdict.counts or {})["fail"] == 1


def test_quick_leaves_out_the_workloads_and_skip_leaves_out_named_stages():
    ran = []

    def mark(name):
        return lambda ctx: ran.append(name)

    stages = {name: mark(name) for name in ("preflight", "micro", "workload")}
    CheckRun(CheckOptions(quick=True, skip={"micro"}, interval=0.1), gpu=GpuTelemetry(FakeNvml([])), nvml_module=FakeNvml([]), stages=stages).run()
    assert ran == ["preflight"]


def test_no_gpu_gives_the_stages_one_clear_reason():
    seen = {}

    def preflight(ctx):
        seen["gpus"], seen["reason"] = ctx.gpus, ctx.gpu_unavailable_reason

    import pynvml

    CheckRun(CheckOptions(interval=0.1), gpu=GpuTelemetry(FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound)), stages={"preflight": preflight}).run()
    assert seen["gpus"] == []
    assert "NVML library not found" in seen["reason"]


def _loaded(watcher: LoadWatcher, **fields) -> None:
    watcher.begin()
    for t in range(20):
        watcher.on_sample(Sample(t=float(t), gpus=[GpuSample(index=0, **fields)]))
    watcher.end()


def test_thermal_slowdown_under_load_fails_and_power_capping_alone_does_not():
    hot = LoadWatcher()
    _loaded(hot, temp_c=91.0, throttle_reasons=["SwThermalSlowdown", "SwPowerCap"], power_w=690.0, power_limit_w=700.0)
    by_id = {r.id: r for r in load_results(hot, [_h200()])}
    assert by_id["gpu0.temp_under_load"].status == FAIL
    assert by_id["gpu0.throttle_under_load"].status == FAIL
    assert "SwThermalSlowdown" in by_id["gpu0.throttle_under_load"].cause

    capped = LoadWatcher()
    _loaded(capped, temp_c=60.0, throttle_reasons=["SwPowerCap"], power_w=699.0, power_limit_w=700.0)
    by_id = {r.id: r for r in load_results(capped, [_h200()])}
    assert by_id["gpu0.temp_under_load"].status == OK
    assert by_id["gpu0.throttle_under_load"].status == OK
    assert by_id["gpu0.power_under_load"].status == INFO
    assert "100%" in by_id["gpu0.power_under_load"].detail


def test_80_degrees_warns():
    warm = LoadWatcher()
    _loaded(warm, temp_c=82.0, throttle_reasons=[])
    assert {r.id: r for r in load_results(warm, [_h200()])}["gpu0.temp_under_load"].status == WARN


def test_samples_outside_the_loaded_stages_do_not_count():
    watcher = LoadWatcher()
    watcher.on_sample(Sample(t=0.0, gpus=[GpuSample(index=0, temp_c=95.0)]))
    assert load_results(watcher, [_h200()])[0].status == SKIPPED


def test_a_check_prices_each_gpu_of_the_instance_not_the_first_one_at_the_whole_price():
    # two GPUs NVML sees, only GPU 0 checked (--gpus 0): the price still buys two
    def micro(ctx):
        ctx.report(CheckResult(id="micro.gpu0.matmul_bf16", group=MICRO, name="matmul", status=OK, value=500.0, unit="TFLOP/s", gpu=0))

    check = CheckRun(
        CheckOptions(interval=0.1, price_per_hour=4.0, gpus=[0]),
        gpu=GpuTelemetry(FakeNvml([FakeGpu(), FakeGpu()])),
        nvml_module=FakeNvml([FakeGpu(), FakeGpu()]),
        stages={"micro": micro},
    )
    costs = {r.id: r for r in check.run().results if r.group == COST}
    assert costs["cost.pflop_hour_bf16"].value == pytest.approx(2.0 * 1000 / 500)
    assert "4 USD/hour for 2 GPUs (2 each)" in costs["cost.pflop_hour_bf16"].detail


def test_cost_per_million_samples_and_per_pflop_hour():
    assert cost_per_million(3.6, 1000.0) == pytest.approx(1.0)  # 3.6 M samples an hour for 3.6 USD
    assert cost_per_pflop_hour(2.0, 500.0) == pytest.approx(4.0)  # 0.5 PFLOP/s: two hours for one PFLOP-hour
    results = [CheckResult(id="workload.gpu0.resnet50_tuned", group=WORKLOAD, name="ResNet-50", status=OK, value=7200.0, unit="images/s", gpu=0)]
    (cost,) = cost_results(results, 2.0)
    assert cost.id == "cost.resnet50_tuned"
    assert cost.value == pytest.approx(2.0 / (7200 * 3600) * 1e6, rel=1e-3)
    assert cost_results(results, None)[0].status == SKIPPED


def _matmul(gpu: int, tflops: float) -> CheckResult:
    return CheckResult(id=f"micro.gpu{gpu}.matmul_bf16", group=MICRO, name="bf16 matmul", status=OK, value=tflops, unit="TFLOP/s", gpu=gpu)


def test_costs_are_per_gpu_when_the_instance_has_several():
    # An 8-GPU box at 8x the price of a 1-GPU box, with the same GPUs, costs the same per sample
    resnet = CheckResult(id="workload.gpu0.resnet50_tuned", group=WORKLOAD, name="ResNet-50", status=OK, value=7200.0, unit="images/s", gpu=0)
    one = {c.id: c for c in cost_results([resnet, _matmul(0, 500.0)], 2.0, gpus_priced=1)}
    eight = {c.id: c for c in cost_results([resnet] + [_matmul(g, 500.0) for g in range(8)], 16.0, gpus_priced=8)}
    assert eight["cost.resnet50_tuned"].value == pytest.approx(one["cost.resnet50_tuned"].value)
    assert eight["cost.pflop_hour_bf16"].value == pytest.approx(one["cost.pflop_hour_bf16"].value) == pytest.approx(4.0)
    assert "16 USD/hour for 8 GPUs (2 each)" in eight["cost.resnet50_tuned"].detail
    assert "the mean of 8 GPUs" in eight["cost.pflop_hour_bf16"].detail


def test_the_pflop_hour_takes_every_gpu_measured_not_only_the_first():
    two = {c.id: c for c in cost_results([_matmul(0, 400.0), _matmul(1, 600.0)], 2.0, gpus_priced=2)}
    assert two["cost.pflop_hour_bf16"].value == pytest.approx(1.0 * 1000 / 500)  # 1 USD/hour per GPU at their mean


def test_a_price_split_over_gpus_not_checked_still_counts_them():
    # --gpus 0 on a 4-GPU instance: the price still buys four GPUs
    (cost,) = cost_results([_matmul(0, 500.0)], 4.0, gpus_priced=4)
    assert cost.value == pytest.approx(1.0 * 1000 / 500)


def test_a_ceiling_reads_at_most_and_a_floor_at_least_with_no_ratio():
    # "CPU steal time: 0 % (expected 5.0 %)" and "0%" of it read as a shortfall; 5 % is a ceiling
    from gputui.check.preflight_host import grade_steal

    steal = grade_steal(0.0, 0.5)
    assert steal.status == OK and steal.bound == AT_MOST and steal.ratio is None
    assert "(at most 5.0 %)" in progress_line(steal)
    shm = CheckResult(id="host.shm", group=PREFLIGHT, name="/dev/shm", status=OK, value=8192, unit="MiB", expected=4096, bound=AT_LEAST)
    table = markdown([steal, shm], Header())
    assert "| ≤ 5.0 % |" in table and "| ≥ 4,096 MiB |" in table
    assert "(0%)" not in table and "(200%)" not in table
    data = steal.to_dict()
    assert data["bound"] == AT_MOST and "ratio" not in data
    assert CheckResult.from_dict(data).bound == AT_MOST
    assert CheckResult.from_dict({**data, "bound": "roughly"}).bound is None  # a newer writer's bound: shown plainly


def test_rendering_names_the_cause_and_the_expectation_source():
    result = CheckResult(
        id="gpu0.power_limit",
        group=PREFLIGHT,
        name="Power limit",
        status=FAIL,
        gpu=0,
        value=420.0,
        unit="W",
        expected=700.0,
        expected_source="the default power limit",
        cause="power-limited to 420 W of its 700 W default",
        advice="ask the provider",
    )
    first, *more = progress_lines(result)
    assert first.startswith("[FAIL] gpu0 Power limit: 420 W (expected 700 W)")
    assert "       Cause: power-limited to 420 W of its 700 W default" in more
    text = markdown([result], make_header({"host": {"hostname": "box", "os": "Linux"}, "gpus": [{"index": 0, "name": "NVIDIA H200"}]}))
    assert "| FAIL | gpu0 | Power limit | 420 W | 700 W (60%) |" in text
    assert "- the default power limit" in text
    assert verdict_line([result]) == "verdict: FAIL (1 fail)"


def _gputui(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputui", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--price", "-1"], "--price: expected a price per hour greater than 0"),
        (["--gpus", "x"], "--gpus: expected GPU indices"),
        (["--skip", "gpu"], "--skip: expected any of preflight, micro, workload"),
        (["--markdown", "/nonexistent/dir/x.md"], "--markdown: /nonexistent/dir is not a directory"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(tmp_path, args, expected):
    proc = _gputui("check", *args, cwd=tmp_path)
    assert proc.returncode == 2
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_quick_json_runs_on_a_machine_without_a_gpu(tmp_path):
    """What CI runs: host checks, one line about the GPU, JSON on stdout, exit 0 or 1."""
    record = tmp_path / "check.jsonl"
    proc = _gputui("check", "--quick", "--json", "--record", str(record), "--markdown", str(tmp_path / "c.md"), cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    result = json.loads(proc.stdout)
    ids = [c["id"] for c in result["checks"]]
    assert any(i.startswith("host.") for i in ids)
    statuses = {c["status"] for c in result["checks"]}
    assert statuses <= {OK, WARN, FAIL, SKIPPED, INFO}
    assert result["verdict"]["verdict"] in ("ok", "warn", "fail")
    assert proc.returncode == (1 if result["verdict"]["verdict"] == "fail" else 0)
    assert check_of(read_recording(record)).verdict == result["verdict"]["verdict"]
    assert (tmp_path / "c.md").read_text().startswith("# gputui check")


def test_a_check_never_records_over_a_file_and_is_kept_in_the_history(tmp_path):
    existing = tmp_path / "old.jsonl"
    existing.write_text("precious\n")
    proc = subprocess.run(
        [sys.executable, "-m", "gputui", "check", "--quick", "--skip", "micro", "--record", str(existing)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert existing.read_text() == "precious\n"

    proc = subprocess.run([sys.executable, "-m", "gputui", "check", "--quick", "--skip", "micro"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    listing = subprocess.run([sys.executable, "-m", "gputui", "runs", "--json"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    (kept,) = json.loads(listing.stdout)
    assert kept["preset"] == "check" and kept["outcome"].startswith("check ")


def test_sigterm_stops_a_check_with_143_and_a_finished_recording(tmp_path):
    import signal

    record = tmp_path / "check.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "check", "--skip", "preflight,micro", "--record", str(record)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "workload" not in (record.read_text() if record.exists() else ""):
        time.sleep(0.2)  # the host-pipeline child is running
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "stopped early" in out
    recording = read_recording(record)
    assert recording.cut is None and check_of(recording).stopped is True


def test_a_check_recording_to_a_full_disk_warns_at_once_and_still_gives_the_verdict(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gputui", "check", "--quick", "--skip", "micro", "--no-history", "--record", "/dev/full", "--force"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert "gputui: warning: /dev/full: cannot write the recording (No space left on device); the check goes on" in proc.stderr
    assert "Traceback" not in proc.stderr and "verdict" in (proc.stdout + proc.stderr).lower()


def test_the_check_builds_its_session_through_the_one_session_factory():
    from gputui.session.assemble import SessionParts
    from gputui.telemetry.host import HostTelemetry

    made: list[object] = []

    def gpu() -> GpuTelemetry:
        telemetry = GpuTelemetry(FakeNvml([]))
        made.append(telemetry)
        return telemetry

    def host() -> HostTelemetry:
        telemetry = HostTelemetry()
        made.append(telemetry)
        return telemetry

    check = CheckRun(CheckOptions(quick=True, interval=0.1), parts=SessionParts(gpu=gpu, host=host, clock=lambda: 42.0))
    assert made == [check.session.gpu, check.session.host]
    assert check.session.elapsed == 42.0  # the factory's clock, not time.monotonic


def test_a_check_that_graded_any_gpu_is_not_host_only():
    gpu_ok = CheckResult(id="micro.gpu0.matmul_bf16", group="micro", name="bf16 matmul", status="ok", gpu=0)
    host_ok = CheckResult(id="host.shm", group="preflight", name="/dev/shm", status="ok")
    skipped_gpu = CheckResult(id="micro", group="micro", name="micro-benchmarks", status="skipped", cause="no GPU")
    assert verdict_line([host_ok, gpu_ok]) == "verdict: OK (2 ok)"
    assert verdict_line([host_ok, skipped_gpu]) == "verdict: OK, host only (1 ok, 1 skipped)"

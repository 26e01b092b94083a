"""The micro-benchmark stage of ``gputui check``: grading hand-made payloads, the child
as a real process (CPU mode here, CUDA on a GPU machine), and the stage's edges."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gputui import protocol
from gputui.check.micro import DeviceIdentity, LinkWatcher, match_devices, nvml_identities
from gputui.check.micro_stage import grade_micro, run_micro_stage
from gputui.check.result import FAIL, INFO, MICRO, OK, SKIPPED, WARN, CheckResult
from gputui.check.stage_context import CheckOptions, StageContext
from gputui.gpus.models import ACHIEVABLE
from gputui.run.outcome import Outcome
from gputui.telemetry.nvml import Nvml
from tests.support.check_gpus import a100, by_id, h200, micro, unknown_gpu
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.process import REPO

GIB = 1024**3


# --- grading ----------------------------------------------------------------------------


def test_a100_bf16_at_250_is_ok_and_at_150_fails_against_its_datasheet():
    gpu = a100()
    assert gpu.model is not None and gpu.model.model == "NVIDIA A100 SXM4 80GB" and "matmul_bf16" not in gpu.model.baselines
    (good,) = grade_micro([micro("matmul_bf16", 250.0, gpu=0, size=8192)], [gpu])
    (bad,) = grade_micro([micro("matmul_bf16", 150.0, gpu=0, size=8192)], [gpu])

    assert good.id == "micro.gpu0.matmul_bf16" and good.group == MICRO
    assert good.status == OK
    assert good.expected == pytest.approx(312 * ACHIEVABLE["matmul"])
    assert "312" in good.expected_source and f"{ACHIEVABLE['matmul']:.0%}" in good.expected_source
    assert good.data["datasheet_share"] == pytest.approx(250 / 312, abs=1e-3)
    assert good.unit == "TFLOP/s" and good.data["size"] == 8192

    assert bad.status == FAIL
    assert bad.cause and "150" in bad.cause and bad.advice
    assert bad.data["datasheet_share"] == pytest.approx(150 / 312, abs=1e-3)


def test_h200_bf16_is_graded_against_its_measured_baseline():
    gpu = h200()
    (result,) = grade_micro([micro("matmul_bf16", 690.0, gpu=0, shape=[16384, 16384, 16384], sweep=[{}, {}, {}])], [gpu])
    assert result.status == OK
    assert result.expected == pytest.approx(gpu.model.baselines["matmul_bf16"]) and "baseline measured by gputui" in result.expected_source
    assert result.data["datasheet_share"] == pytest.approx(690 / 989, abs=1e-3)
    assert "best of 3 shapes: 16384×16384×16384" in result.detail


def test_every_datasheet_metric_is_graded_with_its_own_id():
    results = by_id(
        grade_micro(
            [
                micro("matmul_fp16", 250.0, gpu=1, size=8192),
                micro("matmul_tf32", 120.0, gpu=1, size=8192),
                micro("memory_bandwidth", 1900.0, gpu=1, bytes=GIB),
            ],
            [a100(1)],
        )
    )
    assert set(results) == {"micro.gpu1.matmul_fp16", "micro.gpu1.matmul_tf32", "micro.gpu1.memory_bandwidth"}
    assert results["micro.gpu1.matmul_tf32"].expected == pytest.approx(156 * ACHIEVABLE["matmul"])
    membw = results["micro.gpu1.memory_bandwidth"]
    assert membw.status == OK and membw.unit == "GB/s"
    assert membw.expected == pytest.approx(2039 * 0.85) and membw.expected_source
    assert all(r.gpu == 1 for r in results.values())


def test_gen3_x8_link_on_a_gen5_x16_card_fails_with_both_named():
    payloads = [
        micro("h2d", 6.3, gpu=0, bytes=256 * 1024**2, pcie_gen_loaded=3, pcie_width_loaded=8),
        micro("d2h", 6.5, gpu=0, bytes=256 * 1024**2, pcie_gen_loaded=3, pcie_width_loaded=8),
    ]
    results = by_id(grade_micro(payloads, [h200()]))

    link = results["gpu0.pcie_link_loaded"]  # once, though both copies read it
    assert link.group == MICRO and link.status == FAIL
    assert link.value == "Gen3 x8" and link.expected == "Gen5 x16"
    assert "the link trained at Gen3 x8 while the card supports Gen5 x16" in link.cause
    assert link.advice and link.expected_source.startswith("datasheet")

    h2d = results["micro.gpu0.h2d"]
    assert h2d.status == FAIL
    assert h2d.expected == pytest.approx(3.938 * 16 * 0.80, abs=0.01)
    assert "Gen5 x16" in h2d.expected_source
    assert "gpu0.pcie_link_loaded" in h2d.cause
    assert results["micro.gpu0.d2h"].status == FAIL


def test_full_link_under_load_is_ok_and_slow_copies_blame_the_host_side():
    payloads = [micro("h2d", 30.0, gpu=0, bytes=256 * 1024**2, pcie_gen_loaded=5, pcie_width_loaded=16)]
    results = by_id(grade_micro(payloads, [h200()]))
    assert results["gpu0.pcie_link_loaded"].status == OK
    assert results["gpu0.pcie_link_loaded"].detail.startswith("Gen5 x16 during")
    h2d = results["micro.gpu0.h2d"]
    assert h2d.status == FAIL and "NUMA" in h2d.cause


def test_copies_without_a_link_reading_have_no_link_check():
    results = by_id(grade_micro([micro("h2d", 52.0, gpu=0, bytes=256 * 1024**2)], [h200()]))
    assert set(results) == {"micro.gpu0.h2d"}
    assert results["micro.gpu0.h2d"].status == OK


def test_gpu_not_in_the_table_gets_info_without_a_verdict():
    gpu = unknown_gpu()
    assert gpu.model is None
    results = by_id(
        grade_micro(
            [
                micro("matmul_bf16", 150.0, gpu=0, size=8192),
                micro("memory_bandwidth", 800.0, gpu=0, bytes=GIB),
                micro("h2d", 24.0, gpu=0, bytes=256 * 1024**2, pcie_gen_loaded=4, pcie_width_loaded=16),
            ],
            [gpu],
        )
    )
    for key in ("micro.gpu0.matmul_bf16", "micro.gpu0.memory_bandwidth"):
        assert results[key].status == INFO
        assert results[key].detail == "no reference for Acme Accelerator 9000"
        assert results[key].expected is None and results[key].cause is None
    # The link is still judged: against the card's maximum as NVML reports it.
    h2d = results["micro.gpu0.h2d"]
    assert h2d.status == OK and h2d.expected == pytest.approx(1.969 * 16 * 0.80, abs=0.01)
    assert "NVML" in h2d.expected_source
    assert results["gpu0.pcie_link_loaded"].status == OK


def test_skipped_and_unavailable_payloads_become_skipped_results():
    results = by_id(
        grade_micro(
            [
                {"event": "micro_env", "torch": "2.9", "cuda": "12.8", "device_count": 1, "devices": ["NVIDIA H200"]},
                {"event": "micro_skipped", "metric": "matmul_bf16", "gpu": 0, "reason": "OutOfMemoryError: CUDA out of memory"},
                {"event": "micro_skipped", "metric": "p2p", "reason": "needs two or more GPUs (1 under test)"},
                {"event": "micro_skipped", "metric": "allreduce", "reason": "needs two or more GPUs (1 under test)"},
            ],
            [h200()],
        )
    )
    assert set(results) == {"micro.gpu0.matmul_bf16", "micro.p2p", "micro.allreduce"}
    assert all(r.status == SKIPPED for r in results.values())
    assert results["micro.gpu0.matmul_bf16"].cause == "OutOfMemoryError: CUDA out of memory"
    assert results["micro.gpu0.matmul_bf16"].gpu == 0
    assert results["micro.p2p"].cause == "needs two or more GPUs (1 under test)"

    (unavailable,) = grade_micro([{"event": "micro_unavailable", "reason": "PyTorch is not installed"}], [h200()])
    assert unavailable.id == "micro" and unavailable.status == SKIPPED
    assert unavailable.cause == "PyTorch is not installed"


def test_p2p_without_access_warns_and_allreduce_is_info():
    gpus = [h200(0), h200(1)]
    results = by_id(
        grade_micro(
            [
                micro("p2p", 12.0, gpu=0, peer=1, access=False),
                micro("p2p", 370.0, gpu=1, peer=0, access=True),
                micro("allreduce", 360.0, gpus=2, bytes=256 * 1024**2),
            ],
            gpus,
        )
    )
    no_access = results["micro.p2p.gpu0-gpu1"]
    assert no_access.status == WARN
    assert "cannot reach GPU 1" in no_access.cause and "host memory" in no_access.cause and no_access.advice
    assert results["micro.p2p.gpu1-gpu0"].status == OK
    allreduce = results["micro.allreduce"]
    assert allreduce.status == INFO and allreduce.value == 360.0 and allreduce.data["gpus"] == 2


def test_torch_devices_are_matched_to_nvml_by_uuid_then_pci():
    nvml = [
        DeviceIdentity(index=0, uuid="aaaa", pci=(0, 0x19, 0)),
        DeviceIdentity(index=1, uuid="bbbb", pci=(0, 0x3B, 0)),
        DeviceIdentity(index=2, uuid=None, pci=(0, 0x5D, 0)),
    ]
    torch_ids = [
        DeviceIdentity(index=0, uuid="bbbb", pci=None),
        DeviceIdentity(index=1, uuid=None, pci=(0, 0x5D, 0)),
        DeviceIdentity(index=2, uuid="cccc", pci=(0, 0x99, 0)),
    ]  # CUDA_VISIBLE_DEVICES=1,2 reorders
    matched = match_devices(torch_ids, nvml)
    assert {t: n.index for t, n in matched.items()} == {0: 1, 1: 2}


def test_nvml_identities_and_the_loaded_link_come_through_the_nvml_wrapper():
    fake = FakeNvml([FakeGpu(uuid="GPU-AAAA", pci=(0, 0x19, 0), pcie_gen=3, pcie_width=8), FakeGpu(uuid="GPU-BBBB", pci=(1, 0x3B, 0))])
    nvml = Nvml(fake)
    assert nvml.init() is None
    ids = nvml_identities(nvml)
    assert [(i.index, i.uuid, i.pci) for i in ids] == [(0, "aaaa", (0, 0x19, 0)), (1, "bbbb", (1, 0x3B, 0))]
    # torch writes UUIDs without the GPU- prefix
    assert match_devices([DeviceIdentity(index=0, uuid="bbbb", pci=None)], ids)[0].index == 1

    link = LinkWatcher(nvml, ids[0].handle)
    link.read()
    fake.gpus[0].pcie_gen, fake.gpus[0].pcie_width = 1, 16  # a read while the link idles lower
    link.read()
    assert (link.gen, link.width) == (3, 16)  # the best seen while loaded

    fake.gpus[1].unsupported = {"nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth"}
    silent = LinkWatcher(nvml, ids[1].handle)
    silent.read()
    assert (silent.gen, silent.width) == (None, None)  # absent from the payload, not a guess


# --- the child, a real process ----------------------------------------------------------


def run_child(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "gputui.check.micro", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def payloads_of(stdout: str) -> list[dict]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    payloads = [protocol.decode(line) for line in lines]
    assert all(p is not None for p in payloads), lines  # nothing but protocol lines on stdout
    return payloads


def test_child_imports_only_the_protocol_and_the_nvml_wrapper_of_gputui():
    code = "import sys, gputui.check.micro, gputui.check.micro_allreduce\nprint(' '.join(sorted(m for m in sys.modules if m.startswith('gputui'))))\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    assert set(proc.stdout.split()) == {
        "gputui",
        "gputui.check",
        "gputui.check.micro",
        "gputui.check.micro_allreduce",
        "gputui.check.micro_lines",
        "gputui.check.micro_matmul",
        "gputui.telemetry",
        "gputui.telemetry.nvml",
        "gputui.protocol",
    }


def test_cpu_mode_child_prints_parseable_measurements():
    pytest.importorskip("torch")
    proc = run_child("--device", "cpu", "--quick")
    assert proc.returncode == 0, proc.stderr
    payloads = payloads_of(proc.stdout)
    assert payloads[0]["event"] == "micro_env" and payloads[0]["device"] == "cpu"
    measured = {p["metric"]: p for p in payloads if p["event"] == "micro"}
    assert set(measured) == {"matmul_fp32", "memory_bandwidth"}
    assert all(p["value"] > 0 and p["device"] == "cpu" for p in measured.values())
    assert measured["matmul_fp32"]["unit"] == "TFLOP/s" and measured["memory_bandwidth"]["unit"] == "GB/s"
    # And the grader reads them as host facts, not verdicts.
    graded = by_id(grade_micro(payloads, []))
    assert set(graded) == {"micro.cpu.matmul_fp32", "micro.cpu.memory_bandwidth"}
    assert all(r.status == INFO for r in graded.values())


def test_cuda_child_without_a_usable_gpu_says_why_and_exits_0():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a usable GPU")
    proc = run_child("--quick")
    assert proc.returncode == 0, proc.stderr
    (payload,) = payloads_of(proc.stdout)
    assert payload["event"] == "micro_unavailable" and payload["reason"]


@pytest.mark.gpu
def test_real_child_measures_every_metric_on_the_gpus():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA here")
    proc = run_child("--quick")
    assert proc.returncode == 0, proc.stderr
    payloads = payloads_of(proc.stdout)
    env = payloads[0]
    assert env["event"] == "micro_env" and env["device_count"] >= 1
    measured = {(p["metric"], p.get("gpu"), p.get("peer")): p for p in payloads if p["event"] == "micro"}
    skips = [p for p in payloads if p["event"] == "micro_skipped"]
    for gpu in env["gpus"]:
        for metric in ("matmul_bf16", "matmul_fp16", "matmul_tf32", "memory_bandwidth", "h2d", "d2h"):
            payload = measured.get((metric, gpu, None))
            assert payload is not None, (metric, gpu, skips)
            assert payload["value"] > 0
        assert measured[("h2d", gpu, None)].get("pcie_gen_loaded", 1) > 0
    if len(env["gpus"]) > 1:
        assert measured[("allreduce", None, None)]["value"] > 0
        assert all(measured[("p2p", a, b)]["value"] > 0 for a in env["gpus"] for b in env["gpus"] if a != b)
    else:
        assert {p["metric"] for p in skips} == {"p2p", "allreduce"}


# --- the stage --------------------------------------------------------------------------


def test_stage_without_gpus_reports_one_skipped_result():
    reported: list[CheckResult] = []
    ctx = StageContext(CheckOptions(quick=True), [], report=reported.append, gpu_unavailable_reason="NVML library not found (no NVIDIA driver installed?)")
    run_micro_stage(ctx)
    (result,) = reported
    assert result.id == "micro" and result.status == SKIPPED and result.group == MICRO
    assert result.cause == "NVML library not found (no NVIDIA driver installed?)"

    reported.clear()
    run_micro_stage(StageContext(CheckOptions(), [], report=reported.append))
    assert reported[0].cause == "no GPU"


class ScriptedContext(StageContext):
    """A StageContext whose child is a script: its payloads, then its outcome."""

    def __init__(self, gpus, payloads, outcome, **kw):
        self.reported: list[CheckResult] = []
        super().__init__(CheckOptions(quick=True), gpus, report=self.reported.append, **kw)
        self._payloads, self._outcome = payloads, outcome
        self.argv: list[str] | None = None
        self.reported_before_end: list[str] = []

    def run_child(self, argv, on_payload, *, env=None, timeout=None, on_line=None):
        self.argv, self.timeout = argv, timeout
        for payload in self._payloads:
            on_payload(payload)
        self.reported_before_end = [r.id for r in self.reported]
        return self._outcome


def test_stage_streams_results_and_runs_the_child_on_the_nvml_indices():
    ctx = ScriptedContext([h200(2), h200(5)], [micro("matmul_bf16", 790.0, gpu=2, size=8192)], Outcome(kind="exited", exit_code=0))
    run_micro_stage(ctx)
    assert ctx.argv[1:] == ["-m", "gputui.check.micro", "--gpus", "2,5", "--quick"]
    assert ctx.timeout and ctx.timeout > 0
    assert ctx.reported_before_end == ["micro.gpu2.matmul_bf16"]  # reported as it arrived
    assert [r.id for r in ctx.reported] == ["micro.gpu2.matmul_bf16"]


def test_stage_turns_a_timed_out_child_into_a_failure():
    ctx = ScriptedContext([h200()], [micro("matmul_bf16", 790.0, gpu=0, size=8192)], Outcome(kind="timeout", message="no end after 240 s"))
    run_micro_stage(ctx)
    assert [r.id for r in ctx.reported] == ["micro.gpu0.matmul_bf16", "micro"]
    failure = ctx.reported[-1]
    assert failure.status == FAIL and "timed out" in failure.cause and "no end after 240 s" in failure.cause
    assert failure.advice


def test_stage_turns_a_stopped_child_into_skipped_and_no_torch_into_one_skip():
    stopped = ScriptedContext([h200()], [], Outcome(kind="stopped", message="check stopped"))
    run_micro_stage(stopped)
    assert [(r.id, r.status, r.cause) for r in stopped.reported] == [("micro", SKIPPED, "check stopped")]

    no_torch = ScriptedContext([h200()], [{"event": "micro_unavailable", "reason": "PyTorch is not installed"}], Outcome(kind="exited", exit_code=0))
    run_micro_stage(no_torch)
    assert [(r.id, r.status, r.cause) for r in no_torch.reported] == [("micro", SKIPPED, "PyTorch is not installed")]

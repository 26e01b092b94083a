"""Issue 23: a check you can trust to a few percent.  The matmul sweep (with a stand-in
for torch and CUDA timing), the bands a same-model baseline is graded in, the peers in
one box, and co-running processes named in the cause."""

from __future__ import annotations

import pytest

from gputui.check.micro_matmul import SWEEP_FULL, SWEEP_QUICK, ShapeResult, SweepResult, bytes_needed, fitting_shapes, flops, sweep
from gputui.check.micro_stage import grade_micro
from gputui.check.result import FAIL, OK, WARN
from gputui.check.thresholds import BASELINE_OK_RATIO, BASELINE_WARN_RATIO, PEER_OUTLIER_BELOW, grade_ratio, ratio_bands
from gputui.gpus.models import find_model
from tests.support.check_gpus import GIB, by_id, h100, h200, micro

# --- the sweep ------------------------------------------------------------------------------


class _Matrix:
    def __init__(self, *shape: int) -> None:
        self.shape = shape


class FakeTorch:
    """Just enough of torch for the sweep: matrices that remember their shape, and a
    matmul that tells the fake timer which shape ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[int, int, int]] = []

    def randn(self, *shape: int, device=None, dtype=None) -> _Matrix:
        return _Matrix(*shape)

    def empty(self, *shape: int, device=None, dtype=None) -> _Matrix:
        return _Matrix(*shape)

    def matmul(self, a: _Matrix, b: _Matrix, out: _Matrix) -> None:
        self.ran.append((a.shape[0], b.shape[1], a.shape[1]))


class ShapeTimer:
    """A card whose speed depends on the shape (TFLOP/s per shape), slow while cold."""

    def __init__(self, torch: FakeTorch, tflops: dict[tuple[int, int, int], float], cold_calls: int = 0) -> None:
        self.torch = torch
        self.tflops = tflops
        self.cold_calls = cold_calls  # the first calls run at half speed (clocks not settled)
        self.calls = 0

    def elapsed(self, run_once, iterations: int, while_running=None) -> float:
        seconds = 0.0
        for _ in range(iterations):
            run_once()
            shape = self.torch.ran[-1]
            speed = self.tflops[shape] * (0.5 if self.calls < self.cold_calls else 1.0)
            seconds += flops(shape) / (speed * 1e12)
            self.calls += 1
        return seconds


def test_the_sweep_reports_the_best_shape_and_every_shape_beside_it():
    torch = FakeTorch()
    speeds = {shape: 600.0 for shape in SWEEP_FULL} | {(6144, 17920, 2816): 790.0}
    result = sweep(torch, "cuda:0", "bf16", SWEEP_FULL, seconds_per_shape=0.5, warmup_s=0.5, timer=ShapeTimer(torch, speeds), sync=lambda: None)

    assert result.best.shape == (6144, 17920, 2816)
    assert result.best.tflops == pytest.approx(790.0)
    fields = result.fields()
    assert fields["value"] == 790.0 and fields["shape"] == [6144, 17920, 2816] and "size" not in fields
    assert [s["shape"] for s in fields["sweep"]] == [list(s) for s in SWEEP_FULL]
    assert all(s["windows"] >= 3 for s in fields["sweep"])


def test_a_cold_start_does_not_count_the_warm_up_runs_first():
    torch = FakeTorch()
    speeds = {shape: 800.0 for shape in SWEEP_QUICK}
    # 40 slow calls: without the warm-up they would fall in the first shape's windows
    timer = ShapeTimer(torch, speeds, cold_calls=40)
    result = sweep(torch, "cuda:0", "bf16", SWEEP_QUICK, seconds_per_shape=0.2, warmup_s=1.0, timer=timer, sync=lambda: None)
    assert result.shapes[0].tflops == pytest.approx(800.0)


def test_a_shape_figure_is_the_median_of_its_windows_not_the_luckiest():
    shapes = [ShapeResult((8192, 8192, 8192), tflops=700.0, best_window=760.0, windows=5)]
    fields = SweepResult(shapes[0], shapes).fields()
    assert fields["value"] == 700.0 and fields["best_window"] == 760.0


def test_shapes_that_do_not_fit_in_half_the_free_memory_are_left_out():
    element = 2  # bf16
    free = 2 * bytes_needed((8192, 8192, 8192), element) + 1
    fitting = fitting_shapes(SWEEP_FULL, element, free)
    assert (16384, 16384, 16384) not in fitting and (8192, 8192, 8192) in fitting
    assert fitting_shapes(SWEEP_FULL, element, 3 * 2048 * 2048 * element * 2) == [(2048, 2048, 2048)]


# --- grading bands ----------------------------------------------------------------------------


def test_against_a_same_model_baseline_a_10_percent_slow_card_warns_and_25_percent_fails():
    gpu = h100()
    baseline = gpu.model.baselines["matmul_bf16"]
    results = {share: grade_micro([micro("matmul_bf16", baseline * share, gpu=0)], [gpu])[0].status for share in (1.0, 0.97, 0.90, 0.75)}
    assert results == {1.0: OK, 0.97: OK, 0.90: WARN, 0.75: FAIL}


def test_datasheet_expectations_keep_the_wider_bands():
    assert ratio_bands("matmul_bf16", from_baseline=False) == (0.90, 0.75)
    assert ratio_bands("matmul_bf16", from_baseline=True) == (BASELINE_OK_RATIO, BASELINE_WARN_RATIO)
    assert ratio_bands("h2d", from_baseline=True) == (0.90, 0.75)  # the host's link varies from box to box
    assert grade_ratio(0.91, ratio_bands("matmul_bf16", from_baseline=False)) == OK
    assert grade_ratio(0.91, ratio_bands("matmul_bf16", from_baseline=True)) == WARN


def test_every_gpu_model_with_a_baseline_has_its_measurement_noted():
    for name, memory in (("NVIDIA H100 80GB HBM3", 80), ("NVIDIA H200", 141)):
        model = find_model(name, memory * GIB)
        assert model is not None and model.baselines.get("measured"), name


# --- peers in one box ---------------------------------------------------------------------------


def test_a_gpu_10_percent_below_its_peers_is_named():
    gpus = [h200(i) for i in range(4)]
    payloads = [micro("matmul_bf16", 800.0, gpu=i) for i in (0, 1, 3)] + [micro("matmul_bf16", 720.0, gpu=2)]
    payloads += [micro("memory_bandwidth", 4300.0, gpu=i) for i in range(4)]
    results = by_id(grade_micro(payloads, gpus))

    slow = results["micro.gpu2.peers"]
    assert slow.status == WARN
    assert slow.value == pytest.approx(0.9)
    assert "GPU 2" in slow.cause and "bf16 matmul" in slow.cause and "90%" in slow.cause
    assert "GPU 0, 1, 3" in slow.expected_source
    assert all(results[f"micro.gpu{i}.peers"].status == OK for i in (0, 1, 3))


def test_two_gpus_compare_each_with_the_other():
    payloads = [micro("matmul_bf16", 800.0, gpu=0), micro("matmul_bf16", 800.0 * (1 - PEER_OUTLIER_BELOW) - 5, gpu=1)]
    results = by_id(grade_micro(payloads, [h200(0), h200(1)]))
    assert results["micro.gpu1.peers"].status == WARN
    assert results["micro.gpu0.peers"].status == OK


def test_within_noise_of_the_peers_and_one_gpu_alone_are_not_flagged():
    payloads = [micro("matmul_bf16", 800.0, gpu=0), micro("matmul_bf16", 780.0, gpu=1)]
    assert {r.status for r in grade_micro(payloads, [h200(0), h200(1)]) if r.id.endswith(".peers")} == {OK}
    assert not [r for r in grade_micro([micro("matmul_bf16", 500.0, gpu=0)], [h200()]) if r.id.endswith(".peers")]


# --- causes named ----------------------------------------------------------------------------


def test_a_slow_matmul_names_the_process_that_shared_the_gpu():
    gpu = h100()
    seen = {0: "pid 4242 alice python3 hog.py 20.0 GiB"}
    (result,) = grade_micro([micro("matmul_bf16", 500.0, gpu=0)], [gpu], co_runners=seen.get)
    assert result.status == FAIL
    assert "another process used this GPU" in result.cause and "pid 4242 alice python3 hog.py 20.0 GiB" in result.cause


def test_a_slow_matmul_with_no_other_process_blames_the_card():
    (result,) = grade_micro([micro("matmul_bf16", 500.0, gpu=0)], [h100()], co_runners=lambda gpu: "")
    assert "NVML saw no other process" in result.cause and "another process shares" not in result.cause
    (unknown,) = grade_micro([micro("matmul_bf16", 500.0, gpu=0)], [h100()])
    assert "another process shares it" in unknown.cause


# --- on a real GPU: the planted slowdown ------------------------------------------------------


def _bf16_of_child(*args: str) -> float:
    import subprocess
    import sys

    from gputui import protocol
    from tests.support.process import REPO

    proc = subprocess.run([sys.executable, "-m", "gputui.check.micro", "--quick", "--gpus", "0", *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    payloads = [protocol.decode(line) for line in proc.stdout.splitlines()]
    (bf16,) = [p for p in payloads if p and p.get("metric") == "matmul_bf16" and p.get("event") == "micro"]
    return float(bf16["value"])


@pytest.mark.gpu
@pytest.mark.parametrize("duty, low, high", [(0.10, 0.82, 0.96), (0.25, 0.60, 0.85)])
def test_a_planted_co_runner_takes_its_share_off_the_matmul_figure(duty, low, high):
    """benchmarks/planted_slowdown.py beside the micro child: a 10 % duty cycle lands in the
    band that warns against a baseline, a 25 % one in the band that fails."""
    import subprocess
    import sys

    from tests.support.process import REPO

    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA here")
    alone = _bf16_of_child()
    planted = subprocess.Popen(
        [sys.executable, "benchmarks/planted_slowdown.py", "--duty", str(duty), "--hold-gib", "1"], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert planted.stdout is not None and planted.stdout.readline().startswith("planted:")
        shared = _bf16_of_child()
    finally:
        planted.terminate()
        planted.wait(timeout=30)
    assert low <= shared / alone <= high, (alone, shared)

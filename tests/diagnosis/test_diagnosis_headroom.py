"""Headroom: achieved TFLOP/s a small share of the GPU's peak for the run's precision,
or (FLOPs unknown) a small share of its memory used: information with the numbers
and the levers; not when the GPU is used well, nor when the run waits for data."""

from __future__ import annotations

from gputui.diagnosis import Settings
from gputui.record.events import make_event
from tests.support.diagnosis_traces import each_gpu, findings, kinds, load, of_kind
from tests.support.lookback import RECORDINGS

GIB = 1024**3
RESNET50_TRAIN_FLOPS = 24.6e9  # per image, forward + backward, as the torch workload counts it


def with_workload(rec, **fields):
    """The trace as if its workload line had said ``fields`` (flops_per_sample, precision ...)."""
    rec.events = [make_event(e.t, e.kind, {**e.data, **fields}) if e.kind == "workload" else e for e in rec.events]
    return rec


def seed_twin():
    """A ResNet-50 at batch 32 in tf32 on the H200: ~1,790 images/s (docs/benchmarks.md),
    44 TFLOP/s of a 494 TFLOP/s tf32 peak, 7 GiB of 140 GiB.  Built from the healthy
    trace with its throughput and memory rescaled."""
    rec = with_workload(load("healthy_synthetic"), flops_per_sample=RESNET50_TRAIN_FLOPS, precision="tf32", batch_size=32, image_size=224)
    rec.events = [
        make_event(e.t, e.kind, {**e.data, "samples_per_sec": round(e.data["samples_per_sec"] * 1790 / 2930, 2)})
        if e.kind == "throughput" and "samples_per_sec" in e.data
        else e
        for e in rec.events
    ]
    return each_gpu(rec, lambda t, g: setattr(g, "memory_used", 7 * GIB) if g.memory_used and g.memory_used > GIB else None)


def tuned():
    """ResNet-50 tuned (bf16, channels_last, compile, bs256): ~6,750 images/s, 166
    TFLOP/s, 17% of the 989 TFLOP/s bf16 peak."""
    rec = with_workload(
        load("healthy_synthetic"), flops_per_sample=RESNET50_TRAIN_FLOPS, precision="bf16", batch_size=256, image_size=224, channels_last=True, compile=True
    )
    rec.events = [
        make_event(e.t, e.kind, {**e.data, "samples_per_sec": round(e.data["samples_per_sec"] * 6754 / 2930, 2)})
        if e.kind == "throughput" and "samples_per_sec" in e.data
        else e
        for e in rec.events
    ]
    return rec


def test_the_seed_twin_at_batch_32_has_headroom_with_its_numbers_and_levers():
    events = findings(seed_twin())
    assert kinds(events) == ["headroom"]
    finding = of_kind(events, "headroom")
    evidence = finding["evidence"]
    assert finding["severity"] == "info"
    assert 40 < evidence["achieved_tflops"] < 47 and evidence["peak_tflops"] == 494 and 8 < evidence["peak_pct"] < 10
    assert 4 < evidence["memory_used_pct_max"] < 6 and evidence["batch_size"] == 32
    assert "% of the NVIDIA H200 SXM's 494 TFLOP/s tf32 peak" in finding["title"]
    advice = " ".join(finding["advice"])
    for lever in ("larger batch (32 now)", "find_max_batch", "bf16", "channels_last", "torch.compile"):
        assert lever in advice, lever


def test_the_tuned_preset_has_no_headroom_finding():
    assert "headroom" not in kinds(findings(tuned()))


def test_the_threshold_is_a_setting():
    assert "headroom" in kinds(findings(tuned(), Settings(headroom_tflops_pct=20.0)))
    assert findings(seed_twin(), Settings(headroom_tflops_pct=5.0)) == []


def test_without_flops_a_small_share_of_memory_is_headroom():
    rec = each_gpu(load("healthy_synthetic"), lambda t, g: setattr(g, "memory_used", 6 * GIB) if g.memory_used and g.memory_used > GIB else None)
    finding = of_kind(findings(rec), "headroom")
    assert 3 < finding["evidence"]["memory_used_pct_max"] < 5 and "achieved_tflops" not in finding["evidence"]
    assert finding["title"].startswith("Headroom: the run uses 6.0 of 140 GiB of GPU memory")
    assert findings(load("healthy_synthetic")) == []  # 38 GiB: 27%


def test_an_input_bound_run_gets_the_input_finding_not_headroom():
    rec = with_workload(load("input_bound_1worker"), flops_per_sample=RESNET50_TRAIN_FLOPS, precision="fp32")
    assert kinds(findings(rec)) == ["input_bound"]


# --- on the H200 recordings in docs/recordings (GPM on; their measured phases last ~5 s,
# so the hold is shortened to fit) ---------------------------------------------------------


def h200(name: str):

    from gputui.record.recording import read_recording

    return read_recording(RECORDINGS / f"{name}.jsonl")


def test_on_the_h200_the_seed_twin_has_headroom_and_the_tuned_preset_not():
    short = Settings(headroom_open_after_s=2.0)
    twin = of_kind(findings(h200("h200-torch-resnet50"), short), "headroom")["evidence"]
    assert twin["peak_tflops"] == 494 and 7 < twin["peak_pct"] < 10  # ~43 TFLOP/s in tf32
    assert "headroom" not in kinds(findings(h200("h200-torch-resnet50-tuned"), short))  # ~165 of 989 bf16

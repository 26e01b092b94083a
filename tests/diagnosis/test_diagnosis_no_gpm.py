"""Input-bound and launch-bound on GPUs without GPM (A100, L4, A10, GeForce): the
committed traces with their SM activity taken away, judged from utilization, power
against the limit and throughput against a known ceiling; and the setting that makes
the sampler skip GPM so the fallback can be proven on a GPU that has it."""

from __future__ import annotations

import pytest

from gputui.diagnosis import Settings
from gputui.diagnosis.context import Context
from gputui.diagnosis.rules.gpu_busy import known_ceiling
from gputui.session.session import Session, SessionConfig
from gputui.telemetry.gpu import GpuTelemetry
from tests.support.diagnosis_traces import each_gpu, findings, gpus, kinds, load, of_kind, without_gpm
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.lookback import RECORDINGS
from tests.support.records import make_header


def busy_reading_util(rec, util: float = 100.0):
    """As on cards whose utilization reads ~100% whenever any kernel runs."""
    return each_gpu(rec, lambda t, g: setattr(g, "util_gpu", util) if g.power_w and g.power_w > 100 else None)


# --- input-bound ------------------------------------------------------------------------


def test_input_bound_without_gpm_is_found_by_utilization_and_says_so():
    rec = without_gpm(load("input_bound_1worker"))
    assert all(g.sm_active is None for g in gpus(rec))
    events = findings(rec)
    assert kinds(events) == ["input_bound"]
    finding = of_kind(events, "input_bound")
    assert "gpu_sm_active_pct" not in finding["evidence"]
    assert finding["evidence"]["judged_by_utilization_pct"] >= 80
    assert finding["title"].startswith("Input-bound: GPU utilization 1")


def test_input_bound_without_gpm_at_100_pct_utilization_is_found_by_power():
    # Utilization reads 100% all through; only the power draw (~145 W of 700 W) tells.
    rec = busy_reading_util(without_gpm(load("input_bound_1worker")))
    events = findings(rec)
    finding = of_kind(events, "input_bound")
    evidence = finding["evidence"]
    assert evidence["gpu_util_pct"] == 100
    assert "judged_by_utilization_pct" not in evidence
    assert evidence["judged_by_power_pct"] >= 80 and 15 < evidence["gpu_power_pct_of_limit"] < 27
    assert "power 2" in finding["title"] and "no GPM" in finding["title"]
    assert evidence["workers"] == 1 and evidence["worker_cpu_pct"] >= 95


def test_a_fed_gpu_without_gpm_is_not_input_bound():
    # 12 saturated workers, the GPU at ~610 W of 700: busy by power, so not input-bound.
    rec = busy_reading_util(without_gpm(load("input_enough_workers")))
    assert findings(rec) == []


def test_without_gpm_a_throughput_ceiling_still_flags_a_gpu_that_draws_power():
    rec = without_gpm(load("input_enough_workers"))
    events = findings(rec, Settings(ceiling_samples_per_sec=4500.0))
    evidence = of_kind(events, "input_bound")["evidence"]
    assert evidence["judged_by_throughput_pct"] >= 80 and "judged_by_power_pct" not in evidence
    assert 60 < evidence["ceiling_pct"] < 65


def test_the_power_threshold_is_a_setting():
    rec = busy_reading_util(without_gpm(load("input_bound_1worker")))
    assert "input_bound" not in kinds(findings(rec, Settings(input_power_pct=15.0)))


# --- launch-bound -------------------------------------------------------------------------


def test_busy_but_low_power_without_gpm_is_launch_bound():
    # MobileNetV2 at batch 8: utilization 100%, ~240 W of 700 W.
    rec = without_gpm(load("launch_bound"))
    events = findings(rec)
    assert kinds(events) == ["launch_bound"]
    finding = of_kind(events, "launch_bound")
    evidence = finding["evidence"]
    assert evidence["gpu_util_pct"] == 100 and "sm_active_pct" not in evidence
    assert 30 < evidence["gpu_power_pct_of_limit"] < 38 and evidence["judged_by_power_pct"] >= 80
    assert "no GPM" in finding["title"]


def test_busy_low_power_and_low_throughput_against_the_ceiling():
    rec = without_gpm(load("launch_bound"))
    events = findings(rec, Settings(ceiling_samples_per_sec=5000.0))  # 1,650/s is 33% of it
    evidence = of_kind(events, "launch_bound")["evidence"]
    assert evidence["ceiling_samples_per_sec"] == 5000.0 and 30 < evidence["ceiling_pct"] < 36
    assert evidence["judged_by_throughput_pct"] >= 80
    assert "of the 5000 this preset reaches here" in of_kind(events, "launch_bound")["title"]


def test_low_power_at_the_known_ceiling_is_not_launch_bound():
    # The same GPU delivering what this preset delivers here: a small model, not a fault.
    rec = without_gpm(load("launch_bound"))
    assert findings(rec, Settings(ceiling_samples_per_sec=1700.0)) == []


@pytest.mark.parametrize("name", ["healthy_synthetic", "thermal_flapping", "pcie_link"])
def test_busy_gpus_drawing_power_are_not_launch_bound_without_gpm(name):
    rec = without_gpm(load(name))
    assert "launch_bound" not in kinds(findings(rec))


# --- the ceiling a preset is known to reach ---------------------------------------------------


def ctx_for(preset: dict, gpu_name: str = "NVIDIA H200", settings: Settings | None = None) -> Context:
    ctx = Context(settings or Settings())
    ctx.on_header(make_header({"gpus": [{"index": 0, "name": gpu_name, "memory_total": 150_754_820_096}], "preset": preset}))
    return ctx


def test_known_ceiling_comes_from_the_setting_then_the_baselines_then_the_references():
    assert known_ceiling(ctx_for({"name": "torch-resnet50-tuned"})) == 6754.0  # baselines.toml, H200 SXM
    assert known_ceiling(ctx_for({"name": "torch-resnet50-tuned"}, settings=Settings(ceiling_samples_per_sec=1.0))) == 1.0
    refs = [{"gpu": "NVIDIA H200", "samples_per_sec": 1759, "source": "x"}, {"gpu": "A100 80GB", "samples_per_sec": 9999, "source": "y"}]
    assert known_ceiling(ctx_for({"name": "torch-resnet50", "reference": refs})) == 1759.0  # this GPU's only
    assert known_ceiling(ctx_for({"name": "torch-resnet50", "reference": refs}, gpu_name="NVIDIA L4")) is None
    assert known_ceiling(ctx_for({"name": "my-script"})) is None


# --- switching GPM off ------------------------------------------------------------------------


def test_use_gpm_false_makes_the_sampler_skip_gpm_on_a_gpu_that_has_it():
    telemetry = GpuTelemetry(FakeNvml([FakeGpu()]), use_gpm=False)
    telemetry.open()
    try:
        assert telemetry.infos[0].gpm_supported is False
        for _ in range(3):
            sample = telemetry.sample()[0]
        assert sample.sm_active is None and sample.util_gpu == 97.0 and sample.power_w == 312.5
    finally:
        telemetry.close()


def test_gputui_no_gpm_in_the_environment_wins_over_the_setting(monkeypatch):
    monkeypatch.setenv("GPUTUI_NO_GPM", "1")
    assert GpuTelemetry(FakeNvml([FakeGpu()])).use_gpm is False
    assert Session(SessionConfig()).gpu.use_gpm is False
    monkeypatch.delenv("GPUTUI_NO_GPM")
    assert GpuTelemetry(FakeNvml([FakeGpu()])).use_gpm is True


def test_the_diagnosis_setting_reaches_the_session_sampler(monkeypatch):
    monkeypatch.delenv("GPUTUI_NO_GPM", raising=False)
    assert Session(SessionConfig(diagnosis=Settings(use_gpm=False))).gpu.use_gpm is False
    assert Session(SessionConfig()).gpu.use_gpm is True


# --- the H200 input-bound pair in docs/recordings, with GPM taken away -------------------------


def h200(name: str):

    from gputui.record.recording import read_recording

    return read_recording(RECORDINGS / f"{name}.jsonl")


def test_the_real_input_bound_pair_without_gpm_is_judged_as_with_it():
    bound = of_kind(findings(without_gpm(h200("torch-resnet50-input-bound"))), "input_bound")
    assert "judged_by_utilization_pct" in bound["evidence"]
    # Even with utilization pinned at 100%, the 1-worker run draws ~175 W of 700 W.
    pinned = of_kind(findings(busy_reading_util(without_gpm(h200("torch-resnet50-input-bound")))), "input_bound")
    assert pinned["evidence"]["judged_by_power_pct"] >= 80 and pinned["evidence"]["gpu_power_pct_of_limit"] < 30
    assert findings(busy_reading_util(without_gpm(h200("torch-resnet50-input-fed")))) == []  # ~560 W, fed


def test_the_session_factory_honours_use_gpm_false_from_the_config():
    # The headless CLI and the dashboard build sessions through SessionParts: the
    # [diagnosis] use_gpm = false setting must reach the sampler that way too.
    from gputui.session.assemble import SessionParts

    session = SessionParts().build(SessionConfig(diagnosis=Settings(use_gpm=False)))
    assert session.gpu.use_gpm is False
    assert SessionParts().build(SessionConfig()).gpu.use_gpm is True

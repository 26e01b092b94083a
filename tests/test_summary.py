"""The summary: throughput over the measured phase, GPU statistics, energy per sample."""

from __future__ import annotations

import pytest

from gputui import events as ev
from gputui.events import make_event
from gputui.model import GpuSample, HostSample, ProcessSample, Sample
from gputui.summary import SummaryBuilder


def reading(rate, phase=None, samples=None, seconds=None, final=False):
    data = {"samples_per_sec": rate, "source": "gputui", "final": final}
    if phase:
        data["phase"] = phase
    if samples:
        data.update(samples=samples, seconds=seconds)
    return make_event(0.0, ev.THROUGHPUT, data)


def gpu(t_energy_mj, util, power, reasons=(), temp=60.0, mem=1000):
    return GpuSample(index=0, util_gpu=util, power_w=power, temp_c=temp, energy_mj=t_energy_mj, throttle_reasons=list(reasons), memory_used=mem)


def test_warmup_is_excluded_and_gpu_stats_cover_the_measured_phase():
    b = SummaryBuilder()
    b.on_event(make_event(0, ev.PHASE, {"phase": "warmup"}))
    b.on_sample(Sample(t=0.0, gpus=[gpu(0, util=5, power=100, mem=9000)]))
    b.on_event(reading(10.0, "warmup", 10, 1.0))
    b.on_event(make_event(1, ev.PHASE, {"phase": "measure"}))
    for i, (rate, util) in enumerate([(100.0, 90), (110.0, 95), (90.0, 100)]):
        b.on_event(reading(rate, "measure", rate, 1.0))
        b.on_sample(Sample(t=1.0 + i, gpus=[gpu(1000 + 400_000 * i, util=util, power=400, reasons=["SwPowerCap"] if i == 2 else [], mem=5000)]))
    b.on_event(reading(101.0, final=True))

    s = b.build()
    assert s["window"] == "measure"
    tp = s["throughput"]
    assert tp["median"] == 100.0 and tp["readings"] == 3
    assert tp["mean"] == pytest.approx(300 / 3.0)
    assert tp["reported"]["samples_per_sec"] == 101.0
    g = s["gpus"][0]
    assert g["util_gpu"] == {"median": 95.0, "max": 100.0}
    assert g["peak_memory_used"] == 5000  # the warm-up's 9000 is outside the window
    assert g["throttle_share"]["SwPowerCap"] == pytest.approx(1 / 3, abs=1e-3)
    # 800 J over 2 s = 400 W; at 100 samples/s that is 4 J per sample.
    assert s["energy_j"] == pytest.approx(800.0)
    assert s["energy_per_sample_j"] == pytest.approx(4.0)


def test_without_phases_every_reading_counts_and_window_is_all():
    b = SummaryBuilder()
    for rate in (5.0, 7.0, 6.0):
        b.on_event(make_event(0, ev.THROUGHPUT, {"samples_per_sec": rate, "source": "tqdm"}))
    b.on_sample(
        Sample(
            t=0.0,
            host=HostSample(
                cpu_percent=50.0,
                processes=[
                    ProcessSample(pid=1, role="main", cpu_percent=100.0, rss=10),
                    ProcessSample(pid=2, role="worker", cpu_percent=99.0, rss=20),
                ],
            ),
        )
    )
    s = b.build()
    assert s["window"] == "all"
    assert s["throughput"]["median"] == 6.0 and s["throughput"]["source"] == "tqdm"
    assert s["host"]["run_cpu_percent"]["max"] == 199.0
    assert s["host"]["max_workers"] == 1
    assert s["host"]["run_peak_rss"] == 30


def test_lost_gpu_is_reported():
    b = SummaryBuilder()
    b.on_sample(Sample(t=0.0, gpus=[GpuSample(index=0, util_gpu=50.0), GpuSample(index=1, lost=True)]))
    s = b.build()
    assert s["lost_gpus"] == [1]
    assert s["gpus"][1]["lost"] is True

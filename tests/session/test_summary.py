"""The summary: throughput over the measured phase, GPU statistics, energy per sample."""

from __future__ import annotations

import pytest

from gputui.model import GpuSample, HostSample, ProcessSample, Sample, Throughput
from gputui.record import events as ev
from gputui.record.events import Event, make_event
from gputui.record.schema import Reported, Stats
from gputui.session.summary import SummaryBuilder
from tests.support.lookback import OWN_TRAINING


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
    assert s.window == "measure"
    tp = s.throughput
    assert tp.median == 100.0 and tp.readings == 3
    assert tp.mean == pytest.approx(300 / 3.0)
    assert tp.reported.samples_per_sec == 101.0
    g = s.gpus[0]
    assert g.util_gpu == Stats(median=95.0, max=100.0)
    assert g.peak_memory_used == 5000  # the warm-up's 9000 is outside the window
    assert g.throttle_share["SwPowerCap"] == pytest.approx(1 / 3, abs=1e-3)
    # 800 J over 2 s = 400 W; at 100 samples/s that is 4 J per sample.
    assert s.energy_j == pytest.approx(800.0)
    assert s.energy_per_sample_j == pytest.approx(4.0)


def test_without_phases_every_reading_counts_and_the_window_is_training():
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
    assert s.window == "training"  # the readings came just before: a sample of training
    assert s.throughput.median == 6.0 and s.throughput.source == "tqdm"
    assert s.host.run_cpu_percent.max == 199.0
    assert s.host.max_workers == 1
    assert s.host.run_peak_rss == 30


def test_lost_gpu_is_reported():
    b = SummaryBuilder()
    b.on_sample(Sample(t=0.0, gpus=[GpuSample(index=0, util_gpu=50.0), GpuSample(index=1, lost=True)]))
    s = b.build()
    assert s.lost_gpus == [1]
    assert s.gpus[1].lost is True


# --- A job of the user's own: phases, the training window, units ------------------------------


def _gpu_sample(t: float, util: float, write_bps: float = 0.0) -> Sample:
    host = HostSample(cpu_percent=10.0, processes=[ProcessSample(pid=1, role="main", cpu_percent=100.0, write_bps=write_bps)])
    return Sample(t=t, gpus=[GpuSample(index=0, util_gpu=util, sm_active=util / 2)], host=host)


def _reading(t: float, rate: float, unit: str = "samples", source: str = "tqdm") -> Event:
    return Event(t, ev.THROUGHPUT, Throughput(samples_per_sec=rate, source=source, unit=unit))


def test_a_long_start_up_and_an_idle_tail_stay_out_of_the_medians():
    """The HF Trainer case of the issue: 20 s of start-up at 0 %, 30 s of training at
    60 %, a 15 s idle tail.  The whole-run median said 0 %; the training phase's is 60 %."""
    b = SummaryBuilder()
    for t in range(20):
        b.on_sample(_gpu_sample(float(t), 0.0))
    for t in range(20, 50):
        b.on_event(_reading(t + 0.5, 1000.0))
        b.on_sample(_gpu_sample(float(t), 60.0))
    for t in range(50, 65):
        b.on_sample(_gpu_sample(float(t), 0.0))
    s = b.build()
    assert s.window == "training"
    assert s.gpus[0].util_gpu.median == 60.0
    assert [p.phase for p in s.phases] == ["startup", "training", "tail"]
    startup, training, tail = s.phases
    assert startup.duration_s == pytest.approx(20.0, abs=1.0)
    assert training.duration_s == pytest.approx(32.0, abs=3.0)
    assert tail.until == 64.0


def test_gaps_in_progress_are_evaluation_or_checkpoint_by_what_the_machine_does():
    b = SummaryBuilder()
    for t in range(0, 10):
        b.on_event(_reading(t + 0.5, 500.0))
        b.on_sample(_gpu_sample(float(t), 90.0))
    for t in range(10, 20):  # no progress, the GPU works: evaluation
        b.on_sample(_gpu_sample(float(t), 70.0))
    for t in range(20, 30):  # no progress, the GPU rests, the run writes 200 MB/s: a checkpoint
        b.on_sample(_gpu_sample(float(t), 0.0, write_bps=200e6))
    for t in range(30, 40):
        b.on_event(_reading(t + 0.5, 500.0))
        b.on_sample(_gpu_sample(float(t), 90.0))
    s = b.build()
    assert [p.phase for p in s.phases] == ["training", "evaluation", "checkpoint", "training"]
    assert s.gpus[0].util_gpu.median == 90.0  # neither the evaluation nor the checkpoint counts


def test_a_job_without_progress_is_judged_where_its_gpu_worked():
    """--pid with no output: the summary covers the samples in which a GPU was busy."""
    b = SummaryBuilder()
    for t in range(30):
        b.on_sample(_gpu_sample(float(t), 55.0 if 10 <= t < 25 else 0.0))
    s = b.build()
    assert s.window == "gpu-active"
    assert s.gpus[0].util_gpu.median == 55.0
    assert s.phases is None


def test_throughput_carries_its_unit_and_steps_give_way_to_samples():
    b = SummaryBuilder()
    for t in range(3):
        b.on_event(_reading(t, 30.0, unit="steps"))  # tqdm before the probe told the batch size
    for t in range(3, 10):
        b.on_event(_reading(t, 960.0))
    b.on_event(_reading(10, 2.0, unit="steps"))  # never back to steps once samples are known
    tp = b.build().throughput
    assert (tp.unit, tp.median, tp.readings) == ("samples", 960.0, 7)


def test_the_reported_figure_is_the_one_in_the_runs_unit():
    b = SummaryBuilder()
    b.on_event(_reading(1, 4000.0, unit="tokens", source="nanogpt"))
    b.on_event(Event(2, ev.THROUGHPUT, Throughput(samples_per_sec=3.4, source="hf-trainer", unit="steps", final=True)))
    b.on_event(Event(2, ev.THROUGHPUT, Throughput(samples_per_sec=4100.0, source="hf-trainer", unit="tokens", final=True)))
    assert b.build().throughput.reported == Reported(samples_per_sec=4100.0, source="hf-trainer", unit="tokens")


@pytest.mark.parametrize(("name", "bursty"), [("keras_fit-starved", True), ("keras_fit-fed", False), ("keras_fit-python-bound", False)])
def test_a_jobs_figure_is_its_mean_as_its_own_tools_count_it(name, bursty):
    """Keras (docs/own-training-results/cpu/, recorded on the 2-core VM): the run's figure
    is its mean, samples over seconds of training, within 2 % of the script's own callback.
    Fed by a stalling Python generator, the median of its readings counts only the bursts
    (+28 %): that run is marked bursty and the closing lines say why."""

    from gputui.record.recording import read_recording
    from gputui.session.progress import summary_table

    rec = read_recording(OWN_TRAINING / f"{name}.jsonl")
    b = SummaryBuilder()
    for item in sorted([*rec.samples, *rec.events], key=lambda x: x.t):
        b.on_sample(item) if isinstance(item, Sample) else b.on_event(item)
    tp = b.build().throughput
    assert tp.run_figure == tp.figure == tp.mean == pytest.approx(tp.reported.samples_per_sec, rel=0.02)
    assert bool(tp.bursty) is bursty
    assert (tp.median > 1.2 * tp.mean) is bursty  # the median alone would flatter the bursty one
    lines = summary_table(b.build())
    headline = [line for line in lines if line.split()[:1] == ["throughput"] and line.split()[1][0].isdigit()]
    assert len(headline) == 1 and f"{tp.mean:,.0f}" in headline[0] and "samples over seconds of training" in headline[0]
    assert ("stalls between bursts" in headline[0]) is bursty
    assert any(line.split()[:2] == ["throughput", "median"] for line in lines)


def test_gputuis_own_workloads_are_known_by_their_median():
    """A benchmark workload's readings are windows of timed steps, and its own headline is
    their median: the summary's figure is the median, whatever the mean."""
    b = SummaryBuilder()
    for i, rate in enumerate([900.0, 1000.0, 1000.0, 1000.0, 400.0]):
        b.on_event(Event(float(i), ev.THROUGHPUT, Throughput(samples_per_sec=rate, source="gputui", samples=rate, seconds=1.0)))
    tp = b.build().throughput
    assert tp.figure == tp.median == 1000.0 and tp.mean < 0.9 * tp.median and tp.bursty is None


def test_the_first_window_of_a_job_is_its_start_and_not_counted():
    """The probe's first window holds the first step: compile, cuDNN autotuning, the first
    batch (20 s in docs/own-training-results/torch_tqdm_loop-fed.jsonl).  No tool counts it
    in its own figure, and neither does the mean."""
    b = SummaryBuilder()
    b.on_event(Event(20.0, ev.THROUGHPUT, Throughput(samples_per_sec=6.4, source="probe", samples=128.0, seconds=20.0)))
    for i in range(1, 6):
        b.on_event(Event(20.0 + i, ev.THROUGHPUT, Throughput(samples_per_sec=2000.0, source="probe", samples=2000.0, seconds=1.0)))
    assert b.build().throughput.figure == b.build().throughput.mean == 2000.0


def test_a_series_that_takes_over_from_another_source_starts_no_second_time():
    """timm's lines own the run until the probe takes over (from its second window, the
    first holding the start): the series starts afresh with the probe's windows, all of
    which count, the start being behind it."""
    b = SummaryBuilder()
    for i in range(3):
        b.on_event(Event(20.0 + i, ev.THROUGHPUT, Throughput(samples_per_sec=60.0, source="timm", samples=60.0, seconds=1.0)))
    b.on_event(Event(23.0, ev.THROUGHPUT, Throughput(samples_per_sec=40.0, source="probe", samples=80.0, seconds=2.0)))
    for i in range(4, 7):
        b.on_event(Event(20.0 + i, ev.THROUGHPUT, Throughput(samples_per_sec=64.0, source="probe", samples=64.0, seconds=1.0)))
    tp = b.build().throughput
    assert (tp.source, tp.readings) == ("probe", 4)
    assert tp.figure == tp.mean == pytest.approx((80.0 + 3 * 64.0) / 5.0)


def test_a_live_reading_leaves_the_builder_carrying_the_running_median():
    """Observers hear a live reading with the median of the run's readings so far, itself
    included, whatever their order; the tool's final figure and other events carry none,
    and the median is never written to the recording."""
    from gputui.record.events import event_to_dict

    b = SummaryBuilder()
    counted = [b.counted(Event(float(t), ev.THROUGHPUT, Throughput(samples_per_sec=rate, source="tqdm"))) for t, rate in enumerate([10.0, 30.0, 20.0])]
    assert [e.running_median for e in counted] == [10.0, 20.0, 20.0]
    final = b.counted(Event(3.0, ev.THROUGHPUT, Throughput(samples_per_sec=99.0, source="tqdm", final=True)))
    phase = b.counted(make_event(3.0, ev.PHASE, {"phase": "measure"}))
    assert final.running_median is None and phase.running_median is None
    assert "running_median" not in event_to_dict(counted[-1]) and counted[-1] == Event(2.0, ev.THROUGHPUT, Throughput(samples_per_sec=20.0, source="tqdm"))

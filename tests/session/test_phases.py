"""The phases of a job of the user's own (gputui.session.phases) where the probe saw an
evaluation: the probe's evaluation windows make it a phase wherever it was, however
short the gap in progress, and keep its samples out of the summary's training window."""

from __future__ import annotations

import pytest

from gputui.model import GpuSample, Sample
from gputui.record import events as ev
from gputui.record.events import Event, ProbeReport
from gputui.session.summary import SummaryBuilder


def probe_event(t: float, **fields) -> Event:
    return Event(t, ev.PROBE, ProbeReport({"v": 2, **fields}))


def training_window(t: float, **fields) -> Event:
    return probe_event(t, phase="training", steps=60, seconds=1.0, batches=60, samples=960, data_wait_s=0.05, **fields)


def eval_window(t: float, seconds: float, ongoing: bool = False) -> Event:
    return probe_event(t, phase="evaluation", steps=0, seconds=seconds, batches=30, samples=1920, data_wait_s=0.9 * seconds, ongoing=ongoing or None)


def sample(t: float, util: float) -> Sample:
    return Sample(t=t, gpus=[GpuSample(index=0, util_gpu=util)])


def test_an_evaluation_the_probe_saw_is_a_phase_and_out_of_the_gpu_statistics():
    """Training at 90 % from 0 to 4 s, an evaluation at 30 % from 4 to 6 s (2 s: a gap no
    guess from progress would call anything but training), training again; a sample every
    0.25 s.  The probe's first evaluation window comes a second into it."""
    b = SummaryBuilder()
    events = [training_window(t) for t in (1.0, 2.0, 3.0, 4.0)]
    events += [eval_window(5.0, 1.0, ongoing=True), eval_window(6.0, 1.0)]
    events += [training_window(t) for t in (7.0, 8.0, 9.0, 10.0)]
    samples = [sample(i / 4, 30.0 if 4.0 < i / 4 <= 6.0 else 90.0) for i in range(1, 41)]
    for item in sorted([*events, *samples], key=lambda x: (x.t, isinstance(x, Sample))):
        if isinstance(item, Sample):
            b.on_sample(item)
        else:
            b.on_event(item)
    s = b.build()
    assert [p.phase for p in s.phases] == ["startup", "training", "evaluation", "training"]
    evaluation = s.phases[2]
    assert evaluation.since == pytest.approx(4.0) and evaluation.until == pytest.approx(6.0)
    # The statistics take each sample as it comes: of the 40, start-up's 3, the 5 taken
    # while the probe said an evaluation went on and the 3 after it, before training was
    # heard of again, are left out; the 3 taken before its first window came are not.
    assert s.gpus[0].util_gpu.median == 90.0 and s.gpus[0].samples == 40 - 3 - 5 - 3


def test_a_closing_evaluation_is_no_idle_tail():
    b = SummaryBuilder()
    for t in range(1, 5):
        b.on_event(training_window(float(t)))
        b.on_sample(sample(t + 0.5, 90.0))
    b.on_sample(sample(5.5, 40.0))
    b.on_event(eval_window(6.0, 1.5))  # the script's last validation, sent as it exits
    b.on_sample(sample(6.5, 0.0))
    b.on_sample(sample(7.5, 0.0))
    assert [p.phase for p in b.build().phases] == ["training", "evaluation", "tail"]


# --- Without the probe: what the run's output says ---------------------------------------------


def output(t: float, text: str) -> Event:
    return Event(t, ev.OUTPUT, ev.Output("stdout", text))


def bar_reading(t: float, steps: float = 10.0) -> Event:
    from gputui.model import Throughput

    return Event(t, ev.THROUGHPUT, Throughput(samples_per_sec=10.0, source="tqdm", unit="steps", samples=steps, seconds=1.0))


def phases_of(events: list[Event], until: float) -> list[tuple[str, float]]:
    """The phases of a CPU run (no GPU to tell an evaluation by), a host sample every 0.25 s."""
    from gputui.model import HostSample

    b = SummaryBuilder()
    samples = [Sample(t=i / 4, gpus=[], host=HostSample(cpu_percent=100.0)) for i in range(1, int(until * 4) + 1)]
    for item in sorted([*events, *samples], key=lambda x: (x.t, isinstance(x, Sample))):
        b.on_sample(item) if isinstance(item, Sample) else b.on_event(item)
    return [(p.phase, round(p.duration_s, 1)) for p in b.build().phases or []]


def test_the_trainers_evaluation_is_a_phase_without_the_probe():
    """The Trainer's evaluation metrics say when its evaluation ended and how long it ran
    (eval_runtime); the training bar's redraw after it, no step further, is no progress."""
    events = [bar_reading(float(t)) for t in range(2, 11)]
    events.append(output(15.0, "{'eval_loss': 1.6094, 'eval_accuracy': 0.208, 'eval_runtime': 4.8, 'eval_samples_per_second': 208.3, 'epoch': 1.0}"))
    events.append(bar_reading(15.0, steps=0.0))
    events += [bar_reading(float(t)) for t in range(16, 21)]
    phases = phases_of(events, 21.0)
    assert [p for p, _ in phases] == ["startup", "training", "evaluation", "training"] and phases[2] == ("evaluation", 4.8)


def test_nanogpts_evaluation_line_ends_an_evaluation_since_its_last_iteration():
    events = [bar_reading(float(t)) for t in range(2, 11)]
    events.append(output(12.5, "step 50: train loss 3.3104, val loss 3.3182"))
    events += [bar_reading(t) for t in (12.6, 13.0, 14.0, 15.0)]
    assert [p for p, _ in phases_of(events, 15.0)] == ["startup", "training", "evaluation", "training"]
    assert dict(phases_of(events, 15.0))["evaluation"] == pytest.approx(2.5, abs=0.3)


def test_a_validation_bar_is_evaluation_until_training_goes_on():
    """Lightning's validation bar (a redraw now and then is all the recording keeps); its
    sanity check, before the first progress, is start-up."""
    events = [output(1.0, "Sanity Checking DataLoader 0:  50%|█████     | 1/2 [00:00<00:00,  3.10it/s]")]
    events += [bar_reading(float(t)) for t in range(2, 11)]
    events += [
        output(t, f"Validation DataLoader 0:  {n}%|███       | {n // 10}/10 [00:0{int(t) - 10}<00:03,  1.00it/s]")
        for t, n in ((11.0, 10), (12.5, 40), (13.6, 70))
    ]
    events += [bar_reading(float(t)) for t in range(15, 20)]
    assert [p for p, _ in phases_of(events, 20.0)] == ["startup", "training", "evaluation", "training"]
    assert dict(phases_of(events, 20.0))["evaluation"] == pytest.approx(5.0, abs=0.3)

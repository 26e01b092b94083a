"""What the trials say, held up to noise: the cheapest setting within noise of the best,
its gain over the script as written with an interval, or why there is nothing to tune.

Each trial is known by its training rate (samples over seconds across its probe windows)
with a bootstrap interval that resamples whole windows (gputui.lookback.noise).  A trial
is within noise of the best when the interval of its rate over the best's reaches 1 and
the point ratio is at least 1 - WITHIN_NOISE: an interval alone would let a noisy trial
well below the best pass.  Of those, the cheapest wins (fewest workers, then the least
memory held: LoaderSettings.cost).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from gputui.lookback.noise import RatioInterval, ratio_of_rates
from gputui.tune.settings import LoaderSettings
from gputui.tune.trial import NO_TRAINING, Trial

WITHIN_NOISE = 0.03  # a trial this much slower than the best, at most, may still be its equal
BEATS_BY = 0.02  # a step must gain this much, beyond noise, to count as faster

VerdictKind = Literal["tuned", "already_best", "cannot_feed", "waits_elsewhere", "not_input_bound", "outside_dataloader", "failed"]
CPU_BOUND_SHARE = 0.5  # a job using less of its cores than this, while waiting, waits on something else


def waits_for_data(trial: Trial, data_wait_pct: float) -> bool:
    """The loop still waits for data (the input-bound rule's threshold, or its finding)."""
    wait = trial.data_wait
    return trial.input_bound_finding or (wait is not None and wait * 100.0 >= data_wait_pct)


def best_of(trials: Sequence[Trial]) -> Trial | None:
    measured = [t for t in trials if t.ok and t.rate is not None]
    return max(measured, key=lambda t: t.rate or 0.0) if measured else None


def ratio(base: Trial, other: Trial) -> RatioInterval | None:
    """other's rate over base's, with its interval."""
    return ratio_of_rates(base.windows, other.windows)


def beats(trial: Trial, best: Trial | None) -> bool:
    """``trial`` is faster than ``best`` beyond noise and by BEATS_BY at least."""
    if best is None:
        return trial.ok
    r = ratio(best, trial)
    return r is not None and r.ratio >= 1 + BEATS_BY and (r.low is None or r.low > 1.0)


def within_noise_of(trial: Trial, best: Trial) -> bool:
    if trial is best:
        return True
    r = ratio(best, trial)
    return r is not None and r.ratio >= 1 - WITHIN_NOISE and (r.high is None or r.high >= 1.0)


@dataclass
class Verdict:
    kind: VerdictKind
    headline: str
    baseline: Trial
    chosen: Trial | None = None
    gain: RatioInterval | None = None  # the chosen setting's rate over the script's own
    cores_needed: float | None = None
    cores: float | None = None
    remedies: list[str] = field(default_factory=list)


HEAVIER_REMEDIES = [
    "cache the decoded, resized samples (a pre-processed copy of the data set), so each epoch decodes less",
    "decode and augment on the GPU (NVIDIA DALI, or torchvision.transforms.v2 on CUDA tensors)",
    "rent a box with more CPU cores per GPU",
]


def decide(trials: Sequence[Trial], data_wait_pct: float, cores: float | None) -> Verdict:
    """The verdict over ``trials``; ``trials[0]`` ran the script as written."""
    baseline = trials[0]
    if not baseline.armed and baseline.failure in (None, NO_TRAINING):  # Keras, TF, JAX: nothing of ours to change
        return Verdict(
            "outside_dataloader",
            "the probe saw no PyTorch training in this command: tune changes a PyTorch DataLoader's settings only;"
            " for tf.data, map with num_parallel_calls=tf.data.AUTOTUNE and end with .prefetch(tf.data.AUTOTUNE)",
            baseline,
        )
    if not baseline.ok:
        return Verdict("failed", f"the script as written did not train under the probe: {baseline.failure or 'no training measured'}", baseline)
    if not waits_for_data(baseline, data_wait_pct) and len(trials) == 1:
        wait = baseline.data_wait or 0.0
        return Verdict(
            "not_input_bound",
            f"not input-bound: the loop waited for data {100 * wait:.0f}% of its training time; loading settings will not speed it up",
            baseline,
        )
    if baseline.own_batches:
        return Verdict(
            "outside_dataloader",
            "the loop makes its own batches, with no DataLoader: tune changes a PyTorch DataLoader's settings only;"
            " move the batch making into a Dataset read by a DataLoader with workers",
            baseline,
        )
    if baseline.written is None:
        why = "; ".join(baseline.left_alone) or "no DataLoader was built"
        return Verdict(
            "outside_dataloader", f"no training DataLoader could be changed ({why}): tune changes a shuffling PyTorch DataLoader's settings only", baseline
        )
    best = best_of(trials)
    assert best is not None  # the baseline measured
    equals = [t for t in trials if t.ok and within_noise_of(t, best)]
    chosen = min(equals, key=lambda t: t.settings.cost())
    gain = ratio(baseline, chosen)
    still_waits = waits_for_data(chosen, data_wait_pct)
    if still_waits:
        return _still_waits(baseline, chosen, gain, cores)
    if chosen is baseline:
        return Verdict("already_best", "the script's own settings are as fast as any tried, within noise", baseline, chosen, gain)
    return Verdict("tuned", f"{chosen.settings.label()}: the cheapest setting within noise of the best", baseline, chosen, gain)


def _still_waits(baseline: Trial, chosen: Trial, gain: RatioInterval | None, cores: float | None) -> Verdict:
    """The best setting tried still leaves the loop waiting: the cores cannot keep up
    (the job uses them), or the loading waits on something else (it does not)."""
    wait = f"with the best setting tried the loop still waited for data {100 * (chosen.data_wait or 0.0):.0f}% of its time"
    used = chosen.cpu_cores
    if cores and used is not None and used < CPU_BOUND_SHARE * cores:
        return Verdict(
            "waits_elsewhere",
            f"{wait}, while the job used {used:.1f} of its {cores:g} cores: its loading waits on something other than the CPU (storage, the network, a lock)",
            baseline,
            chosen,
            gain,
            cores=cores,
            remedies=[
                "more workers than cores may still help a loader that waits (gputui tune --workers with larger counts)",
                "copy the data set to local NVMe or into memory (/dev/shm) before training",
            ],
        )
    needed = cores_to_feed(chosen)
    what = "this GPU" if chosen.gpu_busy_pct is not None else "the training"
    headline = f"this box cannot feed {what} at this pipeline's cost per sample: {wait}"
    if needed is not None and (cores is None or needed > cores):
        headline += f"; it would need about {needed:.0f} cores" + (f", and the job has {cores:g}" if cores else "")
    return Verdict("cannot_feed", headline, baseline, chosen, gain, needed, cores, HEAVIER_REMEDIES)


def cores_to_feed(trial: Trial) -> float | None:
    """Cores the run would need for the loop never to wait: what it used, over the share
    of its time it did not wait (its CPU work per sample stays the same)."""
    wait = trial.data_wait
    if trial.cpu_cores is None or wait is None or wait >= 1.0:
        return None
    return trial.cpu_cores / (1.0 - wait)


def change_in_words(settings: LoaderSettings, written: LoaderSettings | None, frameworks: Sequence[str]) -> str:
    """What to change in the script, in its framework's own words."""
    changed = {k: v for k, v in settings.as_dict().items() if v is not None and (written is None or getattr(written, k) != v)}
    if not changed:
        return "nothing: keep the script's settings"
    if "transformers" in frameworks and "lightning" not in frameworks:
        names = {"num_workers": "dataloader_num_workers", "pin_memory": "dataloader_pin_memory"}
        names |= {"persistent_workers": "dataloader_persistent_workers", "prefetch_factor": "dataloader_prefetch_factor"}
        return "TrainingArguments(" + ", ".join(f"{names[k]}={v!r}" for k, v in changed.items()) + ")"
    words = ", ".join(f"{k}={v!r}" for k, v in changed.items())
    if "lightning" in frameworks:
        return f"DataLoader({words}) in the DataModule's train_dataloader()"
    if "timm" in frameworks and set(changed) <= {"num_workers", "pin_memory"}:
        flags = [f"--workers {changed['num_workers']}"] if "num_workers" in changed else []
        flags += ["--pin-mem"] if changed.get("pin_memory") else []
        return "train.py " + " ".join(flags)
    return f"DataLoader({words}) for the training loader"

"""The verdict over trials (gputui.tune.verdict) and the grid that picks them
(gputui.tune.grid), on trials made here: windows of (samples, seconds) with a spread of
their own, as a probe's one-second windows have."""

from __future__ import annotations

import random

import pytest

from gputui.tune.grid import Grid, by_hand, next_settings, worker_ladder
from gputui.tune.settings import LoaderSettings
from gputui.tune.trial import NO_TRAINING, Trial
from gputui.tune.verdict import change_in_words, decide

WRITTEN = LoaderSettings(num_workers=2, pin_memory=True, persistent_workers=False, prefetch_factor=None)


def trial(number: int, workers: int | None, rate: float, wait: float, *, spread: float = 0.02, cores: float | None = None, **asked) -> Trial:
    """A trial of ``rate`` samples/s (30 one-second windows, +-spread), waiting ``wait`` of its time."""
    rng = random.Random(number * 1000 + workers if workers is not None else number)
    windows = [(rate * (1 + rng.uniform(-spread, spread)), 1.0) for _ in range(30)]
    settings = LoaderSettings(num_workers=workers, **asked)
    t = Trial(number=number, asked=settings if number > 1 else LoaderSettings(), windows=windows, data_wait_s=wait * 30)
    t.written = WRITTEN
    t.armed = True
    t.built = settings.over(WRITTEN) if number > 1 else WRITTEN
    t.cpu_cores = cores if cores is not None else float(workers or 1)
    t.gpu_busy_pct = 100.0 * (1 - wait)
    return t


def test_the_cheapest_within_noise_of_the_best_wins_with_its_gain_over_the_script():
    noisy = 0.15  # windows this spread: 2 % is within noise
    trials = [
        trial(1, 2, 200, 0.9, spread=noisy),
        trial(2, 4, 400, 0.8, spread=noisy),
        trial(3, 8, 980, 0.1, spread=noisy),
        trial(4, 16, 1000, 0.05, spread=noisy),
    ]
    verdict = decide(trials, data_wait_pct=40, cores=16)
    assert verdict.kind == "tuned" and verdict.chosen is trials[2]  # 8 workers: 2 % below 16, within noise
    assert verdict.gain is not None and verdict.gain.low is not None and verdict.gain.high is not None
    assert verdict.gain.low < 980 / 200 < verdict.gain.high


def test_a_real_gain_beyond_noise_is_not_given_up_for_a_cheaper_setting():
    trials = [trial(1, 2, 200, 0.9), trial(2, 8, 980, 0.1), trial(3, 16, 1000, 0.05)]
    verdict = decide(trials, data_wait_pct=40, cores=16)
    assert verdict.chosen is trials[2]  # 2 % faster, with 2 % spreads over 30 windows: the interval leaves 1 out


def test_a_noisy_trial_well_below_the_best_is_not_its_equal():
    trials = [trial(1, 2, 200, 0.9), trial(2, 8, 880, 0.1, spread=0.6), trial(3, 16, 1000, 0.05)]
    verdict = decide(trials, data_wait_pct=40, cores=16)
    assert verdict.chosen is trials[2]  # 12 % below: its wide interval reaches the best, its rate does not


def test_a_fed_job_is_not_input_bound_after_one_trial():
    verdict = decide([trial(1, 4, 2000, 0.01)], data_wait_pct=40, cores=16)
    assert verdict.kind == "not_input_bound" and "not input-bound" in verdict.headline and "1%" in verdict.headline


def test_when_no_setting_stops_the_wait_the_box_cannot_feed_the_gpu_and_the_cores_needed_are_named():
    trials = [trial(1, 2, 250, 0.93, cores=2.1), trial(2, 4, 400, 0.82, cores=3.9)]
    verdict = decide(trials, data_wait_pct=40, cores=4)
    assert verdict.kind == "cannot_feed" and verdict.chosen is trials[1]
    assert verdict.cores_needed == pytest.approx(3.9 / 0.18)
    assert "cannot feed this GPU" in verdict.headline and "about 22 cores, and the job has 4" in verdict.headline
    assert any("more CPU cores" in r for r in verdict.remedies)


def test_the_scripts_own_settings_can_be_the_answer():
    trials = [trial(1, 8, 1000, 0.1), trial(2, 16, 1002, 0.05)]  # a grid by hand goes on past a fed first trial
    verdict = decide(trials, data_wait_pct=40, cores=16)
    assert verdict.kind == "already_best" and verdict.chosen is trials[0]


def test_a_loop_of_its_own_batches_and_a_script_without_a_training_loader_are_outside_what_tune_changes():
    own = trial(1, None, 100, 0.7)
    own.own_batches = True
    assert decide([own], 40, None).kind == "outside_dataloader"
    unshuffled = trial(1, 2, 100, 0.7)
    unshuffled.written = None
    unshuffled.left_alone = ["does not shuffle: taken for evaluation"]
    verdict = decide([unshuffled], 40, None)
    assert verdict.kind == "outside_dataloader" and "does not shuffle" in verdict.headline


def test_a_command_without_pytorch_is_outside_what_tune_changes():
    keras = Trial(number=1, asked=LoaderSettings(), failure=NO_TRAINING)
    verdict = decide([keras], 40, None)
    assert verdict.kind == "outside_dataloader" and "no PyTorch training" in verdict.headline and "tf.data.AUTOTUNE" in verdict.headline


def test_a_script_that_fails_as_written_is_the_verdict():
    failed = Trial(number=1, asked=LoaderSettings(), failure="exit code 1: ImportError: no module named foo", armed=True)
    verdict = decide([failed], 40, None)
    assert verdict.kind == "failed" and "ImportError" in verdict.headline


def test_a_failed_trial_is_a_result_and_never_chosen():
    crashed = Trial(number=3, asked=LoaderSettings(num_workers=16), failure="OSError: [Errno 24] Too many open files")
    trials = [trial(1, 2, 200, 0.9), trial(2, 8, 900, 0.1), crashed]
    verdict = decide(trials, data_wait_pct=40, cores=16)
    assert verdict.chosen is trials[1]


@pytest.mark.parametrize(
    "frameworks, words",
    [
        ([], "DataLoader(num_workers=8) for the training loader"),
        (["lightning"], "DataLoader(num_workers=8) in the DataModule's train_dataloader()"),
        (["transformers", "accelerate"], "TrainingArguments(dataloader_num_workers=8)"),
        (["timm"], "train.py --workers 8"),
    ],
)
def test_the_change_is_said_in_the_frameworks_own_words(frameworks, words):
    assert change_in_words(LoaderSettings(8, True, False, None), WRITTEN, frameworks) == words


# --- the grid --------------------------------------------------------------------------


def test_the_worker_ladder_doubles_from_the_scripts_count_up_to_the_cores_per_gpu():
    assert worker_ladder(2, Grid(cores=16, gpus=1)) == [4, 8, 16]
    assert worker_ladder(0, Grid(cores=16, gpus=1)) == [2, 4, 8, 16]
    assert worker_ladder(2, Grid(cores=64, gpus=8)) == [4, 8]
    assert worker_ladder(2, Grid(cores=4, gpus=1)) == [4]
    assert worker_ladder(0, Grid(cores=2, gpus=1)) == [1, 2]
    assert worker_ladder(3, Grid(cores=12, gpus=1)) == [6, 12]
    assert worker_ladder(16, Grid(cores=16, gpus=1)) == []


def test_climbing_stops_once_the_loop_is_fed():
    grid = Grid(cores=16, gpus=1, data_wait_pct=40)
    trials = [trial(1, 2, 200, 0.9)]
    assert next_settings(trials, grid) == LoaderSettings(num_workers=4)
    trials.append(trial(2, 4, 400, 0.8))
    assert next_settings(trials, grid) == LoaderSettings(num_workers=8)
    trials.append(trial(3, 8, 900, 0.05))  # fed: no higher rung; pinned memory is already on
    assert next_settings(trials, grid) is None


def test_climbing_stops_past_the_knee_and_the_extras_are_tried_on_the_best():
    grid = Grid(cores=16, gpus=1, data_wait_pct=40)
    trials = [trial(1, 2, 200, 0.9), trial(2, 4, 400, 0.7, spread=0.1), trial(3, 8, 404, 0.6, spread=0.1)]  # no faster: past the knee
    extra = next_settings(trials, grid)
    assert extra == LoaderSettings(num_workers=4, persistent_workers=True)  # still waits: persistent, then prefetch
    trials.append(trial(4, 4, 402, 0.7, persistent_workers=True))
    assert next_settings(trials, grid) == LoaderSettings(num_workers=4, prefetch_factor=4)
    trials.append(trial(5, 4, 401, 0.7, prefetch_factor=4))
    assert next_settings(trials, grid) is None


def test_the_grid_stops_at_the_most_trials_asked():
    trials = [trial(1, 2, 200, 0.9), trial(2, 4, 400, 0.8)]
    assert next_settings(trials, Grid(cores=16, gpus=1, max_trials=2)) is None


def test_a_grid_by_hand_is_every_combination_cheapest_first_each_once():
    grid = Grid(workers=(8, 4), pin_memory=(False, True), cores=16)
    assert by_hand(grid) == [
        LoaderSettings(num_workers=4, pin_memory=False),
        LoaderSettings(num_workers=4, pin_memory=True),
        LoaderSettings(num_workers=8, pin_memory=False),
        LoaderSettings(num_workers=8, pin_memory=True),
    ]
    trials = [trial(1, 2, 200, 0.01), Trial(number=2, asked=LoaderSettings(num_workers=4, pin_memory=False))]
    assert next_settings(trials, grid) == LoaderSettings(num_workers=4, pin_memory=True)  # not input-bound: by hand goes on


def test_a_loop_still_waiting_with_cores_to_spare_waits_on_something_other_than_the_cpu():
    trials = [trial(1, 0, 48, 0.98, cores=0.1), trial(2, 2, 98, 0.97, cores=0.1)]
    verdict = decide(trials, data_wait_pct=40, cores=2)
    assert verdict.kind == "waits_elsewhere" and verdict.chosen is trials[1]
    assert "used 0.1 of its 2 cores" in verdict.headline and "other than the CPU" in verdict.headline
    assert verdict.cores_needed is None

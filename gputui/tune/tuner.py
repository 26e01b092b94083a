"""The tune itself: trials one after another, the first as the script is written, the
next chosen by the grid from the box and the trials so far, until the grid is done, the
first trial shows there is nothing to tune, or the user stops it (Ctrl-C)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from gputui.live.wiring import RunWiring
from gputui.presets.preset import Preset
from gputui.session.options import RunOptions
from gputui.telemetry.host import cpu_available
from gputui.tune.faces import trial_line
from gputui.tune.grid import Grid, next_settings
from gputui.tune.settings import LoaderSettings
from gputui.tune.trial import Trial, TrialPlan, run_trial
from gputui.tune.verdict import Verdict, decide


@dataclass
class Tune:
    trials: list[Trial]
    verdict: Verdict
    interrupted: bool  # Ctrl-C or SIGTERM ended it

    @property
    def frameworks(self) -> list[str]:
        return list(dict.fromkeys(name for t in self.trials for name in t.frameworks))


def run_tune(preset: Preset, options: RunOptions, wiring: RunWiring, plan: TrialPlan, grid: Grid, stamp: str, say: Callable[[str], None]) -> Tune:
    """Tune ``preset``'s command; ``say`` hears a line as each trial starts and ends.
    Each trial is named after the tune (``train.py (tune STAMP, trial 3)``) in the history."""
    data_wait_pct = float(options.diagnosis_settings(preset).data_wait_pct)
    grid = dataclasses.replace(grid, data_wait_pct=data_wait_pct)
    trials: list[Trial] = []
    asked: LoaderSettings | None = LoaderSettings()
    try:
        while asked is not None:
            number = len(trials) + 1
            say(f"trial {number}, {asked.over(trials[0].written or LoaderSettings()).label() if trials else 'the script as written'}: running")
            trial = run_trial(number, asked, dataclasses.replace(preset, name=f"{preset.name} (tune {stamp}, trial {number})"), options, wiring, plan)
            trials.append(trial)
            say(trial_line(trial, grid.max_trials))
            if trial.stopped_by_user:
                break
            if number == 1:
                first = decide(trials, data_wait_pct, None)
                if first.kind in ("failed", "outside_dataloader") or (first.kind == "not_input_bound" and not grid.by_hand):
                    return Tune(trials, first, interrupted=False)
                grid = _from_the_box(grid, trial)
            asked = next_settings(trials, grid)
    except KeyboardInterrupt:  # Ctrl-C between two trials (within one, the trial's own handler takes it)
        if not trials:
            raise
        trials[-1].stopped_by_user = True
    interrupted = bool(trials) and trials[-1].stopped_by_user
    return Tune(trials, decide(trials, data_wait_pct, grid.cores), interrupted=interrupted)


def _from_the_box(grid: Grid, first: Trial) -> Grid:
    """The grid's facts from the first trial: the cores the job may use (its affinity
    may be narrower than ours: taskset), the GPUs it trains on, whether it has any."""
    cores = min((c for c in (cpu_available(), first.cpus) if c), default=1.0)
    return dataclasses.replace(grid, cores=float(cores), gpus=first.gpus_used or 1, cuda=first.gpus_seen > 0)

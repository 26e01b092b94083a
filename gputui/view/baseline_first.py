"""``gputui --preset NAME --baseline-run`` in the dashboard: the data-parallel preset's
one-GPU twin runs first; when it ends, its measured median becomes the baseline that
NAME's run scales against, and that run starts.  The headless path does the same in
``gputui.cli.main`` (one run after the other, in one thread); here the two runs are two
sessions of the supervisor, and this object remembers what the first one was for."""

from __future__ import annotations

from gputui import fmt
from gputui.presets.preset import Preset
from gputui.record.schema import Baseline
from gputui.session.baseline import THIS_SESSION, baseline_from_summary, one_gpu_twin
from gputui.view.state import RunView


class BaselineFirst:
    def __init__(self, target: Preset) -> None:
        self.target = target
        self.twin = one_gpu_twin(target)  # a UserError when the preset is not data-parallel
        self.pending = True  # cleared when the twin's run ends or the user stops it

    def is_twin(self, run: RunView) -> bool:
        return self.pending and run.ticket.preset is not None and run.ticket.preset.name == self.twin.name

    def cancel(self) -> str | None:
        """The user stopped the twin: what to tell them, or None when nothing was pending."""
        if not self.pending:
            return None
        self.pending = False
        return f"--baseline-run: the one-GPU run was stopped; {self.target.name} was not started"

    def baseline_from(self, run: RunView) -> Baseline:
        """The twin's measured median as a baseline; a UserError when it measured none."""
        self.pending = False
        return baseline_from_summary(run.summary, THIS_SESSION, "--baseline-run")

    @staticmethod
    def describe(baseline: Baseline) -> str:
        return f"one-GPU baseline: {fmt.rate(baseline.samples_per_sec)} samples/s"

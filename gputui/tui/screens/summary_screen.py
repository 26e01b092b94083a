"""A run's end: its summary table (the same lines ``--record`` prints) and how it
compares with the preset's reference result."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputui import fmt
from gputui.escape import widget_text
from gputui.session.progress import summary_table
from gputui.tui.screens.once import DismissOnce
from gputui.tui.screens.terminal_size import TerminalSized
from gputui.view.state import RunView, pick_reference


def summary_text(run: RunView, gpu_names: list[str]) -> Text:
    text = Text()
    title = f"Run {run.label}" if run.number else run.preset.name
    text.append(f"{title} — {run.outcome_word}\n", "bold")
    if run.cut:
        text.append(f"the recording ends early: {run.cut}\n")
    if run.error:
        text.append(f"the session failed: {run.error}\n")
    if run.summary:
        text.append("\n".join(line for line in summary_table(run.summary) if line and line != "gputui summary"))
    median = run.result
    reference = pick_reference(run.preset, gpu_names)
    if reference is not None:
        ref, matched = reference
        text.append(f"\n\n  reference {ref.gpu}: {fmt.rate(ref.samples_per_sec)} samples/s ({ref.source})")
        if median and matched:
            text.append(f"\n  this run: {median / ref.samples_per_sec:.0%} of it")
        elif not matched:
            text.append("\n  (no reference for this machine's GPU)")
    return widget_text(text)


class SummaryScreen(DismissOnce, TerminalSized, ModalScreen[str | None]):
    BINDINGS = [
        Binding("escape,enter,u", "dismiss(None)", "Close", id="close_summary"),
        Binding("r", "dismiss('again')", "Run again", id="summary_run_again"),
        Binding("l", "dismiss('tune')", "Tune loading", id="summary_tune"),
        Binding("q", "app.quit", "Quit", id="summary_quit"),  # a modal screen hides the app's keys
    ]
    DEFAULT_CSS = """
    SummaryScreen { align: center middle; }
    SummaryScreen > Vertical { width: 84; max-width: 100%; height: auto; max-height: 90%;
                               border: round $primary; background: $surface; padding: 0 1; }
    SummaryScreen VerticalScroll { height: auto; max-height: 100%; }
    SummaryScreen #summary-keys { color: $text-muted; }
    """

    def __init__(self, run: RunView, gpu_names: list[str], run_again: bool = True, tune: bool = False) -> None:
        super().__init__()
        self.run = run
        self.gpu_names = gpu_names
        self.run_again = run_again  # False where nothing runs (a replay): r is neither offered nor bound
        self.tune = tune  # an input-bound run of the user's own PyTorch command: l tunes its data loading

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "dismiss" and parameters == ("again",):
            return self.run_again
        if action == "dismiss" and parameters == ("tune",):
            return self.tune
        return True

    def compose(self) -> ComposeResult:
        with Vertical() as panel:
            panel.border_title = "Run summary"
            with VerticalScroll():
                yield Static(summary_text(self.run, self.gpu_names), id="summary-text")
            again = " · r run again" if self.run_again else ""
            tune = " · l tune its data loading (gputui tune)" if self.tune else ""
            yield Static(f"Enter/Esc close{again}{tune} · q quit", id="summary-keys")

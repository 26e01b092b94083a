"""``s`` on the dashboard: stop the run?  A run may be hours of someone's training, so one
key never ends it: ``y`` stops it (its whole process group), ``n`` or Esc leaves it going."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from gputui.escape import for_widget
from gputui.tui.screens.dialog import Dialog

STOP = "stop"


class StopRunScreen(Dialog):
    """Dismisses with "stop", or None to leave the run going."""

    BINDINGS = [
        Binding("y", "dismiss('stop')", "Stop it", id="stop_confirm"),
        Binding("n,escape", "dismiss(None)", "Keep it running", id="stop_cancel"),
    ]

    def __init__(self, label: str, outlives_viewer: bool) -> None:
        super().__init__(f"Stop {label}?")
        self.outlives_viewer = outlives_viewer

    def parts(self) -> ComposeResult:
        yield Static(for_widget(self.text))
        yield Static("Its whole process group gets SIGTERM, then SIGKILL after 5 s if anything is left.")
        if self.outlives_viewer:
            yield Static("To leave it running instead, just quit (q): it goes on, and gputui attach shows it again.")
        yield Static("y stop it · n or Esc keep it running", id="stop-keys")

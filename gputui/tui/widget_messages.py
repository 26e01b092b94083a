"""What screens and widgets ask of the app, as Textual Messages.

A screen or widget posts one; it bubbles up the DOM to the app, whose ``on_…``
handler does the work.  The asker needs no reference to the concrete App class (and
no ``type: ignore`` to call it), and a replay answers the same messages its own way.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.message import Message

from gputui.record.history import KeptRun
from gputui.view.state import RunView

RunEntry = RunView | KeptRun  # a run of this session, or one kept from an earlier one


class StartPreset(Message):
    """Run the preset of this name (Enter on the preset list, Run in the editor)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


class RefreshDashboard(Message):
    """Redraw the dashboard's panels now (it is back on top after a modal)."""


class OpenRun(Message):
    """Show this run's summary (Enter on the Runs list)."""

    def __init__(self, entry: RunEntry) -> None:
        super().__init__()
        self.entry = entry


class CompareRuns(Message):
    """Compare these runs (two marked with c on the Runs list)."""

    def __init__(self, entries: Sequence[RunEntry]) -> None:
        super().__init__()
        self.entries = list(entries)

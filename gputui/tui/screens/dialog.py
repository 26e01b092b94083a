"""A small box in the middle of the screen that asks one question: the editor's (save as,
a changed file, unsaved changes) and the dashboard's (stop a run)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from gputui.tui.screens.once import DismissOnce
from gputui.tui.screens.terminal_size import TerminalSized


class Dialog(DismissOnce, TerminalSized, ModalScreen[str | None]):
    """A small box in the middle of the screen: ``parts()`` yields its widgets."""

    DEFAULT_CSS = """
    Dialog { align: center middle; }
    Dialog > Vertical { width: 80; max-width: 100%; height: auto; border: round $primary; background: $surface; padding: 0 1; }
    Dialog Label { width: 100%; }  /* wrapped in the box (a long path), not cut at its edge */
    """

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield from self.parts()

    def parts(self) -> ComposeResult:
        yield Static(self.text)

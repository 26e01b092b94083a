"""``x`` on the dashboard: run any command, as ``gputui -- CMD`` does on the command line,
or save it as a preset.  The command line is split as a shell would (shlex), without a
shell: quote what has spaces."""

from __future__ import annotations

import shlex

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from gputui.tui.screens.once import DismissOnce
from gputui.tui.screens.terminal_size import TerminalSized

RUN, SAVE = "run", "save"


def split_command(text: str) -> list[str] | str:
    """The command's words, or why it cannot be split (an open quote)."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        return f"cannot split the command: {exc}"
    return words or "type a command, e.g. python train.py --lr 3e-4"


class CommandScreen(DismissOnce, TerminalSized, ModalScreen[tuple[str, list[str]] | None]):
    """Asks for a command line; dismisses with ("run" | "save", argv) or None."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Cancel", id="command_cancel"),
        Binding("ctrl+s", "save", "Save as preset", id="command_save", priority=True),
    ]
    DEFAULT_CSS = """
    CommandScreen { align: center middle; }
    CommandScreen > Vertical { width: 80%; max-width: 100; height: auto; border: round $primary; background: $surface; padding: 0 1; }
    CommandScreen #command-problem { color: $error; height: auto; }
    CommandScreen .hint { color: $text-muted; }
    CommandScreen Label { width: 100%; }  /* wrapped in the box: a Label is one line, cut at its edge */
    """

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Run a command (your own training script): its output is read for throughput, and Python gets the probe.")
            yield Input(placeholder="python train.py --lr 3e-4", id="command-line")
            yield Label("", id="command-problem")
            yield Label("Enter run · ctrl+s save as a preset · Esc cancel", classes="hint")

    def on_mount(self) -> None:
        if self.app_exiting():
            return
        self.query_one(Input).focus()

    def _answer(self, action: str) -> None:
        words = split_command(self.query_one(Input).value)
        if isinstance(words, str):
            self.query_one("#command-problem", Label).update(words)
            return
        self.dismiss((action, words))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._answer(RUN)

    def action_save(self) -> None:
        self._answer(SAVE)

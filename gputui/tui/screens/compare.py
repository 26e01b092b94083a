"""Two runs side by side: the table ``gputui.lookback.compare.compare_rows`` builds
(the same one ``gputui compare`` prints), one row per figure."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputui.escape import for_widget
from gputui.tui.screens.once import DismissOnce


def compare_table(header: list[str], rows: list[list[str]]) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", expand=False)
    for i, name in enumerate(header):
        table.add_column(for_widget(name), justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in rows:
        table.add_row(*(for_widget(cell) for cell in row))  # a string cell would be read as markup
    return table


class CompareScreen(DismissOnce, ModalScreen[None]):
    BINDINGS = [
        Binding("escape,enter,c", "dismiss(None)", "Close", id="close_compare"),
        Binding("q", "app.quit", "Quit", id="compare_quit"),  # a modal screen hides the app's keys
    ]
    DEFAULT_CSS = """
    CompareScreen { align: center middle; }
    CompareScreen > Vertical { width: 90%; max-width: 120; height: auto; max-height: 90%;
                               border: round $primary; background: $surface; padding: 0 1; }
    CompareScreen VerticalScroll { height: auto; max-height: 100%; }
    CompareScreen #compare-keys { color: $text-muted; }
    """

    def __init__(self, header: list[str], rows: list[list[str]], names: list[str]) -> None:
        super().__init__()
        self.header = header
        self.rows = rows
        self.names = names

    def compose(self) -> ComposeResult:
        with Vertical() as panel:
            panel.border_title = for_widget("Compare: " + " vs ".join(self.names))
            with VerticalScroll():
                yield Static(compare_table(self.header, self.rows), id="compare-table")
            yield Static("Enter/Esc close · q quit", id="compare-keys")

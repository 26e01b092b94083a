"""Runs side by side: the table ``gputui.lookback.compare.compare_rows`` builds (the
same one ``gputui compare`` prints), one row per figure, one column per run headed as
the Runs list names it ("#2 resnet50").

Cells never wrap: a wrapped cell turned one figure into two lines and the rows no
longer read across.  Each run's column gets its share of the width; a longer cell (a
machine description, a GPU with its driver, the throttle reasons) is cut with "…"
and shown whole below the table while the cursor is on it, so nothing is lost and
the runs stay side by side, which is what a comparison is for.  Where even the
shares are too narrow (many runs, a narrow terminal) the table scrolls sideways
instead, the row names staying in view.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.coordinate import Coordinate
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from gputui.escape import for_widget
from gputui.lookback.compare import NARROWEST_RUN, share_widths
from gputui.tui.compositor import SteadyScrollbars
from gputui.tui.screens.once import DismissOnce
from gputui.tui.screens.terminal_size import TerminalSized

KEYS_HINT = "←→↑↓ a cell in full below · Enter/Esc close · q quit"


def one_line(text: str, column: int) -> Text:
    """A cell that never wraps: cut with "…" where its column is narrower.  The row
    names read left to right, the runs' figures line up on the right."""
    cell = for_widget(text)  # a string cell would be read as markup
    cell.no_wrap, cell.overflow = True, "ellipsis"
    cell.justify = "left" if column == 0 else "right"
    return cell


def cell_detail(header: list[str], row: list[str], column: int) -> Text:
    """The highlighted cell whole: its row, its run, its text."""
    if column == 0:
        return for_widget(row[0])
    return for_widget(f"{row[0]} · {header[column]}: {row[column]}")


class CompareTable(SteadyScrollbars, DataTable):
    """The comparison, its columns fitted to the width it has (again when it changes)."""

    def __init__(self, header: list[str], rows: list[list[str]]) -> None:
        super().__init__(id="compare-table", cursor_type="cell", fixed_columns=1)
        self.header = header
        self.rows_text = rows
        self._fitted_to: int | None = None

    def on_resize(self, event: events.Resize) -> None:
        self.fit(self.scrollable_content_region.width)

    def column_widths(self, room: int) -> list[int]:
        """The row names whole (up to half the room), the runs sharing the rest."""
        wanted = [max(cell_len(line[i]) for line in [self.header, *self.rows_text]) for i in range(len(self.header))]
        padding = 2 * self.cell_padding
        names = min(wanted[0], max(room // 2 - padding, 1))
        runs = share_widths(wanted[1:], room - names - padding * len(wanted), NARROWEST_RUN)
        return [names, *runs]

    def fit(self, room: int) -> None:
        """(Re)build the table for ``room`` cells, the cursor where it was."""
        if room == self._fitted_to:
            return
        self._fitted_to = room
        cursor = self.cursor_coordinate if self.row_count else Coordinate(0, 1)
        self.clear(columns=True)
        for column, (head, width) in enumerate(zip(self.header, self.column_widths(room))):
            self.add_column(one_line(head, column), width=width)
        for row in self.rows_text:
            self.add_row(*(one_line(cell, column) for column, cell in enumerate(row)))
        self.move_cursor(row=cursor.row, column=cursor.column, animate=False)


class CompareScreen(DismissOnce, TerminalSized, ModalScreen[None]):
    BINDINGS = [
        # priority: the table would take Enter (and select its cell)
        Binding("escape,enter,c", "dismiss(None)", "Close", id="close_compare", priority=True),
        Binding("q", "app.quit", "Quit", id="compare_quit"),  # a modal screen hides the app's keys
    ]
    DEFAULT_CSS = """
    CompareScreen { align: center middle; }
    CompareScreen > Vertical { width: 96%; height: auto; max-height: 90%; border: round $primary; background: $surface; }
    CompareScreen #compare-table { height: auto; }
    /* docked: a tall table (many checks) scrolls above it instead of pushing it out */
    CompareScreen #compare-foot { dock: bottom; height: auto; border-top: solid $primary; }
    CompareScreen #compare-detail { height: auto; max-height: 3; padding: 0 1; }
    CompareScreen #compare-keys { color: $text-muted; padding: 0 1; }
    """

    def __init__(self, header: list[str], rows: list[list[str]], names: list[str]) -> None:
        super().__init__()
        self.header = header
        self.rows = rows
        self.names = names

    def compose(self) -> ComposeResult:
        with Vertical() as panel:
            panel.border_title = for_widget("Compare: " + " vs ".join(self.names))
            yield CompareTable(self.header, self.rows)
            with Vertical(id="compare-foot"):
                yield Static("", id="compare-detail")  # the cut cells are read here whole
                yield Static(KEYS_HINT, id="compare-keys")

    def on_data_table_cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        row, column = event.coordinate
        if row < len(self.rows):
            self.query_one("#compare-detail", Static).update(cell_detail(self.header, self.rows[row], column))

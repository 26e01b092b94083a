"""A kept check, opened from the Runs list: its verdict and results as the Check screen
showed them, the highlighted row's whole note below the table (its notes column is cut).
Nothing to run again here: a check is started from the Check screen (k)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from gputui import fmt
from gputui.check.result import CheckResult
from gputui.check.verdict_text import TABLE_HEADER, verdict_line
from gputui.escape import for_widget
from gputui.tui.screens.check import detail_line, styled_rows
from gputui.tui.screens.once import DismissOnce
from gputui.tui.screens.terminal_size import TerminalSized


def check_report_line(results: list[CheckResult], duration_s: float, stopped: bool) -> Text:
    """The verdict with its counts, how long the check took, and whether it was stopped."""
    stopped_text = " (stopped early)" if stopped else ""
    return Text(f"{verdict_line(results)}{stopped_text} · took {fmt.duration(duration_s)}")


class CheckReportScreen(DismissOnce, TerminalSized, ModalScreen[None]):
    BINDINGS = [
        Binding("escape,enter", "dismiss(None)", "Close", id="close_check_report", priority=True),  # the table would take Enter
        Binding("q", "app.quit", "Quit", id="check_report_quit"),  # a modal screen hides the app's keys
    ]
    DEFAULT_CSS = """
    CheckReportScreen { align: center middle; }
    CheckReportScreen > Vertical { width: 96%; height: 90%; border: round $primary; background: $surface; }
    CheckReportScreen #check-report-verdict { height: auto; padding: 0 1; }
    CheckReportScreen DataTable { height: 1fr; }
    CheckReportScreen #check-report-detail { height: auto; max-height: 8; padding: 0 1; border-top: solid $primary; }
    CheckReportScreen #check-report-keys { color: $text-muted; padding: 0 1; }
    """

    def __init__(self, title: str, results: list[CheckResult], duration_s: float, stopped: bool) -> None:
        super().__init__()
        self.check_title = title
        self.results = results
        self.duration_s = duration_s
        self.stopped = stopped

    def compose(self) -> ComposeResult:
        with Vertical() as panel:
            panel.border_title = for_widget(f"Check {self.check_title}")  # a file's name: never read as markup
            yield Static(check_report_line(self.results, self.duration_s, self.stopped), id="check-report-verdict")
            yield DataTable(id="check-report-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="check-report-detail")  # the highlighted row's whole note, wrapped
            yield Static("↑↓: a row's notes below · Enter/Esc close · q quit · k on the dashboard checks again", id="check-report-keys")

    def on_mount(self) -> None:
        if self.app_exiting():
            return
        table = self.query_one(DataTable)
        table.add_columns(*TABLE_HEADER)
        table.add_rows(styled_rows(self.results))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if 0 <= event.cursor_row < len(self.results):
            self.query_one("#check-report-detail", Static).update(detail_line(self.results[event.cursor_row]))

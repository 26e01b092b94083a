"""The Check screen: ``gputui check`` inside the dashboard, its table filling in live.

The check runs in a thread worker (it blocks for minutes); its listener hands each
stage and result to the screen with ``call_from_thread``, so widgets are only touched
from the event loop.  Esc stops a running check (its child is stopped) and closes.
Once results are shown, Enter asks before the five-minute full check replaces them, and
the highlighted row's whole note shows below the table (its notes column is cut).
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from gputui.check.check_run import CheckListener, CheckReport, CheckRun
from gputui.check.result import CheckResult
from gputui.check.stage_context import CheckOptions, StageState
from gputui.check.verdict_text import TABLE_HEADER, table_rows, verdict_line
from gputui.escape import widget_text
from gputui.tui.compositor import SteadyScrollbars, crop_updates
from gputui.tui.screens.once import DismissOnce
from gputui.tui.screens.terminal_size import TerminalSized

CheckFactory = Callable[[CheckOptions, CheckListener], CheckRun]
STATUS_STYLE = {"ok": "green", "WARN": "yellow", "FAIL": "bold red", "skip": "dim", "info": "cyan"}
IDLE_HINT = "Enter: full check (about 5 minutes) · u: quick check (under a minute) · Esc: close"
# Once results are shown, Enter is what one presses on a row to read it: the full check
# then asks first instead of replacing the results with five minutes of work.
RESULTS_HINT = "↑↓: a row's notes below · Enter twice: full check (about 5 minutes) · u: quick check · Esc: close"
CONFIRM_FULL = "Start the full check (about 5 minutes)? Enter again to start · u: quick check instead · Esc: close"


def styled_rows(results: list[CheckResult]) -> list[list[Text]]:
    """The check table's rows, the status coloured, every cell a Text: a string cell
    would be read as markup, and a note names other people's processes and the GPU."""
    rows: list[list[Text]] = []
    for row in table_rows(results):
        rows.append([Text(row[0], style=STATUS_STYLE.get(row[0], "")), *(widget_text(Text(cell)) for cell in row[1:])])
    return rows


def detail_line(result: CheckResult) -> Text:
    """One result in full: where, which check, its status and the whole note."""
    status, where, name, _measured, _expected, note = table_rows([result])[0]
    line = Text.assemble((status, STATUS_STYLE.get(status, "")), f" {where} · {name}: ")
    line.append(note or "no notes")
    return widget_text(line)


class CheckTable(SteadyScrollbars, DataTable):
    """The results table: its scrollbar is not rewritten at each layout pass of the screen
    (each status line is one), only when the rows move it."""


class _ToScreen(CheckListener):
    def __init__(self, screen: CheckScreen) -> None:
        self.screen = screen

    def on_stage(self, stage: str, state: StageState) -> None:
        self.screen.app.call_from_thread(self.screen.stage_changed, stage, state)

    def on_result(self, result: CheckResult) -> None:
        self.screen.app.call_from_thread(self.screen.add_result, result)


class CheckScreen(DismissOnce, TerminalSized, ModalScreen[None]):
    BINDINGS = [
        Binding("enter", "start(False)", "Full check", id="check_full", priority=True),  # the table would take Enter
        Binding("u", "start(True)", "Quick check", id="check_quick"),
        Binding("escape", "close", "Stop and close", id="check_close"),
    ]
    DEFAULT_CSS = """
    CheckScreen { align: center middle; }
    CheckScreen > Vertical { width: 96%; height: 90%; border: round $primary; background: $surface; }
    CheckScreen #check-status { height: auto; padding: 0 1; }
    CheckScreen DataTable { height: 1fr; }
    CheckScreen #check-detail { height: auto; max-height: 6; padding: 0 1; border-top: solid $primary; }
    """

    def __init__(self, make_check: CheckFactory, *, busy_reason: Callable[[], str | None] = lambda: None) -> None:
        super().__init__()
        crop_updates(self)  # results coming in send the cells that changed
        self._make_check = make_check
        self._busy_reason = busy_reason
        self._check: CheckRun | None = None
        self.results: list[CheckResult] = []
        self.verdict: str | None = None
        self._full_asked = False  # Enter once after a check: the next Enter starts the full check
        self._verdict_text = ""  # the last check's verdict line, shown again after a question lapses
        self._status_text = IDLE_HINT  # what the status line shows

    def compose(self) -> ComposeResult:
        with Vertical() as panel:
            panel.border_title = "Check this machine"
            yield Static(IDLE_HINT, id="check-status")
            yield CheckTable(id="check-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="check-detail")  # the highlighted row's whole note: the column is cut

    def on_mount(self) -> None:
        if self.app_exiting():
            return
        self.query_one(DataTable).add_columns(*TABLE_HEADER)

    def _status(self, text: str) -> None:
        if text != self._status_text:  # each update is a layout pass and a repaint of the line
            self._status_text = text
            self.query_one("#check-status", Static).update(text)

    def action_start(self, quick: bool) -> None:
        if self._check is not None:
            self.notify("A check is running: Esc stops it.")
            return
        if not quick and self.results and not self._full_asked:
            self._full_asked = True
            self._status(CONFIRM_FULL)
            return
        self._full_asked = False
        busy = self._busy_reason()
        if busy:
            self.notify(busy, severity="warning")
            return
        self.results.clear()
        self.verdict = None
        self.query_one(DataTable).clear()
        self.query_one("#check-detail", Static).update("")
        self._check = self._make_check(CheckOptions(quick=quick), _ToScreen(self))
        self._status(f"{'Quick' if quick else 'Full'} check starting…")
        self.run_worker(self._run, thread=True, exit_on_error=False, name="check")

    def _run(self) -> None:
        check = self._check
        assert check is not None
        try:
            report = check.run()
        except Exception as exc:  # a bug in a stage must not take the dashboard down
            self.app.call_from_thread(self._status, f"The check failed: {exc}")
            report = None
        self.app.call_from_thread(self.finished, report)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if 0 <= event.cursor_row < len(self.results):
            self.query_one("#check-detail", Static).update(detail_line(self.results[event.cursor_row]))
        if self._full_asked:  # moved on to read the rows: the question lapses
            self._full_asked = False
            self._status(self._finished_status())

    def stage_changed(self, stage: str, state: StageState) -> None:
        if state == "start" and self.is_mounted:
            self._status(f"Running: {stage} · {len(self.results)} checks so far · Esc stops")

    def add_result(self, result: CheckResult) -> None:
        self.results.append(result)
        if not self.is_mounted:  # closed while the check was stopping
            return
        self.query_one(DataTable).add_row(*styled_rows([result])[0])

    def finished(self, report: CheckReport | None) -> None:
        self._check = None
        if report is None or not self.is_mounted:
            return
        self.verdict = report.summary.verdict or "?"
        self._verdict_text = verdict_line(report.results) + (" (stopped early)" if report.stopped else "")
        self._status(self._finished_status())

    def _finished_status(self) -> str:
        return " · ".join(part for part in (self._verdict_text, RESULTS_HINT) if part)

    def action_close(self) -> None:
        if self._check is not None:
            self._check.stop()
        self.dismiss(None)

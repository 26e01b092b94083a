"""A kept check in the dashboard (the Runs list's check report): a row's whole note, the
advice included, is shown wrapped below the table, not cut in its notes column."""

from __future__ import annotations

from textual.app import App
from textual.widgets import DataTable, Static

from gputui.check.result import FAIL, OK, PREFLIGHT, CheckResult
from gputui.tui.screens.check_report import CheckReportScreen
from tests.support.tui import run_async

ADVICE = (
    "Keep datasets on local NVMe (often /tmp, /scratch or an instance-store mount) or in RAM, "
    "and pack small files into large shards (WebDataset, TFRecord); the end of this note is far past 140 columns"
)
RESULTS = [
    CheckResult(id="host.shm", group=PREFLIGHT, name="/dev/shm size", status=OK, value=8192, unit="MiB", detail="/dev/shm"),
    CheckResult(
        id="host.disk_read",
        group=PREFLIGHT,
        name="Disk read speed",
        status=FAIL,
        value=110,
        unit="MB/s",
        expected=500.0,
        detail="best of 3 passes (97-110 MB/s) over 64 MiB read with O_DIRECT (no page cache) in 64 MiB blocks from /data (ext4)",
        cause="/data (ext4) reads at 110 MB/s at best: a network disk or a throttled cloud volume",
        advice=ADVICE,
    ),
]


def test_the_highlighted_row_s_whole_note_is_shown_below_the_table():
    async def scenario() -> str:
        app: App[None] = App()
        async with app.run_test(size=(120, 40)) as pilot:
            screen = CheckReportScreen("box 2026-11-26", list(RESULTS), 12.0, False)
            await app.push_screen(screen)
            await pilot.pause()
            screen.query_one(DataTable).move_cursor(row=1)
            await pilot.pause()
            return str(screen.query_one("#check-report-detail", Static).render())

    note = run_async(scenario())
    assert "FAIL host · Disk read speed" in note
    assert "reads at 110 MB/s at best" in note and "far past 140 columns" in note

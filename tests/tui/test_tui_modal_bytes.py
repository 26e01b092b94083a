"""What the dashboard sends while a view covers it (issue 11): the run summary or the
findings view left open over a running session must not stream full-screen repaints
(~20 KB per panel update at 140x40 in Textual's handling of screens beneath a modal).
The panels catch up in one repaint when the dashboard is back on top."""

from __future__ import annotations

import dataclasses

import pytest

from gputui.model import Sample
from gputui.record import events as ev
from gputui.record.events import make_event
from gputui.tui.screens.findings_screen import FindingsScreen
from gputui.tui.screens.summary_screen import SummaryScreen
from gputui.view.session_news import EventArrived, SampleArrived
from tests.support.dashboard import scripted_dashboard
from tests.support.terminal import Recorder, assert_same, composed
from tests.support.tui import (
    demo_preset,
    fixed_host,
    run_async,
    shown,
    wait_until,
)

SIZE = (140, 40)


@pytest.mark.parametrize("view", ["summary", "findings"])
def test_panel_updates_under_an_open_view_send_nothing_until_it_closes(tmp_path, view):
    preset = demo_preset()

    async def scenario():
        app = scripted_dashboard(preset, tmp_path)
        recorder = Recorder(app, *SIZE)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.state.run is not None and app.state.run.series.readings == 96, what="script played")
            await shown(pilot)
            state, run = app.state, app.state.run
            if view == "summary":
                app.show_summary(run, state.gpu_names())
                covering = SummaryScreen
            else:
                app.action_show_findings()
                covering = FindingsScreen
            await wait_until(pilot, lambda: isinstance(app.screen, covering), what=f"{view} open")
            await shown(pilot)
            recorder.take()

            sent = 0
            for i in range(12):  # what the redraw timer does while the run goes on
                t = 40.0 + i
                state.apply(run.ticket, [EventArrived(make_event(t, ev.OUTPUT, {"stream": "stdout", "text": f"line #{i}"}))])
                state.apply(
                    run.ticket,
                    [EventArrived(make_event(t, ev.THROUGHPUT, {"samples_per_sec": 2700.0 + 50 * i, "source": "gputui", "phase": "measure"}), 2800.0 + i)],
                )
                gpus = [dataclasses.replace(g.latest, util_gpu=40.0 + i, power_w=300.0 + 9 * i) for _, g in sorted(state.gpus.items())]
                host = dataclasses.replace(fixed_host(True), cpu_percent=float(10 + 5 * i))
                state.apply(run.ticket, [SampleArrived(Sample(t=t, gpus=gpus, host=host))])
                app.refresh_dashboard()
                await pilot.pause()
                sent += sum(len(data) for _, data in recorder.take())
            assert sent < 2048, f"{sent} bytes for 12 updates under the {view}"  # was ~20 KB each

            await pilot.press("escape")
            await wait_until(pilot, lambda: app.screen is app.dashboard, what=f"{view} closed")
            await shown(pilot)
            await pilot.pause()
            assert "line #11" in "\n".join(recorder.term.lines())  # what happened meanwhile is shown at once
            assert_same(recorder.term, composed(app, recorder.console), "after closing")

    run_async(scenario())

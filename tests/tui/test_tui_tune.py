"""The dashboard's "tune" action: the summary of an ended, input-bound run of the user's
own PyTorch command offers ``l``, which starts ``gputui tune`` on that command in a
process of its own and says its verdict when it ends; no other run offers it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gputui.presets.command_preset import command_preset
from gputui.tui.screens.summary_screen import SummaryScreen
from tests.support.dashboard import make_dashboard
from tests.support.tui import demo_preset, run_async, script_delivered, scripted_factory, shown, stop_the_run, wait_until

INPUT_BOUND = {
    "id": "input-1",
    "kind": "input_bound",
    "state": "open",
    "severity": "warning",
    "title": "Input-bound: the training loop waited for data in 85% of its time",
    "since": 2.0,
    "evidence": {"data_wait_pct": 85.0},
    "advice": ["Raise DataLoader(num_workers=...)"],
}
VERDICT = "16 workers: the cheapest setting within noise of the best"


def summary_of(tmp_path: Path, preset, findings: list[dict], started: list) -> tuple:
    """The dashboard over a scripted run of ``preset`` with ``findings``; ``start_tune``
    stands in for the process: it records what it was asked and runs a stand-in that
    says a verdict as gputui tune does."""

    def start_tune(argv, folder, stamp, *, env=None, cwd=None):
        started.append(argv)
        log, report = tmp_path / "tune.log", tmp_path / "tune.html"
        with open(log, "w") as out:
            process = subprocess.Popen([sys.executable, "-c", f"print('gputui tune: {VERDICT}')"], stdout=out)
        report.write_text("<html></html>")
        return process, log, report

    app = make_dashboard(
        {preset.name: preset}, session_factory=scripted_factory(findings=findings, samples=6), start_preset=preset.name, settings_file=tmp_path / "s.toml"
    )
    return app, start_tune


def test_an_input_bound_run_of_the_users_command_offers_tune_and_says_its_verdict(tmp_path, monkeypatch):
    preset = command_preset([sys.executable, "train.py", "--epochs", "90"], {})
    started: list = []
    app, fake = summary_of(tmp_path, preset, [INPUT_BOUND], started)
    monkeypatch.setattr("gputui.live.spawn.start_tune", fake)

    async def scenario():
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_until(pilot, lambda: script_delivered(app), what="the scripted run")
            await stop_the_run(pilot)  # a training job runs until stopped
            await wait_until(pilot, lambda: isinstance(app.screen, SummaryScreen), what="the summary")
            assert "l tune its data loading (gputui tune)" in await shown(pilot)
            await pilot.press("l")
            await wait_until(pilot, lambda: started, what="tune started")
            assert started == [[sys.executable, "train.py", "--epochs", "90"]]
            said = [n.message for n in app._notifications]
            assert any(m.startswith("gputui tune started (pid ") for m in said), said
            await wait_until(pilot, lambda: not app._tunes, timeout=20, what="the tune's end noticed")
            said = [n.message for n in app._notifications]
            assert any(m.startswith(f"gputui tune ended: {VERDICT}; report ") for m in said), said

    run_async(scenario())


@pytest.mark.parametrize("case", ["no finding", "gputui's own workload"])
def test_other_runs_do_not_offer_tune(tmp_path, case):
    preset = command_preset([sys.executable, "train.py"], {}) if case == "no finding" else demo_preset()
    app, _ = summary_of(tmp_path, preset, [] if case == "no finding" else [INPUT_BOUND], [])

    async def scenario():
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_until(pilot, lambda: script_delivered(app), what="the scripted run")
            await stop_the_run(pilot)  # a training job runs until stopped
            await wait_until(pilot, lambda: isinstance(app.screen, SummaryScreen), what="the summary")
            assert "tune" not in await shown(pilot)
            await pilot.press("l")
            await pilot.pause()
            assert isinstance(app.screen, SummaryScreen)  # not bound: the summary stays

    run_async(scenario())

"""Every shipped theme is readable: each text cell of the dashboard (idle and running),
the help, the findings, the editor and the run summary has at least WCAG AA contrast (4.5:1)
against its background, in truecolor and after reduction to 256 and 16 colours."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.tui.screens.editor import PresetEditorScreen
from gputui.tui.screens.findings_screen import FindingsScreen
from gputui.tui.screens.help import HelpScreen
from gputui.tui.screens.summary_screen import SummaryScreen
from gputui.tui.themes import load_themes
from tests.support.contrast import AA, contrast, low_contrast, report
from tests.support.dashboard import make_dashboard
from tests.support.snapshots import FINDING
from tests.support.tui import demo_preset, run_async, scripted_factory, shown, stop_the_run, wait_until


def shipped_themes() -> list[str]:
    """The built-in themes only (a folder that does not exist keeps the user's out)."""
    return sorted(load_themes(Path("/nonexistent/gputui-themes"))[0])


def test_contrast_measure_matches_wcag():
    assert contrast((255, 255, 255), (0, 0, 0)) == pytest.approx(21.0)
    assert contrast((118, 118, 118), (255, 255, 255)) == pytest.approx(4.54, abs=0.01)  # #767676: the AA grey
    assert contrast((255, 255, 255), (247, 248, 250)) < 1.1  # the light theme's old white-on-near-white


async def _views(app, pilot, theme: str) -> list[tuple[str, str]]:
    """(what, problems) for each view of one app, walked by keys."""
    problems: list[tuple[str, str]] = []

    async def check(what: str) -> None:
        text = await shown(pilot)
        text = await shown(pilot)
        failures = low_contrast(app)
        if failures:
            problems.append((what, report(failures, text)))

    preset = next(iter(app.presets.values()))
    await wait_until(pilot, lambda: app.state.header is not None, what="watching")
    await check("idle dashboard")
    await pilot.press("question_mark")
    await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
    await check("help")
    await pilot.press("escape")
    app.start_preset(preset.name)
    await wait_until(pilot, lambda: app.state.run is not None and app.state.run.series.readings == 96 and app.state.open_findings(), what="script played")
    await check("running dashboard")
    await pilot.press("f")
    await wait_until(pilot, lambda: isinstance(app.screen, FindingsScreen), what="findings")
    await check("findings")
    await pilot.press("escape")
    await pilot.press("n")
    await wait_until(pilot, lambda: isinstance(app.screen, PresetEditorScreen), what="editor")
    await check("editor")
    app.screen.dismiss()
    await wait_until(pilot, lambda: app.screen is app.dashboard, what="back to the dashboard")
    await stop_the_run(pilot)
    await wait_until(pilot, lambda: isinstance(app.screen, SummaryScreen), what="summary")
    await check("summary")
    return problems


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize("theme", shipped_themes())
def test_every_text_cell_meets_wcag_aa(theme, size, tmp_path):
    preset = demo_preset()

    async def scenario():
        app = make_dashboard(
            {preset.name: preset},
            session_factory=scripted_factory(findings=[FINDING]),
            theme=theme,
            clock=lambda: 1000.0,
            settings_file=tmp_path / "settings.toml",
            user_themes_dir=tmp_path / "no-themes",
        )
        async with app.run_test(size=size) as pilot:
            return await _views(app, pilot, theme)

    problems = run_async(scenario())
    assert not problems, f"{theme} at {size[0]}x{size[1]}: text under {AA}:1\n" + "\n\n".join(f"[{what}]\n{detail}" for what, detail in problems)

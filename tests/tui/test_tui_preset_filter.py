"""The preset list's filter: `/` opens a field above the list that narrows it; Esc
clears it and the whole list comes back."""

from __future__ import annotations

import dataclasses

from gputui.tui.widgets.presets import PresetDetails, PresetList
from tests.support.dashboard import make_dashboard
from tests.support.tui import demo_preset, run_async, scripted_factory, wait_until


def test_slash_filters_a_list_longer_than_the_screen_and_esc_clears_it(tmp_path):
    base = demo_preset()
    presets = {}
    for i in range(30):
        family = "bert" if i % 3 == 0 else "resnet"
        preset = dataclasses.replace(base, name=f"{family}-{i:02d}", description=f"{family} number {i}")
        presets[preset.name] = preset

    async def scenario():
        app = make_dashboard(presets, session_factory=scripted_factory(), settings_file=tmp_path / "settings.toml", user_themes_dir=tmp_path / "no-themes")
        async with app.run_test(size=(80, 24)) as pilot:
            plist = app.dashboard.query_one(PresetList)
            await wait_until(pilot, lambda: plist.region.height > 0, what="the list")
            assert plist.option_count == 30 and plist.option_count > plist.region.height  # longer than its room
            field = app.dashboard.query_one("#preset-filter")
            assert not field.display
            await pilot.press("slash")
            assert field.display and app.focused is field
            await pilot.press(*"bert-1")
            await pilot.pause()
            names = [plist.get_option_at_index(i).id for i in range(plist.option_count)]
            assert names == ["bert-12", "bert-15", "bert-18"]
            assert "bert number 12" in str(app.dashboard.query_one(PresetDetails).render())
            await pilot.press("enter")  # to the list, the filter kept
            assert app.focused is plist and field.display and plist.option_count == 3
            await pilot.press("down")
            assert plist.selected_preset.name == "bert-15"
            await pilot.press("slash", "escape")  # back in the field: Esc clears it
            await pilot.pause()
            assert not field.display and field.value == "" and plist.option_count == 30
            assert app.focused is plist and plist.selected_preset.name == "bert-15"

    run_async(scenario())

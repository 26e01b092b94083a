"""The palette's Screenshot command works on a server without ~/Downloads: the SVG goes
to the current directory or $GPUTUI_SCREENSHOT_DIR, and a notification says where."""

from __future__ import annotations

from textual.command import CommandPalette

from tests.support.dashboard import make_dashboard
from tests.support.tui import demo_preset, run_async, scripted_factory, wait_until


def shoot_from_the_palette(tmp_path, monkeypatch) -> tuple[list[str], object]:
    monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)  # and the test's home (tests/conftest.py) has no Downloads folder
    preset = demo_preset()
    app = make_dashboard({preset.name: preset}, session_factory=scripted_factory(), settings_file=tmp_path / "s.toml")

    async def scenario():
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until(pilot, lambda: app.state.header is not None, what="watching")
            await pilot.press("ctrl+p")
            await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette), what="palette")
            await pilot.press(*"screenshot")
            await pilot.pause(0.3)
            await pilot.press("enter")
            await wait_until(pilot, lambda: any("Screenshot" == n.title for n in app._notifications), what="note")
            return [n.message for n in app._notifications if n.title == "Screenshot"]

    return run_async(scenario()), app


def test_the_palette_screenshot_lands_in_the_current_directory(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    notes, _app = shoot_from_the_palette(tmp_path, monkeypatch)
    shots = list(work.glob("gputui-*.svg"))
    assert len(shots) == 1 and shots[0].read_text().startswith("<svg")
    assert notes == [f"screenshot saved to {shots[0]}"]


def test_gputui_screenshot_dir_chooses_the_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "shots"
    monkeypatch.setenv("GPUTUI_SCREENSHOT_DIR", str(folder))
    notes, _app = shoot_from_the_palette(tmp_path, monkeypatch)
    shots = list(folder.glob("gputui-*.svg"))
    assert len(shots) == 1
    assert notes == [f"screenshot saved to {shots[0]}"]


def test_a_folder_that_cannot_be_written_says_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("GPUTUI_SCREENSHOT_DIR", str(blocker / "shots"))  # under a file: cannot exist
    notes, _app = shoot_from_the_palette(tmp_path, monkeypatch)
    assert len(notes) == 1 and notes[0].startswith(f"screenshot not saved: {blocker / 'shots'}: ")


def test_the_screenshot_tool_refuses_a_folder_it_cannot_make_in_one_line(capsys):
    from gputui.tui.screenshot import main

    assert main(["/proc/no-such-folder/shot.svg", "--after", "0"]) == 2  # /proc takes no new folders, root or not
    err = capsys.readouterr().err.strip()
    assert err.startswith("gputui: error: /proc/no-such-folder/shot.svg: cannot write the screenshot there") and "\n" not in err

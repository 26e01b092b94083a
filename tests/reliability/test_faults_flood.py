"""The editor under a flood of raw keys (issue 26, class 7): a paste without
bracketed-paste mode arrives as one key event per character.  Every character must
arrive, in order, in work that grows with the text rather than with its square, and
SIGTERM must end the app in the middle of it.  The figures (100 KB: settle and peak
memory) live in benchmarks/editor_flood.py; these tests check the behaviour."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from textual import events
from textual.widgets import Input, Static

from gputui.tui.screens.editor import FIELDS, PresetEditorScreen
from gputui.tui.typing_bursts import TypingBursts
from tests.support.dashboard import app_for
from tests.support.editor import open_editor, setup
from tests.support.process import REPO
from tests.support.tui import run_async, wait_until

TEXT = "the quick brown fox jumps over the lazy dog "


def typed(size: int) -> str:
    return (TEXT * (size // len(TEXT) + 1))[:size]


def flood(app, keys: str | list[str]) -> None:
    """Queue one raw key per character (or per key name) at once, as the terminal delivers them."""
    for name in keys:
        key = events.Key(name, name if len(name) == 1 else None)
        key.set_sender(app)
        app._driver.send_message(key)


async def open_description(pilot, app) -> tuple[PresetEditorScreen, Input]:
    editor = await open_editor(pilot, app, "smoke")
    field = editor.query_one("#field-description", Input)
    field.focus()
    await pilot.pause()
    return editor, field


def test_20_kb_of_raw_keys_reach_the_description_whole_in_a_few_inserts(tmp_path, monkeypatch):
    _user, presets = setup(tmp_path)
    text = typed(20_000)
    inserts = []
    insert = Input.insert_text_at_cursor
    monkeypatch.setattr(Input, "insert_text_at_cursor", lambda self, text: inserts.append(len(text)) or insert(self, text))

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            editor, field = await open_description(pilot, app)
            before = field.value
            flood(app, text)
            await wait_until(pilot, lambda: len(field.value) >= len(before) + len(text), timeout=120, what="every key")
            assert field.value == before + text
            status = editor.query_one("#editor-status", Static)
            await wait_until(pilot, lambda: "✓ valid" in str(status.render()), what="checked")
            # Keys that waited together went in (and were checked) as one: not 20,000 times.
            assert sum(inserts) == len(text) and len(inserts) < len(text) / 20

    run_async(scenario())


def flooded_fields(tmp_path: Path, keys: list[str]) -> tuple[str, str]:
    """The description and command fields after ``keys`` arrive in one flood."""
    _user, presets = setup(tmp_path)

    async def scenario() -> tuple[str, str]:
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            editor, field = await open_description(pilot, app)
            flood(app, keys)
            for _ in range(10):
                await pilot.pause(0.05)
            return field.value, editor.query_one("#field-command", Input).value

    return run_async(scenario())


@pytest.mark.parametrize(
    "keys",
    [[*"abc", "backspace", "d", "home", *"XY", "end", *"!!"], [*"abc", "tab", *"python3 x.py"], [*"ab", "ctrl+a", *"cd"]],
    ids=["editing-keys", "tab", "select-all"],
)
def test_a_flood_lands_exactly_as_key_by_key_handling_would(tmp_path, monkeypatch, keys):
    """Keys gathered into one insert never jump over the keys between them: the fields
    end as Textual's own one-key-at-a-time handling leaves them."""
    gathered = flooded_fields(tmp_path / "gathered", keys)
    monkeypatch.setattr(TypingBursts, "_joins_burst", lambda self, key: False)
    assert flooded_fields(tmp_path / "one-by-one", keys) == gathered


def test_sigterm_in_the_middle_of_a_key_flood_ends_the_dashboard_with_143(tmp_path):
    """A real terminal: the editor open, raw keys written for 2 s, then SIGTERM while
    they still pour in.  Before, the app had queued them all and did not exit in 60 s."""
    out = tmp_path / "flood.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/editor_flood.py", "--kb", "20", "--sigterm-at", "2", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    result = json.loads(out.read_text())
    assert result["sigterm_exit_s"] is not None, done.stdout  # None: still running 60 s on, killed
    assert result["exit_code"] == 143, done.stdout


# 200 characters for each text field of the form, workload rows first: a command hides them.
PASTES = {
    "name": typed(200).replace(" ", "-"),
    "description": (TEXT + "?! 'quoted' \"too\" a=b/c.d,e ")[:40] * 5,
    "batch_size": "1234567890" * 20,
    "steps": "9876543210" * 20,
    "workers": "1029384756" * 20,
    "env": "KEY_ONE=alpha B=2 C='x y' " * 8,
    "command": 'python3 -c "print(1)" --flag=value ' * 6 + "--tail-end-of-line-x",
}


def paste_raw(app, text: str) -> None:
    """Queue one raw key per character at once, named as the terminal's parser names them
    (space, question_mark, ...): a paste without bracketed-paste mode."""
    from textual.keys import _character_to_key

    for character in text:
        key = events.Key(_character_to_key(character), character)
        key.set_sender(app)
        app._driver.send_message(key)


def test_form_fields_are_text_fields_the_bursts_reach():
    assert {key for key, _label, kind in FIELDS if kind != "select"} | {"name"} == set(PASTES)


@pytest.mark.parametrize("attempt", range(10))
def test_200_characters_pasted_as_raw_keys_land_exactly_in_every_text_field(tmp_path, attempt):
    """Issue 25, item 1: a burst of keys (tmux send-keys without delay, a laggy SSH link)
    lost or garbled characters in the name and the description."""
    _user, presets = setup(tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            editor = await open_editor(pilot, app, "smoke")
            for key, text in PASTES.items():
                field = editor.query_one(f"#field-{key}", Input)
                field.value = ""
                field.focus()
                await pilot.pause()
                paste_raw(app, text)
                await wait_until(pilot, lambda field=field, text=text: len(field.value) >= len(text), timeout=10, what=key)
                await pilot.pause(0.05)
                assert field.value == text, key

    run_async(scenario())

"""Issue 26, classes 1 and 5: the files a user points gputui at (presets, settings.toml,
themes) are read through one bounded reader (gputui.text_files): a device that never
ends, a FIFO that never opens, a file too big, TOML nested too deep or holding a number
past Python's int-string limit is one line naming the file (exit 2 where the file
matters), and the dashboard starts with its defaults and says which file it ignored."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gputui.errors import UserError
from gputui.text_files import MAX_TEXT_BYTES, load_toml, read_text_file
from gputui.tui.themes import load_themes, parse_theme
from gputui.tui.user_settings import load_settings
from tests.support.dashboard import make_dashboard
from tests.support.process import run_gputui
from tests.support.tui import demo_preset, run_async, scripted_factory

DEEP = "x = " + "[" * 100_000 + "]" * 100_000 + "\n"
LONG_NUMBER = "x = " + "9" * 5000 + "\n"


def test_the_reader_refuses_what_is_not_a_small_regular_file(tmp_path):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    began = time.monotonic()
    with pytest.raises(UserError, match=r"fifo.toml: a FIFO, not a file; expected a presets file"):
        read_text_file(fifo, "presets file")  # refused, not blocked waiting for a writer
    assert time.monotonic() - began < 5
    with pytest.raises(UserError, match="a device, not a file"):
        read_text_file(Path("/dev/zero"))
    with pytest.raises(UserError, match="a directory, not a file"):
        read_text_file(tmp_path)
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (MAX_TEXT_BYTES + 1))
    with pytest.raises(UserError, match="larger than 4 MiB"):
        read_text_file(big)
    with pytest.raises(FileNotFoundError):
        read_text_file(tmp_path / "absent.toml")


@pytest.mark.parametrize(
    ("text", "expected"), [(DEEP, "nested too deeply"), (LONG_NUMBER, "a number too long to read"), ("x = = 1\n", ":1:5: TOML syntax error")]
)
def test_toml_python_cannot_take_is_one_line(tmp_path, text, expected):
    path = tmp_path / "f.toml"
    path.write_text(text)
    with pytest.raises(UserError) as caught:
        load_toml(path)
    assert expected in str(caught.value) and str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["zero", "fifo", "deep", "long-number"])
def test_a_presets_file_gputui_cannot_use_is_one_line_and_exit_2(tmp_path, name):
    path = {"zero": "/dev/zero"}.get(name, str(tmp_path / f"{name}.toml"))
    if name == "fifo":
        os.mkfifo(path)
    elif name == "deep":
        open(path, "w").write(DEEP.replace("x = ", "[presets.a]\nx = "))
    elif name == "long-number":
        open(path, "w").write("[presets.a]\ncommand = ['true']\nbatch_size = " + "9" * 5000 + "\n")
    done = run_gputui(["presets", "validate", path], tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gputui: error: {path}") and "Traceback" not in done.stderr


@pytest.mark.parametrize("text", [DEEP, LONG_NUMBER, "theme = 'x'\n" + "#" * (MAX_TEXT_BYTES + 1)])
def test_a_settings_file_it_cannot_use_leaves_the_defaults_and_says_why(tmp_path, text):
    path = tmp_path / "settings.toml"
    path.write_text(text)
    settings, problem = load_settings(path)
    assert settings.theme is None and problem.startswith(str(path)) and problem.endswith("ignored, using the defaults")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (DEEP.replace("x = ", "primary = "), "nested too deeply"),
        ('primary = "not-a-colour"\n', "primary: expected a colour string"),
        ('primary = "#4EA1FF"\nluminosity_spread = ' + "9" * 5000 + "\n", "a number too long to read"),
        ('primary = "#4EA1FF"\ntext_alpha = inf\n', "text_alpha: expected a number from 0 to 1"),
    ],
)
def test_a_broken_user_theme_costs_only_that_theme(tmp_path, text, expected):
    folder = tmp_path / "themes"
    folder.mkdir()
    (folder / "mine.toml").write_text(text)
    with pytest.raises(UserError, match=expected):
        parse_theme(folder / "mine.toml")
    themes, problems = load_themes(folder)
    assert "mine" not in themes and len(problems) == 1 and expected in problems[0]


def test_the_dashboard_starts_on_a_broken_settings_file_and_theme_and_says_which(tmp_path):
    settings = tmp_path / "settings.toml"
    settings.write_text(DEEP)
    themes = tmp_path / "themes"
    themes.mkdir()
    (themes / "bad.toml").write_text('primary = "not-a-colour"\n')
    preset = demo_preset()
    app = make_dashboard({preset.name: preset}, session_factory=scripted_factory(), settings_file=settings, user_themes_dir=themes)
    notes: list[str] = []

    async def scenario():
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause(0.2)
            notes.extend(str(n.message) for n in app._notifications)
            await pilot.press("q")

    run_async(scenario())
    assert any(str(settings) in n and "nested too deeply" in n for n in notes), notes
    assert any("bad.toml" in n and "primary" in n for n in notes), notes
    assert settings.read_text() == DEEP  # never rewritten


def test_a_fifo_named_as_a_recording_or_kept_in_the_history_is_refused_not_waited_on(tmp_path):
    from gputui.record.recording import read_recording

    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    began = time.monotonic()
    with pytest.raises(UserError, match="a FIFO, not a file; expected a recording"):
        read_recording(fifo)
    done = run_gputui(["report", str(fifo)], tmp_path, timeout=60)
    assert done.returncode == 2 and "a FIFO, not a file" in done.stderr
    history = tmp_path / "state" / "gputui" / "runs"
    history.mkdir(parents=True)
    os.mkfifo(history / "2026-11-26T00-00-00-x.jsonl")
    env_home = {"XDG_STATE_HOME": str(tmp_path / "state")}
    listed = run_gputui_env(["runs"], tmp_path, env_home)
    assert listed.returncode == 0 and "no runs kept" in listed.stdout  # not a file: not a kept run, and not waited on
    assert time.monotonic() - began < 60


def run_gputui_env(args, tmp_path, extra):
    import subprocess
    import sys

    from tests.support.process import gputui_env

    return subprocess.run(
        [sys.executable, "-m", "gputui", *args], cwd=tmp_path, env={**gputui_env(tmp_path), **extra}, capture_output=True, text=True, timeout=60
    )

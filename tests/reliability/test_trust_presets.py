"""Trust in presets files (issue 15, points 1 and 4): an edit is never lost and a file
never damaged (odd editors, parallel writers, a config home that is a file), and an
untrusted ``./presets.toml`` can neither hide that it overrides a built-in nor crash
gputui (deep nesting, symlink loops).  Every case runs gputui as a user would."""

from __future__ import annotations

import io
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gputui.errors import UserError
from gputui.presets.preset import load_file, load_presets
from gputui.session.progress import ProgressPrinter
from tests.support.process import gputui_env, run_gputui
from tests.support.records import make_header


def user_file(tmp_path: Path) -> Path:
    return tmp_path / "xdg" / "gputui" / "presets.toml"


def editor(tmp_path: Path, body: str) -> str:
    """$EDITOR: a Python script whose ``body`` acts on ``path`` (the temp file)."""
    script = tmp_path / "editor.py"
    script.write_text(f"import os, sys\npath = sys.argv[1]\n{body}\n")
    return f"{sys.executable} {script}"


def run_with_editor(args: list[str], tmp_path: Path, editor_command: str) -> subprocess.CompletedProcess:
    env = gputui_env(tmp_path)
    env["EDITOR"] = editor_command
    return subprocess.run([sys.executable, "-m", "gputui", *args], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in result.stderr, result.stderr
    return [line for line in result.stderr.splitlines() if line.startswith("gputui: error:")]


@pytest.fixture
def mine(tmp_path) -> bytes:
    """A user presets file holding preset 'mine'; its bytes."""
    assert run_gputui(["presets", "new", "mine", "--from", "smoke"], tmp_path).returncode == 0
    return user_file(tmp_path).read_bytes()


# --- Point 1: edits lost or files damaged ----------------------------------------------


def test_an_editor_that_saves_latin1_gets_one_line_and_the_text_kept_in_an_edited_file(tmp_path, mine):
    latin1 = "# caf\u00e9\n".encode("latin-1")
    body = f"data = open(path, 'rb').read()\nopen(path, 'wb').write(data + {latin1!r})"
    result = run_with_editor(["presets", "edit", "mine"], tmp_path, editor(tmp_path, body))
    assert result.returncode == 2
    errors = error_lines(result)
    kept = user_file(tmp_path).with_name("presets.toml.edited")
    assert len(errors) == 1 and "not UTF-8" in errors[0] and str(kept) in errors[0], result.stderr
    assert kept.read_bytes().endswith(latin1)  # the edit, byte for byte
    assert user_file(tmp_path).read_bytes() == mine


def test_an_editor_that_deletes_its_temp_file_gets_one_line(tmp_path, mine):
    result = run_with_editor(["presets", "edit", "mine"], tmp_path, editor(tmp_path, "os.unlink(path)"))
    assert result.returncode == 2
    errors = error_lines(result)
    assert len(errors) == 1 and "is gone" in errors[0], result.stderr
    assert user_file(tmp_path).read_bytes() == mine


@pytest.mark.parametrize(
    "body",
    [
        "open(path, 'w').close()",  # emptied
        "text = open(path).read()\nopen(path, 'w').write(text.replace('[presets.mine]', '[presets.other]'))",  # dropped
    ],
    ids=["emptied", "preset-dropped"],
)
def test_an_edit_that_drops_the_preset_being_edited_is_refused(tmp_path, mine, body):
    result = run_with_editor(["presets", "edit", "mine"], tmp_path, editor(tmp_path, body))
    assert result.returncode == 2
    errors = error_lines(result)
    assert len(errors) == 1 and "removes preset 'mine'" in errors[0], result.stderr
    assert user_file(tmp_path).read_bytes() == mine


def test_twenty_parallel_presets_new_save_every_success(tmp_path):
    env = gputui_env(tmp_path)
    names = [f"p{i}" for i in range(20)]
    with ThreadPoolExecutor(len(names)) as pool:
        results = list(
            pool.map(
                lambda name: subprocess.run(
                    [sys.executable, "-m", "gputui", "presets", "new", name], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
                ),
                names,
            )
        )
    saved = load_file(user_file(tmp_path))
    added = [name for name, result in zip(names, results) if result.returncode == 0]
    assert added == names, [r.stderr for r in results if r.returncode != 0]
    assert sorted(saved) == sorted(names)


@pytest.mark.parametrize("args", [["presets", "new", "x"], ["presets", "edit", "smoke"], ["presets", "rm", "x"]])
def test_xdg_config_home_pointing_at_a_file_gives_one_line(tmp_path, args):
    not_a_folder = tmp_path / "xdg"
    not_a_folder.write_text("oops\n")
    result = run_with_editor(args, tmp_path, "true")
    assert result.returncode == 2
    errors = error_lines(result)
    assert len(errors) == 1 and "not a directory" in errors[0] and "XDG_CONFIG_HOME" in errors[0], result.stderr
    assert not_a_folder.read_text() == "oops\n"


# --- Point 4: an untrusted ./presets.toml -------------------------------------------------

OVERRIDE = '[presets.smoke]\ndescription = "not what you think"\ncommand = ["true"]\n'


def test_presets_list_shows_which_file_overrides_a_builtin(tmp_path):
    (tmp_path / "presets.toml").write_text(OVERRIDE + '[presets.extra]\ncommand = ["true"]\n')
    result = run_gputui(["presets", "list"], tmp_path)
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert f"[from {tmp_path / 'presets.toml'}, overrides the built-in]" in lines["smoke"]
    assert "overrides" not in lines["extra"]  # a new name hides nothing
    assert "overrides" not in lines["tf-smoke"]


def test_the_progress_line_names_the_file_of_an_overriding_preset(tmp_path):
    (tmp_path / "presets.toml").write_text(OVERRIDE)
    preset = load_presets(cwd=tmp_path)["smoke"]
    stream = io.StringIO()
    ProgressPrinter(None, stream).on_header(make_header({"gpus": [], "preset": preset.describe().to_dict(), "command": preset.argv()}))
    assert f"gputui: running true (preset 'smoke' from {tmp_path / 'presets.toml'}, which overrides the built-in)" in stream.getvalue().splitlines()
    builtin = load_presets(cwd=tmp_path / "elsewhere")["smoke"]
    stream = io.StringIO()
    ProgressPrinter(None, stream).on_header(make_header({"gpus": [], "preset": builtin.describe().to_dict(), "command": builtin.argv()}))
    assert "overrides" not in stream.getvalue()


def test_a_headless_run_of_an_overriding_preset_says_so(tmp_path):
    (tmp_path / "presets.toml").write_text(OVERRIDE)
    result = run_gputui(["--preset", "smoke", "--record", "run.jsonl", "--headless", "--no-history"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"(preset 'smoke' from {tmp_path / 'presets.toml'}, which overrides the built-in)" in result.stderr


def _deep_arrays(path: Path) -> None:
    path.write_text("[presets.x]\ncommand = " + "[" * 5000 + "]" * 5000 + "\n")


def _deep_tables(path: Path) -> None:
    path.write_text("[presets.x]\nenv = " + "{a=" * 5000 + "1" + "}" * 5000 + "\n")


def _self_loop(path: Path) -> None:
    path.symlink_to(path.name)


def _two_link_loop(path: Path) -> None:
    path.symlink_to("other.toml")
    path.with_name("other.toml").symlink_to(path.name)


BAD_LOCAL_FILES = {"deep-arrays": _deep_arrays, "deep-tables": _deep_tables, "self-loop": _self_loop, "two-link-loop": _two_link_loop}
COMMANDS = [
    ["presets", "list"],
    ["presets", "show", "smoke"],
    ["presets", "path"],
    ["presets", "validate"],
    ["presets", "new", "x"],
    ["presets", "edit", "smoke"],
    ["presets", "rm", "x"],
    ["--preset", "smoke", "--record", "run.jsonl", "--headless", "--no-history"],
]


@pytest.mark.parametrize("make", BAD_LOCAL_FILES.values(), ids=BAD_LOCAL_FILES.keys())
def test_a_malformed_or_looping_local_file_gives_one_line_naming_it_for_every_command(tmp_path, make):
    local = tmp_path / "presets.toml"
    make(local)
    with pytest.raises(UserError, match=f"^{local}: "):  # what the dashboard and check load through
        load_presets(cwd=tmp_path)
    for args in COMMANDS:
        result = run_with_editor(args, tmp_path, "true")
        assert result.returncode == 2, (args, result.stderr)
        errors = error_lines(result)
        assert len(errors) == 1 and errors[0].startswith(f"gputui: error: {local}: "), (args, result.stderr)
        assert len(result.stderr.splitlines()) == 1, (args, result.stderr)
    assert not (tmp_path / "run.jsonl").exists()

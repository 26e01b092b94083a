"""Editing presets files: only changed keys are written (comments survive), nothing
invalid is written, a crash mid-save leaves the old file, a change on disk is caught;
and the CLI's ``presets validate|new|edit|rm|path``."""

from __future__ import annotations

import difflib
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.errors import UserError
from gputui.presets.preset import load_file
from gputui.presets.store import ConflictError, PresetFile
from tests.support.process import REPO, gputui_env, run_gputui

COMMENTED = """\
# My presets: hand-written, commented, oddly formatted.

[presets.quick]   # the one I run every morning
description = "quick check"      # shown in lists
framework   = "smoke"
batch_size  = 64    # small on purpose
# steps is low: this is a smoke test
steps       = 10
env = { A = "1" }   # inline table

# --- a command preset ---
[presets.train]
command = [ "python", "train.py" ]   # not a shell string
batch_size_hint = 32

[presets.train.env]
# the variables
CUDA_LAUNCH_BLOCKING = "0"   # keep async
"""


def comments(text: str) -> list[str]:
    return [line[line.index("#") :] for line in text.splitlines() if "#" in line]


@pytest.fixture
def commented(tmp_path) -> Path:
    path = tmp_path / "presets.toml"
    path.write_text(COMMENTED)
    return path


def one_line_diff(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


@pytest.mark.parametrize(
    "name,key,value,expected",
    [
        ("quick", "batch_size", 128, ("-batch_size  = 64    # small on purpose", "+batch_size  = 128    # small on purpose")),
        ("quick", "steps", 11, ("-steps       = 10", "+steps       = 11")),
        ("train", "batch_size_hint", 16, ("-batch_size_hint = 32", "+batch_size_hint = 16")),
    ],
)
def test_editing_one_key_changes_that_line_only_and_keeps_every_comment(commented, name, key, value, expected):
    store = PresetFile.load(commented)
    values = store.table(name)
    values[key] = value
    store.set_preset(name, values)
    store.save()
    after = commented.read_text()
    changed = one_line_diff(COMMENTED, after)
    assert changed == list(expected), changed
    assert comments(after) == comments(COMMENTED)
    assert getattr(load_file(commented)[name], key) == value
    assert (commented.parent / "presets.toml.bak").read_text() == COMMENTED  # the previous version


def test_nested_tables_and_new_presets_keep_the_rest_of_the_file(commented):
    store = PresetFile.load(commented)
    train = store.table("train")
    train["env"]["CUDA_LAUNCH_BLOCKING"] = "1"
    store.set_preset("train", train)
    store.set_preset("extra", {"framework": "smoke", "env": {"B": "2"}})
    store.save()
    after = commented.read_text()
    assert one_line_diff(COMMENTED, after)[:2] == ['-CUDA_LAUNCH_BLOCKING = "0"   # keep async', '+CUDA_LAUNCH_BLOCKING = "1"   # keep async']
    assert after.startswith(COMMENTED.replace('"0"   # keep', '"1"   # keep'))  # the new preset is appended
    assert load_file(commented)["extra"].env == {"B": "2"}
    store = PresetFile.load(commented)
    store.remove_preset("extra")
    store.save()
    assert commented.read_text().rstrip() == COMMENTED.replace('"0"   # keep', '"1"   # keep').rstrip()


def test_invalid_content_is_never_written(commented):
    store = PresetFile.load(commented)
    values = store.table("quick")
    values["batch_size"] = 0
    store.set_preset("quick", values)
    with pytest.raises(UserError, match=r"\[presets\.quick\]\.batch_size: expected a whole number"):
        store.save()
    with pytest.raises(UserError, match=r"\[presets\.quick\]\.stepz: unknown key"):
        PresetFile.load(commented).save(COMMENTED.replace("steps ", "stepz "))
    assert commented.read_text() == COMMENTED
    assert not (commented.parent / "presets.toml.bak").exists()


def test_a_change_on_disk_since_loading_is_detected(commented):
    store = PresetFile.load(commented)
    values = store.table("quick")
    values["steps"] = 12
    store.set_preset("quick", values)
    elsewhere = COMMENTED.replace("quick check", "changed elsewhere")
    commented.write_text(elsewhere)
    with pytest.raises(ConflictError, match="changed on disk since it was loaded"):
        store.save()
    assert commented.read_text() == elsewhere
    store.save(force=True)  # the user chose to overwrite
    assert load_file(commented)["quick"].steps == 12


KILL_BEFORE_REPLACE = """
import os, signal, sys
from pathlib import Path
from gputui.presets.store import PresetFile

store = PresetFile.load(Path(sys.argv[1]))
values = store.table("quick")
values["batch_size"] = 999
store.set_preset("quick", values)
real_replace = os.replace

def die_on_replace(src, dst):
    if str(dst) == sys.argv[1]:  # the new text is written and fsynced: die before it lands
        os.kill(os.getpid(), signal.SIGKILL)
    real_replace(src, dst)

os.replace = die_on_replace
store.save()
"""


def test_a_writer_killed_between_write_and_replace_leaves_the_file_intact(commented):
    before = commented.read_bytes()
    result = subprocess.run(
        [sys.executable, "-c", KILL_BEFORE_REPLACE, str(commented)], cwd=REPO, env=gputui_env(commented.parent), capture_output=True, timeout=60
    )
    assert result.returncode == -9, result.stderr
    assert commented.read_bytes() == before
    leftovers = [p.name for p in commented.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers, "the killed writer had written its temp file"  # and it never replaced the file


# --- The CLI -----------------------------------------------------------------------------


def user_file(tmp_path: Path) -> Path:
    return tmp_path / "xdg" / "gputui" / "presets.toml"


def editor_script(tmp_path: Path, body: str) -> str:
    script = tmp_path / "editor.py"
    script.write_text(f"import sys\npath = sys.argv[1]\ntext = open(path).read()\n{body}\nopen(path, 'w').write(text)\n")
    return f"{sys.executable} {script}"


def run_with_editor(args, tmp_path, editor: str):
    env = gputui_env(tmp_path)
    env["EDITOR"] = editor
    return subprocess.run([sys.executable, "-m", "gputui", *args], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def test_cli_new_path_validate_rm(tmp_path):
    result = run_gputui(["presets", "new", "mine", "--from", "smoke"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert load_file(user_file(tmp_path))["mine"].batch_size == 256
    result = run_gputui(["presets", "new", "blank"], tmp_path)
    assert result.returncode == 0 and load_file(user_file(tmp_path))["blank"].framework == "smoke"
    result = run_gputui(["presets", "new", "mine"], tmp_path)
    assert result.returncode == 2 and "exists already" in result.stderr and len(result.stderr.splitlines()) == 1

    result = run_gputui(["presets", "path"], tmp_path)
    assert result.returncode == 0
    assert f"{user_file(tmp_path)}  (your presets file; exists)" in result.stdout
    assert f"{tmp_path / 'presets.toml'}  (this directory; absent)" in result.stdout
    assert any(line.split() == ["mine", str(user_file(tmp_path))] for line in result.stdout.splitlines())

    assert run_gputui(["presets", "validate"], tmp_path).returncode == 0
    bad = tmp_path / "bad.toml"
    bad.write_text('[presets.x]\nframework = "smoke"\nsteps = -1\n')
    result = run_gputui(["presets", "validate", str(bad)], tmp_path)
    assert result.returncode == 2 and "[presets.x].steps: expected" in result.stderr

    result = run_gputui(["presets", "rm", "smoke"], tmp_path)
    assert result.returncode == 2 and "built-in" in result.stderr and "read-only" in result.stderr
    result = run_gputui(["presets", "rm", "mine"], tmp_path)
    assert result.returncode == 0 and "mine" not in load_file(user_file(tmp_path))


@pytest.mark.parametrize(
    "body,error",
    [
        ("text = text.replace('steps = 40', 'stepz = 40')", r"[presets.mine].stepz: unknown key"),
        ("text = text.replace('steps = 40', 'steps = ')", "TOML syntax error"),
    ],
)
def test_cli_edit_to_something_invalid_leaves_the_file_byte_identical(tmp_path, body, error):
    assert run_gputui(["presets", "new", "mine", "--from", "smoke"], tmp_path).returncode == 0
    before = user_file(tmp_path).read_bytes()
    result = run_with_editor(["presets", "edit", "mine"], tmp_path, editor_script(tmp_path, body))
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("gputui: error:")]
    assert len(errors) == 1 and error in errors[0], result.stderr
    assert "left as it was" in result.stderr
    assert user_file(tmp_path).read_bytes() == before


def test_cli_edit_saves_a_valid_edit_and_copies_a_builtin_first(tmp_path):
    editor = editor_script(tmp_path, "text = text.replace('batch_size = 256', 'batch_size = 7')")
    result = run_with_editor(["presets", "edit", "smoke"], tmp_path, editor)
    assert result.returncode == 0, result.stderr
    assert "built-in (read-only)" in result.stderr
    assert load_file(user_file(tmp_path))["smoke"].batch_size == 7
    assert "batch_size = 256" in (REPO / "presets.toml").read_text()  # the built-in file is untouched
    result = run_with_editor(["presets", "edit", "smoke"], tmp_path, "true")  # no change
    assert result.returncode == 0 and "no changes" in result.stdout


NO_FINAL_NEWLINE = '[presets.a]\ndescription = "a"\nframework = "smoke"\n\n[presets.b]\ndescription = "b"\nframework = "smoke"'


@pytest.mark.parametrize(
    "before,edit",
    [
        ("", lambda store: store.set_preset("new", {"description": "n", "framework": "smoke"})),
        (NO_FINAL_NEWLINE, lambda store: store.set_preset("b", {"description": "b2", "framework": "smoke"})),
        (NO_FINAL_NEWLINE + "\n", lambda store: store.remove_preset("b")),
        (NO_FINAL_NEWLINE + "\n", lambda store: store.rename_preset("b", "c", {"description": "b", "framework": "smoke"})),
    ],
    ids=["new-file", "hand-written-without-one", "last-removed", "last-renamed"],
)
def test_a_saved_presets_file_ends_with_exactly_one_newline(tmp_path, before, edit):
    """Issue 25, item 12: the saved presets.toml had no final newline."""
    path = tmp_path / "presets.toml"
    if before:
        path.write_text(before)
    store = PresetFile.load(path)
    edit(store)
    store.save()
    text = path.read_text()
    assert text.endswith("\n") and not text.endswith("\n\n"), repr(text[-40:])


def test_a_whole_file_saved_as_typed_ends_with_exactly_one_newline(commented):
    store = PresetFile.load(commented)
    store.save(COMMENTED.rstrip("\n"))
    assert commented.read_text() == COMMENTED

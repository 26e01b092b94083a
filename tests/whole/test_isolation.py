"""No test sees the real user's files or GPUTUI_* settings (tests/conftest.py's autouse
fixture, tests/support/isolation.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from gputui.config import config_dir
from gputui.record.history import runs_dir
from tests.support.isolation import USER_FOLDERS
from tests.support.process import REPO

PLANTED = '[presets.planted]\ncommand = ["echo", "planted"]\n'

INNER_TEST = textwrap.dedent(
    """
    import os
    from pathlib import Path

    from gputui.presets.preset import load_presets


    def test_the_planted_preset_is_out_of_sight(tmp_path):
        assert "smoke" in load_presets(cwd=tmp_path)  # the built-ins are there
        assert "planted" not in load_presets(cwd=tmp_path)
        assert Path.home().is_relative_to(tmp_path)
        assert not [name for name in os.environ if name.startswith("GPUTUI_")]
    """
)


def test_each_test_has_user_folders_of_its_own_and_no_gputui_settings(tmp_path):
    assert Path.home() == tmp_path / "home"
    assert config_dir() == tmp_path / "xdg" / "gputui"
    assert runs_dir(os.environ) == tmp_path / "state" / "gputui" / "runs"
    assert {name: os.environ[name] for name in USER_FOLDERS} == {name: str(tmp_path / folder) for name, folder in USER_FOLDERS.items()}
    assert not [name for name in os.environ if name.startswith("GPUTUI_")]


def test_a_test_cannot_see_a_presets_file_planted_in_the_real_users_config(tmp_path):
    """A user with ~/.config/gputui/presets.toml and GPUTUI_NO_HISTORY=1 runs the suite:
    a test under this conftest sees neither."""
    real_home = tmp_path / "real-home"
    planted = real_home / ".config" / "gputui" / "presets.toml"
    planted.parent.mkdir(parents=True)
    planted.write_text(PLANTED)
    user_env = {name: value for name, value in os.environ.items() if not name.startswith("XDG_")}
    user_env.update(HOME=str(real_home), GPUTUI_NO_HISTORY="1", PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    # The plant works: outside the suite, gputui reads it.
    seen = subprocess.run(
        [sys.executable, "-c", "from gputui.presets.preset import load_presets; print(sorted(load_presets()))"],
        cwd=tmp_path,
        env=user_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "'planted'" in seen.stdout, seen.stderr

    # A test run with tests/conftest.py as its only setup does not.
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_inner.py").write_text(INNER_TEST)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.conftest",
            "--rootdir",
            str(inner),
            "--basetemp",
            str(tmp_path / "tmp"),
            str(inner),
        ],
        cwd=REPO,
        env=user_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout + result.stderr
    assert planted.read_text() == PLANTED  # and the user's file is untouched

"""A non-editable install carries presets.toml and themes/ inside the package."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile

import pytest

from tests.support.process import REPO


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_lists_presets_anywhere(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)], check=True, capture_output=True)
    wheel = next(dist.glob("gputui-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "gputui/presets.toml" in names
    assert any(n.startswith("gputui/themes/") for n in names)

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run(
        [str(env_dir / "bin" / "gputui"), "presets", "list"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("smoke ")
    shown = subprocess.run(
        [str(python), "-m", "gputui", "presets", "show", "smoke"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert str(env_dir) in shown.stdout  # the packaged file, not the source tree

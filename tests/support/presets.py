"""Preset files the tests write (a test helper, no tests)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from gputui.errors import UserError
from gputui.presets.preset import load_file

# A command preset that speaks the protocol slowly, so tests can act mid-run.
SLOW_WORKLOAD = textwrap.dedent(
    """
    import json, sys, time
    for step in range(1, 10_000):
        print("@gputui " + json.dumps({"event": "step", "phase": "measure", "step": step, "samples": 8, "seconds": 0.1}), flush=True)
        time.sleep(0.1)
    """
)


def slow_presets(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text(SLOW_WORKLOAD)
    path = tmp_path / "slow.toml"
    path.write_text(f"[presets.slow]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(script))}]\n")
    return path


def write_preset(tmp_path: Path, code: str, timeout: float | None = None) -> Path:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(code))
    line = f"[presets.fault]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(script))}]\n"
    if timeout is not None:
        line += f"timeout = {timeout}\n"
    path = tmp_path / "fault.toml"
    path.write_text(line)
    return path


def write_presets(directory: Path, text: str, name: str = "presets.toml") -> Path:
    """A presets file with ``text`` in ``directory`` (made if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def load_error(path: Path) -> str:
    """The UserError message reading the presets file at ``path`` gives."""
    with pytest.raises(UserError) as info:
        load_file(path)
    return str(info.value)

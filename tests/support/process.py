"""Helpers for tests that run gputui as a user would: a real process, real files."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.support.isolation import user_folders

REPO = Path(__file__).resolve().parents[2]


def gputui_env(tmp_path: Path) -> dict[str, str]:
    """An environment where only the built-in presets (and ones a test passes) exist,
    and runs are kept under tmp_path: the test's own (tests/conftest.py), spelled out
    so that a fixture of a wider scope gets the same."""
    env = {**os.environ, **user_folders(tmp_path)}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_gputui(args: list[str], tmp_path: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args],
        cwd=tmp_path,
        env=gputui_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_gputui(args: list[str], tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gputui", *args],
        cwd=tmp_path,
        env=gputui_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


def try_read(path: Path):
    """The recording as far as it is written, or None while it has no whole header yet."""
    from gputui.errors import UserError
    from gputui.record.recording import read_recording

    try:
        return read_recording(path)
    except (UserError, FileNotFoundError):
        return None


def gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True

"""gputui in a real terminal (a test helper, no tests): a private tmux server driven by keys,
the ``tmux`` fixture that gives one, and a wait for processes to go.  Tests that use the
fixture are marked serial: real terminals are waited on by the screenful."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from tests.support.dashboard import LONG_SMOKE
from tests.support.process import gone, gputui_env

TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux is not installed: the real-terminal tests need it")


class Tmux:
    """One private tmux server (its own socket, no user config) with one session."""

    def __init__(self, tmp_path) -> None:
        self.socket = f"gputui-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.tmp_path = tmp_path

    def tmux(self, *args: str) -> str:
        result = subprocess.run([TMUX, "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=10)
        if result.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {result.stderr}")
        return result.stdout

    def start(self, args: list[str], size=(80, 24), term: str = "tmux-256color") -> int:
        env = gputui_env(self.tmp_path)
        # exec (and env's own exec): the pane's pid is gputui's
        command = " ".join(["exec", "env", f"TERM={term}", sys.executable, "-m", "gputui", *args])
        self.tmux(
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            str(size[0]),
            "-y",
            str(size[1]),
            "-c",
            str(self.tmp_path),
            "-e",
            f"XDG_CONFIG_HOME={env['XDG_CONFIG_HOME']}",
            "-e",
            f"XDG_STATE_HOME={env['XDG_STATE_HOME']}",
            "-e",
            f"PYTHONPATH={env['PYTHONPATH']}",
            "-e",
            "COLORTERM=",
            command,
        )
        return int(self.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip())

    def screen(self) -> str:
        try:
            return self.tmux("capture-pane", "-p", "-t", "t")
        except AssertionError:
            return ""  # the session ended with gputui

    def screen_with_colours(self) -> str:
        return self.tmux("capture-pane", "-p", "-e", "-t", "t")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)

    def wait_for(self, pattern: str, timeout: float = 30.0) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.last_screen = self.screen()
            match = re.search(pattern, self.last_screen)
            if match:
                return match
            time.sleep(0.1)
        raise AssertionError(f"{pattern!r} never appeared; the screen:\n{self.screen()}")

    def wait_until_gone(self, pattern: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not re.search(pattern, self.screen()):
                return
            time.sleep(0.1)
        raise AssertionError(f"{pattern!r} stayed; the screen:\n{self.screen()}")

    def kill_server(self) -> None:
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True, timeout=10)


@pytest.fixture
def tmux(tmp_path):
    (tmp_path / "long.toml").write_text(LONG_SMOKE)
    session = Tmux(tmp_path)
    yield session
    session.kill_server()


def wait_gone(pids: list[int], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if gone(pids):
            return
        time.sleep(0.1)
    alive = [p for p in pids if not gone([p])]
    raise AssertionError(f"processes left behind: {alive}")

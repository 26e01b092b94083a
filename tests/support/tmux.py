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
    """One private tmux server (its own socket, no user config) with a session "t" (and
    others a test names: two dashboards in two terminals)."""

    def __init__(self, tmp_path) -> None:
        self.socket = f"gputui-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.tmp_path = tmp_path

    def tmux(self, *args: str) -> str:
        result = subprocess.run([TMUX, "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=10)
        if result.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {result.stderr}")
        return result.stdout

    def start(self, args: list[str], size=(80, 24), term: str = "tmux-256color", session: str = "t") -> int:
        """gputui with ``args`` in a new session of this server; its pid."""
        # exec (and env's own exec): the pane's pid is gputui's
        return self.start_command(["exec", "env", f"TERM={term}", sys.executable, "-m", "gputui", *args], size, session)

    def start_command(self, words: list[str], size=(80, 24), session: str = "t") -> int:
        """A shell command line (``words`` joined by spaces) in a new session; the pane's pid."""
        env = gputui_env(self.tmp_path)
        command = " ".join(words)
        self.tmux(
            "new-session",
            "-d",
            "-s",
            session,
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
        return int(self.tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip())

    def screen(self, session: str = "t") -> str:
        try:
            return self.tmux("capture-pane", "-p", "-t", session)
        except AssertionError:
            return ""  # the session ended with gputui

    def screen_with_colours(self, session: str = "t") -> str:
        return self.tmux("capture-pane", "-p", "-e", "-t", session)

    def keys(self, *keys: str, session: str = "t") -> None:
        self.tmux("send-keys", "-t", session, *keys)

    def wait_for(self, pattern: str, timeout: float = 30.0, session: str = "t") -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.last_screen = self.screen(session)
            match = re.search(pattern, self.last_screen)
            if match:
                return match
            time.sleep(0.1)
        raise AssertionError(f"{pattern!r} never appeared; the screen:\n{self.screen(session)}")

    def wait_until_gone(self, pattern: str, timeout: float = 30.0, session: str = "t") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not re.search(pattern, self.screen(session)):
                return
            time.sleep(0.1)
        raise AssertionError(f"{pattern!r} stayed; the screen:\n{self.screen(session)}")

    def escape_from(self, pattern: str, session: str = "t") -> None:
        """Close what shows ``pattern`` with Escape: once it is up, and until it has gone.
        An Escape sent before it is up does nothing there, and a key sent within Textual's
        ESCDELAY of an Escape (0.1 s) merges with it into Alt+key, losing both."""
        self.wait_for(pattern, session=session)
        self.keys("Escape", session=session)
        self.wait_until_gone(pattern, session=session)

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

"""`gputui` in tmux on a machine without a GPU: the Check screen opened and run with keys
alone, its verdict table read back from the terminal."""

from __future__ import annotations

import pytest

from tests.support.tmux import Tmux, needs_tmux

pytestmark = pytest.mark.serial  # a real terminal, and a check that measures the machine: alone, after the parallel pass


@needs_tmux
def test_quick_check_from_keys_alone_shows_its_verdict_table(tmp_path):
    tmux = Tmux(tmp_path)
    try:
        tmux.start([], size=(140, 40))
        tmux.wait_for(r"gputui")
        tmux.keys("k")
        tmux.wait_for(r"Check this machine")
        tmux.keys("u")  # the quick check: preflight and micro-benchmarks
        screen = tmux.wait_for(r"verdict: (OK|WARN|FAIL)", timeout=180).string
        assert "status" in screen and "measured" in screen  # the table's header
        assert "/dev/shm" in screen or "CPU cores" in screen  # host checks ran here
        assert "skip" in screen  # no GPU: the GPU checks say so instead of failing
        tmux.escape_from(r"Check this machine")
        tmux.keys("q")
    finally:
        tmux.kill_server()

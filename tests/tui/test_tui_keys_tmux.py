"""Help and safe keys in a real terminal (tmux, 80×24, keys alone): ``?`` shows
gputui's keys and Esc closes them; in the preset editor q and Ctrl+C leave the app and
the edit where they were, and Esc with unsaved changes asks before dropping them."""

from __future__ import annotations

import re
import time

import pytest

from tests.support.tmux import needs_tmux, tmux, wait_gone  # noqa: F401  (tmux: the fixture)
from tests.support.tui import shown_field

pytestmark = pytest.mark.serial  # a real terminal, keys sent without delay: alone, after the parallel pass


@needs_tmux
def test_help_then_q_in_the_editor_keeps_the_app_and_the_edit_at_80x24(tmux):  # noqa: F811
    gputui = tmux.start([])
    tmux.wait_for(r"Presets")
    tmux.wait_for(r"○ watching")
    footer = tmux.screen().rstrip("\n").splitlines()[-1]
    assert "e Edit" in footer and "n New" in footer and "? Help" in footer, footer

    tmux.keys("?")
    tmux.wait_for(r"gputui keys")
    screen = tmux.last_screen
    assert "Dashboard" in screen
    for key, what in (("Enter", "run the highlighted preset"), ("e", "edit the highlighted preset"), ("n", "a new preset"), ("s", "stop the run")):
        assert f"{key} " in screen and what in screen, screen
    tmux.escape_from(r"gputui keys")

    tmux.keys("n")
    tmux.wait_for(r"✓ valid")  # the form is up, the name field has the focus
    tmux.keys(*["BSpace"] * 12)
    tmux.wait_for(shown_field("name", ""))
    tmux.keys("-l", "mine")
    tmux.wait_for(shown_field("name", "mine"))
    tmux.keys(*["Tab"] * 3)  # description, command, framework: a select, where q is no text
    time.sleep(0.5)
    tmux.keys("q")
    time.sleep(1.0)
    tmux.keys("C-c")
    time.sleep(1.0)
    screen = tmux.screen()
    assert screen, "gputui quit"
    assert re.search(shown_field("name", "mine"), screen) and "Presets" not in screen, screen  # still editing, edit intact

    tmux.keys("Escape")
    tmux.wait_for(r"mine has unsaved changes")
    tmux.keys("d")
    tmux.wait_for(r"Presets")
    tmux.keys("q")
    wait_gone([gputui])

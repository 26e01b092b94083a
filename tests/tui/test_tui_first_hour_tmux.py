"""A new user's first hour in a real terminal (tmux, 80×24, keys sent without delay):
text typed right after a burst of Tab presses lands in the field the Tabs reached."""

from __future__ import annotations

import pytest

from tests.support.tmux import needs_tmux, tmux, wait_gone  # noqa: F401  (tmux: the fixture)
from tests.support.tui import shown_field

pytestmark = pytest.mark.serial  # a real terminal, keys sent without delay: alone, after the parallel pass


@needs_tmux
def test_text_typed_right_after_a_burst_of_tabs_lands_in_the_field_reached(tmux):  # noqa: F811
    """Tab ×6, 8, 8 in one burst left the field unchanged: the 8s were lost."""
    gputui = tmux.start([])
    tmux.wait_for(r"Presets")
    tmux.keys("n")
    tmux.wait_for(r"✓ valid")  # the form is up, the name field has the focus
    tmux.wait_for(shown_field("steps", "40"))
    # one send-keys call: the terminal delivers them together, as a quick typist or a slow link does
    tmux.keys(*["Tab"] * 6, "8", "8")  # description, command, framework, model, batch size, steps
    tmux.wait_for(shown_field("steps", "4088"), timeout=10)
    screen = tmux.last_screen
    assert "new-preset" in screen and "8" not in screen.split("new-preset")[1].split("\n")[0], screen  # the name kept as it was
    tmux.keys("Escape")
    tmux.wait_for(r"unsaved changes")
    tmux.keys("d")
    tmux.wait_for(r"Presets")
    tmux.keys("q")
    wait_gone([gputui])

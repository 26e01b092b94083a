"""Screens that close once, however many close keys arrive.

Textual's ``Screen.dismiss`` pops whatever screen is on top.  Keys already queued for
a screen are still handled after it closed, so Esc, Esc in one burst (a held key, a
slow link) closed the modal and then the screen beneath it: the dashboard itself,
after which the app crashed on its next redraw.
"""

from __future__ import annotations

from typing import Any

from textual.await_complete import AwaitComplete


class DismissOnce:
    """Mix into a Screen class, before the Screen base."""

    def dismiss(self, result: Any = None) -> AwaitComplete:
        if self.app.screen is not self:  # type: ignore[attr-defined]  # already closed (or covered)
            return AwaitComplete()
        return super().dismiss(result)  # type: ignore[misc]

"""Screens that close once, however many close keys arrive, and that mount safely
while the app exits.

Textual's ``Screen.dismiss`` pops whatever screen is on top.  Keys already queued for
a screen are still handled after it closed, so Esc, Esc in one burst (a held key, a
slow link) closed the modal and then the screen beneath it: the dashboard itself,
after which the app crashed on its next redraw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.await_complete import AwaitComplete

if TYPE_CHECKING:
    from textual.screen import Screen

    ScreenMixin = Screen[Any]  # the type checker sees the Screen this is mixed into
else:
    # At run time a plain mixin: Textual takes CSS type names and component classes
    # from each class's first base only, which must stay the real Screen class.
    ScreenMixin = object


class DismissOnce(ScreenMixin):
    """Mix into a Screen class, before the Screen base: ``class S(DismissOnce, ModalScreen[T])``."""

    def dismiss(self, result: Any = None) -> AwaitComplete:
        if self.app.screen is not self:  # already closed (or covered)
            return AwaitComplete()
        return super().dismiss(result)

    def app_exiting(self) -> bool:
        """True when the app exits in the tick this screen was pushed (a run ends as the
        user quits): Textual then mounts the screen without composing its children, and
        an ``on_mount`` that looked them up raised NoMatches on quit. Check it first."""
        return self.app.return_code is not None

"""Screens laid out at the terminal's size, whatever size a queued Resize says.

Textual 8.2 lays a screen out at the size of each Resize it handles, and a layout
that changed the screen's own size posts the screen a Resize of that size (the one its
widgets get).  A Resize for a size the terminal has since left can therefore come
after the terminal's own: the screen then ends at the old size, or, with other
messages between them (a panel's layout refresh), two sizes re-post each other for
ever.  A window dragged while the app was busy left the dashboard laying itself out
at 10x3 and 80x24 in turn at 100 % of a core (the resize-storm test, on a loaded
machine).  Here every Resize a screen handles carries the terminal's size now.
"""

from __future__ import annotations

from typing import Any

from textual import events

from gputui.tui.screens.once import ScreenMixin


class TerminalSized(ScreenMixin):
    """Mix into a Screen class, before the Screen base: ``class S(TerminalSized, Screen)``."""

    async def on_event(self, event: events.Event) -> Any:
        if isinstance(event, events.Resize) and not self.app.is_inline:
            size = self.app.size
            if event.size != size:  # queued before the terminal's last change
                event.size = event.virtual_size = event.container_size = size
        return await super().on_event(event)

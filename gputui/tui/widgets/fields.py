"""A text field whose blinking cursor repaints its one cell.

Textual's Input repaints the whole field at each blink (twice a second): with the
preset editor open, its name field was rewritten twice a second while nothing was
typed (docs/performance.md#figures-behind-the-codes-choices).  Here a blink marks only the cursor's cell dirty
(the screen's cropping compositor then sends just that cell: gputui.tui.compositor);
everything else (typing, moving, focus) repaints as Textual does.
"""

from __future__ import annotations

from textual.geometry import Region
from textual.widgets import Input


class EditorField(Input):
    def _toggle_cursor(self) -> None:
        visible = (not self._cursor_visible) if self.screen.is_active else True  # as Textual's
        if visible == self._cursor_visible:
            return
        try:  # the cell the cursor is drawn in (the terminal's own cursor is parked one right of it at the end)
            x = self._position_to_cell(self.cursor_position) - int(self.scroll_offset.x)
        except Exception:  # a Textual without these: its own blink
            self._cursor_visible = visible
            return
        self.set_reactive(Input._cursor_visible, visible)
        width = self.scrollable_content_region.width + 1  # the cursor may sit one past the text
        self.refresh(Region(max(0, min(x, width - 1)), 0, 1, 1))

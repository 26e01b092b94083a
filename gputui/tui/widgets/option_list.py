"""Textual's OptionList, made safe for a list with no room for its text.

A terminal dragged small (or a modal's list at a few columns) leaves an OptionList
less width than its options' padding.  Textual 8.2 then crashes the app in two ways:
wrapping an option into 0 columns (Rich's ``chop_cells``: "range() arg 3 must not be
zero"), and Page Up/Down on a list whose lines were never laid out (``_move_page``:
KeyError, see kagan-sh/kagan-legacy#31).  Both were met in the resize-storm test.
Here a list without room is measured as one column wide, lays its lines out once it
has room, and pages through nothing until then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.geometry import Size
from textual.widgets import OptionList

if TYPE_CHECKING:
    from textual._widget_navigation import Direction  # -1 | 1


class NarrowSafeOptionList(OptionList):
    def _option_padding(self) -> int:
        return self.get_component_styles("option-list--option").padding.width

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # Textual wraps each option into width - padding columns: at least one.
        return super().get_content_height(container, viewport, max(width, self._option_padding() + 1))

    def _update_lines(self) -> None:
        region = self.scrollable_content_region
        if region and region.width - self._get_left_gutter_width() - self._option_padding() < 1:
            return  # no room yet, as Textual does for no region: laid out on the next resize
        super()._update_lines()

    def _move_page(self, direction: Direction) -> None:
        if (self.highlighted or 0) not in self._index_to_line:
            return  # no lines laid out (no room): nothing to page through
        super()._move_page(direction)

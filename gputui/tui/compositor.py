"""Partial screen updates that send only the cells that changed.

Textual 8.2 keeps track of which cells changed (the widgets' dirty regions) but, when
it writes a partial update, it crops each line fragment only at the right end: every
changed line is sent from the left edge of its widget (border, padding and all)
to the last changed cell.  A chart gaining a column at its right end, a clock
ticking at the end of a status line, or a new line in the output pane therefore
cost a whole panel row each (``ChopsUpdate`` has a "TODO: crop to x extents").  This
module does that crop, for the screens that ask for it: at 140×40 with a benchmark
printing seven lines a second, about 3 KB/s became under 1 KB/s.

It leans on Textual internals (``Screen._compositor``, ``Compositor`` and
``ChopsUpdate``), so it applies only on the Textual versions it was tested with
(:data:`TESTED_TEXTUAL`) and where their signatures are still the ones written for;
anywhere else the screen keeps Textual's own compositor (more bytes, same picture).
That makes a Textual upgrade this module's decision alone: pyproject.toml allows any
8.x, and tests/test_tui_compositor.py checks both the cropped frames and the fallback;
tests/test_tui_updates.py replays the updates on a terminal emulator and compares
them with the composed screen, cell by cell.
"""

from __future__ import annotations

import inspect
from functools import cache
from importlib.metadata import PackageNotFoundError, version

from rich.cells import cell_len, get_character_cell_size
from rich.console import Console
from rich.control import Control
from textual._compositor import ChopsUpdate, Compositor
from textual.screen import Screen
from textual.strip import Strip


def _cell_bounds(strip: Strip, start: int, stop: int) -> tuple[int, int]:
    """Widen ``start``/``stop`` (cell offsets) so neither cuts a double-width
    character in half: a half would be written as a space and blank its twin."""
    pos = 0
    for segment in strip:
        text = segment.text
        seg_end = pos + cell_len(text)
        if seg_end <= start:
            pos = seg_end
            continue
        if pos >= stop:
            break
        if not text.isascii():
            x = pos
            for char in text:
                width = get_character_cell_size(char)
                if x < start < x + width:
                    start = x
                if x < stop < x + width:
                    stop = x + width
                x += width
        pos = seg_end
    return start, stop


class CroppedChopsUpdate(ChopsUpdate):
    """A partial update that writes each changed span from its first cell, not from
    the left edge of the widget it falls in."""

    def render_segments(self, console: Console) -> str:
        sequences: list[str] = []
        append = sequences.append
        move_to = Control.move_to
        chops, chop_ends, spans = self.chops, self.chop_ends, self.spans
        for i, (y, x1, x2) in enumerate(spans):
            for end, (x, strip) in zip(chop_ends[y], chops[y].items()):
                if strip is None or x >= x2 or end <= x1:
                    continue
                start, stop = max(x1, x) - x, min(end, x2) - x
                if start or stop < end - x:
                    start, stop = _cell_bounds(strip, start, stop)
                    strip = strip.crop(start, stop)
                append(move_to(x + start, y).segment.text)
                append(strip.render(console))
            if i + 1 < len(spans) and spans[i + 1][0] != y:
                append("\n")  # as Textual does between lines (each span starts with a move)
        return "".join(sequences)


class CroppingCompositor(Compositor):
    def render_partial_update(self) -> ChopsUpdate | None:
        update = super().render_partial_update()
        if update is None:
            return None
        return CroppedChopsUpdate(update.chops, update.spans, update.chop_ends)


TESTED_TEXTUAL = ("8.2.",)  # version prefixes whose internals this was checked against


@cache
def _textual_version() -> str:
    try:
        return version("textual")
    except PackageNotFoundError:  # a Textual without package metadata: unknown, so not cropped
        return ""


def _looks_as_expected() -> bool:
    """This Textual is one the cropping was tested with, and its internals still
    have the shapes used here."""
    if not _textual_version().startswith(TESTED_TEXTUAL):
        return False
    try:
        init = inspect.signature(ChopsUpdate.__init__).parameters
        update = inspect.signature(Compositor.render_partial_update).parameters
    except (TypeError, ValueError):
        return False
    return list(init) == ["self", "chops", "spans", "chop_ends"] and list(update) == ["self"]


SUPPORTED = _looks_as_expected()  # on the Textual installed (asked again for each screen)


def crop_updates(screen: Screen) -> bool:
    """Give a freshly made screen the cropping compositor; False where this Textual
    is not the one it was written for (the screen then keeps Textual's own)."""
    if not _looks_as_expected() or type(getattr(screen, "_compositor", None)) is not Compositor:
        return False
    screen._compositor = CroppingCompositor()
    return True

"""Partial screen updates that send only the cells that changed.

Textual 8.2 keeps track of which cells changed (the widgets' dirty regions) but, when
it writes a partial update, it crops each line fragment only at the right end: every
changed line is sent from the left edge of its widget (border, padding and all)
to the last changed cell.  A chart gaining a column at its right end, a clock
ticking at the end of a status line, or a new line in the output pane therefore
cost a whole panel row each (``ChopsUpdate`` has a "TODO: crop to x extents").  This
module does that crop, for the screens that ask for it: a third of the bytes or less
for a chatty run (docs/performance.md#figures-behind-the-codes-choices).

It leans on Textual internals (``Screen._compositor``, ``Compositor`` and
``ChopsUpdate``), so it applies only on the Textual versions it was tested with
(:data:`TESTED_TEXTUAL`) and where their signatures are still the ones written for;
anywhere else the screen keeps Textual's own compositor (more bytes, same picture).
That makes a Textual upgrade this module's decision alone: pyproject.toml allows any
8.x, and tests/tui/test_tui_compositor.py checks both the cropped frames and the fallback;
tests/tui/test_tui_updates.py replays the updates on a terminal emulator and compares
them with the composed screen, cell by cell.

More fixes of Textual 8.2 behaviour live here for the same reason:
:class:`SteadyScrollbars` (a layout pass repainted every ScrollView's scrollbar),
:func:`settle_covered` (a screen under a modal, once changed, repainted itself and the
modal whole at each later message it handled) and ``CroppingCompositor._get_renders``
(a partial update rendered every widget in the box around all the changes, whole).
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Iterable
from functools import cache
from typing import Any

from rich.cells import cell_len, get_character_cell_size
from rich.color import ColorSystem
from rich.console import Console
from rich.control import Control
from textual._compositor import ChopsUpdate, Compositor, LayoutUpdate
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip

from gputui.tui.textual_version import TESTED_TEXTUAL
from gputui.tui.textual_version import textual_version as _textual_version


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


Cell = tuple[str, str, str]  # what a terminal cell shows: its character ("" right of a wide one), colours (SGR), link
GAP_CELLS = 4  # unchanged cells between two changes on a line: resent (a cursor move costs about as much)


def _ansi(style: Any, color_system: ColorSystem) -> str:
    if style is None:
        return ""
    return style._ansi if style._ansi is not None else Strip.render_ansi(style, color_system)


def _cells(strip: Strip, color_system: ColorSystem) -> list[Cell] | None:
    """The cells a strip writes, or None where its characters are not its cells."""
    cells: list[Cell] = []
    for text, style, _control in strip:
        if not text:
            continue
        ansi, link = _ansi(style, color_system), (style._link or "") if style is not None else ""
        for char in text:
            width = get_character_cell_size(char)
            if width == 0:
                return None  # a combining character: sent whole, never compared
            cells.append((char, ansi, link))
            if width == 2:
                cells.append(("", ansi, link))
    return cells if len(cells) == strip.cell_length else None


@cache
def _sgr_parts(ansi: str) -> tuple[tuple[str, ...], str, str]:
    """An SGR parameter string as Rich writes it (attributes, then the foreground, then
    the background) split into (attributes, foreground, background)."""
    params = ansi.split(";") if ansi else []
    attributes: list[str] = []
    foreground = background = ""
    i = 0
    while i < len(params):
        code = params[i]
        if code in ("38", "48"):  # 38;5;N or 38;2;R;G;B
            size = 3 if i + 1 < len(params) and params[i + 1] == "5" else 5
            group = ";".join(params[i : i + size])
            i += size
            if code == "38":
                foreground = group
            else:
                background = group
            continue
        number = int(code) if code.isdigit() else -1
        if 30 <= number <= 39 or 90 <= number <= 97:
            foreground = code
        elif 40 <= number <= 49 or 100 <= number <= 107:
            background = code
        else:
            attributes.append(code)
        i += 1
    return tuple(attributes), foreground, background


@cache
def sgr_change(old: str, new: str) -> str:
    """The shortest escape from colours ``old`` to ``new`` (SGR parameter strings, ""
    the defaults).  Rich writes a style whole after a reset (``ESC[0mESC[38;5;203;48;5;16m``,
    23 bytes); where the attributes stay, only the colour that changed is sent
    (``ESC[38;5;203m``, 11 bytes): about a fifth of a running dashboard's bytes."""
    if old == new:
        return ""
    if not new:
        return "\x1b[0m"
    if not old:
        return f"\x1b[{new}m"
    old_attributes, old_fg, old_bg = _sgr_parts(old)
    attributes, fg, bg = _sgr_parts(new)
    if attributes != old_attributes:  # attributes have no common way off: start from the defaults
        return f"\x1b[0m\x1b[{new}m"
    changes = [fg or "39"] if fg != old_fg else []
    if bg != old_bg:
        changes.append(bg or "49")
    return f"\x1b[{';'.join(changes)}m"


def cursor_move(cursor: tuple[int, int] | None, x: int, y: int) -> str:
    """The shortest move to (x, y) from a known cursor: along its row forward (CUF) or to
    a column (CHA), else to the cell (CUP, 8-9 bytes at 140x40)."""
    if cursor is not None and cursor[1] == y:
        if x > cursor[0]:
            return f"\x1b[{x - cursor[0]}C" if x - cursor[0] > 1 else "\x1b[C"
        return f"\x1b[{x + 1}G"
    return Control.move_to(x, y).segment.text


class _Writer:
    """Writes strips at cursor positions, colours only where they change and by the
    shortest escape (see sgr_change and cursor_move), and ends with the terminal's
    colours reset."""

    def __init__(self, console: Console) -> None:
        self.color_system = console._color_system or ColorSystem.TRUECOLOR  # as Strip.render
        self.sequences: list[str] = []
        self.current = ""  # the colours the terminal has now ("": its defaults)
        self.cursor: tuple[int, int] | None = None

    def write(self, x: int, y: int, strip: Strip) -> None:
        append = self.sequences.append
        if self.cursor != (x, y):
            append(cursor_move(self.cursor, x, y))
        for text, style, _control in strip:
            if not text:
                continue
            if style is not None and style._link:  # a hyperlink: Textual's own escapes, from the defaults
                if self.current:
                    append("\x1b[0m")
                    self.current = ""
                append(Strip.render_style(style, text, self.color_system))
                continue
            ansi = _ansi(style, self.color_system)
            if ansi != self.current:
                append(sgr_change(self.current, ansi))
                self.current = ansi
            append(text)
        # where the cursor is now, if no character's width is in doubt (box and block
        # characters are two cells wide in some terminals): else the next write moves there
        self.cursor = (x + strip.cell_length, y) if strip.text.isascii() else None

    def done(self) -> str:
        if self.current:
            self.sequences.append("\x1b[0m")
        return "".join(self.sequences)


class CroppedChopsUpdate(ChopsUpdate):
    """A partial update that writes only the cells that change on the terminal.

    Textual writes every dirty region whole, from the left edge of the widget it falls
    in, and every segment as its full colour escape, the text and a reset
    (``ESC[38;5;188;48;5;16m6ESC[0m``).  Here, each span is cropped to the dirty cells;
    when the compositor knows what the terminal shows (``sent``: it wrote the last
    full frame and every update since), cells that would be written as they already are
    are left out (a widget refreshed whole for one changed cell, a scrollbar or a table
    redrawn unchanged); a segment in the colours of the one before it is written as its
    text alone, a change of colours sends only what changed (sgr_change), and the
    update ends with a reset, so whatever Textual writes next starts from the defaults.
    Rendered once: asked again, it returns the same text."""

    compositor: CroppingCompositor | None = None
    _rendered: str | None = None

    def render_segments(self, console: Console) -> str:
        if self._rendered is not None:
            return self._rendered
        writer = _Writer(console)
        sent = self.compositor._sent if self.compositor is not None else None
        chops, chop_ends, spans = self.chops, self.chop_ends, self.spans
        for y, x1, x2 in spans:
            row = sent[y] if sent is not None and y < len(sent) else None
            for end, (x, strip) in zip(chop_ends[y], chops[y].items()):
                if strip is None or x >= x2 or end <= x1:
                    continue
                start, stop = max(x1, x) - x, min(end, x2) - x
                if start or stop < end - x:
                    start, stop = _cell_bounds(strip, start, stop)
                    strip = strip.crop(start, stop)
                x0 = x + start
                known = row is not None and x0 + strip.cell_length <= len(row)
                cells = _cells(strip, writer.color_system) if known else None
                if cells is None:
                    writer.write(x0, y, strip)
                    if known and row is not None:  # not known cell by cell: resent next time
                        row[x0 : x0 + strip.cell_length] = [None] * strip.cell_length
                    continue
                assert row is not None
                for a, b in _changed_runs(row, x0, cells):
                    a, b = _cell_bounds(strip, a, b)
                    writer.write(x0 + a, y, strip.crop(a, b))
                row[x0 : x0 + len(cells)] = cells
        self._rendered = writer.done()
        return self._rendered


def _changed_runs(row: list, x0: int, cells: list[Cell]) -> list[tuple[int, int]]:
    """Runs [a, b) of ``cells`` that differ from what ``row`` holds from ``x0`` on,
    joined across unchanged stretches of up to GAP_CELLS cells."""
    runs: list[list[int]] = []
    for i, cell in enumerate(cells):
        if x0 + i < len(row) and row[x0 + i] == cell:
            continue
        if runs and i - runs[-1][1] <= GAP_CELLS:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    return [(a, b) for a, b in runs]


class RecordedLayoutUpdate(LayoutUpdate):
    """A full frame that, as it is written, tells its compositor what the terminal shows."""

    compositor: CroppingCompositor | None = None
    _rendered: str | None = None

    def render_segments(self, console: Console) -> str:
        if self._rendered is not None:
            return self._rendered
        self._rendered = super().render_segments(console)
        if self.compositor is not None:
            color_system = console._color_system or ColorSystem.TRUECOLOR
            width, height = self.region.right, self.region.bottom
            sent: list[list[Cell | None]] = [[None] * width for _ in range(height)]
            for y, line in enumerate(self.strips, self.region.y):
                x = self.region.x
                for strip in line:
                    cells = _cells(strip, color_system)
                    if cells is not None:
                        sent[y][x : x + len(cells)] = cells
                    x += strip.cell_length
            self.compositor._sent = sent
        return self._rendered


class CroppingCompositor(Compositor):
    """The compositor of a screen that asked for cropped updates (crop_updates); it
    keeps what it wrote to the terminal (``_sent``, per row) while it is the one writing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sent: list[list[Cell | None]] | None = None  # None: unknown (another screen wrote since)
        self._updating: list[Region] | None = None  # the changed regions, while a partial update renders
        _COMPOSITORS.add(self)

    def forget(self) -> None:
        """Something else was written to the terminal: until the next full frame, send every dirty cell."""
        self._sent = None

    def render_full_update(self, simplify: bool = False) -> LayoutUpdate:
        update = super().render_full_update(simplify=simplify)
        recorded = RecordedLayoutUpdate(update.strips, update.region)
        recorded.compositor = self
        return recorded

    def render_partial_update(self) -> ChopsUpdate | None:
        self._updating = list(self._dirty_regions)  # Textual's clears them before it renders
        try:
            update = super().render_partial_update()
        finally:
            self._updating = None
        if update is None:
            return None
        cropped = CroppedChopsUpdate(update.chops, update.spans, update.chop_ends)
        cropped.compositor = self
        return cropped

    def _get_renders(self, crop: Region | None = None) -> Iterable[tuple[Region, Region, list[Strip]]]:
        """Textual's renders for a partial update: every widget that overlaps the box
        around all the changes, each whole (at 140x40, the run's clock at the top right
        and a GPU panel's line below made the CPU panel, the sidebar and the footer
        render every line, among others).  Here
        only a widget a change falls in renders, and only the rows of its changes:
        the update writes no other cell.

        A change is drawn by the frontmost widget over it: Textual's update keeps the
        first strip for each cell, front to back.  So a widget behind (the containers
        and the screen under a panel) renders only for a change no band in front of
        it already covers: a panel's changed line made its two containers and the
        screen render too, the screen over every row between the clock at the top
        and the GPU line below (half of the renders of a running dashboard:
        docs/performance.md#figures-behind-the-codes-choices)."""
        updating = self._updating
        if not updating:
            yield from super()._get_renders(crop)
            return
        drawn: list[Region] = []  # the bands rendered so far, by widgets in front
        for widget, (region, clip) in self.visible_widgets.items():  # front to back, as Textual's
            visible = region.intersection(clip)
            touched = [change.intersection(visible) for change in updating]
            touched = [part for part in touched if part.area and not any(band.contains_region(part) for band in drawn)]
            if not touched:
                continue
            rows = Region.from_union(touched)
            band = Region(visible.x, rows.y, visible.width, rows.height)
            drawn.append(band)
            yield region, band, widget.render_lines(band.translate(-region.offset))


_COMPOSITORS: weakref.WeakSet[CroppingCompositor] = weakref.WeakSet()


def displaying(screen: Screen) -> None:
    """Call as anything is written for ``screen`` (the app's ``_display``): the other
    screens' cropping compositors no longer know what the terminal shows."""
    own = getattr(screen, "_compositor", None)
    for compositor in list(_COMPOSITORS):
        if compositor is not own:
            compositor.forget()


def _looks_as_expected() -> bool:
    """This Textual is one the cropping was tested with, and its internals still
    have the shapes used here."""
    if not _textual_version().startswith(TESTED_TEXTUAL):
        return False
    try:
        init = inspect.signature(ChopsUpdate.__init__).parameters
        update = inspect.signature(Compositor.render_partial_update).parameters
        full_init = inspect.signature(LayoutUpdate.__init__).parameters
        full = inspect.signature(Compositor.render_full_update).parameters
        renders = inspect.signature(Compositor._get_renders).parameters
    except (TypeError, ValueError, AttributeError):
        return False
    return (
        list(init) == ["self", "chops", "spans", "chop_ends"]
        and list(update) == ["self"]
        and list(renders) == ["self", "crop"]
        and list(full_init) == ["self", "strips", "region"]
        and list(full) == ["self", "simplify"]
    )


SUPPORTED = _looks_as_expected()  # on the Textual installed (asked again for each screen)


def crop_updates(screen: Screen) -> bool:
    """Give a freshly made screen the cropping compositor; False where this Textual
    is not the one it was written for (the screen then keeps Textual's own)."""
    if not _looks_as_expected() or type(getattr(screen, "_compositor", None)) is not Compositor:
        return False
    screen._compositor = CroppingCompositor()
    return True


class SteadyScrollbars:
    """Mix into a Textual ScrollView (OptionList, DataTable), before it: a layout pass
    that leaves the widget's sizes as they were does not repaint its scrollbars.

    Textual 8.2's ``ScrollView._size_updated`` compares the container size the layout
    hands it (its parent's) with its own container size, which always differ, so every
    layout pass of the screen, whatever it was for, refreshes the widget's vertical
    scrollbar and calls the widget resized: the preset list's scrollbar (12 cells of
    column 31 at 140x40) was rewritten, unchanged, at each pass
    (docs/performance.md#figures-behind-the-codes-choices), and under a modal each refresh costs a whole-screen repaint.
    The sizes are those the layout passes in; what the widget changes itself (its
    lines, so its virtual size) goes through ``_scroll_update`` directly, as before.
    On a Textual without this method the override is never called.
    """

    _steady_sizes: tuple | None = None

    def _size_updated(self, size: Any, virtual_size: Any, container_size: Any, *args: Any, **kwargs: Any) -> bool:
        sizes = (size, virtual_size, container_size, getattr(self, "virtual_size", None))
        if sizes == self._steady_sizes:
            return False  # nothing moved: no scrollbar repaint, no Resize
        self._steady_sizes = sizes
        return super()._size_updated(size, virtual_size, container_size, *args, **kwargs)  # type: ignore[misc]


def settle_covered(screen: Screen) -> None:
    """After a covered screen (one under a modal) forwarded its changed cells to the
    screen on top, take back the whole repaint Textual schedules for it.

    Textual 8.2 then sets the covered screen's ``_repaint_required``, and it stays set:
    at every later message that screen handles (a timer, a callback, a widget's
    refresh) the covered screen repaints itself whole, which sets it again, and the view
    on top is rewritten whole each time (~20 KB at 140x40).  One change under a modal
    (a run ending, the "panels paused" note) thus turned every later message into a
    full-screen repaint.  The changed cells themselves are forwarded as before, and the
    screen repaints whole anyway when it is back on top (Textual's ScreenResume)."""
    if not SUPPORTED:
        return
    try:
        top = screen.app.screen
    except Exception:  # no screen stack (the app is closing)
        return
    if top is not screen and getattr(screen, "_repaint_required", False):
        screen._repaint_required = False

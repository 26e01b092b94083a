"""WCAG contrast of what a Textual app draws, cell by cell (a test helper, no tests).

A cell counts as text when it holds a letter, digit or sign; box drawing, block
elements and braille (borders, bars, sparklines) are graphics and left out.  Colours
are judged as a terminal would show them: in truecolor, and after Rich's reduction to
256 and to 16 colours.  The 16 colours are measured in the palette Rich matches them
against (VGA's), so the colour Rich picked is the colour judged; "default" colours are
the foreground and background of Textual's ANSI theme for the app's light or dark mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from rich._palettes import STANDARD_PALETTE
from rich.color import Color, ColorSystem
from rich.segment import Segment
from rich.terminal_theme import TerminalTheme
from textual.geometry import Region
from textual.screen import ModalScreen

AA = 4.5  # WCAG 2 AA for normal text
SYSTEMS = {"truecolor": ColorSystem.TRUECOLOR, "256": ColorSystem.EIGHT_BIT, "16": ColorSystem.STANDARD}
GRAPHICS = ((0x2500, 0x259F), (0x25A0, 0x25FF), (0x2800, 0x28FF))  # box drawing, blocks, shapes, braille


@dataclass(frozen=True)
class Failure:
    system: str
    x: int
    y: int
    text: str
    ratio: float
    fg: tuple[int, int, int]
    bg: tuple[int, int, int]

    def __str__(self) -> str:
        return f"{self.system}: ({self.x},{self.y}) {self.text!r} {self.ratio:.2f}:1 fg #{bytes(self.fg).hex()} on bg #{bytes(self.bg).hex()}"


def luminance(rgb: tuple[int, int, int]) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = rgb
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def is_text(char: str) -> bool:
    if char.isspace():
        return False
    code = ord(char)
    return not any(lo <= code <= hi for lo, hi in GRAPHICS)


def shown_rgb(color: Color | None, system: ColorSystem, palette: TerminalTheme, foreground: bool) -> tuple[int, int, int]:
    if color is None:
        color = Color.default()
    reduced = color.downgrade(system) if system != ColorSystem.TRUECOLOR else color
    return tuple(reduced.get_truecolor(palette, foreground=foreground))  # type: ignore[return-value]


def terminal_palette(app) -> TerminalTheme:
    """VGA's 16 colours, with the default colours of a light or dark terminal."""
    ansi = app.ansi_theme
    colours = [tuple(STANDARD_PALETTE[i]) for i in range(16)]
    return TerminalTheme(tuple(ansi.background_color), tuple(ansi.foreground_color), colours[:8], colours[8:])


def cells(app) -> Iterator[tuple[int, int, Segment]]:
    """(x, y, one-character segment) for each cell of the screen as drawn now."""
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    for y, line in enumerate(update.strips):
        x = 0
        for strip in line:
            for segment in strip:
                if segment.control:
                    continue
                for char in segment.text:
                    yield x, y, Segment(char, segment.style)
                    x += 1


def checked_region(app) -> Region:
    """A modal's own box (what is behind it is dimmed on purpose); else the screen."""
    screen = app.screen
    if isinstance(screen, ModalScreen):
        regions = [child.region for child in screen.children if child.region]
        if regions:
            return Region.from_union(regions)
    return Region(0, 0, *app.size)


def low_contrast(app, minimum: float = AA) -> list[Failure]:
    """Every text cell on screen drawn below ``minimum`` contrast, in each colour system."""
    palette = terminal_palette(app)
    region = checked_region(app)
    failures: list[Failure] = []
    for x, y, segment in cells(app):
        if not is_text(segment.text) or not region.contains(x, y):
            continue
        style = segment.style
        fg_color, bg_color = (style.color, style.bgcolor) if style else (None, None)
        if style and style.reverse:
            fg_color, bg_color = bg_color, fg_color
        for name, system in SYSTEMS.items():
            fg = shown_rgb(fg_color, system, palette, foreground=not (style and style.reverse))
            bg = shown_rgb(bg_color, system, palette, foreground=bool(style and style.reverse))
            if style and style.dim:  # terminals draw dim text about halfway to the background
                fg = tuple((f + b) // 2 for f, b in zip(fg, bg))  # type: ignore[assignment]
            ratio = contrast(fg, bg)
            if ratio < minimum:
                failures.append(Failure(name, x, y, segment.text, ratio, fg, bg))
    return failures


def report(failures: list[Failure], screen_text: str, limit: int = 25) -> str:
    """Failures grouped by colour pair, with the words they hit, for a readable assert."""
    groups: dict[tuple[str, tuple, tuple], list[Failure]] = {}
    for failure in failures:
        groups.setdefault((failure.system, failure.fg, failure.bg), []).append(failure)
    lines = []
    rows = screen_text.splitlines()
    for (system, fg, bg), hits in list(groups.items())[:limit]:
        first = hits[0]
        row = rows[first.y] if first.y < len(rows) else ""
        lines.append(f"{system}: #{bytes(fg).hex()} on #{bytes(bg).hex()} {first.ratio:.2f}:1, {len(hits)} cells, e.g. row {first.y}: {row.strip()[:70]!r}")
    return "\n".join(lines)

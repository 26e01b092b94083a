"""What Textual writes to the terminal, captured and replayed (a test helper, no tests): a
minimal terminal, the screen as composed, and a cell-by-cell comparison of the two."""

from __future__ import annotations

import io
import re

from rich.cells import get_character_cell_size
from rich.console import Console
from rich.control import Control
from textual._compositor import ChopsUpdate, CompositorUpdate

CSI = re.compile(r"\x1b\[([0-9;]*)([A-Za-z])")


def _sgr_apply(state: tuple[tuple[str, ...], str, str], params: str) -> tuple[tuple[str, ...], str, str]:
    """A terminal's colours and attributes after ``ESC[params m``: (attributes, fg, bg)."""
    attributes, fg, bg = state
    codes = params.split(";") if params else ["0"]
    i = 0
    while i < len(codes):
        code = codes[i]
        if code in ("38", "48"):
            size = 3 if codes[i + 1] == "5" else 5
            group = ";".join(codes[i : i + size])
            fg, bg = (group, bg) if code == "38" else (fg, group)
            i += size
            continue
        number = int(code or "0")
        if number == 0:
            attributes, fg, bg = (), "", ""
        elif number == 39:
            fg = ""
        elif number == 49:
            bg = ""
        elif 30 <= number <= 37 or 90 <= number <= 97:
            fg = code
        elif 40 <= number <= 47 or 100 <= number <= 107:
            bg = code
        elif code not in attributes:
            attributes = (*attributes, code)
        i += 1
    return attributes, fg, bg


def _sgr_text(state: tuple[tuple[str, ...], str, str]) -> str:
    """A cell's colours as one SGR string, the way Rich orders them."""
    attributes, fg, bg = state
    return ";".join([*attributes, *(part for part in (fg, bg) if part)])


class Terminal:
    """Just enough of a terminal for what Textual and gputui's compositor write: cursor
    moves (to a cell, to a column, forward), SGR colours changed in part or whole, and
    text (wide characters take two cells)."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.cells = [[(" ", "")] * width for _ in range(height)]
        self.x = self.y = 0
        self.state: tuple[tuple[str, ...], str, str] = ((), "", "")
        self.sgr = ""

    def feed(self, data: str) -> None:
        pos = 0
        for match in CSI.finditer(data):
            self._text(data[pos : match.start()])
            params, command = match.groups()
            if command == "H":
                row, col = (params.split(";") + ["1", "1"])[:2]
                self.y, self.x = int(row or 1) - 1, int(col or 1) - 1
            elif command == "G":
                self.x = int(params or 1) - 1
            elif command == "C":
                self.x = min(self.width - 1, self.x + int(params or 1))
            elif command == "m":
                self.state = _sgr_apply(self.state, params)
                self.sgr = _sgr_text(self.state)
            pos = match.end()
        self._text(data[pos:])

    def _text(self, text: str) -> None:
        for char in text:
            if char in "\r\n":
                continue
            width = get_character_cell_size(char)
            if width == 0 or self.x >= self.width:
                continue
            self.cells[self.y][self.x] = (char, self.sgr)
            if width == 2 and self.x + 1 < self.width:
                self.cells[self.y][self.x + 1] = ("", self.sgr)
            self.x += width

    def lines(self) -> list[str]:
        return ["".join(char for char, _ in row) for row in self.cells]


def console_for(width: int, height: int) -> Console:
    # Truecolor, as Textual's own consoles in this process: Rich caches a style's
    # escape codes on the style, whichever colour system first asked for them.
    return Console(file=io.StringIO(), width=width, height=height, color_system="truecolor", force_terminal=True, legacy_windows=False)


def composed(app, console: Console) -> Terminal:
    """The screen as Textual composes it, written out whole."""
    width, height = app.size
    term = Terminal(width, height)
    for y, strip in enumerate(app.screen._compositor.render_strips()):
        term.feed(Control.move_to(0, y).segment.text + strip.render(console))
    return term


class Recorder:
    """Captures what the app would write to the terminal, and replays it."""

    def __init__(self, app, width: int, height: int) -> None:
        self.console = console_for(width, height)
        self.term = Terminal(width, height)
        self.writes: list[tuple[str, str]] = []  # (kind, data)
        original = app._display

        def display(screen, renderable):
            if isinstance(renderable, CompositorUpdate):
                data = renderable.render_segments(self.console)
                self.writes.append(("partial" if isinstance(renderable, ChopsUpdate) else "full", data))
                self.term.feed(data)
            return original(screen, renderable)

        app._display = display

    def take(self) -> list[tuple[str, str]]:
        writes, self.writes = self.writes, []
        return writes


def _looks(cell: tuple[str, str]) -> tuple[str, str]:
    """A cell as it looks: a blank's foreground colour and boldness do not show."""
    char, sgr = cell
    if char != " " or not sgr:
        return cell
    params, kept = sgr.split(";"), []
    i = 0
    while i < len(params):
        p = params[i]
        n = (
            3
            if p in ("38", "48") and i + 1 < len(params) and params[i + 1] == "5"
            else 5
            if p in ("38", "48") and i + 1 < len(params) and params[i + 1] == "2"
            else 1
        )
        group = params[i : i + n]
        if p in ("7", "4", "9", "53") or p.startswith("48") or "7" in params:
            kept += group
        i += n
    return char, ";".join(kept)


def assert_same(term: Terminal, reference: Terminal, what: str) -> None:
    for y, (row, ref) in enumerate(zip(term.cells, reference.cells)):
        row, ref = [_looks(c) for c in row], [_looks(c) for c in ref]
        if row != ref:
            x = next(i for i, (a, b) in enumerate(zip(row, ref)) if a != b)
            raise AssertionError(
                f"{what}: line {y} differs from column {x}:\n"
                f"  shown:    {''.join(c for c, _ in row)!r}\n  composed: {''.join(c for c, _ in ref)!r}\n"
                f"  cells:    {row[x : x + 4]} vs {ref[x : x + 4]}"
            )

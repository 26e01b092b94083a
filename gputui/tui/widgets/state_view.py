"""The base of the dashboard's panels: drawn from the shared state, redrawn only when
the sections they show have changed, and then only the cells that changed.

Textual repaints every cell of a refreshed region, with its colour escapes; over SSH
at 140×40 a whole-panel repaint each second is several KB/s.  So a panel keeps the
cells it last drew, builds its new text on the app's timer, and marks dirty just the
spans of each line that differ; the dashboard's screen then sends just those spans
(gputui.tui.compositor), so a chart gaining a column sends one cell per row.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import Visual, visualize
from textual.widget import Widget

from gputui.escape import widget_text

if TYPE_CHECKING:
    from gputui.view.state import DashboardState

# The state a panel draws, asked for at each redraw: a replay swaps the state object
# when it seeks back, so panels hold the app's accessor rather than one object.
StateSource = Callable[[], "DashboardState"]
# The pace of the panels that follow a run (GPUs, CPU, the chart's figures, the clock).
# Once a second was more bytes than nvitop over SSH; samples and recordings keep the
# sampler's interval, and a run starting or ending is drawn at once.  Panels step
# together on one clock (step_of), so the clock, the GPU line and the chart go out in one
# frame, not a frame each; 2.5 s, in steps of two ticks and three in turn, is the pace
# they had on average on clocks of their own (docs/performance.md#figures-behind-the-codes-choices).
LIVE_REDRAW_S = 2.5


def step_of(now: float, period: float) -> int:
    """Which step of a clock of ``period`` seconds ``now`` falls in.  Every panel counts
    on this one clock, so panels of one pace, and paces that are multiples of it, step
    at the same tick and go out in one frame."""
    return math.floor(now / period)


class Cells:
    """One line as drawn: its characters and, per character, its styles.  Lines are
    compared by their text and spans first; the per-character styles (a Python loop
    over every character) are worked out only for a line that changed."""

    __slots__ = ("_styles", "spans", "text")

    def __init__(self, text: str, spans: tuple[Span, ...] = ()) -> None:
        self.text, self.spans = text, spans
        self._styles: tuple[tuple[Any, ...], ...] | None = None

    @property
    def styles(self) -> tuple[tuple[Any, ...], ...]:
        if self._styles is None:
            styles: list[tuple[Any, ...]] = [()] * len(self.text)
            for span in self.spans:
                for i in range(span.start, min(span.end, len(self.text))):
                    styles[i] = styles[i] + (span.style,)
            self._styles = tuple(styles)
        return self._styles

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cells):
            return NotImplemented
        return self.text == other.text and (self.spans == other.spans or self.styles == other.styles)

    __hash__ = None  # type: ignore[assignment]  # compared, never a key


def line_cells(lines: Iterable[Text]) -> list[Cells]:
    return [Cells(line.plain, tuple(line.spans)) for line in lines]


def cells_of(text: Text) -> list[Cells]:
    return line_cells(text.split("\n", allow_blank=True))


def _plain_span(span: Span) -> bool:
    """A span Rich draws as Textual does: a Rich style without a link or click action."""
    return isinstance(span.style, Style) and not span.style.link and not span.style._meta


def _plain_style(style: str | Style) -> bool:
    """A line's own style that Rich draws as Textual does: none, or a Rich style without
    a link or click action (a style in words goes Textual's way: Textual turns "red" into
    its theme's red, Rich keeps the terminal's)."""
    return style == "" or (isinstance(style, Style) and not style.link and not style._meta)


def _side_by_side(line: Text, base: Style) -> list[Segment] | None:
    """The segments of a line whose spans (Rich styles) lie side by side, in order, each
    in ``base`` plus its style, as Rich's render and apply_style make them; None where
    spans overlap.  Rich's render sorts the spans' ends and stacks their styles: about
    four times this walk's time for the same segments
    (docs/performance.md#figures-behind-the-codes-choices)."""
    text, pos = line.plain, 0
    segments: list[Segment] = []
    for span in line.spans:
        start, end = span.start, min(span.end, len(text))
        if start < pos:
            return None
        if end <= start:
            continue
        if start > pos:
            segments.append(Segment(text[pos:start], base))
        segments.append(Segment(text[start:end], base + span.style))  # type: ignore[operator]  # a Rich Style: _plain_span
        pos = end
    if pos < len(text):
        segments.append(Segment(text[pos:], base))
    return segments


_BLANK = Cells("")
# Skipping unchanged cells between two changes on a line costs a cursor move and the
# colours of the next change, about this many bytes; sending them again costs a byte
# a cell and a colour escape (~20 bytes) wherever the style changes among them.
SPLIT_COST = 28
STYLE_SWITCH_COST = 20


def changed_regions(old: list[Cells], new: list[Cells], width: int) -> list[Region]:
    """The changed cells, as regions of one line each: from a line's first to its
    last differing cell, split where skipping an unchanged stretch is cheaper than
    sending it again (the partial update writes just these regions: see
    gputui.tui.compositor).  A missing line is a blank one (the panel's background),
    so a line written under the last one costs its text, not the panel's width.
    Lines with wide or zero-width characters (output can hold anything) are sent
    whole: their characters are not their cells."""
    regions = []
    for y in range(max(len(old), len(new))):
        a, b = old[y] if y < len(old) else _BLANK, new[y] if y < len(new) else _BLANK
        if a == b:
            continue
        a_text, a_styles, b_text, b_styles = a.text, a.styles, b.text, b.styles
        if cell_len(a_text) != len(a_text) or cell_len(b_text) != len(b_text):
            regions.append(Region(0, y, width, 1))
            continue
        la, lb = len(a_text), len(b_text)
        diffs = [x for x in range(max(la, lb)) if x >= la or x >= lb or a_text[x] != b_text[x] or a_styles[x] != b_styles[x]]
        runs = [[diffs[0], diffs[0] + 1]]
        for x in diffs[1:]:
            end = runs[-1][1]
            if x > end:  # an unchanged stretch [end, x), its styles as they are now
                switches = sum(1 for i in range(end, min(x, lb)) if b_styles[i] != b_styles[i - 1])
                if (x - end) + STYLE_SWITCH_COST * switches > SPLIT_COST:
                    runs.append([x, x + 1])
                    continue
            runs[-1][1] = x + 1
        for x0, x1 in runs:
            x0, x1 = min(x0, width), min(x1, width)
            if x1 > x0:
                regions.append(Region(x0, y, x1 - x0, 1))
    return regions


class StateView(Widget):
    # Panels crop long lines (with an ellipsis) rather than wrap them: a wrapped
    # line would push the rest of the panel out of its box.
    DEFAULT_CSS = """
    StateView { text-wrap: nowrap; text-overflow: ellipsis; }
    """
    SECTIONS: ClassVar[tuple[str, ...]] = ()
    # At most a redraw a step of a clock of this many seconds (step_of); 0: at any tick with news.
    MIN_REDRAW_S: ClassVar[float] = 0.0
    # Parts drawn on a clock of their own (sparklines, the plot, steady figures) may lag
    # the sections' last draw: a forced redraw draws such a panel again, news or not.
    PACED: ClassVar[bool] = False

    def __init__(self, *args: Any, source: StateSource, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._source = source
        self._seen: tuple[int, ...] | None = None
        self._drawn_step: int | None = None  # the step of MIN_REDRAW_S's clock last drawn in
        self._built = False  # _lines hold the last build (forgotten to draw afresh)
        self._text: Text | None = None  # those lines as one text, made when Textual asks for it
        self._lines: list[Text] = []
        self._strips: list[Strip | None] = []  # each line as Textual draws it, made when first asked for
        self._strips_style: object = None  # the panel's style the strips were made in
        self._cells: list[Cells] = []
        self._built_for = Size(0, 0)
        self._styles_kept: dict[str, tuple[object, Style]] = {}  # component -> (its styles, their Rich style)

    @property
    def state(self) -> DashboardState:
        return self._source()

    @property
    def compact(self) -> bool:
        return self.screen.has_class("-compact")

    def build(self) -> Text:
        """What the panel shows now, as one text.  Subclasses draw here, or in
        build_lines where they make their lines one by one."""
        return Text("\n").join(self.build_lines())

    def build_lines(self) -> list[Text]:
        """What the panel shows now, line by line.  A panel that makes its lines one by
        one returns them as they are: joining them for build() and splitting them again
        cost the chart time at every redraw, for nothing
        (docs/performance.md#figures-behind-the-codes-choices)."""
        return list(self.build().split("\n", allow_blank=True))

    def render(self) -> Text:
        # Textual asks on its own (resize, layout): rebuild only when the size changed.
        if not self._built or self.content_size != self._built_for:
            self._remember(self.build_lines())
        if self._text is None:
            self._text = Text("\n").join(self._lines)
        return self._text

    def render_line(self, y: int) -> Strip:
        # Textual's own render_line turns the whole text into strips whenever any of it
        # changed: for a clock's digit, or a worker's figure in the CPU panel, every line
        # of the panel (over half of a running dashboard's CPU:
        # docs/performance.md#figures-behind-the-codes-choices).
        # Textual asks only for the lines it marked dirty, and each is made alone here.
        if self.text_selection is not None:  # the mouse selects text: Textual draws its highlight
            self._strips = []
            return super().render_line(y)
        self._dirty_regions.clear()  # Textual's own render_line clears them as it draws
        if not self._built or self.content_size != self._built_for:
            self._remember(self.build_lines())
        width, style = self.content_size.width, self.visual_style
        if y >= len(self._lines) or width < 1:  # past the text, or no room (a terminal dragged small)
            return Strip.blank(width, style.rich_style)
        if style is not self._strips_style:  # the panel's own colours changed (Textual keeps the style while they do not)
            self._strips, self._strips_style = [None] * len(self._lines), style
        strip = self._strips[y]
        if strip is None:
            # drawn alone, the line would say it is the first: selecting text with the mouse
            # goes by the offsets in the cells' styles
            strip = self._line_strip(self._lines[y], width, style).apply_offsets(0, y)
            self._strips[y] = strip
        return strip

    def _line_strip(self, line: Text, width: int, style: VisualStyle) -> Strip:
        """One line as Textual would draw it, made by Rich where that is the same: a line
        that fits, in Rich styles, without links, in a panel aligned left.  Textual turns
        each span into its own style and back per line, three to four times Rich's time
        (half of a running dashboard's repaint: docs/performance.md#figures-behind-the-codes-choices).  Other lines
        go Textual's way; tests/tui/test_state_view_lines.py holds the two to the same
        cells, colours and offsets."""
        plain = line.cell_len <= width and "\t" not in line.plain and _plain_style(line.style)  # Textual expands tabs
        if plain and self._drawn_plainly() and all(_plain_span(span) for span in line.spans):
            console, base = self.app.console, style.rich_style
            if line.style:  # under every span, and where none is (Rich's render leaves it out of a line without spans)
                base = base + console.get_style(line.style)
            segments = _side_by_side(line, base)
            if segments is None:  # spans over spans: Rich stacks their styles
                segments = list(Segment.apply_style(line.render(console), base))
            return Strip(segments, line.cell_len)
        return Visual.to_strips(self, visualize(self, line), width, 1, style)[0]

    def _drawn_plainly(self) -> bool:
        """Whether Textual would lay the panel's lines out as they are (no alignment,
        padding or link styling of its own)."""
        rules = self.styles
        return rules.content_align == ("left", "top") and rules.text_align in ("left", "start") and not rules.line_pad

    def _remember(self, built: list[Text]) -> None:
        # Panels show preset names, run labels, GPU names and a job's output: every
        # panel's text passes gputui.escape here, so no control character reaches Rich.
        lines: list[Text] = []
        for line in built:
            line = widget_text(line)
            if "\n" in line.plain:  # a part of a panel that spans lines (the chart's legend)
                lines.extend(line.split("\n", allow_blank=True))
            else:
                lines.append(line)
        cells = line_cells(lines)
        strips: list[Strip | None] = [None] * len(lines)
        if self._built and self.content_size == self._built_for and len(self._strips) == len(self._cells) == len(cells):
            # a redraw of the same panel: the lines that did not change keep their strips
            strips = [strip if old == new else None for strip, old, new in zip(self._strips, self._cells, cells)]
        self._built, self._text = True, None
        self._lines, self._strips, self._cells, self._built_for = lines, strips, cells, self.content_size

    def invalidate(self) -> None:
        """Forget what was drawn (the theme or the layout changed): redraw it all."""
        self._built, self._text = False, None
        self._strips = []
        self.refresh(layout=self._auto_height or self._auto_width)

    @property
    def _auto_height(self) -> bool:
        """Whether the panel's height follows its lines: its own height is auto, or it is
        a cell of a grid's auto rows, which Textual sizes by the cells' lines whatever
        their CSS height says (the GPU panels: laid out while "waiting for the first
        sample…", they kept one row)."""
        if self.styles.height is not None and self.styles.height.is_auto:
            return True
        grid = self.parent.styles if isinstance(self.parent, Widget) else None
        return grid is not None and grid.layout is not None and grid.layout.name == "grid" and any(row.is_auto for row in grid.grid_rows or ())

    @property
    def _auto_width(self) -> bool:
        return self.styles.width is not None and self.styles.width.is_auto

    def sync(self, force: bool = False) -> None:
        """Called by the app's refresh timer: redraw what changed in our sections."""
        if not self.display:
            # Hidden (the GPU rows while the panels fit): nothing to draw, and a refresh
            # here would cost a layout pass of the whole screen per sample (an auto
            # height asks for one).  What was drawn is forgotten, so that being shown
            # again draws it afresh.
            self._built, self._text, self._seen = False, None, None
            return
        versions = tuple(self.state.versions[s] for s in self.SECTIONS)
        if versions == self._seen and not (force and self.PACED):
            return
        step = step_of(time.monotonic(), self.MIN_REDRAW_S) if self.MIN_REDRAW_S > 0 else None
        if not force and step is not None and step == self._drawn_step:
            return
        self._seen, self._drawn_step = versions, step
        if not self._built or self.content_size != self._built_for:
            self.invalidate()
            return
        old = self._cells
        self._remember(self.build_lines())
        resized = (len(old) != len(self._cells) and self._auto_height) or (
            self._auto_width and max((len(c.text) for c in old), default=0) != max((len(c.text) for c in self._cells), default=0)
        )
        if resized:
            self.refresh(layout=True)
            return
        regions = changed_regions(old, self._cells, self.content_size.width)
        if regions:
            self.refresh(*regions)

    def style_of(self, component: str) -> Style:
        # Textual forgets these at every refresh() (every redraw of a panel) and works
        # each out again from the stylesheet: a tenth of a running dashboard's main
        # thread.  Kept here while the component's styles are the same object: Textual
        # makes new ones whenever it applies the stylesheet again (a theme, a class).
        styles = self._component_styles.get(component)
        kept = self._styles_kept.get(component)
        if kept is not None and kept[0] is styles:
            return kept[1]
        style = self.get_component_rich_style(component, partial=True)
        self._styles_kept[component] = (styles, style)
        return style

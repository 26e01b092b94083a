"""The panels draw their lines with Rich where Textual would draw the same cells
(StateView._line_strip): every line of every panel of a running dashboard, in every
theme gputui ships and one of Textual's own, at both sizes, is held to Textual's own
rendering of it, cell by cell: character, colours, attributes and the offsets that
mouse selection reads."""

import pytest
from rich.text import Text
from textual.visual import Visual, visualize

from gputui.tui.themes import load_themes
from gputui.tui.widgets.state_view import StateView
from tests.support.redraw import one_gpu_app, started
from tests.support.tui import run_async

THEMES = [*sorted(load_themes()[0]), "textual-dark"]


def cells(strip) -> list[tuple]:
    out = []
    for text, style, _ in strip:
        for char in text:
            out.append(
                (
                    char,
                    style.color if style else None,
                    style.bgcolor if style else None,
                    tuple(bool(getattr(style, a)) if style else False for a in ("bold", "dim", "italic", "underline", "reverse", "strike")),
                    style.meta.get("offset") if style else None,
                )
            )
    return out


def textual_strip(view: StateView, line: Text, y: int):
    width = view.content_size.width
    return Visual.to_strips(view, visualize(view, line), width, 1, view.visual_style)[0].apply_offsets(0, y)


@pytest.mark.parametrize("size", [(140, 40), (80, 24)])
def test_every_panel_line_is_the_cells_textual_would_draw_in_every_theme(tmp_path, size):
    app = one_gpu_app(tmp_path)
    compared: dict[str, int] = {}

    async def scenario():
        async with app.run_test(size=size) as pilot:
            await started(app, pilot)
            for theme in THEMES:
                app.theme = theme
                await pilot.pause()
                app.refresh_dashboard(force=True)
                await pilot.pause()
                for view in app.dashboard.query(StateView):
                    if not view.display or not view.content_size.width:
                        continue
                    view.render()  # its lines for the size it has now
                    width, style = view.content_size.width, view.visual_style
                    for y, line in enumerate(view._lines):
                        ours = view._line_strip(line, width, style).apply_offsets(0, y)
                        theirs = textual_strip(view, line, y)
                        assert cells(ours) == cells(theirs), f"{theme}: {type(view).__name__} line {y}: {line.plain!r}"
                        assert ours.cell_length == theirs.cell_length
                        compared[type(view).__name__] = compared.get(type(view).__name__, 0) + 1

    run_async(scenario())
    assert {"CpuPanel", "GpuPanel", "ThroughputChart", "RunStatus", "MachineInfo"} <= set(compared), compared


def in_a_panel(tmp_path, panel: str, check) -> None:
    """``check(view, width, style)`` on the running dashboard's panel of that class."""
    app = one_gpu_app(tmp_path)

    async def scenario():
        async with app.run_test(size=(140, 40)) as pilot:
            await started(app, pilot)
            view = next(v for v in app.dashboard.query(StateView) if type(v).__name__ == panel)
            check(view, view.content_size.width, view.visual_style)

    run_async(scenario())


def test_lines_rich_cannot_draw_as_textual_does_go_textuals_way(tmp_path):
    """A line longer than the panel (Textual ends it with an ellipsis), a Textual style
    variable, a link and a tab are Textual's to draw."""

    def check(view, width, style):
        long = Text("x" * (width + 5))
        variable = Text("busy", style="$accent")
        linked = Text.assemble(("docs", "link https://example.com"))
        tabbed = Text("step\t12")  # panels escape tabs (gputui.escape); Textual would expand one
        for line in (long, variable, linked, tabbed):
            assert cells(view._line_strip(line, width, style).apply_offsets(0, 0)) == cells(textual_strip(view, line, 0)), line.plain
        assert "…" in "".join(c[0] for c in cells(view._line_strip(long, width, style)))

    in_a_panel(tmp_path, "CpuPanel", check)


def test_a_line_with_a_style_of_its_own_is_drawn_in_it(tmp_path):
    """Panels hand over their lines one by one (StateView.build_lines), each with the
    style it was made in ("waiting for the first sample…", "no clock throttling"); Rich's
    Text.render leaves that style out of a line without spans."""
    from rich.style import Style

    def check(view, width, style):
        dim = Style(color="#9aa5b1")
        alone = Text("no clock throttling", dim)
        named = Text("waiting", "bold red")
        with_spans = Text("util 100%", dim)
        with_spans.stylize("bold", 0, 4)
        unstyled = cells(view._line_strip(Text("waiting"), width, style))
        for line in (alone, named, with_spans):
            ours = cells(view._line_strip(line, width, style).apply_offsets(0, 0))
            assert ours == cells(textual_strip(view, line, 0)), line.plain
            assert ours[-1][1] != unstyled[0][1], f"{line.plain!r} is drawn in the panel's own colour"

    in_a_panel(tmp_path, "GpuPanel", check)


def test_spans_side_by_side_are_walked_and_spans_over_spans_go_rich_s_way(tmp_path):
    """Rich's render sorts the spans' ends and stacks their styles, four times the time
    of walking spans that lie side by side (StateView's common line).  Both ways give
    Textual's cells: gaps between spans, an empty span, spans on a line's own style,
    and spans over spans (which the walk leaves to Rich)."""
    from rich.style import Style

    from gputui.tui.widgets import state_view

    red, bold, under = Style(color="#ff5555"), Style(bold=True), Style(underline=True)

    def check(view, width, style):
        gaps = Text.assemble("  ", ("5.0k", red), "┤ ", ("████", bold), " ", ("▅", red))
        empty = Text("abc")
        empty.stylize(red, 1, 1)
        empty.stylize(bold, 1, 3)
        on_its_own = Text.assemble(("util", bold), " 100%", style=Style(color="#9aa5b1"))
        overlapping = Text("overlap")
        overlapping.stylize(red, 0, 5)
        overlapping.stylize(under, 2, 7)
        for line in (gaps, empty, on_its_own, overlapping):
            assert cells(view._line_strip(line, width, style).apply_offsets(0, 0)) == cells(textual_strip(view, line, 0)), line.plain
        walked = [line.plain for line in (gaps, empty, on_its_own, overlapping) if state_view._side_by_side(line, Style()) is not None]
        assert walked == [gaps.plain, empty.plain, on_its_own.plain], "the overlapping line is Rich's to draw"

    in_a_panel(tmp_path, "CpuPanel", check)

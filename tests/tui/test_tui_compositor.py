"""gputui.tui.compositor behind a version test: on the Textual it was written for, a
screen that asks gets the cropping compositor, whose frames reproduce the screen
Textual's own compositor shows, in fewer bytes; on any other Textual (another
version, or internals of another shape) the screen keeps Textual's own compositor
and still shows the right picture.  So upgrading Textual is that module's decision.

Each app is driven the same way (a bordered, padded panel whose lines grow a cell at
their right end, as a chart does) and everything it writes to the terminal, the first
full frame and the partial updates after it, is replayed on a small terminal emulator.
"""

from __future__ import annotations

from typing import Any

import pytest
from rich.text import Text
from textual._compositor import ChopsUpdate, Compositor
from textual.app import App
from textual.geometry import Region
from textual.screen import Screen
from textual.widget import Widget

from gputui.tui import compositor
from gputui.tui.compositor import CroppingCompositor, crop_updates
from tests.support.terminal import Recorder, assert_same, composed
from tests.support.tui import run_async

SIZE = (60, 8)
PREFIX = "行 {row}: "  # a double-width character left of the changes
GROWTH = 12


class Ticker(Widget):
    DEFAULT_CSS = """
    Ticker { border: round $primary; padding: 0 2; width: 50; height: 5; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def render(self) -> Text:
        return Text("\n".join(PREFIX.format(row=row) + "#" * self.count for row in range(3)), style="bold")

    def grow(self) -> None:
        """One more cell at the right end of each line: only those cells are dirty."""
        self.count += 1
        x = len(PREFIX.format(row=0)) + 1 + self.count - 1  # 行 takes two cells
        self.refresh(*(Region(x, row, 1, 1) for row in range(3)))


class TickerScreen(Screen[None]):
    def __init__(self, crop: bool) -> None:
        super().__init__()
        self.cropping = crop_updates(self) if crop else False

    def compose(self):
        yield Ticker()


class TickerApp(App[None]):
    def __init__(self, crop: bool) -> None:
        super().__init__()
        self.crop = crop

    def on_mount(self) -> None:
        self.push_screen(TickerScreen(self.crop))


def drive(crop: bool) -> dict[str, Any]:
    """Run the app, grow its panel, and return what it wrote and how it looks."""
    result: dict[str, Any] = {}

    async def scenario() -> None:
        app = TickerApp(crop)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            recorder = Recorder(app, *SIZE)
            app.screen.refresh()  # a full frame for the emulator to start from
            await pilot.pause()
            ticker = app.screen.query_one(Ticker)
            for _ in range(GROWTH):
                ticker.grow()
                await pilot.pause()
            writes = recorder.take()
            screen = app.screen
            assert isinstance(screen, TickerScreen)
            result.update(
                cropping=screen.cropping,
                compositor=type(screen._compositor),
                shown=recorder.term,
                composed=composed(app, recorder.console),
                partial_bytes=sum(len(data) for kind, data in writes if kind == "partial"),
                partials=sum(1 for kind, _ in writes if kind == "partial"),
                full_frames=sum(1 for kind, _ in writes if kind == "full"),
            )

    run_async(scenario())
    return result


def textual_own() -> dict[str, Any]:
    plain = drive(crop=False)
    assert plain["compositor"] is Compositor and plain["full_frames"] >= 1 and plain["partials"] >= GROWTH // 2
    assert_same(plain["shown"], plain["composed"], "Textual's own compositor")
    assert PREFIX.format(row=2) + "#" * GROWTH + " " in plain["shown"].lines()[3]  # under the border
    return plain


def test_on_the_supported_textual_the_cropped_frames_show_what_textual_s_own_do():
    assert compositor.SUPPORTED, f"Textual {compositor._textual_version()} is not one gputui.tui.compositor was tested with"
    plain = textual_own()
    cropped = drive(crop=True)
    assert cropped["cropping"] and cropped["compositor"] is CroppingCompositor and cropped["partials"] >= GROWTH // 2
    assert_same(cropped["shown"], cropped["composed"], "the cropping compositor's frames")
    assert_same(cropped["shown"], plain["shown"], "cropped frames against Textual's own")
    assert cropped["shown"].cells == plain["shown"].cells
    # The optimisation at work: each update sends the new cells, not whole rows from
    # the panel's left border.
    assert cropped["partial_bytes"] * 2 < plain["partial_bytes"]


def _newer_chops_init(original):
    def __init__(self, chops, spans, chop_ends, extra=None) -> None:  # a parameter this module does not know
        original(self, chops, spans, chop_ends)

    return __init__


@pytest.mark.parametrize("change", ["version", "signature"])
def test_on_an_unrecognised_textual_the_screen_keeps_textual_s_own_compositor(monkeypatch, change):
    plain = textual_own()
    if change == "version":
        monkeypatch.setattr(compositor, "_textual_version", lambda: "8.3.0")
    else:
        monkeypatch.setattr(ChopsUpdate, "__init__", _newer_chops_init(ChopsUpdate.__init__))
    assert not compositor._looks_as_expected()
    fallback = drive(crop=True)
    assert not fallback["cropping"] and fallback["compositor"] is Compositor
    assert_same(fallback["shown"], fallback["composed"], "the fallback's frames")
    assert fallback["shown"].cells == plain["shown"].cells

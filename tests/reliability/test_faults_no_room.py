"""Widgets left no room for their text (a terminal dragged small): they draw nothing
there and keep running.  Each case crashed the app in the resize-storm test
(tests/reliability/test_faults_app.py) on a loaded CI machine; here it is made to
happen every time."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets.option_list import Option

from gputui.tui.screenshot import screen_text
from gputui.tui.widgets.option_list import NarrowSafeOptionList
from gputui.tui.widgets.state_view import StateView
from tests.support.tui import run_async

OPTIONS = ["resnet50-demo", "a-longer-preset-name-that-wraps", "x"]


class Panel(StateView):
    def build(self) -> Text:
        return Text("first line\nsecond line")


class NoRoomApp(App[None]):
    # 3 columns of border and padding: the content is 0 columns wide.
    CSS = """
    Panel { width: 3; height: 4; border-left: solid red; padding: 0 1; }
    NarrowSafeOptionList { width: 3; height: 6; }
    """

    def compose(self) -> ComposeResult:
        yield Panel(source=lambda: None)  # type: ignore[arg-type,return-value]  # build reads no state
        yield NarrowSafeOptionList(*(Option(name, id=name) for name in OPTIONS))


def test_a_panel_and_a_list_without_room_draw_and_take_keys():
    app = NoRoomApp()

    async def scenario():
        async with app.run_test(size=(40, 12)) as pilot:
            panel, options = app.query_one(Panel), app.query_one(NarrowSafeOptionList)
            assert panel.content_size.width == 0
            options.focus()
            options.highlighted = 1
            for key in ("pagedown", "pageup", "down", "up", "end", "home"):
                await pilot.press(key)
            await pilot.pause()
            assert app.is_running
            assert "first" not in screen_text(app)  # nothing of the panel's text where it has no room
            panel.styles.width = 20  # room again: the text is drawn
            options.styles.width = 30
            await pilot.pause()
            text = screen_text(app)
            assert "first line" in text and "resnet50-demo" in text

    run_async(scenario())


def test_a_list_measured_at_no_width_counts_a_line_a_cell():
    app = NoRoomApp()

    async def scenario():
        async with app.run_test(size=(40, 12)):
            options = app.query_one(NarrowSafeOptionList)
            size = app.size
            # Textual wraps each option into width - padding columns; at 0 that crashed.
            assert options.get_content_height(size, size, 0) == sum(len(name) for name in OPTIONS)

    run_async(scenario())


def test_a_resize_queued_before_the_terminal_s_last_one_leaves_the_screen_at_the_terminal_s_size(tmp_path, monkeypatch):
    # A window dragged while the app is busy: a Resize for an older size is still queued
    # when the terminal's own arrives, with other messages between them.  The dashboard
    # ended at the old size; with more of them, two sizes re-posted each other for ever.
    from textual.events import Resize
    from textual.geometry import Size
    from textual.screen import Screen

    from tests.support.keys import scripted_app
    from tests.support.tui import close_all_and_quit, wait_until

    app = scripted_app(tmp_path, monkeypatch)
    laid_out: list[tuple[int, int]] = []
    real_layout = Screen._refresh_layout

    def counted(screen, size=None, *args, **kwargs):
        laid_out.append(tuple(size or screen.outer_size))
        return real_layout(screen, size, *args, **kwargs)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            monkeypatch.setattr(Screen, "_refresh_layout", counted)
            screen = app.screen
            screen.post_message(Resize(Size(10, 3), Size(10, 3)))
            screen.call_later(lambda: None)  # something between them: no coalescing
            screen.post_message(Resize(Size(80, 24), Size(80, 24)))
            await wait_until(pilot, lambda: laid_out, what="the queued Resizes handled")
            await pilot.pause(0.5)  # time for any re-posted Resize to come round
            assert app.screen.size == app.size == Size(80, 24)
            assert (80, 24) in laid_out and (10, 3) not in laid_out and len(laid_out) < 10, laid_out
            await close_all_and_quit(app, pilot)

    run_async(scenario())


def test_every_screen_of_the_app_is_laid_out_at_the_terminal_s_size():
    import importlib
    import pkgutil

    from textual.screen import Screen

    import gputui.tui as tui
    from gputui.tui.screens.terminal_size import TerminalSized

    for module in pkgutil.walk_packages(tui.__path__, f"{tui.__name__}."):
        importlib.import_module(module.name)
    ours = [cls for cls in _subclasses(Screen) if cls.__module__.startswith("gputui.")]
    assert len(ours) >= 12
    assert [cls.__name__ for cls in ours if not issubclass(cls, TerminalSized)] == []


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found

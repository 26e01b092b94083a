"""What the dashboard writes to the terminal between full frames: the partial updates.

The dashboard's screen sends each changed span from its first changed cell
(gputui.tui.compositor), and its panels mark dirty only the cells that changed
(gputui.tui.widgets.state_view.changed_regions).  Both would leave stale cells on the
user's screen if they were wrong, so these tests replay every update the app writes
on a small terminal emulator and compare it, cell by cell and colour by colour,
with the screen as Textual composes it; and they pin what typical updates cost.
"""

from __future__ import annotations

import dataclasses

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual._compositor import ChopsUpdate
from textual.geometry import Region
from textual.strip import Strip

from gputui.model import Sample
from gputui.record import events as ev
from gputui.record.events import make_event
from gputui.tui.compositor import SUPPORTED, CroppedChopsUpdate, CroppingCompositor, cursor_move, sgr_change
from gputui.tui.widgets.state_view import cells_of, changed_regions
from gputui.view.session_news import EventArrived, SampleArrived
from tests.support.dashboard import scripted_dashboard
from tests.support.terminal import Recorder, Terminal, assert_same, composed, console_for
from tests.support.tui import demo_preset, fixed_host, run_async, shown, wait_until


def test_the_dashboard_uses_the_cropping_compositor():
    assert SUPPORTED, "Textual's compositor changed: gputui.tui.compositor no longer applies"


def test_every_partial_update_leaves_the_screen_as_composed(tmp_path):
    """Log lines (wide characters too), GPU and host samples, throughput readings and
    the ticking clock, each followed by a redraw: after every one, the replayed
    terminal matches the composed screen exactly."""
    preset = demo_preset()
    size = (140, 40)

    async def scenario():
        app = scripted_dashboard(preset, tmp_path)
        recorder = Recorder(app, *size)
        async with app.run_test(size=size) as pilot:
            await wait_until(pilot, lambda: app.state.run is not None and app.state.run.series.readings == 96, what="script played")
            await shown(pilot)
            await shown(pilot)
            assert_same(recorder.term, composed(app, recorder.console), "after the script")
            state, run = app.state, app.state.run
            ticket = run.ticket
            recorder.take()

            # One line of output under the last: about its text goes out, not the pane's width.
            line = "step 50: 1401234.5 samples/sec"
            state.apply(ticket, [EventArrived(make_event(29.0, ev.OUTPUT, {"stream": "stdout", "text": line}))])
            app.refresh_dashboard(force=True)
            await pilot.pause()
            sent = "".join(data for kind, data in recorder.take())
            assert line in sent and len(sent) < len(line) + 60, repr(sent)
            assert_same(recorder.term, composed(app, recorder.console), "after one line")

            partial = 0
            lines = ["step 50: 1401234.5 samples/sec", "epoch 1 損失 0.25 ✓ done", "tab\there", "🎉 party", "x" * 300, ""]
            for i in range(40):
                t = 30.0 + i
                state.apply(
                    ticket,
                    [EventArrived(make_event(t, ev.OUTPUT, {"stream": "stderr" if i % 7 == 3 else "stdout", "text": lines[i % len(lines)] + f" #{i}"}))],
                )
                state.apply(
                    ticket,
                    [
                        EventArrived(
                            make_event(t, ev.THROUGHPUT, {"samples_per_sec": 2700.0 + 90 * (i % 5), "source": "gputui", "phase": "measure"}), 2800.0 + i
                        )
                    ],
                )
                if i % 3 == 0:
                    gpus = [
                        dataclasses.replace(
                            g.latest, util_gpu=50 + 7 * ((i + n) % 7), power_w=300.0 + 11 * (i % 9), temp_c=70.0 + (i % 20), sm_clock_mhz=1500 + 15 * (i % 30)
                        )
                        for n, g in sorted(state.gpus.items())
                    ]
                    host = dataclasses.replace(fixed_host(True), cpu_percent=float(10 + 9 * (i % 10)))
                    state.apply(ticket, [SampleArrived(Sample(t=t, gpus=gpus, host=host))])
                app.refresh_dashboard(force=i % 2 == 0)  # the panels redraw at most every LIVE_REDRAW_S unforced
                await pilot.pause()
                writes = recorder.take()
                partial += sum(kind == "partial" for kind, _ in writes)
                assert_same(recorder.term, composed(app, recorder.console), f"after step {i}")
            assert partial >= 20  # the checks above were of partial updates, not full frames

    run_async(scenario())


def test_a_new_output_line_costs_about_its_text():
    """Appending a line under the last one sends that line, not the pane's width;
    changing a few cells at the end of a wide line sends those cells."""
    old = cells_of(Text("first line"))
    new = cells_of(Text("first line\nsecond line"))
    assert changed_regions(old, new, 120) == [Region(0, 1, len("second line"), 1)]
    assert changed_regions(new, old, 120) == [Region(0, 1, len("second line"), 1)]
    a = cells_of(Text("util  97%  SM  44%" + " " * 60 + "▁▂▃▄"))
    b = cells_of(Text("util  98%  SM  44%" + " " * 60 + "▂▃▄▅"))
    assert changed_regions(a, b, 120) == [Region(7, 0, 1, 1), Region(78, 0, 4, 1)]  # two spans, not one
    c = cells_of(Text("wide 損失 x"))
    d = cells_of(Text("wide 損失 y"))
    assert changed_regions(c, d, 40) == [Region(0, 0, 40, 1)]  # characters are not cells: the whole line


def test_cropped_spans_start_at_the_change_and_keep_wide_characters_whole():
    console = console_for(40, 3)
    red = Style(color="red")
    strip = Strip([Segment("│ ", red), Segment("ab損cd", None), Segment(" efgh", red)])
    chops = [{0: strip}]
    ends = [[strip.cell_length]]

    def written(x1: int, x2: int) -> str:
        term = Terminal(40, 1)
        term.feed(CroppedChopsUpdate(chops, [(0, x1, x2)], ends).render_segments(console))
        return term.lines()[0].rstrip()

    assert written(3, 4) == "   b"
    assert written(5, 6) == "    損"  # the right half of 損 starts the span: all of it is sent
    assert written(2, 5) == "  ab損"  # ends inside 損: all of it is sent
    full = Terminal(40, 1)
    full.feed(ChopsUpdate(chops, [(0, 3, 4)], ends).render_segments(console))
    assert full.lines()[0].rstrip() == "│ ab"  # Textual's own: from the widget's edge


def test_a_change_of_colour_sends_only_the_colour_that_changed():
    """Rich writes each style whole after a reset; between two cells that differ in one
    colour only that colour goes out, and a terminal replaying it shows both cells in
    exactly the colours Rich would have written."""
    red_on_navy, amber_on_navy = "38;5;203;48;5;17", "38;5;221;48;5;17"
    assert sgr_change(red_on_navy, amber_on_navy) == "\x1b[38;5;221m"
    assert sgr_change("1;38;5;203;48;5;17", "1;38;5;203;48;5;16") == "\x1b[48;5;16m"
    assert sgr_change(red_on_navy, "48;5;17") == "\x1b[39m"  # the default foreground, the same background
    assert sgr_change(red_on_navy, "38;2;10;20;30") == "\x1b[38;2;10;20;30;49m"
    assert sgr_change(red_on_navy, "1;" + red_on_navy) == "\x1b[0m\x1b[1;" + red_on_navy + "m"  # bold on: whole
    assert sgr_change("1;" + red_on_navy, red_on_navy) == "\x1b[0m\x1b[" + red_on_navy + "m"  # and off
    assert sgr_change(red_on_navy, "") == "\x1b[0m" and sgr_change("", red_on_navy) == f"\x1b[{red_on_navy}m"

    console = console_for(40, 1)
    styles = [Style(color="red", bgcolor="blue"), Style(color="yellow", bgcolor="blue"), Style(bold=True, color="yellow"), Style(color="green")]
    strip = Strip([Segment(char, style) for char, style in zip("abcd", styles)])
    ours, reference = Terminal(40, 1), Terminal(40, 1)
    sent = CroppedChopsUpdate([{0: strip}], [(0, 0, 4)], [[4]]).render_segments(console)
    ours.feed(sent)
    reference.feed(strip.render(console))
    assert_same(ours, reference, "four cells, each in other colours")
    assert sent.count("\x1b[0m") == 3, repr(sent)  # bold on, bold off, and the reset that ends the update
    assert "\x1b[33mb" in sent  # red to yellow on blue: the foreground alone


def test_cursor_moves_are_the_shortest_that_get_there():
    assert cursor_move((10, 5), 14, 5) == "\x1b[4C"  # forward along the row
    assert cursor_move((10, 5), 11, 5) == "\x1b[C"
    assert cursor_move((10, 5), 2, 5) == "\x1b[3G"  # back along the row: to the column
    assert cursor_move((10, 5), 14, 6) == "\x1b[7;15H"  # another row
    assert cursor_move(None, 14, 5) == "\x1b[6;15H"  # where the cursor is is not known

    console = console_for(40, 2)
    strip = Strip([Segment("ab"), Segment("XY", Style(color="red")), Segment("cdefgh")])
    ours, reference = Terminal(40, 2), Terminal(40, 2)
    for term in (ours, reference):
        term.feed("\x1b[2;1H" + strip.render(console))
    changed = Strip([Segment("ab"), Segment("XZ", Style(color="red")), Segment("cdefgq")])
    sent = CroppedChopsUpdate([{}, {0: changed}], [(1, 0, 10)], [[], [10]]).render_segments(console)
    reference.feed("\x1b[2;1H" + changed.render(console))
    ours.feed(sent)
    assert_same(ours, reference, "two changes on one row")


def test_the_compositor_is_only_swapped_for_textual_s_own():
    from textual.screen import Screen

    from gputui.tui.compositor import crop_updates

    class Odd(Screen):
        pass

    screen = Odd()
    assert crop_updates(screen) and isinstance(screen._compositor, CroppingCompositor)
    assert not crop_updates(screen)  # already done

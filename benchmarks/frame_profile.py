"""Where a running dashboard's redraw goes: cProfile over forced redraws.

    python benchmarks/frame_profile.py [--frames 100] [--size 140x40] [--cores 16] [--top 40]

The app runs headless (Textual's run_test) over the NVML test double (one GPU), its
state fed as the session bridge feeds it: before each redraw two samples of --cores
cores and 13 processes (benchmarks/synthetic.py) and ten throughput readings.  Each
redraw is forced (``refresh_dashboard(force=True)``): every panel is drawn again, the
chart's plot too, which a real run redraws every 4 s.  Prints the CPU milliseconds a
redraw took under the profiler and the functions with the most cumulative time; the
profile is written to --out for a closer look (``python -m pstats``).  It says where the
time goes, not what a redraw costs without the profiler: that is
benchmarks/app_scale.py's frame cost, and benchmarks/tui_cost.py's on a real terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from synthetic import sample

from gputui.presets.preset import Config
from gputui.record import events as ev
from gputui.record.events import make_event
from gputui.session.options import RunOptions
from gputui.tui.live_app import DashboardLook, DashboardParts, make_app
from gputui.view.session_news import EventArrived, SampleArrived
from tests.support.fake_nvml import FakeGpu
from tests.support.tui import demo_preset, scripted_factory, wait_until

WARM_FRAMES = 30


async def profile(args: argparse.Namespace, scratch: Path) -> float:
    preset = demo_preset()
    app = make_app(
        RunOptions(config=Config(presets={preset.name: preset}, diagnosis={}), preset=preset),
        DashboardParts(session_factory=scripted_factory([FakeGpu()], samples=2)),
        DashboardLook(settings_file=scratch / "settings.toml", user_themes_dir=scratch / "no-themes"),
    )
    async with app.run_test(size=args.size) as pilot:
        await wait_until(pilot, lambda: app.state.run is not None and app.state.run.series.readings > 0, what="run started")
        state, ticket = app.state, app.state.run.ticket
        i = 10

        def feed() -> None:
            nonlocal i
            for _ in range(2):
                i += 1
                state.apply(ticket, [SampleArrived(sample(i, 1.0, 1, args.cores, 13))])
                for k in range(5):
                    reading = {"samples_per_sec": 900.0 + 13 * ((i * 5 + k) % 7), "phase": "measure", "source": "gputui"}
                    state.apply(ticket, [EventArrived(make_event(i + k / 5, ev.THROUGHPUT, reading), 920.0)])

        async def frame() -> None:
            app.refresh_dashboard(force=True)
            await pilot.pause()

        for _ in range(WARM_FRAMES):
            feed()
            await frame()
        profiler = cProfile.Profile()
        began = time.process_time()
        profiler.enable()
        for _ in range(args.frames):
            feed()
            await frame()
        profiler.disable()
        per_frame_ms = (time.process_time() - began) * 1e3 / args.frames
        profiler.dump_stats(str(args.out))
    return per_frame_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--size", type=lambda text: tuple(int(n) for n in text.split("x")), default=(140, 40), metavar="COLSxROWS")
    parser.add_argument("--cores", type=int, default=16)
    parser.add_argument("--top", type=int, default=40, help="functions to print, by cumulative time")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "gputui-frame.prof", help="where the profile goes (default: the temp folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gputui-frame-") as scratch:
        per_frame_ms = asyncio.run(profile(args, Path(scratch)))
    print(f"{per_frame_ms:.1f} ms of CPU a redraw, under the profiler ({args.frames} redraws, {args.size[0]}x{args.size[1]}, {args.cores} cores)")
    pstats.Stats(str(args.out)).sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The dashboard at scale: frame cost with 8 GPUs and 128 cores of synthetic telemetry,
and its memory over a fast-forwarded 24-hour feed.

    python benchmarks/app_scale.py [--gpus 8] [--cores 128] [--frames 200] [--hours 24] [--out DIR]

The app runs headless (Textual's run_test) at 140x40 over a scripted session on the
test double of NVML (tests/support/fake_nvml.py, 8 GPUs).  Synthetic samples
(benchmarks/synthetic.py) go into the dashboard's state as the session bridge puts
them there, then:

  frame cost   CPU time of one redraw tick (refresh_dashboard + the repaint it
               causes) after each new sample, a throughput reading and a log line
  24 h memory  --hours of 1 Hz samples fed an hour at a time, a frame after each
               hour: this process's resident memory per simulated hour

Writes DIR/app-scale.json and a Markdown table.  Time to first frame and bytes per
second are benchmarks/tui_cost.py's (a real terminal).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

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

MIB = 1024**2


async def scenario(args: argparse.Namespace, scratch: Path) -> dict:
    preset = demo_preset()
    gpus = [FakeGpu(uuid=f"GPU-{n}") for n in range(args.gpus)]
    app = make_app(
        RunOptions(config=Config(presets={preset.name: preset}, diagnosis={}), preset=preset),
        DashboardParts(session_factory=scripted_factory(gpus, samples=2)),
        DashboardLook(settings_file=scratch / "settings.toml", user_themes_dir=scratch / "no-themes"),
    )
    me = psutil.Process()
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: app.state.run is not None and app.state.run.series.readings > 0, what="run started")
        state, ticket = app.state, app.state.run.ticket
        i = 10

        def feed(n: int) -> None:
            nonlocal i
            for _ in range(n):
                i += 1
                t = float(i)
                state.apply(ticket, [SampleArrived(sample(i, 1.0, args.gpus, args.cores, 9))])
                reading = {"samples_per_sec": 2700.0 + 13 * (i % 7), "phase": "measure", "source": "gputui"}
                state.apply(ticket, [EventArrived(make_event(t, ev.THROUGHPUT, reading), 2750.0)])
            line = {"stream": "stdout", "text": f"step {i}: loss 0.{i % 997:03d}"}
            state.apply(ticket, [EventArrived(make_event(float(i), ev.OUTPUT, line))])

        async def frame() -> float:
            began = time.process_time()
            app.refresh_dashboard()
            await pilot.pause()
            return (time.process_time() - began) * 1e3

        for _ in range(5):  # warm caches
            feed(1)
            await frame()
        costs = []
        for _ in range(args.frames):
            feed(1)
            costs.append(await frame())
        rss = [(0, round(me.memory_info().rss / MIB, 1))]
        for hour in range(1, int(args.hours) + 1):
            feed(3600)
            await frame()
            rss.append((hour, round(me.memory_info().rss / MIB, 1)))
    costs.sort()
    later = [m for h, m in rss if h >= 1]
    return {
        "gpus": args.gpus,
        "cores": args.cores,
        "frames": args.frames,
        "frame_ms_median": round(statistics.median(costs), 2),
        "frame_ms_p95": round(costs[int(len(costs) * 0.95) - 1], 2),
        "rss_mib_by_hour": rss,
        "rss_growth_after_hour_1_mib": round(max(later) - min(later), 1) if later else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--cores", type=int, default=128)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--out", type=Path, default=Path("app-scale-out"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gputui-app-scale-") as scratch:
        result = asyncio.run(scenario(args, Path(scratch)))
    (args.out / "app-scale.json").write_text(json.dumps(result, indent=2) + "\n")
    rss = result["rss_mib_by_hour"]
    lines = [
        "| figure | value |",
        "| --- | --- |",
        f"| frame cost, {args.gpus} GPUs and {args.cores} cores (median / p95) | {result['frame_ms_median']} / {result['frame_ms_p95']} ms |",
        f"| app RSS at 0 / 1 / {rss[-1][0]} h | {rss[0][1]:.0f} / {rss[min(1, len(rss) - 1)][1]:.0f} / {rss[-1][1]:.0f} MiB |",
        f"| app RSS growth after hour 1 | {result['rss_growth_after_hour_1_mib']} MiB |",
    ]
    (args.out / "app-scale.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""An SVG screenshot of the dashboard replaying a recording at one moment (a recording
made on a GPU machine, shot here without one):

    python scripts/replay-screenshot.py RECORDING OUT.svg [--at SECONDS] [--size 160x48]

--at defaults to the middle of the measured phase.  OUT.txt gets the same screen as text.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recording", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--at", type=float, help="seconds into the recording (default: mid measured phase)")
    parser.add_argument("--size", default="160x48", help="COLUMNSxROWS (default 160x48)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))

    from gputui.record.recording import read_recording
    from gputui.safe_write import write_atomic
    from gputui.tui.replay_app import make_replay_app
    from gputui.tui.screenshot import screen_text

    width, height = (int(part) for part in args.size.split("x"))
    recording = read_recording(args.recording)

    async def shoot() -> tuple[str, str]:
        with tempfile.TemporaryDirectory(prefix="gputui-replay-shot-") as scratch:
            app = make_replay_app(recording, start_paused=True, settings_file=Path(scratch) / "s.toml", user_themes_dir=Path(scratch) / "themes")
            async with app.run_test(size=(width, height)) as pilot:
                player = app.player
                start = player.measure_t() or 0.0
                at = args.at if args.at is not None else (start + player.end_t) / 2
                app._seek(at, "no such moment")
                for _ in range(10):  # a few redraw ticks: the panels fold the seek
                    await pilot.pause(0.05)
                app.refresh_dashboard(force=True)
                await pilot.pause()
                return app.export_screenshot(title=f"gputui replay {args.recording.name} at {at:.0f} s"), screen_text(app)

    svg, text = asyncio.run(shoot())
    write_atomic(args.out, svg)
    write_atomic(args.out.with_suffix(".txt"), text + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``gputui replay FILE [--speed X]``: a recording played back in the dashboard, through
the same widgets and state as a live run.  Nothing runs and NVML is never opened."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gputui.errors import UserError

SPEEDS = {"1": 1.0, "10": 10.0, "60": 60.0, "max": None}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, metavar="FILE", help="a recording (--record's file, or a kept run's name from `gputui runs`)")
    parser.add_argument("--speed", default="1", metavar="X", help="playback speed: a factor (1, 10, 60, ...) or max (as fast as it draws); default 1")


def parse_speed(text: str) -> float | None:
    """A factor above 0, or None for as fast as possible."""
    word = text.strip().lower()
    if word == "max":
        return None
    word = word.removesuffix("x")  # 10x means 10
    try:
        value = float(word)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise UserError(f"--speed: expected a factor greater than 0 (1, 10, 60, ...) or max, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from gputui.lookback.load import load_recording

    speed = parse_speed(args.speed)
    recording = load_recording(args.file)  # a bad or newer file: one line, before the screen opens
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UserError("replay needs a terminal (it opens the dashboard)")
    from gputui.tui.replay_app import make_replay_app  # Textual loads only now

    app = make_replay_app(recording, speed=speed, theme=args.theme)
    code = app.run()
    return code if isinstance(code, int) else 0

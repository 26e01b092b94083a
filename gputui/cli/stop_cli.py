"""``gputui stop RUN``: stop a live run (its whole process group: TERM, then KILL after
the grace) and say how it ended.  RUN is a live run's name as ``gputui runs`` lists it,
the start of one, its pid or one of its files."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

WAIT_S = 60.0  # the run's grace (5 s) before KILL, its last sample and summary, with room to spare


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", help="a live run: its name as `gputui runs` lists it, its pid, or its recording")
    parser.add_argument("--no-wait", action="store_true", help="ask it to stop and return at once")


def run(args: argparse.Namespace) -> int:
    from gputui.escape import for_terminal
    from gputui.live.registry import Registry
    from gputui.live.stop_request import asked_by, request_stop

    live = Registry().find(args.run)
    request_stop(live, asked_by("gputui stop"))
    if args.no_wait:
        print(for_terminal(f"gputui: asked {live.name} to stop"))
        return 0
    deadline = time.monotonic() + WAIT_S
    while live.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    if live.alive():
        print(for_terminal(f"gputui: asked {live.name} to stop; it is still stopping (pid {live.pid})"))
        return 1
    print(for_terminal(f"gputui: {live.name}: {how_it_ended(live.kept_path or live.record_path or live.recording)}"))
    return 0


def how_it_ended(path: Path) -> str:
    """The outcome a finished recording gives, in a line."""
    from gputui.errors import UserError
    from gputui.record.history import read_kept_run

    if not path.exists():
        return "ended"  # its only copy was the live one (--no-history), gone with it
    try:
        kept = read_kept_run(path)
    except UserError as exc:
        return str(exc)
    if kept.problem:
        return f"ended; its recording: {kept.problem}"
    return f"ended ({kept.outcome})" + (f": {kept.message}" if kept.message else "")

"""``gputui attach [RUN]``: the dashboard on a live run, from any terminal: the run's whole
history from its start, then the run as it goes.  Closing the dashboard leaves the run
going; ``s`` there stops it (after asking).  Without RUN: the one live run, or a choice
among several."""

from __future__ import annotations

import argparse
import sys

from gputui.errors import UserError


class NoRunToAttach(UserError):
    """None is live, or none was chosen: not bad input, so not exit code 2."""

    exit_code = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", nargs="?", metavar="RUN", help="a live run: its name as `gputui runs` lists it (or its start), its pid, or its recording")


def run(args: argparse.Namespace) -> int:
    from gputui.cli.dashboard_cli import run_dashboard
    from gputui.live.registry import Registry

    registry = Registry()
    live = registry.find(args.run) if args.run else choose(registry.runs())
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UserError(f"gputui attach opens the dashboard, which needs a terminal; {live.name} goes on (gputui runs lists it, gputui stop stops it)")
    return run_dashboard(args, attach_to=live)


def choose(runs):
    """The live run to attach to: the only one, or the one the user picks."""
    from gputui import fmt
    from gputui.escape import for_terminal

    if not runs:
        raise NoRunToAttach("no run is live to attach to (gputui runs lists the ended ones; gputui replay plays one back)")
    if len(runs) == 1:
        return runs[0]
    lines = [f"{i:>3}  {run.name}  pid {run.pid}  {fmt.duration(run.elapsed_s())}  {run.label}" for i, run in enumerate(runs, start=1)]
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UserError(f"{len(runs)} runs are live ({', '.join(run.name for run in runs)}); name one: gputui attach RUN")
    print("Live runs:\n" + for_terminal("\n".join(lines)))
    while True:
        try:
            answer = input(f"Attach to which? [1-{len(runs)}, Enter for the newest] ").strip()
        except (EOFError, KeyboardInterrupt):
            raise NoRunToAttach("no run chosen") from None
        if not answer:
            return runs[-1]
        if answer.isdigit() and 1 <= int(answer) <= len(runs):
            return runs[int(answer) - 1]
        print(f"expected a number from 1 to {len(runs)}")

"""``gputui runs [--json]``, ``gputui runs prune [--keep N] [--older-than DAYS]``,
``gputui runs path``: the kept run history (see gputui.record.history), the runs going
now marked live with their pid and how long they have run (gputui.live)."""

from __future__ import annotations

import argparse
import json

from gputui.errors import UserError
from gputui.escape import for_terminal

# Not MEDIAN/S: a run's figure is the mean over its training for a job of the user's own,
# the median of the timed windows for gputui's workloads (--json says which)
COLUMNS = ("STARTED", "PRESET", "GPU", "OUTCOME", "RATE/S", "FINDINGS", "FILE")
RIGHT = {"RATE/S", "FINDINGS"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="the list as JSON")
    actions = parser.add_subparsers(dest="runs_command", metavar="ACTION")
    prune = actions.add_parser(
        "prune", help="remove kept runs: the oldest beyond --keep, those older than --older-than, or (with neither) the oldest beyond the size cap"
    )
    prune.add_argument("--keep", type=int, metavar="N", help="keep the newest N runs")
    prune.add_argument("--older-than", type=float, metavar="DAYS", help="remove runs started more than DAYS ago")
    actions.add_parser("path", help="the folder the runs are kept in")


def run(args: argparse.Namespace) -> int:
    from gputui.record.history import RunHistory, cap_bytes, runs_dir

    history = RunHistory(runs_dir(), cap_bytes())
    if args.runs_command == "path":
        print(for_terminal(history.folder))
        return 0
    if args.runs_command == "prune":
        return _prune(history, args.keep, args.older_than)
    runs, live = with_live_runs(history.runs())
    if args.json:
        print(json.dumps([{**r.to_json(), "live": live_json(live.get(r.path))} for r in runs], indent=2))
        return 0
    if not runs:
        print(f"no runs kept in {for_terminal(history.folder)}")
        return 0
    print(table(runs, live))
    say_why_unlisted(runs)
    return 0


def with_live_runs(runs):
    """The kept runs and the runs going now that have no kept copy (--no-history), newest
    first, and the live ones by their file."""
    from gputui.live.registry import Registry
    from gputui.record.history import read_kept_run

    live = {}
    for run in Registry().runs():
        live[run.kept_path or run.recording] = run
        if run.kept_path is None:
            runs.append(read_kept_run(run.recording))
    runs.sort(key=lambda r: (r.sort_key(), r.path.name), reverse=True)
    return runs, live


def live_json(run):
    if run is None:
        return None
    return {"name": run.name, "pid": run.pid, "elapsed_s": round(run.elapsed_s(), 1), "detached": run.detached}


def live_word(run) -> str:
    """ "live, pid 4242, 1:02:03" """
    from gputui import fmt

    return f"live, pid {run.pid}, {fmt.duration(run.elapsed_s())}"


def say_why_unlisted(runs) -> None:
    """A file listed as unreadable (or of a newer format) says why on stderr, one line
    each: the table stays a table, and the listing still exits 0."""
    import sys

    from gputui.escape import for_terminal

    for r in runs:
        if r.problem:
            print(f"gputui: {r.outcome}: {for_terminal(r.problem)}", file=sys.stderr)


def table(runs, live=None) -> str:
    from gputui import fmt

    live = live or {}
    rows = [COLUMNS] + [
        tuple(
            for_terminal(cell)  # a preset name, a GPU name, a file name: from the recordings
            for cell in (
                r.local_time(),
                r.label,
                r.gpu_text(),
                live_word(live[r.path]) if r.path in live else r.outcome,
                fmt.rate(r.figure) + (" " + fmt.per_second_short(r.unit) if r.unit in ("tokens", "steps") else ""),
                "-" if r.findings is None else str(r.findings),
                r.path.name,
            )
        )
        for r in runs
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = []
    for row in rows:
        cells = [cell.rjust(w) if name in RIGHT else cell.ljust(w) for cell, w, name in zip(row, widths, COLUMNS)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _prune(history, keep: int | None, older_than: float | None) -> int:
    if keep is not None and keep < 0:
        raise UserError(f"--keep: expected a number of runs of 0 or more, got {keep}")
    if older_than is not None and not older_than > 0:
        raise UserError(f"--older-than: expected a number of days greater than 0, got {older_than}")
    if keep is None and older_than is None:
        pruned = history.prune_to_cap()
    else:
        pruned = history.prune(keep=keep, older_than_days=older_than)
    print(f"removed {len(pruned.removed)} run(s), {pruned.freed / 1e6:.1f} MB; {len(pruned.kept)} kept in {for_terminal(history.folder)}")
    return 0

"""``gputui runs [--json]``, ``gputui runs prune [--keep N] [--older-than DAYS]``,
``gputui runs path``: the kept run history (see gputui.record.history)."""

from __future__ import annotations

import argparse
import json

from gputui.errors import UserError
from gputui.escape import for_terminal

COLUMNS = ("STARTED", "PRESET", "GPU", "OUTCOME", "MEDIAN/S", "FINDINGS", "FILE")
RIGHT = {"MEDIAN/S", "FINDINGS"}


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
    runs = history.runs()
    if args.json:
        print(json.dumps([r.to_json() for r in runs], indent=2))
        return 0
    if not runs:
        print(f"no runs kept in {for_terminal(history.folder)}")
        return 0
    print(table(runs))
    say_why_unlisted(runs)
    return 0


def say_why_unlisted(runs) -> None:
    """A file listed as unreadable (or of a newer format) says why on stderr, one line
    each: the table stays a table, and the listing still exits 0."""
    import sys

    from gputui.escape import for_terminal

    for r in runs:
        if r.problem:
            print(f"gputui: {r.outcome}: {for_terminal(r.problem)}", file=sys.stderr)


def table(runs) -> str:
    from gputui import fmt

    rows = [COLUMNS] + [
        tuple(
            for_terminal(cell)  # a preset name, a GPU name, a file name: from the recordings
            for cell in (
                r.local_time(),
                r.label,
                r.gpu_text(),
                r.outcome,
                fmt.rate(r.median) + (" " + fmt.per_second_short(r.unit) if r.unit in ("tokens", "steps") else ""),
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

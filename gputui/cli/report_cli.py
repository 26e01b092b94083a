"""``gputui report FILE [--out DIR] [--html] [--price USD_PER_HOUR]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from gputui.cli.run_options import check_price
from gputui.errors import UserError


def add_price_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--price", type=float, metavar="USD_PER_HOUR", help="what the instance costs per hour: adds the cost per million samples")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, metavar="FILE", help="a recording (.jsonl or .jsonl.gz)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="write report.md and the plots (PNG) into DIR; without it the report is printed")
    parser.add_argument("--html", action="store_true", help="also write DIR/report.html, images inlined")
    add_price_argument(parser)


def run(args: argparse.Namespace) -> int:
    price = check_price(args.price)
    if args.html and args.out is None:
        raise UserError("--html: needs --out DIR (the page and its plots are written there)")
    from gputui.escape import for_terminal
    from gputui.lookback.load import load_recording
    from gputui.lookback.report import markdown_report, write_report

    if args.out is not None:
        _claim_folder(args.out, html=args.html)
    recording = load_recording(args.file)
    if args.out is None:
        print(markdown_report(recording, price), end="")
        return 0
    written, _plots = write_report(recording, args.out, html=args.html, price_per_hour=price)
    for path in written:
        print(for_terminal(path))  # --out DIR is a directory name, printed back
    return 0


def _claim_folder(out: Path, *, html: bool) -> None:
    """``--out DIR`` checked before the recording is read: a folder, or one to make in an
    existing folder, and its report files ones the write would take (gputui.safe_write)."""
    from gputui.safe_write import claim_output

    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: cannot write the report (not a directory, expected a folder for report.md and its plots)")
    if not out.exists():
        parent = out.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise UserError(f"--out {out}: cannot write the report ({parent} is not a directory)")
        return
    for name in ("report.md", *(["report.html"] if html else [])):
        try:
            claim_output(out / name)
        except OSError as exc:
            raise UserError(f"--out {out}: cannot write the report ({name}: {exc.strerror or exc})") from None

"""``gputui compare A.jsonl B.jsonl ... [--markdown | --csv] [--price USD_PER_HOUR]``."""

from __future__ import annotations

import argparse
import csv
import shutil
import sys
from pathlib import Path

from gputui.cli.report_cli import add_price_argument
from gputui.cli.run_options import check_price
from gputui.errors import UserError
from gputui.escape import for_csv_cell


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", type=Path, nargs="+", metavar="FILE", help="two recordings or more (.jsonl or .jsonl.gz)")
    style = parser.add_mutually_exclusive_group()
    style.add_argument("--markdown", action="store_true", help="print a Markdown table")
    style.add_argument("--csv", action="store_true", help="print CSV")
    add_price_argument(parser)


def run(args: argparse.Namespace) -> int:
    price = check_price(args.price)
    if len(args.files) < 2:
        raise UserError(f"compare: expected two recordings or more, got {len(args.files)} (`gputui report FILE` shows one)")
    from gputui.lookback.compare import compare_rows, text_table
    from gputui.lookback.document import markdown_table
    from gputui.lookback.load import load_recording

    header, rows = compare_rows([load_recording(path) for path in args.files], price)
    if args.csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        for line in [header, *rows]:
            writer.writerow([for_csv_cell(cell) for cell in line])
    elif args.markdown:
        print(markdown_table(header, rows))
    else:
        # on a terminal, fitted to its width; to a file or a pipe, one line a row
        print(text_table(header, rows, shutil.get_terminal_size().columns if sys.stdout.isatty() else None))
    return 0

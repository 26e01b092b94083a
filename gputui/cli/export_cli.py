"""``gputui export FILE --csv OUT | --parquet OUT``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gputui.errors import UserError
from gputui.record.recorder import exists_message


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, metavar="FILE", help="a recording (.jsonl or .jsonl.gz)")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--csv", type=Path, metavar="OUT", help="write the samples as CSV to OUT (- for stdout)")
    target.add_argument("--parquet", type=Path, metavar="OUT", help="write the samples as Parquet to OUT (needs pyarrow: pip install pyarrow)")
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")


def run(args: argparse.Namespace) -> int:
    from gputui.escape import for_terminal
    from gputui.lookback.export import write_csv, write_parquet
    from gputui.lookback.load import load_recording

    to_stdout = args.csv is not None and str(args.csv) == "-"  # the usual Unix spelling
    out = args.csv if args.csv is not None else args.parquet
    if not to_stdout and not args.force and out.is_file():  # a device or FIFO (/dev/stdout) is written into, not replaced
        raise UserError(exists_message(out))
    if not to_stdout:
        from gputui.safe_write import claim_output

        if out.is_dir():  # in the words of the export's own writer (gputui.lookback.export)
            raise UserError(f"{out}: is a directory, expected a file to write")

        try:
            claim_output(out)  # refused before the recording is read (and held, a FIFO or device)
        except OSError as exc:
            raise UserError(f"{out}: cannot write the export ({exc.strerror or exc})") from None
    recording = load_recording(args.file)
    if to_stdout:
        count = write_csv(recording, sys.stdout)
        note = f" (the recording was cut: {recording.cut})" if recording.cut else ""
        print(for_terminal(f"{count} rows{note}"), file=sys.stderr)  # stdout holds the table alone
        return 0
    if args.csv is not None:
        count, out = write_csv(recording, args.csv), args.csv
    else:
        count, out = write_parquet(recording, args.parquet), args.parquet
    note = f" (the recording was cut: {recording.cut})" if recording.cut else " (the run is live: the rows so far)" if recording.live else ""
    print(for_terminal(f"{out}: {count} rows{note}"))
    return 0

"""``gputui check [--quick] [--price USD_PER_HOUR] [--verbose] [--json] [--markdown FILE] [--record FILE]``."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from gputui.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="preflight and short micro-benchmarks only, under a minute (no training workloads)")
    parser.add_argument(
        "--price", type=float, metavar="USD_PER_HOUR", help="what this instance costs per hour: adds the cost per million samples and per PFLOP-hour"
    )
    # Also accepted before the subcommand (gputui --record FILE check): SUPPRESS keeps that value.
    parser.add_argument(
        "--record",
        type=Path,
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="save the whole check as a recording (header, samples, one event per check, summary)",
    )
    parser.add_argument("--force", action="store_true", default=argparse.SUPPRESS, help="let --record replace an existing FILE")
    parser.add_argument(
        "--no-history", action="store_true", default=argparse.SUPPRESS, help="keep no copy of this check in the run history (also: GPUTUI_NO_HISTORY=1)"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="under every check, where its expectation comes from (not-ok checks always show it, with cause and advice)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout (progress stays on stderr)")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also write the verdict table as Markdown to FILE")
    parser.add_argument(
        "--metrics-file",
        type=Path,
        metavar="FILE",
        help="also write the results as Prometheus metrics to FILE (node_exporter's textfile collector: a *.prom file in its folder)",
    )
    parser.add_argument("--gpus", metavar="LIST", help="check only these GPU indices, e.g. 0,1 (default: all)")
    parser.add_argument("--skip", metavar="STAGES", default="", help="leave out stages: any of preflight, micro, workload (comma-separated)")
    parser.add_argument("--workdir", type=Path, metavar="DIR", help="directory whose disk is checked (default: the current one)")


def parse_gpus(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        indices = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"--gpus: expected GPU indices such as 0,1, got {text!r}") from None
    if not indices or any(i < 0 for i in indices):
        raise UserError(f"--gpus: expected GPU indices such as 0,1, got {text!r}")
    return indices


STAGES = ("preflight", "micro", "workload")


def parse_skip(text: str) -> set[str]:
    skip = {part.strip() for part in text.split(",") if part.strip()}
    unknown = skip - set(STAGES)
    if unknown:
        raise UserError(f"--skip: expected any of {', '.join(STAGES)}, got {', '.join(sorted(unknown))}")
    return skip


def run(args: argparse.Namespace) -> int:
    if args.price is not None and not (math.isfinite(args.price) and args.price > 0):
        raise UserError(f"--price: expected a price per hour greater than 0, got {args.price}")
    from gputui.check.stage_context import CheckOptions
    from gputui.cli.check_headless import OUTPUT_FILES, run_check_cli
    from gputui.safe_write import claim_output

    for option, path in (("--markdown", args.markdown), ("--metrics-file", args.metrics_file)):
        if path is None:
            continue
        if not path.parent.is_dir():
            raise UserError(f"{option}: {path.parent} is not a directory")
        try:
            claim_output(path)  # refused now, not after minutes of checking (and held, a FIFO or device)
        except OSError as exc:
            raise UserError(f"{path}: {OUTPUT_FILES[option]} ({exc.strerror or exc})") from None
    from gputui.record.recorder import check_record_target

    if args.record is not None:
        check_record_target(args.record, args.force)  # before minutes of checking, not after
    from gputui.presets.preset import load_config

    config = load_config(extra=args.presets)  # a broken presets file: one line now, not after the micro-benchmarks

    options = CheckOptions(
        quick=args.quick,
        price_per_hour=args.price,
        gpus=parse_gpus(args.gpus),
        skip=parse_skip(args.skip),
        workdir=args.workdir or Path.cwd(),
        interval=args.interval,
        presets_file=args.presets,
        config=config,
    )
    return run_check_cli(
        options,
        record=args.record,
        as_json=args.json,
        markdown=args.markdown,
        metrics_file=args.metrics_file,
        quiet=args.quiet,
        verbose=args.verbose,
        force=args.force,
        no_history=args.no_history,
    )

"""``gputui tune -- CMD``: short trials of the user's own PyTorch command over its
training DataLoader's settings (workers, pinned memory, persistent workers, prefetch),
put in by the probe with no change to the script, and the cheapest setting within noise
of the best (gputui.tune)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.console import say
from gputui.errors import UserError

if TYPE_CHECKING:
    from gputui.protocol import JsonObject

EXIT_INTERRUPTED = 130


def _counts(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas, e.g. 2,4,8; got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected whole numbers 0 or more, got {text!r}")
    return values


def _factors(text: str) -> tuple[int, ...]:
    values = _counts(text)
    if 0 in values:
        raise argparse.ArgumentTypeError(f"expected batches per worker, 1 or more, got {text!r}")
    return values


def _switch(text: str) -> tuple[bool, ...]:
    choices = {"on": (True,), "off": (False,), "both": (False, True)}
    if text not in choices:
        raise argparse.ArgumentTypeError(f"expected on, off or both, got {text!r}")
    return choices[text]


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds greater than 0, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "gputui tune [OPTIONS] -- COMMAND [ARG ...]"
    parser.add_argument(
        "--trial-seconds", type=_seconds, default=60.0, metavar="S", help="training per trial at most, after start-up (default 60; less once steady)"
    )
    parser.add_argument("--startup-seconds", type=_seconds, default=300.0, metavar="S", help="how long a trial may take to start training (default 300)")
    parser.add_argument("--max-trials", type=int, default=8, metavar="N", help="trials at most, the script as written included (default 8)")
    parser.add_argument("--workers", type=_counts, metavar="N,N,...", help="try these DataLoader worker counts (default: chosen from the cores per GPU)")
    parser.add_argument(
        "--pin-memory", type=_switch, metavar="on|off|both", help="pin_memory in the trials (default: tried once workers are chosen, with a GPU)"
    )
    parser.add_argument("--persistent-workers", type=_switch, metavar="on|off|both", help="persistent_workers in the trials")
    parser.add_argument("--prefetch", type=_factors, metavar="N,N,...", help="prefetch_factor values to try")
    parser.add_argument("--json", action="store_true", help="the trials and the verdict as JSON on stdout (progress still on stderr)")
    parser.add_argument("--report", type=Path, metavar="FILE", help="also write a report: FILE.md or FILE.html, with the plot of throughput against workers")


def run(args: argparse.Namespace) -> int:
    from gputui.fmt import printable
    from gputui.live.wiring import RunWiring
    from gputui.presets.command_preset import command_preset
    from gputui.presets.preset import load_config
    from gputui.probe import is_python_command
    from gputui.record.history import RunHistory
    from gputui.session.options import RunOptions
    from gputui.tune.faces import table, to_json, verdict_lines
    from gputui.tune.grid import Grid
    from gputui.tune.trial import TrialPlan
    from gputui.tune.tuner import run_tune

    command = args.run_command
    if not command:
        raise UserError("tune: expected your training command after --, e.g. gputui tune -- python train.py")
    if not is_python_command(command):
        raise UserError(f"tune: {printable(command[0])} does not run Python: tune changes a PyTorch DataLoader through the probe, in a Python command")
    if args.max_trials < 1:
        raise UserError(f"--max-trials: expected 1 or more, got {args.max_trials}")
    if args.report is not None:
        _claim_report(args.report)
    config = load_config(extra=args.presets)
    preset = command_preset(command, config.presets, probe=True)
    options = RunOptions(config=config, preset=preset, interval=args.interval)
    wiring = RunWiring(history=RunHistory.from_environment(args.no_history))
    plan = TrialPlan(training_s=args.trial_seconds, min_training_s=min(15.0, args.trial_seconds), startup_s=args.startup_seconds)
    grid = Grid(
        workers=args.workers, pin_memory=args.pin_memory, persistent_workers=args.persistent_workers, prefetch_factor=args.prefetch, max_trials=args.max_trials
    )
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")  # names the trials in the history, and the tune's record
    say(f"gputui tune: {printable(preset.name)}, at most {args.max_trials} trials of up to {args.trial_seconds:g} s of training each")
    try:
        tune = run_tune(preset, options, wiring, plan, grid, stamp, lambda line: say(f"gputui tune: {line}"))
    except KeyboardInterrupt:
        say("gputui tune: interrupted before the first trial")
        return EXIT_INTERRUPTED
    trials, verdict, frameworks = tune.trials, tune.verdict, tune.frameworks
    document = to_json(trials, verdict, frameworks)  # --json's, and the tune's record
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print(table(trials, verdict))
        print()
        print("\n".join(verdict_lines(verdict, frameworks)))
    if args.report is not None:
        from gputui.tune.report import write_report

        try:
            write_report(args.report, trials, verdict, frameworks, command)
        except OSError as exc:
            say(f"gputui: error: --report {printable(args.report)}: {exc.strerror or exc}; the tune's record is kept")
            _keep(stamp, document, command)
            return 1
        say(f"gputui tune: report written to {printable(args.report)}")
    _keep(stamp, document, command)
    if tune.interrupted:
        return EXIT_INTERRUPTED
    return 1 if verdict.kind == "failed" else 0


def _claim_report(path: Path) -> None:
    """``--report FILE``: one that can be written, refused now rather than after the trials."""
    from gputui.fmt import printable
    from gputui.safe_write import claim_output

    if path.suffix not in (".md", ".html"):
        raise UserError(f"--report {printable(path)}: expected a file ending in .md or .html")
    try:
        claim_output(path)
    except OSError as exc:
        raise UserError(f"--report {printable(path)}: {exc.strerror or exc}") from None


def _keep(stamp: str, document: JsonObject, command: list[str]) -> None:
    """The tune's own record beside the run history: its trials' recordings and its verdict."""
    from gputui.record.history import make_private_folder, state_dir
    from gputui.record.redact import redact_argv
    from gputui.safe_write import write_atomic

    folder = state_dir() / "tunes"
    try:
        make_private_folder(folder)
        write_atomic(folder / f"tune-{stamp}.json", json.dumps({"command": redact_argv(command), **document}, indent=2) + "\n", private=True)
    except OSError as exc:
        say(f"gputui: warning: the tune's record could not be kept in {folder}: {exc.strerror or exc}")

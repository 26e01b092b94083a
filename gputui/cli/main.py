"""Command line: ``gputui [--record FILE] [--preset NAME] ...`` and ``gputui presets ...``."""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from gputui import __version__
from gputui.console import say
from gputui.errors import UserError
from gputui.fmt import printable
from gputui.metrics import DEFAULT_ADDRESS

if TYPE_CHECKING:
    from gputui.presets.preset import Preset


def preset_name(text: str) -> str:
    """``--preset NAME``: an empty name would read as no --preset at all."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a preset's name, got an empty one")
    return text


class OneLineParser(argparse.ArgumentParser):
    """argparse, whose refusals are one line (no usage block) and exit 2, as every
    other bad input of gputui's."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, printable(f"{self.prog}: error: {_with_hint(message)}") + "\n")


_NOT_A_COMMAND = re.compile(r"argument COMMAND: invalid choice: '([^']*)'")


def _with_hint(message: str) -> str:
    """A word that is no gputui command is most likely the user's own command without
    the ``--`` before it: say how to run it."""
    match = _NOT_A_COMMAND.match(message)
    if match is None:
        return message
    word = match.group(1)
    return f"{word!r} is not a gputui command ({', '.join(SUBCOMMANDS_AND_PRESETS)}); to run your own command, put it after --: gputui -- {word} ..."


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="gputui",
        usage="%(prog)s [OPTIONS] [-- COMMAND [ARG ...]]  or  %(prog)s COMMAND ...",
        description="Run GPU training benchmarks, or your own training command (after --), and see what holds them back.",
        epilog="gputui -- python train.py --lr 3e-4   runs your own command; gputui --headless -- torchrun --nproc-per-node 8 train.py runs it with no dashboard, its output passed through.",
    )
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    parser.add_argument("--presets", type=Path, metavar="FILE", help="an extra presets file, merged last")
    parser.add_argument("--preset", metavar="NAME", type=preset_name, help="run this preset")
    parser.add_argument("--record", type=Path, metavar="FILE", help="record to FILE (JSON Lines); on a terminal the dashboard shows it, else headless")
    parser.add_argument("--force", action="store_true", help="let --record replace an existing FILE")
    parser.add_argument("--no-history", action="store_true", help="keep no copy of this run in the run history (also: GPUTUI_NO_HISTORY=1)")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S", help="sampling interval in seconds (0.1 or more; default 1)")
    parser.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    parser.add_argument(
        "--baseline", type=Path, metavar="FILE", help="a recording of the preset on one GPU: a data-parallel run's scaling efficiency is judged against it"
    )
    parser.add_argument(
        "--baseline-run", action="store_true", help="run a data-parallel preset on one GPU first, in this session, and judge its scaling against that"
    )
    parser.add_argument("--pid", type=int, metavar="PID", help="watch the process tree of a job started elsewhere")
    parser.add_argument(
        "--batch-size", type=int, metavar="N", help="samples per step of the command: turns its steps/s (tqdm it/s, Keras ms/step) into samples/s"
    )
    parser.add_argument(
        "--no-probe", action="store_true", help="no zero-code PyTorch probe in the command's Python (default: on; see docs/your-own-training.md)"
    )
    parser.add_argument("--headless", action="store_true", help="no dashboard, even on a terminal")
    parser.add_argument("--detach", action="store_true", help="headless, in a process of its own: prints how to attach and stop it, and returns to the shell")
    parser.add_argument("--quiet", action="store_true", help="no live line (the summary still prints at the end)")
    parser.add_argument("--theme", metavar="NAME", help="dashboard colour theme (remembered), e.g. gputui-light")
    parser.add_argument(
        "--serve-metrics",
        nargs="?",
        const=DEFAULT_ADDRESS,
        metavar="[HOST:]PORT",
        help=f"serve Prometheus metrics while gputui runs (default {DEFAULT_ADDRESS}; see docs/fleet.md)",
    )
    # Its own dest: report and compare have a --price of their own.
    parser.add_argument(
        "--price",
        dest="run_price",
        type=float,
        metavar="USD_PER_HOUR",
        help="what this machine costs per hour: the idle finding says what idle time cost, and --serve-metrics adds the cost per million samples",
    )
    parser.set_defaults(run_command=None)  # main() fills it from what follows "--"
    parser.add_argument("--no-confirm-quit", action="store_true", help="kept for scripts: q quits at once (a run goes on in a process of its own either way)")

    sub = parser.add_subparsers(dest="command", metavar="COMMAND", prog="gputui")  # "gputui report", not the usage line
    presets = sub.add_parser("presets", help="list, show, check and edit presets")
    presets_sub = presets.add_subparsers(dest="presets_command", metavar="ACTION", required=True)
    presets_sub.add_parser("list", help="the presets, one a line")
    show = presets_sub.add_parser("show", help="one preset in full, with the command it runs")
    show.add_argument("name")
    from gputui.cli.preset_cli import add_commands

    add_commands(presets_sub)  # validate, new, edit, rm, path
    for name, (module, summary) in SUBCOMMANDS.items():
        command = sub.add_parser(name, help=summary, description=summary)
        importlib.import_module(module).add_arguments(command)
    return parser


# Subcommands that live in their own module.  Each module stays cheap to import (its
# heavy imports happen inside run) and offers add_arguments(parser) and run(args) -> int.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "check": ("gputui.cli.check_cli", "is this machine healthy and as fast as it should be for its GPU?"),
    "report": ("gputui.cli.report_cli", "a recording as a readable report: Markdown, plots, HTML"),
    "compare": ("gputui.cli.compare_cli", "recordings side by side, and whether their differences are real"),
    "export": ("gputui.cli.export_cli", "a recording's samples as a flat table (CSV or Parquet)"),
    "runs": ("gputui.cli.runs_cli", "the kept run history: list it, prune it"),
    "replay": ("gputui.cli.replay_cli", "play a recording back in the dashboard"),
    "attach": ("gputui.cli.attach_cli", "watch a live run in the dashboard: one started in another terminal, detached, or before an SSH session dropped"),
    "stop": ("gputui.cli.stop_cli", "stop a live run (its whole process group) and say how it ended"),
    "tune": (
        "gputui.cli.tune_cli",
        "short trials of your own PyTorch command over its DataLoader's workers and memory settings: the cheapest fast one, measured",
    ),
    "fleet": ("gputui.cli.fleet_cli", "gputui check on every node of a fleet (Slurm, SSH), and the report that finds the slow one"),
}


SUBCOMMANDS_AND_PRESETS = ("presets", *SUBCOMMANDS)

# Subcommands that read what follows "--" themselves (args.run_command): fleet check's srun options, tune's command.
TAKE_WHAT_FOLLOWS = ("fleet", "tune")


def _load(args: argparse.Namespace):
    from gputui.presets.preset import load_presets

    return load_presets(extra=args.presets)


def cmd_presets(args: argparse.Namespace) -> int:
    from gputui.presets.preset import get_preset

    if args.presets_command not in ("list", "show"):
        from gputui.cli.preset_cli import run

        return run(args)
    from gputui.record.redact import redact_argv, redact_env

    presets = _load(args)
    if args.presets_command == "list":
        names = {name: printable(name) for name in presets}  # a name may hold escapes: show them escaped
        width = max((len(n) for n in names.values()), default=0)
        for name in sorted(presets):
            preset = presets[name]
            origin = f"  [from {printable(preset.source)}, overrides the built-in]" if preset.overrides else ""
            print(f"{names[name]:<{width}}  {printable(preset.description)}{origin}")
        return 0
    preset = get_preset(presets, args.name)
    shown = {**preset.describe(redacted=True).to_dict(), "argv": redact_argv(preset.argv())}
    if "env" in shown:
        shown["env"], hidden = redact_env(shown["env"])
        if hidden:
            shown["env_redacted"] = hidden
    print(json.dumps(shown, indent=2))  # JSON escapes control characters itself
    return 0


def probe_notice(preset: Preset | None) -> None:
    """Say once per user that gputui writes to a job's environment (the probe), and how
    to switch it off; a marker in the config folder remembers it was said."""
    if preset is None or not preset.probed():
        return
    from gputui.config import config_dir

    marker = config_dir() / "probe-notice-shown"
    if marker.exists():
        return
    from gputui.probe import NOTICE

    say(f"gputui: {NOTICE}")
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass  # said again next time: no harm


def cmd_record(args: argparse.Namespace) -> int:
    """A recorded run with no dashboard: in the foreground (the command's output passed through, a live line), or
    with --detach in a process of its own, this one returning at once."""
    from gputui.cli.run_options import run_options, run_wiring
    from gputui.live.host import HostSpec, record_run
    from gputui.record.recorder import check_record_target

    if args.record is not None:
        check_record_target(args.record, args.force)
    options = run_options(args)
    probe_notice(options.preset)
    spec = HostSpec(options=options, wiring=run_wiring(args, options), progress=not args.quiet)
    if args.detach:
        return detach(spec)
    if options.preset is None and options.attach_pid is None and options.duration is None and not sys.stdin.isatty():
        say("gputui: recording telemetry until interrupted (Ctrl-C or SIGTERM)")
    result = record_run(spec)
    if result.record_error is not None:
        say(f"gputui: error: {printable(result.record_error)}; the run was stopped")
        return RECORD_WRITE_FAILED
    if result.signals:  # the shell's convention: 130 for Ctrl-C, 143 for SIGTERM
        return signal_exit_code(result.signals[0])
    outcome = result.summary.outcome if result.summary is not None else None
    if outcome is None:
        return 0
    if outcome.kind == "stopped":
        return 130
    return 0 if outcome.ok else 1


RECORD_WRITE_FAILED = 74  # sysexits' EX_IOERR: the recording could not be written (disk full)


def detach(spec) -> int:
    """--detach: start the run in a process of its own and say, in one line, how to
    watch and stop it."""
    from gputui.live.spawn import start_detached

    live = start_detached(spec)
    for note in live.notes:
        say(f"gputui: warning: {printable(note)}")
    where = live.record_path or live.kept_path or live.recording
    name = printable(live.name)
    print(f"gputui: {name} runs detached (pid {live.pid}), recording to {printable(where)}; watch it: gputui attach {name}; stop it: gputui stop {name}")
    return 0


def signal_exit_code(signum: int) -> int:
    """What a shell reports for a process ended by this signal: 128 + its number."""
    return 128 + int(signum)


def _has_work(args: argparse.Namespace) -> bool:
    """Something to run or record: off a terminal, it goes headless rather than refused."""
    return args.record is not None or args.preset is not None or args.run_command is not None or args.pid is not None


def _on_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """gputui's own arguments, and the command after the first ``--`` (None without one)."""
    if "--" not in argv:
        return argv, None
    i = argv.index("--")
    return argv[:i], argv[i + 1 :]


def main(argv: list[str] | None = None) -> int:
    own, command = split_command(sys.argv[1:] if argv is None else list(argv))
    parser = build_parser()
    args = parser.parse_args(own)
    args.run_command = command
    if command is not None and args.command is not None and args.command not in TAKE_WHAT_FOLLOWS:
        parser.error(f"-- COMMAND runs your own command; not with '{args.command}'")
    try:
        if args.command == "presets":
            return cmd_presets(args)
        if args.command in SUBCOMMANDS:
            return importlib.import_module(SUBCOMMANDS[args.command][0]).run(args)
        if args.detach or args.headless or (_has_work(args) and not _on_terminal()):
            return cmd_record(args)  # kept in the run history, and in --record FILE when given
        from gputui.cli.dashboard_cli import run_dashboard  # Textual loads only for the dashboard

        return run_dashboard(args)
    except UserError as exc:
        say(f"gputui: error: {printable(str(exc))}")
        return exc.exit_code
    except BrokenPipeError:  # `gputui presets list | head`
        return 0


if __name__ == "__main__":
    raise SystemExit(main())

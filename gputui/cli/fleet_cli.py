"""``gputui fleet check`` (every node, through srun or ssh) and ``gputui fleet report``."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from gputui.errors import UserError
from gputui.fmt import printable

DEFAULT_PARALLEL = 16
QUICK_TIMEOUT_S, FULL_TIMEOUT_S = 300.0, 1800.0  # a quick check takes about a minute, a full one 5-10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="fleet_command", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="gputui check on every node, through srun or ssh; one JSON and one recording per node")
    engine = check.add_mutually_exclusive_group(required=True)
    engine.add_argument("--slurm", action="store_true", help="run through srun --ntasks-per-node=1 (srun options after --)")
    engine.add_argument("--hosts", type=Path, metavar="FILE", help="run through ssh on each host of FILE (one a line, # comments)")
    check.add_argument("--out", type=Path, metavar="DIR", required=True, help="folder for NODE.json and NODE.jsonl of each node")
    check.add_argument("--quick", action="store_true", help="the quick check on each node (preflight and short micro-benchmarks)")
    check.add_argument("--price", type=float, metavar="USD_PER_HOUR", help="what a node costs per hour (passed to each check)")
    check.add_argument("--parallel", type=int, default=DEFAULT_PARALLEL, metavar="N", help=f"ssh: nodes checked at once (default {DEFAULT_PARALLEL})")
    check.add_argument("--connect-timeout", type=float, default=10.0, metavar="S", help="ssh: seconds to wait for a connection (default 10)")
    check.add_argument(
        "--timeout", type=float, metavar="S", help=f"seconds a node's check may take (default {QUICK_TIMEOUT_S:.0f} quick, {FULL_TIMEOUT_S:.0f} full)"
    )
    check.add_argument("--remote-gputui", default="gputui", metavar="CMD", help="how gputui is started on a node (default: gputui)")
    check.add_argument("--gpus", metavar="LIST", help="check only these GPU indices on each node, e.g. 0")
    check.epilog = "With --slurm, options after -- go to srun, e.g. gputui fleet check --slurm --out DIR -- -N 4 -p gpu"
    report = sub.add_parser("report", help="the nodes of a fleet check side by side, with the outliers by name")
    report.add_argument("paths", type=Path, nargs="+", metavar="DIR|FILE", help="a fleet check's folder, or node JSONs (gputui check --json outputs too)")
    report.add_argument("--price", type=float, metavar="USD_PER_HOUR", help="what a node costs per hour: adds the cost per million ResNet-50 samples")
    report.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    report.add_argument("--out", type=Path, metavar="DIR", help="write fleet.md, fleet.html and the plots into DIR")


def run(args: argparse.Namespace) -> int:
    if args.fleet_command == "check":
        return run_check(args)
    if args.run_command is not None:
        raise UserError("fleet report: takes nothing after --")
    return run_report(args)


def _check_args(args: argparse.Namespace) -> list[str]:
    from gputui.cli.run_options import check_price

    out = ["--quick"] if args.quick else []
    if check_price(args.price) is not None:
        out += ["--price", repr(args.price)]
    if args.gpus:
        out += ["--gpus", args.gpus]
    return out


def _timeout(args: argparse.Namespace) -> float:
    timeout = args.timeout if args.timeout is not None else (QUICK_TIMEOUT_S if args.quick else FULL_TIMEOUT_S)
    if not (math.isfinite(timeout) and timeout > 0):
        raise UserError(f"--timeout: expected a number of seconds greater than 0, got {timeout}")
    return timeout


def run_check(args: argparse.Namespace) -> int:
    from gputui.fleet.node import SLURM_NODENAME, node_script
    from gputui.fleet.results import HEALTHY, NodeResult, ResultFolder

    srun_options = args.run_command or []
    if srun_options and not args.slurm:
        raise UserError("--hosts: takes nothing after --; options after -- are srun's, for --slurm")
    if not 1 <= args.parallel <= 1024:
        raise UserError(f"--parallel: expected 1 to 1024 nodes at once, got {args.parallel}")
    if not (math.isfinite(args.connect_timeout) and args.connect_timeout > 0):
        raise UserError(f"--connect-timeout: expected a number of seconds greater than 0, got {args.connect_timeout}")
    if not args.remote_gputui.strip() or "\n" in args.remote_gputui:
        raise UserError("--remote-gputui: expected a command line on one line, e.g. 'gputui' or '~/venv/bin/gputui'")
    check_args, timeout = _check_args(args), _timeout(args)
    hosts = None
    if not args.slurm:  # read before the folder is made and before any ssh: a bad line is one line
        from gputui.fleet.ssh import read_hostfile

        hosts = read_hostfile(args.hosts)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{args.out}: cannot make the output folder ({exc.strerror or exc})") from None
    folder = ResultFolder(args.out)
    unsaved: list[str] = []

    def done(result: NodeResult) -> None:
        try:
            saved = f"-> {folder.save(result)}"
        except OSError as exc:  # one node's file: the others are still checked and kept
            unsaved.append(result.node)
            saved = f"not saved: {exc.filename or args.out}: {exc.strerror or exc}"
        print(f"{result.line()}  {printable(saved)}", flush=True)

    if args.slurm:
        from gputui.fleet.slurm import check_over_srun

        results = check_over_srun(node_script(args.remote_gputui, check_args, SLURM_NODENAME), srun_options, timeout, done)
    else:
        from gputui.fleet.ssh import check_over_ssh, run_hosts

        assert hosts is not None
        script = node_script(args.remote_gputui, check_args)
        results = run_hosts(hosts, lambda host: check_over_ssh(host, script, args.connect_timeout, timeout), args.parallel, done)
    bad = [r.node for r in results if r.status not in HEALTHY]
    shared = folder.shared_names()
    for name, files in shared.items():  # two nodes under one name: each kept, neither trusted as the other
        print(
            printable(f"{name}: {len(files)} nodes answered to this one name; each result is kept ({', '.join(map(str, files))}); tell the nodes apart"),
            flush=True,
        )
    said = [f"{len(bad)} not healthy{': ' + ', '.join(bad) if bad else ''}"]
    if shared:
        said.append(f"{len(shared)} name{'s' if len(shared) != 1 else ''} shared by several nodes: {', '.join(shared)}")
    if unsaved:
        said.append(f"{len(unsaved)} not saved: {', '.join(unsaved)}")
    nodes = f"{len(results)} node{'s' if len(results) != 1 else ''}"
    print(printable(f"fleet check: {nodes}, {'; '.join(said)}; gputui fleet report {args.out}"))
    return 1 if bad or shared or unsaved else 0


def run_report(args: argparse.Namespace) -> int:
    import json

    from gputui.cli.run_options import check_price
    from gputui.fleet.peers import load_report
    from gputui.fleet.report_files import skipped_lines, terminal_lines, to_json, write_documents

    report = load_report(args.paths, check_price(args.price))
    for line in skipped_lines(report):
        print(line, file=sys.stderr)
    if args.out is not None:
        try:
            args.out.mkdir(parents=True, exist_ok=True)
            written = write_documents(report, args.out)
        except OSError as exc:
            raise UserError(f"{args.out}: cannot write the report ({exc.strerror or exc})") from None
        print(printable(f"wrote {', '.join(str(p) for p in written)}"), file=sys.stderr)
    if args.json:
        print(json.dumps(to_json(report), indent=1))
    else:
        print("\n".join(terminal_lines(report)))
    return report.exit_code

"""The probe's cost on a real training script, A/B inside one run: blocks of steps with the
probe working and blocks with it stood aside, alternating.

    python benchmarks/probe_toggle_ab.py [--runs 2] [--block 2] [--warmup 20] -- python SCRIPT ARGS...
    python benchmarks/probe_toggle_ab.py --quick -- python SCRIPT ARGS...   # 1 run, 1 s blocks

probe_overhead.py compares whole runs with and without the probe; on a GPU loop whose
speed moves from run to run by several percent (the core a process lands on, the GPU's
clocks), dozens of pairs would be needed to tell 1 %.  Here each run is probed (on a real
channel that listens, as under gputui) and, after --warmup seconds, a thread in the
script's own process switches the probe's master switch every --block seconds: on, off,
off, on, on, off, ... (ABBA, so a block's place in its pair cancels).  With it off every
hook of the probe returns at its first test, so an off block is the script without the
probe's work; what stays is that test and the wrapper's call, well under a microsecond a
step.  Adjacent blocks share the process, its core, the GPU's clocks and the allocator's
state, so their ratio is the probe's cost with the run-to-run spread taken out.

The steps are timed by a global optimizer post-hook of this benchmark's own, present in
both kinds of block alike; a block's rate is its steps over the time from its first to
its last step.  Printed: each kind's median rate, the median of the pairs' own changes
(on / off) with its bootstrap interval, and how many probe reports arrived.

What it leaves out: the probe's work at import (once a run) and its stack sampler, which a
DataLoader-fed loop stops for good once its batches are known to be training (a loop not
fed by a DataLoader would lose its sampler at the first off block: the run says which).
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _switch_blocks(probe: object, warmup: float, block: float, boundaries: list[tuple[float, bool]]) -> None:
    """After ``warmup`` s, flip ``probe._on`` every ``block`` s in ABBA order, noting each
    boundary's (time, the probe's state from then on)."""
    time.sleep(warmup)
    for i in range(1_000_000):
        # pair i // 2 runs on-then-off when it is even, off-then-on when odd
        state = (i % 2 == 0) == (i // 2 % 2 == 0)
        probe._on = state  # type: ignore[attr-defined]
        boundaries.append((time.perf_counter(), state))
        time.sleep(block)


def child(out: str, warmup: float, block: float, script: list[str]) -> None:
    """Run ``script`` as __main__ in this (probed) process, switching the probe in blocks;
    write every step's time and the block boundaries to ``out``."""
    from torch.optim.optimizer import register_optimizer_step_post_hook  # loads the probe: its import hook patches this module

    probe = sys.modules.get("_gputui_probe")
    if probe is None or not getattr(probe, "_on", False):
        sys.exit("the probe is not armed in this process (run through probe_toggle_ab.py's parent, with a channel)")
    steps: list[float] = []
    clock = time.perf_counter

    def count(optimizer: object, args: object, kwargs: object) -> None:
        steps.append(clock())

    register_optimizer_step_post_hook(count)
    boundaries: list[tuple[float, bool]] = []
    threading.Thread(target=_switch_blocks, args=(probe, warmup, block, boundaries), daemon=True).start()
    sys.argv = script
    sys.path[0] = os.path.dirname(os.path.abspath(script[0]))  # as `python SCRIPT` has it
    try:
        runpy.run_path(script[0], run_name="__main__")
    finally:
        ended = clock()
        probe._on = True  # the probe's closing report, as in any run
        fed = bool(getattr(probe, "_fed_by_loader", False))
        with open(out, "w") as f:
            json.dump({"steps": steps, "boundaries": boundaries + [(ended, True)], "fed_by_loader": fed}, f)


def block_rates(steps: list[float], boundaries: list[tuple[float, bool]]) -> list[tuple[int, bool, float]]:
    """(block number, probe on, steps per second) of each whole block: its steps after the
    first over the time from its first step to its last; blocks with under 3 steps left out."""
    rates = []
    for number, ((start, on), (end, _)) in enumerate(zip(boundaries, boundaries[1:])):
        inside = [t for t in steps if start <= t < end]
        if len(inside) >= 3 and inside[-1] > inside[0]:
            rates.append((number, on, (len(inside) - 1) / (inside[-1] - inside[0])))
    return rates


def pair_changes(rates: list[tuple[int, bool, float]]) -> list[float]:
    """on / off - 1 of each pair of blocks (blocks 0 and 1, 2 and 3, ...) both of whose
    blocks have a rate."""
    pairs: dict[int, dict[bool, float]] = {}
    for number, on, rate in rates:
        pairs.setdefault(number // 2, {})[on] = rate
    return [pair[True] / pair[False] - 1.0 for _, pair in sorted(pairs.items()) if len(pair) == 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs of the script (each probed, switched in blocks)")
    parser.add_argument("--block", type=float, default=2.0, help="seconds a block")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds before the first block (the script's start, cuDNN's autotuning)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 run, 1 s blocks after 5 s")
    parser.add_argument("--child", metavar="OUT", help=argparse.SUPPRESS)  # in the script's process: where the times go
    parser.add_argument("command", nargs=argparse.REMAINDER, help="python SCRIPT ARGS... (after --)")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.child is not None:
        child(args.child, args.warmup, args.block, command)
        return
    if len(command) < 2 or "python" not in Path(command[0]).name:
        parser.error("give the script as: -- python SCRIPT ARGS...")
    if args.quick:
        args.runs, args.block, args.warmup = 1, 1.0, 5.0

    from benchmarks.probe_overhead import run_command
    from benchmarks.probe_step_cost import median_interval

    rates: list[tuple[int, bool, float]] = []
    changes: list[float] = []
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "times.json")
            wrapped = [command[0], str(Path(__file__).resolve()), "--child", out, "--warmup", str(args.warmup), "--block", str(args.block), "--", *command[1:]]
            done, reports = run_command(wrapped, probed=True)
            if done.returncode != 0 or not os.path.exists(out):
                sys.exit(f"run {run}: {' '.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
            with open(out) as f:
                times = json.load(f)
        these = block_rates(times["steps"], [(t, bool(on)) for t, on in times["boundaries"]])
        mine = pair_changes(these)
        rates += these
        changes += mine
        on = [r for _, o, r in these if o]
        off = [r for _, o, r in these if not o]
        print(
            f"run {run}: {len(these)} blocks, {reports} probe reports, fed by a DataLoader: {'yes' if times['fed_by_loader'] else 'no (its sampler stopped at the first off block)'}; "
            f"median steps/s on {statistics.median(on) if on else float('nan'):.2f}, off {statistics.median(off) if off else float('nan'):.2f}; "
            f"median pair change {100.0 * statistics.median(mine) if mine else float('nan'):+.2f} %",
            flush=True,
        )
        if reports == 0:
            print("  no probe reports: the probe did not arm (not a torch script?)", flush=True)
    if not changes:
        sys.exit("no pair of blocks: make the script run longer than --warmup plus two blocks")
    on = [r for _, o, r in rates if o]
    off = [r for _, o, r in rates if not o]
    print(f"median steps/s with the probe on:  {statistics.median(on):.2f} ({len(on)} blocks of {args.block:g} s)")
    print(f"median steps/s with the probe off: {statistics.median(off):.2f} ({len(off)} blocks)")
    print(f"pairs: {len(changes)}; median change (on / off) {100.0 * statistics.median(changes):+.3f} %, mean {100.0 * statistics.mean(changes):+.3f} %")
    interval = median_interval(changes)
    if interval is not None:
        print(f"95 % interval of the median change (bootstrap of the pairs): {100.0 * interval[0]:+.3f} % to {100.0 * interval[1]:+.3f} %")


if __name__ == "__main__":
    main()

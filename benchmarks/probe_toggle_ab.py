"""The probe's cost on a real training script, A/B inside one run: blocks of steps with the
probe working and blocks with it stood aside, alternating.

    python benchmarks/probe_toggle_ab.py [--runs 3] [--block 0.25] [--warmup 20] -- python SCRIPT ARGS...
    python benchmarks/probe_toggle_ab.py --quick -- python SCRIPT ARGS...   # 1 run, 0.5 s blocks

probe_overhead.py compares whole runs with and without the probe; on a GPU loop whose
speed moves from run to run by several percent (the core a process lands on, the GPU's
clocks), dozens of pairs would be needed to tell 1 %.  Here each run is probed (on a real
channel that listens, as under gputui) and, --warmup seconds after its first optimizer
step (its imports and set-up take what they take, more on a loaded machine), a thread in the
script's own process switches the probe's master switch every --block seconds: on, off,
off, on, on, off, ... (ABBA, so a block's place in its pair cancels).  With it off every
hook of the probe returns at its first test, so an off block is the script without the
probe's work; what stays is that test and the wrapper's call, well under a microsecond a
step.  Adjacent blocks share the process, its core, the GPU's clocks and the allocator's
state, so their ratio is the probe's cost with the run-to-run spread taken out.

The steps are timed by a global optimizer post-hook of this benchmark's own, present in
both kinds of block alike; a block's rate is its steps over the time from its first to
its last step, and the loop thread's own CPU time a step is read from that thread's clock
at each step (where the probe's hooks run, so the figure the GPU's timing moves least);
its typical rate is one over its median step (a step stalled by something
else, another thread holding the GIL, moves it little; the probe's work, done in every
step, moves it as much as any).  Printed: each block; for each of the three figures,
each kind's median and the pairs' own changes (on / off), their median and mean with a
bootstrap interval of each; the probe's work a step in µs (the loop thread's CPU, on -
off); and how many probe reports arrived.  Short blocks: a run's speed moved as much
between blocks of 2 s as of 0.25 s (docs/your-own-training.md, "The probe's cost"), so
shorter blocks give more pairs for the same spread.

What it leaves out: the probe's work at import (once a run) and its stack sampler, which a
DataLoader-fed loop stops for good once its batches are known to be training (a loop not
fed by a DataLoader would lose its sampler at the first off block: the run says which).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import runpy
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _switch_blocks(probe: object, steps: list[float], warmup: float, block: float, boundaries: list[tuple[float, bool]]) -> None:
    """``warmup`` s after the first step, flip ``probe._on`` every ``block`` s in ABBA order,
    noting each boundary's (time, the probe's state from then on)."""
    while not steps:
        time.sleep(0.05)
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
    cpu: list[float] = []  # the loop thread's own CPU time at each step, where the probe's hooks run
    clock, thread_clock = time.perf_counter, time.thread_time

    def count(optimizer: object, args: object, kwargs: object) -> None:
        steps.append(clock())
        cpu.append(thread_clock())

    register_optimizer_step_post_hook(count)
    boundaries: list[tuple[float, bool]] = []
    threading.Thread(target=_switch_blocks, args=(probe, steps, warmup, block, boundaries), daemon=True).start()
    sys.argv = script
    sys.path[0] = os.path.dirname(os.path.abspath(script[0]))  # as `python SCRIPT` has it
    try:
        runpy.run_path(script[0], run_name="__main__")
    finally:
        ended = clock()
        probe._on = True  # type: ignore[attr-defined]  # the probe's closing report, as in any run
        fed = bool(getattr(probe, "_fed_by_loader", False))
        with open(out, "w") as f:
            json.dump({"steps": steps, "cpu": cpu, "boundaries": boundaries + [(ended, True)], "fed_by_loader": fed}, f)


class Block(NamedTuple):
    number: int  # its place in the run: blocks 2k and 2k + 1 are a pair
    on: bool  # the probe working
    rate: float  # steps per second: its steps after the first over the time from its first to its last
    typical: float  # steps per second at its median step (a stalled step, the GIL held elsewhere, moves it little)
    cpu_us: float | None  # the loop thread's CPU time a step, in microseconds (None in runs saved without it)


def blocks(steps: list[float], boundaries: list[tuple[float, bool]], cpu: list[float] | None = None) -> list[Block]:
    """Each whole block of the run; those with under 3 steps left out.  ``cpu``: the loop
    thread's CPU time at each step, beside ``steps``."""
    found = []
    for number, ((start, on), (end, _)) in enumerate(zip(boundaries, boundaries[1:])):
        first = bisect.bisect_left(steps, start)
        last = bisect.bisect_left(steps, end) - 1
        n = last - first + 1
        if n >= 3 and steps[last] > steps[first]:
            gaps = [b - a for a, b in zip(steps[first:last], steps[first + 1 : last + 1])]
            cpu_us = 1e6 * (cpu[last] - cpu[first]) / (n - 1) if cpu else None
            found.append(Block(number, on, (n - 1) / (steps[last] - steps[first]), 1.0 / statistics.median(gaps), cpu_us))
    return found


def pairs_of(found: list[Block], figure: str) -> list[tuple[float, float]]:
    """(on, off) of ``figure`` for each pair of blocks (0 and 1, 2 and 3, ...) both of
    which are there."""
    pairs: dict[int, dict[bool, float]] = {}
    for block in found:
        pairs.setdefault(block.number // 2, {})[block.on] = getattr(block, figure)
    return [(pair[True], pair[False]) for _, pair in sorted(pairs.items()) if len(pair) == 2]


def pair_changes(found: list[Block], figure: str) -> list[float]:
    """on / off - 1 of ``figure`` (rate, typical or cpu_us) for each pair of blocks."""
    return [on / off - 1.0 for on, off in pairs_of(found, figure)]


def summarize(runs: list[list[Block]], figure: str, label: str, unit: str = "steps/s") -> None:
    """Both kinds' medians of ``figure`` over every run, and the pairs' changes (each run's
    blocks paired within it)."""
    from benchmarks.probe_step_cost import paired_interval

    changes = [change for found in runs for change in pair_changes(found, figure)]
    found = [block for blocks_of_run in runs for block in blocks_of_run]
    on = [getattr(b, figure) for b in found if b.on]
    off = [getattr(b, figure) for b in found if not b.on]
    print(f"{label}: on {statistics.median(on):.2f}, off {statistics.median(off):.2f} {unit} (medians of {len(on)} and {len(off)} blocks)")
    print(f"  {len(changes)} pairs: median change (on / off) {100.0 * statistics.median(changes):+.3f} %, mean {100.0 * statistics.mean(changes):+.3f} %")
    for statistic in ("median", "mean"):  # the mean: with hundreds of pairs of short blocks, the tighter figure
        interval = paired_interval(changes, statistic)
        if interval is not None:
            print(f"  95 % interval of the {statistic} change (bootstrap of the pairs): {100.0 * interval[0]:+.3f} % to {100.0 * interval[1]:+.3f} %")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of the script (each probed, switched in blocks)")
    parser.add_argument(
        "--block",
        type=float,
        default=0.25,
        help="seconds a block (short: a run's speed moves as much between blocks of 2 s as of 0.25 s, so shorter blocks give more pairs for the same noise)",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=20.0,
        help="seconds from the script's first optimizer step to the first block (cuDNN's autotuning, the allocator's growth)",
    )
    parser.add_argument("--save", metavar="PREFIX", help="write each run's step and block times to PREFIX-N.json")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 run, 0.5 s blocks from 1 s after the first step")
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
        args.runs, args.block, args.warmup = 1, 0.5, 1.0

    from benchmarks.probe_overhead import run_command

    runs: list[list[Block]] = []
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "times.json")
            wrapped = [command[0], str(Path(__file__).resolve()), "--child", out, "--warmup", str(args.warmup), "--block", str(args.block), "--", *command[1:]]
            done, reports = run_command(wrapped, probed=True)
            if done.returncode != 0 or not os.path.exists(out):
                sys.exit(f"run {run}: {' '.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
            with open(out) as f:
                times = json.load(f)
        if args.save:
            with open(f"{args.save}-{run}.json", "w") as f:
                json.dump(times, f)
        found = blocks(times["steps"], [(t, bool(on)) for t, on in times["boundaries"]], times.get("cpu"))
        runs.append(found)
        fed = "yes" if times["fed_by_loader"] else "no (its sampler stopped at the first off block)"
        print(f"run {run}: {len(found)} blocks, {reports} probe reports, fed by a DataLoader: {fed}", flush=True)
        for block in found:
            cpu = f", loop thread's CPU {block.cpu_us:9.1f} µs a step" if block.cpu_us is not None else ""
            print(f"  block {block.number:3d} {'on ' if block.on else 'off'} {block.rate:8.2f} steps/s, at the median step {block.typical:8.2f}{cpu}")
        if reports == 0:
            print("  no probe reports: the probe did not arm (not a torch script?)", flush=True)
    if not any(pair_changes(found, "rate") for found in runs):
        sys.exit("no pair of blocks: make the script run longer than --warmup plus two blocks")
    summarize(runs, "rate", f"steps/s over each {args.block:g} s block")
    summarize(runs, "typical", "steps/s at each block's median step")
    if all(block.cpu_us is not None for found in runs for block in found):
        summarize(runs, "cpu_us", "the loop thread's CPU a step, µs", unit="µs")
        differences = [on - off for found in runs for on, off in pairs_of(found, "cpu_us")]
        print(f"  the probe's work a step, on - off: median {statistics.median(differences):+.1f} µs, mean {statistics.mean(differences):+.1f} µs")


if __name__ == "__main__":
    main()

"""What the zero-code probe (gputui.probe) adds to each training step, in microseconds, on this CPU.

    python benchmarks/probe_step_cost.py [--pairs 36] [--seconds 1.5] [--core N]
    python benchmarks/probe_step_cost.py --quick                      # a smoke run (~15 s: torch's import in each run)

probe_overhead.py compares a real loop's throughput with and without the probe, and a
GPU step's run-to-run spread (a few percent) hides a cost of 1 %.  This measures the
probe's own work per step instead, where it is large enough to be told: a loop whose
step is a few hundred microseconds (a tiny MLP and SGD on one CPU thread, fed by a real
DataLoader, shuffle=True and no workers, over in-memory tensors: one batch fetched and
one optimizer step per step, model.train() at each epoch), so the probe's wrappers of
the DataLoader iterator, the backward pass and the optimizer step, and its report once
a second, are a large part of it.  The difference in microseconds is what the same hooks
add to any step on this CPU; over a step of S microseconds it is a share of
difference / S (printed for a 22 ms and a 1 ms step).  A slower CPU adds more.

Each run is a fresh process (the probe arms at interpreter start) pinned to one core
with one torch thread; after a warm-up it trains for --seconds and prints the 10th
percentile of its steps' wall time, its mean step in CPU time of the whole process
(every thread's, the probe's too) and its median step.  The 10th percentile decides: on
a shared machine, neighbours slow whole stretches of a run's steps (shared caches, the
host's scheduling of the virtual cores; the CPU time grows with the wall time, so it is
no preemption), by more than the probe costs and differently from run to run, while the
fastest tenth of a run's steps are those they left alone, and the probe's work, done in
every step, lengthens them as much as any.  What it leaves out, the probe's report once
a second (one step in thousands), the mean CPU time counts.  Runs come in --pairs
back-to-back pairs, one without and one with the probe, in alternating order (ABBA, as
probe_overhead.py: a run's place in its pair cancels).  The step time of each kind is
the median of its runs; the difference's interval is a percentile bootstrap of the
difference of the medians, and each pair's own difference (with - without) is
summarized too.  Some runs are slowed through and through (their 10th percentile too):
the medians leave them out while they are fewer than half, and where a busy neighbour
comes and goes, the pairs' own differences (both runs of a pair seconds apart) are the
tighter figure.  The load average, the time the hypervisor stole from the pinned core
and how busy the other cores were are printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import psutil

REPO = Path(__file__).resolve().parent.parent

BATCH = 16
FEATURES = 32
CLASSES = 10
ROWS = 4096  # 256 steps an epoch: an epoch's start (a new iterator, model.train()) counts too
STEPS_PER_CHECK = 64  # steps between looks at the clock for the run's end
CHILD_LINE = re.compile(r"probe loaded: (yes|no), steps: (\d+), p10 wall us/step: ([0-9.]+), cpu us/step: ([0-9.]+), median wall us/step: ([0-9.]+)")
# What each run measures, in CHILD_LINE's order: the first decides, the others are shown beside it.
MEASURES = ("10th percentile of the steps' wall time", "mean process CPU time", "median of the steps' wall time")


def child(seconds: float, warmup: float, core: int | None) -> None:
    """One run: pins itself, trains for ``warmup`` + ``seconds`` and prints CHILD_LINE."""
    if core is not None:
        os.sched_setaffinity(0, {core})
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(ROWS, FEATURES), torch.randint(0, CLASSES, (ROWS,)))
    loader = DataLoader(data, batch_size=BATCH, shuffle=True, num_workers=0, drop_last=True)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(), torch.nn.Linear(64, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    clock, cpu = time.perf_counter_ns, time.process_time_ns
    stamps: list[int] = []
    began = clock()
    warm_until, end = began + int(warmup * 1e9), began + int((warmup + seconds) * 1e9)
    cpu_began = 0
    while True:
        model.train()
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if stamps:
                stamps.append(clock())
                if len(stamps) % STEPS_PER_CHECK == 0 and stamps[-1] >= end:
                    break
            elif clock() >= warm_until:
                cpu_began = cpu()
                stamps.append(clock())
        if stamps and stamps[-1] >= end:
            break
    cpu_used = cpu() - cpu_began
    steps = len(stamps) - 1
    loaded = "yes" if "_gputui_probe" in sys.modules else "no"
    wall = [(b - a) / 1e3 for a, b in zip(stamps, stamps[1:])]
    print(
        f"probe loaded: {loaded}, steps: {steps}, p10 wall us/step: {statistics.quantiles(wall, n=10)[0]:.3f}, "
        f"cpu us/step: {cpu_used / 1e3 / steps:.3f}, median wall us/step: {statistics.median(wall):.3f}",
        flush=True,
    )


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


Statistic = Literal["median", "mean"]


def difference_interval(a: list[float], b: list[float], statistic: Statistic = "median") -> tuple[float, float] | None:
    """Percentile bootstrap of statistic(b) - statistic(a), each run resampled on its own;
    None with fewer than noise.MIN_READINGS runs of either."""
    import numpy as np

    from gputui.lookback.noise import CONFIDENCE, MIN_READINGS, RESAMPLES, SEED

    if len(a) < MIN_READINGS or len(b) < MIN_READINGS:
        return None
    rng = np.random.default_rng(SEED)
    xa, xb = np.asarray(a), np.asarray(b)
    reduce = np.median if statistic == "median" else np.mean
    boot_a = reduce(xa[rng.integers(0, len(xa), (RESAMPLES, len(xa)))], axis=1)
    boot_b = reduce(xb[rng.integers(0, len(xb), (RESAMPLES, len(xb)))], axis=1)
    tail = (1.0 - CONFIDENCE) / 2.0 * 100.0
    low, high = np.percentile(boot_b - boot_a, [tail, 100.0 - tail])
    return float(low), float(high)


def paired_interval(changes: list[float], statistic: Statistic = "median") -> tuple[float, float] | None:
    """Percentile bootstrap of the median (or mean) of pairs' own changes."""
    return difference_interval([0.0] * len(changes), changes, statistic)


def neighbours(before: list[Any], after: list[Any], core: int | None) -> tuple[float, float]:
    """(percent of the pinned core's time the hypervisor stole, percent busy of the other
    cores) between two psutil.cpu_times(percpu=True): what else slowed the runs."""

    def busy_steal(b: Any, a: Any) -> tuple[float, float, float]:
        total = sum(a) - sum(b)
        idle = (a.idle - b.idle) + (getattr(a, "iowait", 0.0) - getattr(b, "iowait", 0.0))
        steal = getattr(a, "steal", 0.0) - getattr(b, "steal", 0.0)
        return total, total - idle - steal, steal

    steal = 0.0
    if core is not None and core < len(after):
        total, _, stolen = busy_steal(before[core], after[core])
        steal = 100.0 * stolen / total if total > 0 else 0.0
    rest = [busy_steal(b, a) for i, (b, a) in enumerate(zip(before, after)) if i != core]
    total = sum(t for t, _, _ in rest)
    return steal, (100.0 * sum(busy for _, busy, _ in rest) / total if total > 0 else 0.0)


def share(us: float, step_us: float) -> str:
    return f"{100.0 * us / step_us:+.3f} %"


def parent(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "benchmarks"))
    from probe_overhead import pair_orders, run_command

    core = args.core
    if core is None and hasattr(os, "sched_getaffinity"):
        core = max(os.sched_getaffinity(0))
    if core is not None and not hasattr(os, "sched_setaffinity"):
        core = None  # macOS: no pinning; the scheduler moves the run around
    if core is not None and core not in os.sched_getaffinity(0):
        sys.stderr.write(f"probe_step_cost.py: --core {core} is not one this process may run on ({sorted(os.sched_getaffinity(0))})\n")
        sys.exit(2)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(args.seconds), "--warmup", str(args.warmup)]
    if core is not None:
        command += ["--core", str(core)]
    print(f"command: {' '.join(command)}  (with the probe: the same, PYTHONPATH and GPUTUI_PROBE_SOCKET from gputui.probe.ProbeChannel.env)")
    print(
        f"machine: {os.cpu_count()} cores, {cpu_model()}; run pinned to {'core ' + str(core) if core is not None else 'no core'}, 1 torch thread; "
        f"torch {metadata.version('torch')}, Python {platform.python_version()}"
    )
    print(
        f"loop: MLP {FEATURES}-64-{CLASSES}, batch {BATCH}, SGD, DataLoader shuffle=True num_workers=0; {args.pairs} pairs of {args.warmup:g} s warm-up + {args.seconds:g} s"
    )
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)

    values: dict[str, dict[bool, list[float]]] = {name: {False: [], True: []} for name in MEASURES}
    loads: list[float] = []
    steals: list[float] = []
    others: list[float] = []
    began = time.monotonic()
    for i, order in enumerate(pair_orders(args.pairs)):
        line = []
        times_before = psutil.cpu_times(percpu=True)
        for probed in order:
            done, reports = run_command(command, probed)
            found = CHILD_LINE.search(done.stdout)
            if done.returncode != 0 or found is None:
                sys.exit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
            if (found[1] == "yes") != probed:
                sys.exit(f"the probe was {'not ' if probed else ''}loaded in a run {'with' if probed else 'without'} it: {found[0]}")
            for name, value in zip(MEASURES, found.groups()[2:], strict=True):
                values[name][probed].append(float(value))
            line.append(f"{'with' if probed else 'without'} {float(found[3]):7.2f} (cpu {float(found[4]):7.2f})" + (f" ({reports} reports)" if probed else ""))
        loads.append(os.getloadavg()[0])
        steal, other = neighbours(times_before, psutil.cpu_times(percpu=True), core)
        steals.append(steal)
        others.append(other)
        print(f"pair {i + 1:3d}: {', '.join(line)} us/step; load {loads[-1]:.2f}, steal {steal:.1f} %, other cores busy {other:.0f} %", flush=True)
    print(
        f"load average (1 min) over the pairs: min {min(loads):.2f}, median {statistics.median(loads):.2f}, max {max(loads):.2f}; {time.monotonic() - began:.0f} s in all"
    )
    print(
        f"pinned core's time stolen by the hypervisor: median {statistics.median(steals):.1f} %, max {max(steals):.1f} %; other cores busy: median {statistics.median(others):.0f} %"
    )

    first = values[MEASURES[0]]
    without, with_probe = statistics.median(first[False]), statistics.median(first[True])
    diff = with_probe - without
    print(f"step time without probe: {without:.2f} us (median over {len(first[False])} runs of each run's {MEASURES[0]})")
    print(f"step time with probe:    {with_probe:.2f} us")
    interval = difference_interval(first[False], first[True])
    text = f"{interval[0]:+.2f} to {interval[1]:+.2f} us" if interval else "too few runs for an interval"
    print(f"probe cost per step (one batch and one optimizer step): {diff:+.2f} us; 95 % interval {text} (bootstrap of the medians)")
    for step_us, name in ((22_000.0, "22 ms"), (1_000.0, "1 ms")):
        shares = f" ({share(interval[0], step_us)} to {share(interval[1], step_us)})" if interval else ""
        print(f"share of a {name} step: {share(diff, step_us)}{shares}")
    pairs = [b - a for a, b in zip(first[False], first[True], strict=True)]
    paired = paired_interval(pairs)
    text = f"; 95 % interval {paired[0]:+.2f} to {paired[1]:+.2f} us" if paired else ""
    print(f"pairs' own differences (with - without): median {statistics.median(pairs):+.2f} us{text}")
    # The mean CPU time counts everything the probe does, its report once a second too,
    # and every slowdown a neighbour caused: noisier, shown to check the first.
    for name in MEASURES[1:]:
        runs = values[name]
        interval = difference_interval(runs[False], runs[True])
        text = f"; 95 % interval {interval[0]:+.2f} to {interval[1]:+.2f} us" if interval else ""
        print(
            f"by {name} per step instead: without {statistics.median(runs[False]):.2f} us, with {statistics.median(runs[True]):.2f} us, "
            f"{statistics.median(runs[True]) - statistics.median(runs[False]):+.2f} us{text}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=36, help="pairs of runs, one without and one with the probe (default 36)")
    parser.add_argument("--seconds", type=float, default=1.5, help="measured seconds of each run (default 1.5)")
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds each run trains before it measures (default 0.5)")
    parser.add_argument("--core", type=int, help="the core each run is pinned to (default: the last this process may use)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 pairs of 0.1 s warm-up + 0.3 s")
    parser.add_argument("--child", type=float, metavar="SECONDS", help=argparse.SUPPRESS)  # one run itself
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.warmup, args.core)
        return
    if args.quick:
        args.pairs, args.seconds, args.warmup = 2, 0.3, 0.1
    if args.pairs < 1 or args.seconds <= 0 or args.warmup < 0:
        parser.exit(2, "probe_step_cost.py: --pairs must be at least 1, --seconds above 0 and --warmup at least 0\n")
    parent(args)


if __name__ == "__main__":
    main()

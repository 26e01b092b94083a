"""What the zero-code probe (gputui.probe) costs a training loop: its throughput with and without it.

    python benchmarks/probe_overhead.py [--runs 6] [--seconds 20]           # the built-in loop
    python benchmarks/probe_overhead.py --quick                              # a few-second smoke run
    python benchmarks/probe_overhead.py --pattern 'tok/s: ([0-9.]+)' -- python train.py --epochs 1

Runs the command --runs times without and --runs times with the probe in back-to-back
pairs (drift of clocks, heat or neighbours between pairs hits both runs of a pair alike),
reads the throughput the command prints itself (the last match of --pattern in its
stdout) and prints both medians, the change in percent with its bootstrap interval, and
each pair's change (with / without, whichever ran first).  The pairs alternate their
order, without-then-with, then with-then-without (A B B A A B ...): a run's place in its
pair matters too (page cache, GPU clocks and allocator warmth left by the run before; on
an H200 the second run of every pair was faster), and alternating puts the probed run
first in half the pairs, so that effect cancels in the medians instead of passing for
the probe's.  An even --runs balances it exactly.  The probed runs listen on a real
channel and count the probe's reports, so a probe that never armed shows.

The built-in loop (``--loop``, what runs without a command) is the probe's worst case:
a small MLP fed by a DataLoader over in-memory tensors, so the per-batch and per-step
costs the probe adds are a large share of each step; on cuda when there is one (else on
one CPU thread).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gputui.lookback.noise import ratio_of_medians
from gputui.probe import ProbeChannel
from gputui.protocol import decode

DEFAULT_PATTERN = r"samples/s: ([0-9][0-9.]*)"


def loop(seconds: float) -> None:
    """The built-in training loop: prints ``samples/s: N`` over all but its first 20 %."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(1)  # steadier: intra-op threads on a small model mostly add scheduling noise
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32768, 64), torch.randint(0, 10, (32768,)))
    loader = DataLoader(data, batch_size=64, shuffle=True, num_workers=0, pin_memory=device == "cuda", drop_last=True)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    began = time.perf_counter()
    warm_until, end = began + 0.2 * seconds, began + seconds
    measuring_since, samples = None, 0
    while True:
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            now = time.perf_counter()
            if measuring_since is None:
                if now >= warm_until:
                    if device == "cuda":
                        torch.cuda.synchronize()
                    measuring_since = time.perf_counter()
                continue
            samples += len(x)
            if now >= end:
                break
        if time.perf_counter() >= end and measuring_since is not None:
            break
    if device == "cuda":
        torch.cuda.synchronize()
    print(f"device {device}, samples/s: {samples / (time.perf_counter() - measuring_since):.1f}", flush=True)


def pair_orders(runs: int) -> list[tuple[bool, bool]]:
    """The order of each pair's two runs (probed or not): without-then-with, then
    with-then-without, alternating (ABBA), so that a run's place in its pair cancels."""
    return [(False, True) if i % 2 == 0 else (True, False) for i in range(runs)]


def run_command(command: list[str], probed: bool) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run ``command`` to its end, with the probe (on a channel that listens) or without;
    (what it did, how many probe reports arrived)."""
    env = dict(os.environ)
    env.pop("GPUTUI_PROBE_SOCKET", None)
    reports: list[str] = []
    channel = ProbeChannel() if probed else None
    if channel is not None:
        channel.start(lambda line: reports.append(line) if (decode(line) or {}).get("event") == "probe" else None)
        env.update(channel.env(env))
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True)
    finally:
        if channel is not None:
            channel.close()
    return done, len(reports)


def run_once(command: list[str], pattern: re.Pattern[str], probed: bool) -> tuple[float, int]:
    """(the command's throughput, how many probe reports arrived)."""
    done, reports = run_command(command, probed)
    matches = pattern.findall(done.stdout)
    if done.returncode != 0 or not matches:
        sys.exit(f"{' '.join(command)} exited {done.returncode} with no match of {pattern.pattern!r}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return float(matches[-1]), reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6, help="pairs of runs, one of each kind (default 6: twelve in all; even, so each order comes as often)")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of one run of the built-in loop")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 runs of each kind, 4 s each")
    parser.add_argument("--pattern", default=DEFAULT_PATTERN, help="a regex whose first group is the command's throughput")
    parser.add_argument("--loop", type=float, metavar="SECONDS", help=argparse.SUPPRESS)  # the built-in loop itself
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the training command (after --); default: the built-in loop")
    args = parser.parse_args()
    if args.loop is not None:
        loop(args.loop)
        return
    if args.quick:
        args.runs, args.seconds = 2, 4.0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    command = command or [sys.executable, str(Path(__file__).resolve()), "--loop", str(args.seconds)]
    pattern = re.compile(args.pattern)

    rates: dict[bool, list[float]] = {False: [], True: []}
    for i, order in enumerate(pair_orders(args.runs)):
        for probed in order:
            rate, reports = run_once(command, pattern, probed)
            rates[probed].append(rate)
            print(f"run {i + 1} {'with   ' if probed else 'without'} probe: {rate:12.1f}" + (f"  ({reports} probe reports)" if probed else ""), flush=True)
            if probed and reports == 0:
                print("  no probe reports: the probe did not arm (not a torch script?) or the run was under 1 s", flush=True)
    without, with_probe = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"median without probe: {without:.1f}")
    print(f"median with probe:    {with_probe:.1f}")
    print(f"change: {100.0 * (with_probe - without) / without:+.2f} %")
    # Each pair ran back to back, so its ratio cancels the drift between pairs; the
    # interval says how far the runs' spread lets the change be told.  Both lists hold
    # one run per pair in pair order, whichever of the two ran first.
    pairs = [b / a for a, b in zip(rates[False], rates[True], strict=True)]
    print(f"pairs (with / without): {', '.join(f'{100.0 * (r - 1.0):+.2f} %' for r in pairs)}; median {100.0 * (statistics.median(pairs) - 1.0):+.2f} %")
    interval = ratio_of_medians(rates[False], rates[True])
    if interval is not None and interval.known:
        assert interval.low is not None and interval.high is not None
        print(f"95 % interval of the change (bootstrap of the medians): {100.0 * (interval.low - 1.0):+.2f} % to {100.0 * (interval.high - 1.0):+.2f} %")


if __name__ == "__main__":
    main()

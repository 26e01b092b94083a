"""How much the disk read check's figure moves between runs, alone and beside CPU-burning
or disk-writing neighbours, and which verdicts it gave.

    python benchmarks/disk_read_spread.py [--runs 20] [--burn 2] [--writer] [--full]
                                          [--single-pass] [--cli] [--workdir DIR]

Each run is the check's disk stage exactly as ``gputui check`` runs it
(``measure_read_throughput`` with the quick or full size and budget, then
``grade_disk_read``); ``--cli`` runs the whole ``gputui check --quick --json`` instead
and reads its ``host.disk_read`` line.  ``--burn N`` starts N processes spinning on the
CPU for the whole measurement, ``--writer`` one that keeps writing and fsyncing a 256 MiB
file beside it.  ``--single-pass`` measures the way the check did before: one pass
through the page cache (its pages dropped first) in 4 MiB blocks.  Prints each run, then min / median / max and the
verdicts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gputui.check.preflight_host import (
    MIB,
    READ_BUDGET_S,
    READ_QUICK_BUDGET_S,
    READ_TEST_BYTES,
    READ_TEST_QUICK_BYTES,
    grade_disk_read,
    measure_read_throughput,
)

BURN = "while True: pass"
WRITE = """
import os, sys
block = os.urandom(4 << 20)
path = sys.argv[1]
while True:
    with open(path, "wb", buffering=0) as fh:
        for _ in range(64):
            fh.write(block)
        os.fsync(fh.fileno())
"""


def stage_once(workdir: Path, full: bool, single_pass: bool) -> tuple[float | None, str, str]:
    size = READ_TEST_BYTES if full else READ_TEST_QUICK_BYTES
    if single_pass:
        test = measure_read_throughput(workdir, size, budget_s=0.0, direct=False, cached_block_bytes=4 * MIB)
    else:
        test = measure_read_throughput(workdir, size, budget_s=READ_BUDGET_S if full else READ_QUICK_BUDGET_S)
    result = grade_disk_read(test)
    value = result.value if isinstance(result.value, (int, float)) else None
    return value, result.status, result.detail or result.cause or ""


def cli_once(workdir: Path) -> tuple[float | None, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "gputui", "check", "--quick", "--json", "--no-history", "--workdir", str(workdir)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = json.loads(proc.stdout)
    disk = next(c for c in out["checks"] if c["id"] == "host.disk_read")
    return disk.get("value"), disk["status"], f"exit {proc.returncode}, verdict {out['verdict']['verdict']}; {disk.get('detail') or disk.get('cause')}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--burn", type=int, default=0, metavar="N", help="CPU-burning neighbours")
    parser.add_argument("--writer", action="store_true", help="a neighbour writing and fsyncing to the same disk")
    parser.add_argument("--full", action="store_true", help="the full check's 256 MiB and budget (default: --quick's)")
    parser.add_argument("--single-pass", action="store_true", help="one pass in 4 MiB blocks, as before the passes")
    parser.add_argument("--cli", action="store_true", help="run the whole `gputui check --quick --json` each time")
    parser.add_argument("--workdir", type=Path, default=Path.cwd())
    args = parser.parse_args()

    neighbours = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(args.burn)]
    scratch = tempfile.NamedTemporaryFile(dir=args.workdir, prefix=".disk-spread-writer-", delete=False)
    scratch.close()
    if args.writer:
        neighbours.append(subprocess.Popen([sys.executable, "-c", WRITE, scratch.name]))
    values: list[float] = []
    statuses: dict[str, int] = {}
    try:
        time.sleep(1.0 if neighbours else 0.0)  # the neighbours are running before the first run
        for run in range(1, args.runs + 1):
            began = time.perf_counter()
            value, status, note = cli_once(args.workdir) if args.cli else stage_once(args.workdir, args.full, args.single_pass)
            print(f"run {run:2d}: {value} MB/s {status} ({time.perf_counter() - began:.1f} s) {note}", flush=True)
            if value is not None:
                values.append(value)
            statuses[status] = statuses.get(status, 0) + 1
    finally:
        for proc in neighbours:
            proc.kill()
            proc.wait()
        os.unlink(scratch.name)
    how = "gputui check --quick" if args.cli else f"disk stage ({'full' if args.full else 'quick'}{', single pass' if args.single_pass else ''})"
    load = f"{args.burn} CPU burners" + (" + a writer" if args.writer else "")
    if values:
        print(
            f"{how}, {load}, {len(values)} runs: min {min(values):,.0f}  median {statistics.median(values):,.0f}  max {max(values):,.0f} MB/s; "
            + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

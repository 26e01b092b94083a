"""The CPU of gputui's XID watchers (gputui.telemetry.xid_watcher) on a real GPU: one
watcher alone, then two at once (a Check run from the dashboard: the session's and the
check's), with and without a GPU load in another process, and one here beside one in another
process.

    python3 benchmarks/xid_watch_cost.py [--seconds 5]

Prints each phase's CPU by thread (from /proc/self/task), in % of one core.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.telemetry.xid_watcher import XidWatcher  # noqa: E402


def _name_threads() -> None:
    """Give each Python thread's name to the OS, as benchmarks/tui_cost.py's probe does."""
    original = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def named(self):
        try:
            with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as fh:
                fh.write(self.name[:15])
        except OSError:
            pass
        original(self)

    threading.Thread._bootstrap_inner = named  # type: ignore[attr-defined]


def thread_times() -> dict[int, tuple[str, float]]:
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            name = (task / "comm").read_text().strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        out[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return out


def phase(label: str, seconds: float) -> None:
    before, t0 = thread_times(), time.monotonic()
    time.sleep(seconds)
    after, dt = thread_times(), time.monotonic() - t0
    rows = []
    for tid, (name, cpu) in after.items():
        share = (cpu - before.get(tid, (name, 0.0))[1]) / dt * 100
        rows.append((share, tid, name))
    total = sum(r[0] for r in rows)
    print(f"## {label}: {len(after)} threads, {total:.2f} % of a core in all")
    for share, tid, name in sorted(rows, reverse=True):
        if share > 0:
            print(f"   {share:7.2f} %  {tid:>8}  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--hold", type=float, help=argparse.SUPPRESS)  # the other process: watch this long
    args = parser.parse_args()
    if args.hold:
        held = XidWatcher([0])
        held.start()
        time.sleep(args.hold)
        held.stop()
        return 0
    _name_threads()
    import pynvml

    pynvml.nvmlInit()  # the session's own NVML, as in the dashboard
    count = pynvml.nvmlDeviceGetCount()
    gpus = list(range(count))
    phase("no watcher", args.seconds)
    first = XidWatcher(gpus)
    first.start()
    phase("one watcher", args.seconds)
    second = XidWatcher(gpus)
    second.start()
    phase("two watchers", args.seconds)
    loop = Path(__file__).with_name("gpu_loop.py")
    load = subprocess.Popen([sys.executable, str(loop), "4000"], stdout=subprocess.DEVNULL) if loop.exists() else None
    time.sleep(5)
    phase("two watchers, the GPU loaded by another process", args.seconds)
    print("second watcher stopped:", second.stop())
    phase("one watcher, the GPU loaded by another process", args.seconds)
    if load is not None:
        load.terminate()
        load.wait()
    print("first watcher stopped:", first.stop())
    # A watcher here and one in another process (gputui check in a second terminal
    # beside the dashboard): the hub cannot share across processes.
    first = XidWatcher(gpus)
    first.start()
    other = subprocess.Popen([sys.executable, __file__, "--hold", str(args.seconds + 3)])
    time.sleep(2)
    phase("one watcher here, one in another process", args.seconds)
    other.wait()
    print("first watcher stopped:", first.stop())
    pynvml.nvmlShutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

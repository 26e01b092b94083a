"""How long one telemetry tick costs: GPU (NVML, per call and per sample) and host (psutil).

    python benchmarks/sample_cost.py [--ticks 200] [--tree 5] [--threads 1] [--busy-main]

Prints a table of milliseconds per tick (median and p95): an ordinary tick, one that
also reads the cumulative counters (energy, clock-event times: every 10 s), the host;
and the slowest NVML calls. Beside each, the CPU time of the thread that made it: an
NVML call can wait for the GPU asleep or spin in the driver.
Run it on the GPU machine while something runs on the GPU; numbers go in docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from gputui.stats import spread
from gputui.telemetry import host as host_module
from gputui.telemetry.gpu import GpuTelemetry
from gputui.telemetry.host import HostTelemetry


def timed_calls(function, times: list[float], cpu_times: list[float] | None = None):
    """``function``, appending each call's milliseconds to ``times`` and, if given, the
    calling thread's CPU milliseconds in it to ``cpu_times`` (an NVML call may wait on
    the GPU asleep, or spin in the driver: only the CPU counts against the monitor)."""

    def call(*args, **kwargs):
        began, began_cpu = time.perf_counter(), time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            times.append((time.perf_counter() - began) * 1e3)
            if cpu_times is not None:
                cpu_times.append((time.thread_time() - began_cpu) * 1e3)

    return call


class TimedModule:
    """Wraps pynvml so every call is timed by name."""

    def __init__(self, module):
        self._module = module
        self.times: dict[str, list[float]] = {}
        self.cpu_times: dict[str, list[float]] = {}

    def __getattr__(self, name):
        value = getattr(self._module, name)
        if not callable(value) or not name.startswith("nvml") or isinstance(value, type):
            return value
        return timed_calls(value, self.times.setdefault(name, []), self.cpu_times.setdefault(name, []))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=200)
    parser.add_argument("--tree", type=int, default=5, help="processes in a stand-in run tree the host sample follows")
    parser.add_argument("--threads", type=int, default=1, help="threads in each of its processes (a PyTorch trainer has dozens)")
    parser.add_argument("--busy-main", action="store_true", help="the tree's main process spins a thread, as a trainer's does: its threads are read")
    parser.add_argument("--tick-s", type=float, default=0.01, help="seconds between ticks (the sampler's are 1 s)")
    args = parser.parse_args()
    import pynvml

    # Each process of the tree starts its extra threads, all asleep.
    threads = f"import threading, time; [threading.Thread(target=time.sleep, args=(3600,), daemon=True).start() for _ in range({args.threads - 1})]"
    child = f"{threads}; time.sleep(3600)"
    spin = "threading.Thread(target=any, args=(iter(int, 1),), daemon=True).start(); " if args.busy_main else ""  # any() of endless zeros: a core, no memory
    script = f"import subprocess, sys; {threads}; {spin}kids = [subprocess.Popen([sys.executable, '-c', {child!r}]) for _ in range({args.tree - 1})]; time.sleep(3600)"
    tree = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    time.sleep(1.0)  # its children started

    try:
        nvml = TimedModule(pynvml)
        gpu = GpuTelemetry(nvml_module=nvml)
        gpu.open()
        host = HostTelemetry()
        threads_ms: list[float] = []  # each reading of a busy process's threads, inside the host sample
        host_module._thread_times = timed_calls(host_module._thread_times, threads_ms)
        gpu_ms, host_ms, gpu_cpu_ms, host_cpu_ms = [], [], [], []
        for _ in range(args.ticks):
            timed_calls(gpu.sample, gpu_ms, gpu_cpu_ms)()
            timed_calls(host.sample, host_ms, host_cpu_ms)([tree.pid])
            time.sleep(args.tick_s)
        exact_ms, exact_cpu_ms = [], []  # a tick that also reads the cumulative counters (every 10 s, and a window's ends)
        for _ in range(20):
            timed_calls(gpu.sample, exact_ms, exact_cpu_ms)(exact=True)
        gpu.close()
    finally:  # the stand-in tree holds our stdout: it goes whatever happened
        os.killpg(tree.pid, signal.SIGKILL)
        tree.wait()
    print(f"GPUs: {len(gpu.infos)} ({', '.join(i.name for i in gpu.infos) or gpu.unavailable_reason})")
    for label, values, cpu in (
        ("GPU sample (all GPUs)", gpu_ms, gpu_cpu_ms),
        ("... with counters", exact_ms, exact_cpu_ms),
        (f"host sample, {args.tree}-process tree of {args.threads} threads each{', main busy' if args.busy_main else ''}", host_ms, host_cpu_ms),
    ):
        s = spread(values)
        print(
            f"{label:<24} median {s['median']:.3f} ms  mean {s['mean']:.3f} ms  p95 {s['p95']:.3f} ms  max {s['max']:.3f} ms"
            f"  | CPU mean {spread(cpu)['mean']:.3f} ms"
        )
    if threads_ms:
        s = spread(threads_ms)
        print(f"  of which a busy process's threads: {len(threads_ms)} readings in {args.ticks} ticks, median {s['median']:.3f} ms each")
    per_call = sorted(((spread(v)["median"], name, len(v)) for name, v in nvml.times.items() if v), reverse=True)  # if v: looked up, never called
    print("slowest NVML calls (median ms per call; the CPU ms the calling thread spent in it):")
    for median, name, count in per_call[:12]:
        print(f"  {name:<44} {median:.4f}  CPU {spread(nvml.cpu_times[name])['median']:.4f}  ({count} calls)")


if __name__ == "__main__":
    main()

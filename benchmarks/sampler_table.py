"""What each GPU monitor costs, measured side by side in one run:

    python benchmarks/sampler_table.py [--seconds 60] [--start-seconds 3] [--load] [--out DIR]

Every tool runs at the same time for --seconds (so each sees the same GPU, the same
load and the same moment; each uses a few % of one core of a many-core host) while,
with --load, benchmarks/gpu_loop.py keeps the GPU busy with a bf16 matmul loop.  Each
tool's CPU time (user + system, its children included) comes from its own wait4
rusage and is given as % of one core over its wall time, interpreter start included.
A second, short round of --start-seconds gives each tool's start cost, so the table
also shows the steady cost: (CPU long - CPU short) / (wall long - wall short), what an
hour-long run pays per second.

  gputui 1 s       python -m gputui --headless --record F --duration S
  gputui 0.1 s     the same at --interval 0.1
  dmon             nvidia-smi dmon -s pucvmet -d 1
  nvitop 1 s       nvitop's ResourceMetricCollector(interval=1) collecting
  pynvml idle      a Python process that only imports pynvml, initialises NVML and sleeps

Tools not installed here are skipped and listed.  Writes DIR/sampler-table.json and
a Markdown table.  Targets: gputui at 1 s <= dmon; gputui at 0.1 s <= 1.5 %.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

NVITOP = """
import sys, time
from nvitop import Device, ResourceMetricCollector
collector = ResourceMetricCollector(Device.all(), interval=1.0).daemonize(on_collect=lambda metrics: True, interval=1.0)
time.sleep(float(sys.argv[1]))
"""
PYNVML_IDLE = "import sys, time, pynvml; pynvml.nvmlInit(); time.sleep(float(sys.argv[1]))"


def tools(seconds: float, scratch: Path) -> dict[str, list[str] | None]:
    py = sys.executable
    gputui = [py, "-m", "gputui", "--headless", "--quiet", "--no-history", "--duration", str(seconds)]
    try:
        import nvitop  # noqa: F401

        have_nvitop = True
    except ImportError:
        have_nvitop = False
    return {
        "gputui --headless --record, 1 s": gputui + ["--record", str(scratch / "g1.jsonl")],
        "gputui --headless --record, 0.1 s": gputui + ["--interval", "0.1", "--record", str(scratch / "g01.jsonl")],
        "nvidia-smi dmon -s pucvmet -d 1": ["nvidia-smi", "dmon", "-s", "pucvmet", "-d", "1"] if shutil.which("nvidia-smi") else None,
        "nvitop ResourceMetricCollector, 1 s": [py, "-c", NVITOP, str(seconds)] if have_nvitop else None,
        "python + pynvml, idle": [py, "-c", PYNVML_IDLE, str(seconds)],
    }


RUNS_UNTIL_STOPPED = "nvidia-smi dmon"  # the others end by themselves after their duration


def run_together(commands: dict[str, list[str]], seconds: float, env: dict[str, str]) -> dict[str, dict]:
    """Start every command at once; after ``seconds`` stop those still running (dmon
    runs until stopped) and read each one's CPU from its own wait4."""
    began = time.monotonic()
    procs = {name: subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO) for name, argv in commands.items()}
    ended: dict[str, tuple[int, object, float]] = {}
    stopped: set[str] = set()
    give_up = began + seconds + 30  # the tools that end themselves get time to write their end
    while len(ended) < len(procs) and time.monotonic() < give_up:  # never Popen.poll(): it would reap before wait4
        for name, proc in procs.items():
            if name not in ended:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    ended[name] = (status, usage, time.monotonic())
                elif name not in stopped and (name.startswith(RUNS_UNTIL_STOPPED) and time.monotonic() >= began + seconds):
                    proc.send_signal(signal.SIGINT)
                    stopped.add(name)
        time.sleep(0.05)
    for name, proc in procs.items():
        if name not in ended:
            proc.send_signal(signal.SIGINT)
    for name, proc in procs.items():
        if name not in ended:
            _, status, usage = os.wait4(proc.pid, 0)  # rusage of it and its reaped children
            ended[name] = (status, usage, time.monotonic())
    rows = {}
    for name, proc in procs.items():
        status, usage, at = ended[name]
        wall = at - began
        cpu = usage.ru_utime + usage.ru_stime  # type: ignore[attr-defined]
        stderr = proc.stderr.read().decode(errors="replace")[-500:] if proc.stderr else ""
        rows[name] = {
            "cpu_s": round(cpu, 3),
            "wall_s": round(wall, 2),
            "cpu_percent_of_one_core": round(cpu / wall * 100, 2),
            "max_rss_mib": round(usage.ru_maxrss / 1024, 1),
            "exit": os.waitstatus_to_exitcode(status),
            "stderr_tail": stderr,
        }  # type: ignore[attr-defined]
    return rows


def steady(long: dict, short: dict) -> float | None:
    """% of one core once started: the CPU the longer round added, per second it added."""
    extra_wall = long["wall_s"] - short["wall_s"]
    return round((long["cpu_s"] - short["cpu_s"]) / extra_wall * 100, 2) if extra_wall > 1 else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="the long round (default 60)")
    parser.add_argument("--start-seconds", type=float, default=3.0, help="the short round that gives the start cost (default 3; 0: none)")
    parser.add_argument("--load", action="store_true", help="keep the GPU busy with benchmarks/gpu_loop.py meanwhile")
    parser.add_argument("--out", type=Path, default=Path("sampler-table-out"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    load = None
    if args.load:  # steps enough to outlast every tool
        load = subprocess.Popen(
            [sys.executable, str(REPO / "benchmarks" / "gpu_loop.py"), "1000000"], stdout=subprocess.DEVNULL, env=env, start_new_session=True
        )
        time.sleep(8)  # CUDA context up and the loop running
    skipped: list[str] = []
    short: dict[str, dict] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="sampler-table-") as scratch:
            if args.start_seconds > 0:
                present = {n: a for n, a in tools(args.start_seconds, Path(scratch) / "short").items() if a is not None}
                (Path(scratch) / "short").mkdir()
                short = run_together(present, args.start_seconds, env)
            commands = tools(args.seconds, Path(scratch))
            skipped = [name for name, argv in commands.items() if argv is None]
            rows = run_together({n: a for n, a in commands.items() if a is not None}, args.seconds, env)
    finally:
        if load is not None:
            os.killpg(load.pid, signal.SIGTERM)
            load.wait()
    for name, row in rows.items():
        if name in short:
            row["start"] = short[name]
            row["steady_cpu_percent_of_one_core"] = steady(row, short[name])
    result = {
        "seconds": args.seconds,
        "start_seconds": args.start_seconds,
        "together": True,
        "load": args.load,
        "cores": os.cpu_count(),
        "tools": rows,
        "skipped": skipped,
    }
    (args.out / "sampler-table.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"| tool | CPU over {args.seconds:g} s, start included (% of one core) | steady, start excluded | start (CPU s) | exit |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, row in rows.items():
        steady_pct = row.get("steady_cpu_percent_of_one_core")
        start_cpu = row["start"]["cpu_s"] if "start" in row else None
        lines.append(
            f"| {name} | {row['cpu_percent_of_one_core']:.2f} % | {'-' if steady_pct is None else f'{steady_pct:.2f} %'} | "
            f"{'-' if start_cpu is None else f'{start_cpu:.2f}'} | {row['exit']} |"
        )
    lines += [f"| {name} | not installed | | | |" for name in skipped]
    (args.out / "sampler-table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

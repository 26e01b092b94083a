"""What each GPU monitor costs, measured side by side in one run:

    python benchmarks/sampler_table.py [--seconds 20] [--load] [--out DIR]

Each tool runs alone for --seconds (interpreter start included) while, with --load,
benchmarks/gpu_loop.py keeps the GPU busy with a bf16 matmul loop.  Its CPU time
(user + system, its children included) comes from wait4's rusage and is given as %
of one core over its wall time:

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


def measure(argv: list[str], seconds: float, env: dict[str, str]) -> dict:
    began = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO)
    deadline = began + seconds
    pid = 0
    while time.monotonic() < deadline:  # never Popen.poll(): it would reap before wait4
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.05)
    if not pid:
        proc.send_signal(signal.SIGINT)  # dmon runs until stopped; the others have ended
        _, status, usage = os.wait4(proc.pid, 0)  # rusage of it and its reaped children
    wall = time.monotonic() - began
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode(errors="replace")[-500:] if proc.stderr else ""
    cpu = usage.ru_utime + usage.ru_stime
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 2), "cpu_percent_of_one_core": round(cpu / wall * 100, 2),
            "max_rss_mib": round(usage.ru_maxrss / 1024, 1), "exit": proc.returncode, "stderr_tail": stderr}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="per tool (default 20)")
    parser.add_argument("--load", action="store_true", help="keep the GPU busy with benchmarks/gpu_loop.py meanwhile")
    parser.add_argument("--out", type=Path, default=Path("sampler-table-out"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    load = None
    if args.load:  # steps enough to outlast every tool
        load = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "gpu_loop.py"), "1000000"],
                                stdout=subprocess.DEVNULL, env=env, start_new_session=True)
        time.sleep(8)  # CUDA context up and the loop running
    rows: dict[str, dict] = {}
    skipped = []
    try:
        with tempfile.TemporaryDirectory(prefix="sampler-table-") as scratch:
            for name, argv in tools(args.seconds, Path(scratch)).items():
                if argv is None:
                    skipped.append(name)
                    continue
                rows[name] = measure(argv, args.seconds, env)
                print(f"{name:<40} {rows[name]['cpu_percent_of_one_core']:6.2f} % of one core", flush=True)
    finally:
        if load is not None:
            os.killpg(load.pid, signal.SIGTERM)
            load.wait()
    result = {"seconds": args.seconds, "load": args.load, "cores": os.cpu_count(), "tools": rows, "skipped": skipped}
    (args.out / "sampler-table.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["| tool | CPU (% of one core) |", "| --- | --- |"]
    lines += [f"| {name} | {row['cpu_percent_of_one_core']:.2f} % |" for name, row in rows.items()]
    lines += [f"| {name} | not installed |" for name in skipped]
    (args.out / "sampler-table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

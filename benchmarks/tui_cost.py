"""What the dashboard costs: CPU, bytes to the terminal, time to the first frame.

    python benchmarks/tui_cost.py [--seconds 30] [--size 140x40] [--interval 1] [--json OUT.json]
    python benchmarks/tui_cost.py --preset gpu-loop --presets benchmarks/gpu-presets.toml
    python benchmarks/tui_cost.py --headless        # the same run, recorded with no dashboard
    python benchmarks/tui_cost.py --preset watch    # no run: the dashboard watching
    python benchmarks/tui_cost.py --state summary   # the run summary left open (also: findings, editor)

gputui runs as a user runs it: ``python -m gputui`` in a pseudo-terminal of the given
size (TERM=xterm-256color unless --truecolor), with a preset started from the command
line and sampling every --interval seconds.  The script reads everything gputui
writes to the terminal and measures, over --seconds after a short warm-up:

  cpu       gputui's own CPU time (user + system) / wall time, in % of one core:
            the app, its sampler and session threads; not the benchmark it runs
  bytes/s   bytes written to the terminal per second
  1st frame seconds from exec to the first full frame (the "Presets" panel drawn),
            and the CPU seconds gputui used until then (what a busy machine stretches)

Without --preset it runs its own stand-in workload (tui_bench_workload below): two
data-loader-like worker processes and a main process reporting throughput ten times
a second through gputui's protocol, plus a log line every two seconds, for as long
as the measurement lasts.  Targets: <= 3.4 % of one core, <= 2 KB/s, <= 1.0 s.
--dump FILE keeps the window's terminal output, to see what is being redrawn.

--state says what the user leaves on screen during the window: ``running`` (the
dashboard over the stand-in run, the default), ``watching`` (no run: ``--preset
watch``), ``summary`` (the stand-in run ends after 3 s and its summary stays open over
the dashboard, which keeps sampling), ``findings`` (f: the findings view open over the
run) or ``editor`` (e: the preset editor open over the run).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import pty
import select
import signal
import struct
import sys
import tempfile
import termios
import textwrap
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
FIRST_FRAME_MARK = b"Presets"  # a border title in every layout: the first frame is up
STATES = ("running", "watching", "summary", "findings", "editor")
STATE_KEYS = {"findings": b"f", "editor": b"e"}  # pressed a second after the first frame
SUMMARY_RUN_S = 3.0  # --state summary: the run ends and its summary opens by itself

WORKLOAD = textwrap.dedent(
    """
    import json, multiprocessing, sys, time

    def loader(stop):
        while not stop.is_set():  # a light data-loader worker: a little CPU, mostly waiting
            sum(i * i for i in range(20000))
            time.sleep(0.05)

    if __name__ == "__main__":
        run_for = float(sys.argv[1]) if len(sys.argv) > 1 else float("inf")
        stop = multiprocessing.Event()
        workers = [multiprocessing.Process(target=loader, args=(stop,)) for _ in range(2)]
        for w in workers:
            w.start()
        step, began = 0, time.monotonic()
        try:
            while time.monotonic() - began < run_for:
                step += 1
                phase = "warmup" if step <= 20 else "measure"
                print("@gputui " + json.dumps({"event": "step", "phase": phase, "step": step,
                      "samples": 64, "seconds": 0.1}), flush=True)
                if step % 20 == 0:
                    print(f"epoch {step // 20}: loss {1 / step:.5f} after {time.monotonic() - began:.0f}s", flush=True)
                time.sleep(0.1)
        finally:
            stop.set()
    """
)


def _size(text: str) -> tuple[int, int]:
    cols, rows = (int(v) for v in text.lower().split("x"))
    return cols, rows


def measure(args: argparse.Namespace, scratch: Path) -> dict:
    cols, rows = args.size
    presets_args: list[str] = []
    preset = "watch" if args.state == "watching" else args.preset
    if preset is None:
        workload = scratch / "tui_bench_workload.py"
        workload.write_text(WORKLOAD)
        run_for = [json.dumps(str(SUMMARY_RUN_S))] if args.state == "summary" else []
        presets_file = scratch / "bench.toml"
        presets_file.write_text(
            f'[presets.tui-bench]\ndescription = "tui_cost stand-in workload"\n'
            f"command = [{', '.join([json.dumps(sys.executable), json.dumps(str(workload)), *run_for])}]\n"
        )
        presets_args, preset = ["--presets", str(presets_file)], "tui-bench"
    elif args.presets:
        presets_args = ["--presets", str(args.presets)]
    argv = [sys.executable, "-m", "gputui", *presets_args, "--interval", str(args.interval)]
    if preset != "watch":
        argv += ["--preset", preset]
    if args.headless:  # the same session with no dashboard: what the dashboard itself adds
        argv += ["--record", str(scratch / "baseline.jsonl"), "--headless", "--quiet"]

    env = dict(os.environ)
    env.update(
        XDG_CONFIG_HOME=str(scratch / "xdg"),
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        TERM="xterm-256color",
        LINES=str(rows),
        COLUMNS=str(cols),
    )
    env.pop("COLORTERM", None)
    if args.truecolor:
        env["COLORTERM"] = "truecolor"

    started = time.monotonic()
    pid, master = pty.fork()
    if pid == 0:  # the child: size the terminal before gputui looks at it
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.execve(argv[0], argv, env)  # in the caller's directory: presets may name relative paths

    proc = psutil.Process(pid)
    seen = bytearray()
    first_frame: float | None = None
    first_frame_cpu: float | None = None
    load_before = os.getloadavg()[0]
    total = 0
    window_bytes = 0
    window_start = started + args.warmup
    window_end = window_start + args.seconds
    cpu_start: float | None = None
    cpu_end: float | None = None
    key = STATE_KEYS.get(args.state)
    try:
        while True:
            now = time.monotonic()
            if key and first_frame is not None and now >= started + first_frame + 1.0:
                os.write(master, key)  # open the view the user leaves on screen
                key = None
            if cpu_start is None and now >= window_start:
                times = proc.cpu_times()
                cpu_start, window_start = times.user + times.system, now
                window_end = now + args.seconds
            if now >= window_end:
                times = proc.cpu_times()
                cpu_end, window_end = times.user + times.system, now
                break
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child ended
                raise SystemExit(f"gputui exited early; it wrote:\n{bytes(seen[-2000:]).decode(errors='replace')}") from None
            total += len(chunk)
            if cpu_start is not None:
                window_bytes += len(chunk)
                if args.dump:
                    args.dump.write(chunk)
            if first_frame is None:
                seen += chunk
                if FIRST_FRAME_MARK in seen and not args.headless:
                    first_frame = time.monotonic() - started
                    times = proc.cpu_times()
                    first_frame_cpu = times.user + times.system
    finally:
        if args.headless:
            os.kill(pid, signal.SIGINT)  # Ctrl-C for the headless recorder
        else:
            os.write(master, b"q")  # quit as a user does; the benchmark's group stops with it
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            try:
                if select.select([master], [], [], 0.1)[0]:
                    os.read(master, 65536)
            except OSError:
                pass
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(master)

    seconds = window_end - window_start
    return {
        "preset": preset,
        "state": args.state,
        "face": "headless --record" if args.headless else "dashboard",
        "interval_s": args.interval,
        "size": f"{cols}x{rows}",
        "colors": "truecolor" if args.truecolor else "256",
        "window_s": round(seconds, 2),
        "cpu_percent_of_one_core": round((cpu_end - cpu_start) / seconds * 100, 2),
        "bytes_per_s": round(window_bytes / seconds, 1),
        "first_frame_s": None if first_frame is None else round(first_frame, 3),
        "first_frame_cpu_s": None if first_frame_cpu is None else round(first_frame_cpu, 3),
        "load_avg_at_start": round(load_before, 2),
        "bytes_total": total,
    }


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{psutil.cpu_count()} logical CPUs ({cpu}), {psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="measurement window (default 30)")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds before the window opens (default 5)")
    parser.add_argument("--size", type=_size, default=(140, 40), metavar="COLSxROWS", help="terminal size (default 140x40)")
    parser.add_argument("--interval", type=float, default=1.0, help="gputui's sampling interval (default 1)")
    parser.add_argument("--preset", help="a preset to run instead of the stand-in workload; 'watch' for none")
    parser.add_argument("--presets", type=Path, help="an extra presets file for --preset")
    parser.add_argument("--truecolor", action="store_true", help="COLORTERM=truecolor (24-bit colour escapes)")
    parser.add_argument("--headless", action="store_true", help="baseline: the same run recorded headless (no dashboard), for comparison")
    parser.add_argument("--state", choices=STATES, default="running", help="what stays on screen during the window (default running)")
    parser.add_argument("--json", type=Path, help="also write the result here")
    parser.add_argument("--dump", type=argparse.FileType("wb"), help="write the window's terminal output here")
    args = parser.parse_args()
    # The window opens once the view is up (on a busy machine the first frame takes seconds).
    if args.state == "summary":  # the run has ended and its summary opened by itself
        args.warmup = max(args.warmup, SUMMARY_RUN_S + 7.0)
    elif args.state in STATE_KEYS:
        args.warmup = max(args.warmup, 10.0)
    with tempfile.TemporaryDirectory(prefix="gputui-tui-cost-") as scratch:
        result = measure(args, Path(scratch))
    result["machine"] = machine()
    for key, value in result.items():
        print(f"{key:>24}: {value}")
    targets = [("cpu_percent_of_one_core", 3.4)]
    if not args.headless:
        targets += [("bytes_per_s", 2048), ("first_frame_s", 1.0)]
    failed = [k for k, limit in targets if result[k] is None or result[k] > limit]
    print("targets: " + ("all met" if not failed else "missed: " + ", ".join(failed)))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

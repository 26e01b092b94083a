"""A run started in the dashboard, the dashboard killed, the run attached to again: does the
run notice?  Issue 41's check on a GPU box.

    python3 benchmarks/reattach.py --presets benchmarks/gpu-presets.toml --preset reattach-input-fed \\
        --duration 180 --kill-at 60 --attach-at 90 --out DIR

1. The dashboard (``gputui --preset P --duration D``, 140x40 pseudo-terminal) starts the
   run, which lives in a process of its own.
2. --kill-at seconds into the run the dashboard is SIGKILLed (no clean-up of any kind).
3. --attach-at seconds in, ``gputui attach RUN`` opens on it in a new terminal, and
   stays until the run has ended (--duration caps it) and its summary is up.
4. The same preset then runs headless in the foreground (``--record --headless``) with the
   same --duration, nothing else on the GPU.

It writes, under --out: reattach.json and reattach.md (the gaps between the run's samples,
whether any is longer than two intervals, both figures and how far apart they are), and
the screens as text: the dashboard just before it was killed, the viewer after it
attached, and its summary at the end.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tui_cost import Pty, live_runs, machine, program_text, stop_runs
from viewer_cost import gputui_env, pump

from gputui.record.recording import read_recording

SIZE = (140, 40)


def run_figure(path: Path) -> dict:
    recording = read_recording(path)
    summary = recording.summary
    times = sorted(sample.t for sample in recording.samples)
    gaps = [round(b - a, 3) for a, b in zip(times, times[1:])]
    interval = recording.header.interval or 1.0
    figure = summary.figure if summary is not None else None
    return {
        "file": path.name,
        "samples": len(times),
        "first_t": times[0] if times else None,
        "last_t": times[-1] if times else None,
        "longest_gap_s": max(gaps, default=None),
        "gaps_over_two_intervals": [g for g in gaps if g > 2 * interval],
        "figure": figure,
        "unit": summary.throughput.unit if summary is not None and summary.throughput is not None else None,
        "outcome": summary.outcome.message if summary is not None and summary.outcome is not None else recording.cut,
        "cut": recording.cut,
    }


def screen(session: Pty) -> str:
    return session.term.text().rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", required=True)
    parser.add_argument("--presets", type=Path)
    parser.add_argument("--duration", type=float, default=180.0, help="each run's length in seconds (default 180)")
    parser.add_argument("--kill-at", type=float, default=60.0, help="SIGKILL the dashboard this far into the run (default 60)")
    parser.add_argument("--attach-at", type=float, default=90.0, help="attach this far into the run (default 90)")
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--no-headless", action="store_true", help="skip the headless run to compare with")
    parser.add_argument("--fake-gpus", type=int, default=0, help="no GPU here: the NVML test double in gputui's processes")
    parser.add_argument("--fake-cores", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    presets = ["--presets", str(args.presets)] if args.presets else []
    common = [*presets, "--preset", args.preset, "--duration", f"{args.duration:g}", "--interval", f"{args.interval:g}"]
    result: dict = {"machine": machine(), "preset": args.preset, "duration_s": args.duration, "kill_at_s": args.kill_at, "attach_at_s": args.attach_at}
    with tempfile.TemporaryDirectory(prefix="gputui-reattach-") as folder:
        scratch = Path(folder)
        env = gputui_env(scratch, *SIZE, args, None)
        try:
            dashboard = Pty([sys.executable, "-m", "gputui", *common], env, *SIZE)
            deadline = time.monotonic() + 120
            while not (runs := live_runs(scratch)):
                if time.monotonic() > deadline or dashboard.ended:
                    raise SystemExit(f"no run started: {program_text(dashboard)[-800:]}")
                pump([dashboard], time.monotonic() + 0.2)
            run = runs[0]
            began = time.monotonic()  # within a pump's step of the run's start
            pump([dashboard], began + args.kill_at)
            (args.out / "1-dashboard-before-kill.txt").write_text(screen(dashboard))
            dashboard.proc.kill()  # SIGKILL: the dashboard gets no say
            dashboard.proc.wait(10)
            result["run_alive_after_kill"] = run.alive()
            time.sleep(max(0.0, began + args.attach_at - time.monotonic()))
            result["run_alive_at_attach"] = run.alive()
            viewer = Pty([sys.executable, "-m", "gputui", "attach", run.name], env, *SIZE)
            pump([viewer], time.monotonic() + 15)
            (args.out / "2-attached.txt").write_text(screen(viewer))
            deadline = began + args.duration + 120
            while run.alive() and time.monotonic() < deadline:
                pump([viewer], time.monotonic() + 1)
            pump([viewer], time.monotonic() + 5)  # the summary opens once the recording's summary is read
            (args.out / "3-summary.txt").write_text(screen(viewer))
            viewer.stop([b"\x1b", b"q"])
            assert run.kept_path is not None
            result["dashboard_run"] = run_figure(run.kept_path)
        finally:
            stop_runs(scratch)
        if not args.no_headless:
            headless = scratch / "headless.jsonl"
            done = subprocess.run(
                [sys.executable, "-m", "gputui", *common, "--record", str(headless), "--headless", "--quiet", "--no-history"],
                env=env,
                timeout=args.duration + 300,
            )
            result["headless_exit"] = done.returncode
            result["headless_run"] = run_figure(headless)
    dash, head = result["dashboard_run"], result.get("headless_run")
    if head and dash["figure"] and head["figure"]:
        result["figure_difference_pct"] = round((dash["figure"] - head["figure"]) / head["figure"] * 100, 2)
    (args.out / "reattach.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"Machine: {result['machine']}",
        f"Preset {args.preset}, {args.duration:g} s each; the dashboard SIGKILLed at {args.kill_at:g} s, attached again at {args.attach_at:g} s.",
        "",
        "| run | samples | longest gap (s) | gaps over 2 intervals | figure | outcome |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, figures in (("started in the dashboard", dash), ("headless", head)):
        if figures:
            lines.append(
                f"| {name} | {figures['samples']} | {figures['longest_gap_s']} | {len(figures['gaps_over_two_intervals'])} | "
                f"{figures['figure']} {figures['unit'] or 'samples'}/s | {figures['outcome']} |"
            )
    lines += ["", f"Run alive after the kill: {result['run_alive_after_kill']}; at the attach: {result['run_alive_at_attach']}."]
    if "figure_difference_pct" in result:
        lines.append(f"Figure, dashboard run against headless: {result['figure_difference_pct']:+.2f} % (target: within 1 %).")
    text = "\n".join(lines) + "\n"
    (args.out / "reattach.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

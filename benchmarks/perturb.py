"""Does watching slow the job, and does gputui report the job's own number?

    python benchmarks/perturb.py [--rounds 3] [--seconds 15] [--interval 0.1] [--out DIR]

Runs benchmarks/matmul_bench.py (a steady bf16 matmul loop) alternately unmonitored
(A) and under ``gputui --headless --record --interval 0.1`` (B), A/B/A/B..., and
writes DIR/perturb.json and a Markdown table:

  perturbation  median B throughput / median A throughput, each the workload's own
                number for its measured phase (target >= 99.5 %)
  fidelity      in each B run, gputui's measured-phase median (the recording's
                summary) against the workload's own number and against an
                independent CUDA-event timing of the same phase (target within 1 %)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gputui import protocol
from gputui.record import events as ev
from gputui.record.recording import read_recording


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), out.get("PYTHONPATH")) if p)
    return out


def unmonitored(workload: list[str]) -> dict:
    done = subprocess.run(workload, capture_output=True, text=True, env=env(), check=True)
    results = [p for p in map(protocol.decode, done.stdout.splitlines()) if p and p.get("event") == "result"]
    return results[-1]


def monitored(workload: list[str], interval: float, scratch: Path, n: int) -> dict:
    presets = scratch / "perturb.toml"
    presets.write_text("[presets.matmul]\ncommand = [" + ", ".join(json.dumps(a) for a in workload) + "]\n")
    recording = scratch / f"monitored-{n}.jsonl"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gputui",
            "--presets",
            str(presets),
            "--preset",
            "matmul",
            "--headless",
            "--quiet",
            "--no-history",
            "--interval",
            str(interval),
            "--record",
            str(recording),
            "--force",
        ],
        env=env(),
        check=True,
        stdout=subprocess.DEVNULL,
        cwd=REPO,
    )
    rec = read_recording(recording)
    result = dict(rec.events_of(ev.RESULT)[-1].data)
    summary = rec.summary
    assert summary is not None and summary.throughput is not None, f"{recording}: {rec.cut}"
    result["gputui_median"] = summary.throughput.median
    result["gputui_window"] = summary.window
    result["samples_recorded"] = summary.samples
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15.0, help="measured phase of each run")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--interval", type=float, default=0.1, help="gputui's sampling interval in B runs")
    parser.add_argument("--out", type=Path, default=Path("perturb-out"))
    parser.add_argument("--workload-args", default="", help="extra matmul_bench.py arguments, e.g. '--cpu --size 256'")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    workload = [
        sys.executable,
        str(REPO / "benchmarks" / "matmul_bench.py"),
        "--seconds",
        str(args.seconds),
        "--warmup",
        str(args.warmup),
        *args.workload_args.split(),
    ]
    a_runs, b_runs = [], []
    for n in range(args.rounds):
        a_runs.append(unmonitored(workload))
        b_runs.append(monitored(workload, args.interval, args.out, n))
        print(f"round {n + 1}: A {a_runs[-1]['samples_per_sec']:.3f}/s  B {b_runs[-1]['samples_per_sec']:.3f}/s", flush=True)
    a = statistics.median(r["samples_per_sec"] for r in a_runs)
    b = statistics.median(r["samples_per_sec"] for r in b_runs)
    fidelity = [
        {
            "gputui_vs_own": r["gputui_median"] / r["samples_per_sec"],
            "gputui_vs_cuda_events": r["gputui_median"] / r["cuda_event_samples_per_sec"],
            "own_vs_cuda_events": r["samples_per_sec"] / r["cuda_event_samples_per_sec"],
        }
        for r in b_runs
    ]
    worst = max(abs(f[k] - 1) for f in fidelity for k in ("gputui_vs_own", "gputui_vs_cuda_events"))
    result = {
        "interval_s": args.interval,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "unmonitored": a_runs,
        "monitored": b_runs,
        "monitored_over_unmonitored": b / a,
        "fidelity": fidelity,
        "fidelity_worst_error": worst,
    }
    (args.out / "perturb.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "| figure | value | target |",
        "| --- | --- | --- |",
        (f"| throughput monitored at {args.interval:g} s / unmonitored (median of {args.rounds}, A/B interleaved) | {b / a:.2%} | >= 99.5 % |"),
        (
            f"| gputui measured-phase median vs the workload's own number (worst of {args.rounds}) "
            f"| {max(abs(f['gputui_vs_own'] - 1) for f in fidelity):.2%} off | within 1 % |"
        ),
        (
            f"| gputui measured-phase median vs CUDA-event timing (worst of {args.rounds}) "
            f"| {max(abs(f['gputui_vs_cuda_events'] - 1) for f in fidelity):.2%} off | within 1 % |"
        ),
    ]
    (args.out / "perturb.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

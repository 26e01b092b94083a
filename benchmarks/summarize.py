"""Turn workload recordings into the Markdown table of docs/benchmarks.md.

    python benchmarks/summarize.py RUN.jsonl [RUN.jsonl ...]

One row per recording: the preset, what it ran, throughput (median of measured windows,
p5-p95, and samples over time), the framework's peak memory, achieved TFLOP/s and its
share of the GPU's datasheet peak (shared/reference/gpu-specs.toml, copied below), and
the preset's published references.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gputui import fmt
from gputui.errors import UserError
from gputui.record import events as ev
from gputui.record.recording import read_recording
from gputui.record.schema import PresetRecord

# Dense datasheet peaks in TFLOP/s (shared/reference/gpu-specs.toml): fp32 for fp32 runs,
# the tensor-core half-precision figure for bf16/fp16 (and TF32 at half of it).
PEAK_TFLOPS = {"NVIDIA H200": {"fp32": 67.0, "tf32": 494.5, "bf16": 989.0, "fp16": 989.0}}


def row(path: Path) -> str:
    rec = read_recording(path)
    preset = rec.header.preset or PresetRecord()
    gpus = rec.header.gpu_list
    results = rec.events_of(ev.RESULT)
    result = results[-1].data if results else {}
    workload = rec.events_of(ev.WORKLOAD)
    start = workload[0].data if workload else {}
    outcome = rec.summary.outcome if rec.summary else None
    precision = preset.precision or "fp32"
    what = f"{preset.framework} {preset.model} bs{result.get('batch_size', preset.batch_size)} {precision}"
    extras = [k for k in ("channels_last", "compile") if preset.setting(k)]
    if preset.pipeline == "host":
        extras.append(f"host pipeline, {preset.workers} workers, {preset.setting('augment') or 'light'} augment")
    if extras:
        what += " (" + ", ".join(extras) + ")"
    if outcome is None or not outcome.ok:
        return f"| `{preset.name}` | {what} | {outcome.message if outcome else 'no outcome'} | | | | |"
    if "curve" in result:  # --find-max-batch
        curve = ", ".join(f"{t['batch_size']}: {fmt.rate(t.get('samples_per_sec'))}" if t.get("fits") else f"{t['batch_size']}: OOM" for t in result["curve"])
        return f"| `{preset.get('name')}` | {what} | largest batch **{result.get('max_batch_size')}**; samples/s by batch: {curve} | | | | |"
    median = result.get("samples_per_sec")
    spread = f"{fmt.rate(result.get('p5'))}–{fmt.rate(result.get('p95'))}"
    peak = result.get("peak_memory_bytes")
    tflops = result.get("achieved_tflops")
    gpu_peak = PEAK_TFLOPS.get(gpus[0].name if gpus else "", {}).get(precision)
    share = f" ({tflops / gpu_peak:.0%} of {gpu_peak:g})" if tflops and gpu_peak else ""
    refs = "; ".join(f"{r.gpu}: {fmt.rate(r.samples_per_sec)} ({r.source})" for r in preset.references)
    device = start.get("device", "?")
    return (
        f"| `{preset.name}` | {what} on {device} | **{fmt.rate(median)}** ({spread}; mean {fmt.rate(result.get('mean'))}) "
        f"| {fmt.gib(peak)} GiB | {tflops:.1f}{share} | {refs or '-'} |"
        if tflops is not None
        else f"| `{preset.name}` | {what} on {device} | **{fmt.rate(median)}** ({spread}) | {fmt.gib(peak)} GiB | - | {refs or '-'} |"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recordings", nargs="+", type=Path, metavar="RUN.jsonl")
    args = parser.parse_args(argv)
    try:
        rows = [row(path) for path in args.recordings]
    except UserError as error:  # a missing or unreadable recording: one line, as gputui says it
        print(f"summarize.py: {error}", file=sys.stderr)
        return 2
    print("| preset | what ran | samples/s: median of windows (p5–p95; mean) | peak memory | achieved TFLOP/s | published |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

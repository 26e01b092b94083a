"""A 24-hour recording, fast-forwarded: does the recorder's memory stay flat, and how
big is the file?

    python benchmarks/long_run.py [--hours 24] [--gpus 8] [--cores 128] [--interval 1] [--out DIR]

Feeds synthetic samples (benchmarks/synthetic.py: every GPU field filled) as fast as
it can through the headless recorder and the summary builder, exactly as a Session
does, and reads this process's resident memory at 20 checkpoints.  Writes
DIR/long-run.json and a Markdown table: RSS at the start, middle and end, bytes per
sample and per GPU-sample, the 24 h file size (extrapolated when --hours < 24), and
what ``--record x.jsonl.gz`` makes of it (the recorder's gzip writer, sync-flushed after
every line as it is at 1 Hz, on a real H200 recording, --gzip-sample: the synthetic
samples repeat far more than real ones do).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from synthetic import gpu_sample, sample

from gputui.model import to_dict
from gputui.record.gzip_lines import GzipLineWriter
from gputui.record.recorder import Recorder
from gputui.record.schema import Header
from gputui.session.summary import SummaryBuilder

MIB = 1024**2


def recorder_gzip_ratio(real: bytes) -> float:
    """Compressed / plain size of ``real`` as the Recorder writes a .gz: one sync flush
    per line (at 1 Hz it syncs after about every sample; at 10 Hz, once a second)."""
    out = io.BytesIO()
    writer = GzipLineWriter(out)
    for line in real.decode("utf-8").splitlines(keepends=True):
        writer.write(line)
        writer.sync_flush()
    writer.finish()
    return len(out.getvalue()) / len(real)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--cores", type=int, default=128)
    parser.add_argument("--processes", type=int, default=9, help="the run's processes (a main and its loaders)")
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=Path("long-run-out"))
    parser.add_argument(
        "--gzip-sample", type=Path, default=REPO / "docs" / "recordings" / "h200-torch-resnet50.jsonl", help="a real recording to take gzip's ratio from"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "long-run.jsonl"
    count = int(args.hours * 3600 / args.interval)
    me = psutil.Process()
    recorder, builder = Recorder(path), SummaryBuilder()
    header = Header(interval=args.interval, extra={"synthetic": True})
    for observer in (builder, recorder):
        observer.on_header(header)
    rss: list[tuple[float, float]] = []  # (simulated hours, MiB)
    checkpoints = {int(count * k / 20) for k in range(21)}
    began = time.process_time()
    for i in range(count):
        s = sample(i, args.interval, args.gpus, args.cores, args.processes)
        builder.on_sample(s)
        recorder.on_sample(s)
        if i in checkpoints:
            rss.append((round(i * args.interval / 3600, 2), round(me.memory_info().rss / MIB, 1)))
    summary = builder.build()
    recorder.on_summary(summary)
    recorder.close()
    cpu = time.process_time() - began
    rss.append((round(count * args.interval / 3600, 2), round(me.memory_info().rss / MIB, 1)))
    size = path.stat().st_size
    per_sample = size / count
    one_gpu = len(json.dumps(to_dict(gpu_sample(0, 1, False)), separators=(",", ":")))
    real = args.gzip_sample.read_bytes()
    gz_ratio = recorder_gzip_ratio(real)
    day = per_sample * 86400 / args.interval
    after_first = [m for h, m in rss if h >= rss[-1][0] * 0.1]
    result = {
        "hours": args.hours,
        "gpus": args.gpus,
        "cores": args.cores,
        "interval_s": args.interval,
        "samples": count,
        "rss_mib": rss,
        "rss_growth_after_first_10pct_mib": round(max(after_first) - min(after_first), 1),
        "bytes_per_sample": round(per_sample),
        "bytes_per_gpu_sample": one_gpu,
        "bytes_24h": round(day),
        "gzip_ratio": round(gz_ratio, 3),
        "bytes_24h_gzip": round(day * gz_ratio),
        "cpu_s_per_sample_recorded": round(cpu / count * 1e3, 3),
    }
    (args.out / "long-run.json").write_text(json.dumps(result, indent=2) + "\n")
    path.unlink()  # gigabytes at full scale: only the figures come back
    lines = [
        "| figure | value |",
        "| --- | --- |",
        f"| recorder RSS at 0 / {rss[len(rss) // 2][0]:g} / {rss[-1][0]:g} h (MiB) | {rss[0][1]:.0f} / {rss[len(rss) // 2][1]:.0f} / {rss[-1][1]:.0f} |",
        f"| RSS growth after the first 10 % of the feed | {result['rss_growth_after_first_10pct_mib']} MiB |",
        f"| bytes per GPU-sample | {one_gpu} B |",
        f"| bytes per sample ({args.gpus} GPUs, {args.cores} cores, {args.processes} processes) | {per_sample:,.0f} B |",
        f"| 24 h at {args.interval:g} s | {day / 2**30:.2f} GiB ({day * gz_ratio / 2**30:.2f} GiB as .jsonl.gz at the ratio of {args.gzip_sample.name}, {gz_ratio:.2f}) |",
        f"| recorder + summary CPU per sample | {result['cpu_s_per_sample_recorded']} ms |",
    ]
    (args.out / "long-run.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The own-training runs (benchmarks/own-training-gpu.sh) as one Markdown table.

    python benchmarks/own_training_table.py RUN.jsonl [RUN.jsonl ...]

One row per recording: the run, the unit gputui read its throughput in, the median
over the training phase, the script's own final figure and how far the median is from
it, how long after the training started the first reading in that unit came, the
share of its time the loop waited for data (the probe), the GPU's median SM activity
(utilization without GPM) over the training phase, and the findings that opened.

    python benchmarks/own_training_table.py --figures RUN.jsonl [RUN.jsonl ...]

One row per recording: the run's figure (ThroughputSummary.run_figure, counted again from the
readings for recordings from before the summary wrote one), its median, the script's own
final figure, and how far each is from it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gputui import fmt
from gputui.lookback.load import load_recording, run_summary
from gputui.model import Throughput
from gputui.record import events as ev
from gputui.record.recording import read_recording, recording_stem
from gputui.record.schema import Stats, Summary, ThroughputSummary

COLUMNS = ("run", "unit", "median", "script's own", "Δ", "first reading", "data wait", "GPU busy", "window", "findings")
FIGURE_COLUMNS = ("run", "gputui's figure", "median", "the script's own", "Δ figure", "Δ median")


def first_reading_after_start(rec, unit: str) -> float | None:
    """Seconds from the training's start (its first progress of any kind: a reading or a
    probe window with steps) to its first live reading in ``unit``."""
    starts = [e.t for e in rec.events_of(ev.THROUGHPUT) if isinstance(e.payload, Throughput) and not e.payload.final]
    starts += [e.t for e in rec.events_of(ev.PROBE) if isinstance(e.payload, ev.ProbeReport) and e.payload.steps]
    firsts = [e.t for e in rec.events_of(ev.THROUGHPUT) if isinstance(e.payload, Throughput) and not e.payload.final and e.payload.unit == unit]
    if not starts or not firsts:
        return None
    return min(firsts) - min(starts)


def data_wait(rec) -> float | None:
    """The probe's data-wait share over the whole run, in percent (timed around DataLoader
    batches, or sampled where the loop makes its own)."""
    reports = [e.payload for e in rec.events_of(ev.PROBE) if isinstance(e.payload, ev.ProbeReport) and e.payload.steps]
    seconds = sum(r.seconds or 0.0 for r in reports)
    waited = sum(r.loop_wait_s or 0.0 for r in reports)
    return 100.0 * waited / seconds if seconds else None


def row(path: Path) -> tuple[str, ...]:
    rec = read_recording(path)
    summary = rec.summary or Summary()
    tp = summary.throughput or ThroughputSummary()
    unit = tp.unit_name
    median = tp.median
    own = own_figure(tp)
    delta = f"{100.0 * (median - own) / own:+.1f}%" if median and own else "-"
    first = first_reading_after_start(rec, unit)
    wait = data_wait(rec)
    busy = [(g.sm_active or g.util_gpu or Stats()).median for g in summary.gpus]
    busy_text = ", ".join(fmt.pct(b) for b in busy if b is not None) or "-"
    findings = sorted({f.kind for f in summary.findings or [] if f.severity in ("warning", "critical")})
    return (
        recording_stem(path),
        unit,
        fmt.rate(median),
        fmt.rate(own) if own else "-",
        delta,
        f"{first:.1f} s" if first is not None else "-",
        f"{wait:.0f}%" if wait is not None else "-",
        busy_text,
        summary.window or "-",
        ", ".join(findings) or "none",
    )


def own_figure(tp: ThroughputSummary) -> float | None:
    """The script's own closing figure, where it is in the run's unit."""
    reported = tp.reported
    return reported.samples_per_sec if reported is not None and (reported.unit or "samples") == tp.unit_name else None


def percent_off(value: float | None, own: float | None) -> str:
    return f"{100.0 * (value - own) / own:+.1f}%" if value and own else "-"


def figure_row(path: Path) -> tuple[str, ...]:
    tp = run_summary(load_recording(path)).throughput or ThroughputSummary()
    own = own_figure(tp)
    figure, median = tp.run_figure, tp.median
    kind = "" if figure is None or tp.mean_is_figure and not tp.is_bursty else " (bursty)" if tp.is_bursty else " (median)"
    return (
        recording_stem(path),
        fmt.rate_in(figure, tp.unit) + kind,
        fmt.rate(median),
        fmt.rate(own),
        percent_off(figure, own),
        percent_off(median, own),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", action="store_true", help="the run's figure and median against the script's own")
    parser.add_argument("recordings", nargs="+", type=Path)
    args = parser.parse_args(argv)
    columns = FIGURE_COLUMNS if args.figures else COLUMNS
    rows = [(figure_row if args.figures else row)(path) for path in args.recordings]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for cells in rows:
        print("| " + " | ".join(fmt.printable(c) for c in cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The headless live line: what it shows as a run goes, and what it stops showing."""

from __future__ import annotations

import io

from gputui.model import GpuSample, Sample, Throughput
from gputui.record import events as ev
from gputui.session.progress import STALE_READING_S, ProgressPrinter
from gputui.session.summary import SummaryBuilder


def test_the_last_rate_leaves_the_live_line_once_no_reading_repeats_it():
    stream = io.StringIO()
    printer = ProgressPrinter(SummaryBuilder(), stream)
    printer.on_event(ev.Event(1.0, ev.THROUGHPUT, Throughput(samples_per_sec=250.0, source="generic", unit="samples", phase="training")))
    printer.on_sample(Sample(t=2.0, gpus=[GpuSample(index=0)]))
    printer.on_sample(Sample(t=2.0 + STALE_READING_S + 1, gpus=[GpuSample(index=0)]))  # the idle tail
    during, after = stream.getvalue().splitlines()
    assert "training 250 samples/s" in during
    assert "samples/s" not in after and "250" not in after


def test_the_user_guides_example_line_has_the_fields_the_printer_prints():
    import re

    from tests.support.process import REPO

    printer_line = io.StringIO()
    printer = ProgressPrinter(SummaryBuilder(), printer_line)
    printer.on_event(ev.Event(11.0, ev.THROUGHPUT, Throughput(samples_per_sec=1771.0, source="gputui", unit="samples", phase="measure")))
    printer.on_sample(Sample(t=12.0, gpus=[GpuSample(index=0, util_gpu=100.0)]))
    rate_field = re.compile(r"\| (\w+) ([\d,]+) (samples|tokens|steps)/s \(median")
    assert rate_field.search(printer_line.getvalue())
    guide = (REPO / "docs" / "user-guide.md").read_text(encoding="utf-8")
    example = re.search(r"```\n( +12\.0s \|[^\n]*)\n```", guide)
    assert example is not None and rate_field.search(example.group(1)), "docs/user-guide.md's progress-line example"


def test_the_summary_names_what_its_figure_counts_in_the_runs_unit():
    """A run counted in tokens (nanoGPT) or steps (a bar without a batch size) says so:
    its figure is tokens, or steps, over seconds of training, not samples."""
    from gputui.record.schema import Summary, ThroughputSummary
    from gputui.session.progress import summary_table

    for unit in ("tokens", "steps", "samples"):
        tp = ThroughputSummary(readings=10, unit=unit, source="nanogpt", median=1000.0, mean=990.0, figure=990.0)
        (headline,) = [line for line in summary_table(Summary(throughput=tp)) if line.split()[:1] == ["throughput"] and line.split()[1][0].isdigit()]
        assert f"{unit} over seconds of training" in headline
        others = {"tokens", "steps", "samples"} - {unit}
        assert not any(f"{other} over" in headline for other in others)

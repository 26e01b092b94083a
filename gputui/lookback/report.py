"""One recording as a report: what ran where, how fast, what held it back.

``report_blocks`` builds the content once (gputui.lookback.document); ``write_report``
draws the plots and writes report.md (and report.html) into a directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gputui import fmt
from gputui.check.result import with_bound
from gputui.errors import UserError
from gputui.lookback.document import Block, Bold, Bullets, Code, Heading, Image, Line, Paragraph, ReportNote, Table, to_html, to_markdown, with_code
from gputui.lookback.facts import RunFacts, run_facts, throttle_text
from gputui.lookback.load import check_results, check_summary, run_summary
from gputui.lookback.plots import ReportPlot, make_plots
from gputui.model import BURSTY_NOTE
from gputui.record import events as ev
from gputui.record.recording import Recording
from gputui.record.schema import Summary
from gputui.safe_write import write_atomic


def value_text(value: Any, unit: str = "") -> str:
    """A measured value for a table: numbers at a sensible precision, with their unit."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{value}{' ' + unit if unit else ''}"
    if isinstance(value, int) or (abs(value) < 1e15 and float(value).is_integer()):
        text = f"{int(value):,}"
    else:
        text = fmt.rate(value) if value >= 0 else f"{value:.3g}"
    return f"{text} {unit}".strip()


def ratio_text(ratio: float | None) -> str:
    return "-" if ratio is None else f"×{ratio:.2f}"


def usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def _run_table(recording: Recording, facts: RunFacts, summary: Summary) -> Table:
    rows: list[list[Line]] = [["Machine", facts.machine], ["GPU", facts.gpu]]
    if facts.preset:
        rows.append(["Preset", facts.preset])
    if facts.command:
        rows.append(["Command", (Code(facts.command),)])
    rows.append(["Outcome", facts.outcome + ("" if facts.ok is None else " (ok)" if facts.ok else " (failed)")])
    header = recording.header
    if header.started_at:
        rows.append(["Started", header.started_at])
    interval = header.interval if header.interval is not None else "?"
    rows.append(["Sampled", f"{fmt.duration(summary.duration_s)} ({summary.samples or 0} samples every {interval} s)"])
    return Table(["", ""], rows)


_LEFT_OUT = {"startup": "start-up", "evaluation": "evaluation", "checkpoint": "checkpoints", "stall": "stalls", "tail": "the idle tail"}


def _training_window(facts: RunFacts) -> str:
    """What the training window left out: the phases the run was seen in, no others."""
    seen = {p.phase for p in facts.phases or []}
    left = [name for phase, name in _LEFT_OUT.items() if phase in seen]
    if not left:
        return "training phase"
    listed = left[0] if len(left) == 1 else ", ".join(left[:-1]) + " and " + left[-1]
    return f"training phase: {listed} left out"


def _throughput_blocks(facts: RunFacts) -> list[Block]:
    tp, unit = facts.throughput, facts.unit
    reported = tp.reported
    if tp.median is None:
        if reported is not None and reported.samples_per_sec is not None:
            figure = fmt.rate_in(reported.samples_per_sec, reported.unit)
            return [Heading(2, "Throughput"), Paragraph(f"The tool's own figure: {figure} (no readings over time).")]
        return [Heading(2, "Throughput"), Paragraph("No throughput readings: the run printed no rate gputui could parse.")]
    window = {"measure": "measured phase, warm-up left out", "training": _training_window(facts)}
    mean = ["Mean (all it did over all the time it took)", fmt.rate_in(tp.mean, unit)]
    if tp.mean_is_figure:  # a job of the user's: counted the way its own tools count
        mean[1] += f" (the run's figure: {BURSTY_NOTE})" if tp.is_bursty else " (the run's figure)"
        rows = [mean, ["Median", fmt.rate_in(tp.median, unit)]]
    else:
        rows = [["Median", fmt.rate_in(tp.median, unit)], *([mean] if tp.mean else [])]
    readings = tp.readings if tp.readings is not None else len(facts.rates)
    rows += [
        ["p5 – p95", f"{fmt.rate(tp.p5)} – {fmt.rate_in(tp.p95, unit)}"],
        ["Readings", f"{readings} ({window.get(facts.window, 'every reading')}; source {tp.source or '?'})"],
    ]
    if reported:
        rows.append(["The tool's own figure", fmt.rate_in(reported.samples_per_sec, reported.unit)])
    if facts.phases:
        rows.append(["Phases", fmt.phase_line([(p.phase, p.duration_s) for p in facts.phases])])
    one = unit[:-1] if unit.endswith("s") else unit
    rows.append([f"Energy per {one}", value_text(facts.energy_per_sample_j, "J")])
    if facts.cost_per_million is not None:
        rows.append([f"Cost per million {unit}", f"{usd(facts.cost_per_million)} at {usd(facts.price_per_hour)}/hour"])
    else:
        rows.append([f"Cost per million {unit}", "- (give --price USD_PER_HOUR)"])
    return [Heading(2, "Throughput"), Table(["", ""], rows)]


def _batch_search_blocks(recording: Recording) -> list[Block]:
    """A batch-size search (``--find-max-batch``): each batch size tried, from its result line."""
    result = next((e.payload.fields for e in reversed(recording.events_of(ev.RESULT)) if isinstance(e.payload, ev.Result) and e.payload.curve), None)
    if result is None:
        return []
    rows = [
        [
            str(step.get("batch_size", "?")),
            "yes" if step.get("fits") else "no (out of memory)",
            fmt.rate(step.get("samples_per_sec")),
            f"{fmt.gib(step.get('peak_memory_bytes'))} GiB",
        ]
        for step in result["curve"]
    ]
    return [
        Heading(2, "Batch-size search"),
        Paragraph(
            f"Largest batch that fits: {result.get('max_batch_size', '-')}; fastest: batch "
            f"{result.get('best_batch_size', '-')} at {fmt.rate(result.get('best_samples_per_sec'))} samples/s."
        ),
        Table(["batch size", "fits", "samples/s", "peak memory"], rows),
    ]


def _memory_blocks(facts: RunFacts) -> list[Block]:
    window = "measured phase" if facts.window == "measure" else "whole run"
    rows = []
    if facts.peak_vram_workload is not None:
        rows.append(
            ["The workload's own peak", f"{fmt.gib(facts.peak_vram_workload)} GiB" + (f" ({facts.peak_vram_source})" if facts.peak_vram_source else "")]
        )
    for index, used in sorted(facts.peak_vram_nvml.items()):
        rows.append([f"GPU{index} peak, NVML (all processes, {window})", f"{fmt.gib(used)} GiB"])
    if not rows:
        return []
    return [Heading(2, "Peak GPU memory"), Table(["", ""], rows)]


def _reference_blocks(facts: RunFacts) -> list[Block]:
    if not facts.references:
        return []
    rows = [
        [ref.gpu + ("" if ref.same_gpu else " (another GPU)"), f"{fmt.rate(ref.samples_per_sec)} samples/s", ref.source or "-", ratio_text(ref.ratio)]
        for ref in facts.references
    ]
    return [Heading(2, "Published references"), Table(["GPU", "published", "source", "this run / published"], rows)]


def _throttle_blocks(facts: RunFacts) -> list[Block]:
    rows = [
        [f"GPU{index}", reason, fmt.pct(share * 100)]
        for index, shares in sorted(facts.throttle.items())
        for reason, share in sorted(shares.items(), key=lambda kv: -kv[1])
    ]
    window = "the measured phase" if facts.window == "measure" else "the run"
    if not facts.throttle:
        return [Heading(2, "Throttling"), Paragraph("Not measured: the recording has no GPU samples, so no clock-event reason could be seen.")]
    if not rows:
        return [Heading(2, "Throttling"), Paragraph(f"No clock-event (throttle) reason was active during {window}.")]
    return [
        Heading(2, "Throttling"),
        Paragraph(f"Share of samples during {window} with each clock-event reason active ({throttle_text(facts)})."),
        Table(["GPU", "reason", "share of time"], rows),
    ]


def _finding_blocks(facts: RunFacts) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Findings")]
    if facts.findings_replayed:
        blocks.append(Paragraph("This recording was made without the diagnosis: these findings come from today's diagnosis replayed over its samples."))
    if not facts.findings:
        blocks.append(Paragraph("None: the diagnosis saw nothing holding the run back."))
        return blocks
    for finding in facts.findings:
        since, until = finding.since, finding.until
        when = f"from {fmt.num(since, ' s', 1)}" + (f" to {fmt.num(until, ' s', 1)}" if until is not None else "")
        blocks.append(Heading(3, f"{finding.severity or '?'}: {finding.title or finding.kind}"))
        blocks.append(Paragraph((Code(finding.kind), f", {finding.state or '?'}, {when}.")))
        evidence = finding.evidence or {}
        if evidence:
            blocks.append(Paragraph("Evidence: " + ", ".join(f"{k} = {value_text(v)}" for k, v in evidence.items())))
        if finding.advice:
            blocks.append(Bullets([with_code(str(a)) for a in finding.advice]))
    return blocks


def _check_blocks(recording: Recording) -> list[Block]:
    results = check_results(recording)
    recorded = check_summary(recording)
    verdict = recorded.verdict if recorded is not None else None
    if verdict is None:
        from gputui.check.result import worst

        verdict = worst([r.status for r in results]) + (" (so far)" if recording.cut or recording.live else "")
    rows = []
    for r in results:
        expected = with_bound(value_text(r.expected, r.unit), r.bound) + (f" ({r.expected_source})" if r.expected_source else "")
        note = "; ".join(x for x in (r.cause, r.advice) if x)
        rows.append(
            [r.group, r.name, r.status, value_text(r.value, r.unit), expected if r.expected is not None else "-", ratio_text(r.ratio), with_code(note or "-")]
        )
    if not rows:
        return [Heading(2, "Checks"), Paragraph("No check result was recorded.")]
    return [
        Heading(2, "Checks"),
        Paragraph(("Verdict: ", Bold(str(verdict)), ".")),
        Table(["group", "check", "status", "value", "expected", "ratio", "cause / advice"], rows),
    ]


def _plot_blocks(plots: list[ReportPlot]) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Plots")]
    for plot in plots:
        blocks.append(Heading(3, plot.title))
        blocks.append(Image(plot.file, plot.title) if plot.file else Paragraph(f"Left out: {plot.missing}."))
    return blocks


def report_blocks(recording: Recording, price_per_hour: float | None = None, plots: list[ReportPlot] | None = None) -> list[Block]:
    """The report's content; without ``plots`` (printing to a terminal) the plot section is left out."""
    facts = run_facts(recording, price_per_hour)
    summary = run_summary(recording)
    blocks: list[Block] = [Heading(1, f"gputui report: {facts.label}")]
    if recording.cut:
        blocks.append(ReportNote((Bold("This recording was cut"), f": {recording.cut}. Figures cover what it holds.")))
    elif recording.live:
        blocks.append(ReportNote((Bold("This run is live"), ": it is still going. Figures cover what it has recorded so far.")))
    blocks.append(_run_table(recording, facts, summary))
    if facts.check:
        blocks += _check_blocks(recording)
    else:
        blocks += _throughput_blocks(facts) + _reference_blocks(facts) + _batch_search_blocks(recording)
    blocks += _memory_blocks(facts) + _throttle_blocks(facts) + _finding_blocks(facts)
    if plots is not None:
        blocks += _plot_blocks(plots)
    return blocks


def markdown_report(recording: Recording, price_per_hour: float | None = None) -> str:
    """The report as Markdown, without plots: what ``gputui report FILE`` prints."""
    return to_markdown(report_blocks(recording, price_per_hour))


def write_report(recording: Recording, out_dir: Path, *, html: bool = False, price_per_hour: float | None = None) -> tuple[list[Path], list[ReportPlot]]:
    """Write the plots, report.md and (with ``html``) report.html into ``out_dir``.
    Returns the files written and the plots (with their geometry)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        plots = make_plots(recording, run_summary(recording), out_dir)
        blocks = report_blocks(recording, price_per_hour, plots)
        written = [out_dir / p.file for p in plots if p.file]
        write_atomic(out_dir / "report.md", to_markdown(blocks))
        written.append(out_dir / "report.md")
        if html:
            write_atomic(out_dir / "report.html", to_html(blocks, f"gputui report: {recording.path.name}", out_dir))
            written.append(out_dir / "report.html")
    except OSError as exc:
        raise UserError(f"--out {out_dir}: cannot write the report ({exc.strerror or exc})") from None
    return written, plots

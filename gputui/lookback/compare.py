"""Recordings side by side: one column per run, one row per fact.

Runs line up by preset: columns are grouped by preset (in the order presets first
appear) and each run's throughput is compared with the first run of its preset, with
a bootstrap interval saying whether the difference is real (gputui.lookback.noise).
``gputui check`` recordings line up check by check instead: one row per check id,
a column per machine.  ``compare_rows`` is the table; the CLI and the dashboard show it.
"""

from __future__ import annotations

import textwrap

from gputui import fmt
from gputui.errors import UserError
from gputui.escape import for_terminal
from gputui.lookback.facts import RunFacts, findings_text, run_facts, throttle_text
from gputui.lookback.load import check_results, check_summary, is_check
from gputui.lookback.noise import ratio_of_medians
from gputui.lookback.report import ratio_text, usd, value_text
from gputui.record.recording import Recording, recording_stem


def distinct(labels: list[str]) -> list[str]:
    """The same label twice gets its position added: every column tells which run it is."""
    return [f"{s} ({i + 1})" if labels.count(s) > 1 else s for i, s in enumerate(labels)]


def column_labels(recordings: list[Recording]) -> list[str]:
    """File names without .jsonl(.gz), as ``gputui compare FILE...`` heads its columns."""
    return distinct([recording_stem(r.path) for r in recordings])


def _by_preset(recordings: list[Recording]) -> list[int]:
    """Column order: runs grouped by preset, presets in order of first appearance."""
    first_seen: dict[str | None, int] = {}
    for i, rec in enumerate(recordings):
        first_seen.setdefault(rec.header.preset_name, i)
    return sorted(range(len(recordings)), key=lambda i: (first_seen[recordings[i].header.preset_name], i))


def noise_text(baseline: RunFacts, run: RunFacts) -> str:
    """ "×0.93 [0.91–0.95], real: slower" against the baseline run."""
    interval = ratio_of_medians(baseline.rates, run.rates)
    if interval is None:
        return "- (no throughput to compare)"
    if not interval.known:
        return f"{ratio_text(interval.ratio)}, {interval.verdict()}"
    return f"{ratio_text(interval.ratio)} [{interval.low:.2f}–{interval.high:.2f}], {interval.verdict()}"


def figure_text(run: RunFacts) -> str:
    """The run's figure (ThroughputSummary.run_figure), marked where it is a mean."""
    if run.throughput.is_bursty:
        return f"{fmt.rate(run.figure)} (mean: bursty)"
    return f"{fmt.rate(run.figure)} (mean)" if run.throughput.mean_is_figure else fmt.rate(run.figure)


def check_one_unit(facts: list[RunFacts]) -> None:
    """Runs are compared in one unit: samples/s beside tokens/s would read as a speed-up."""
    measured = [f for f in facts if f.throughput.median is not None]
    units = {f.unit for f in measured}
    if len(units) > 1:
        by_unit = "; ".join(f"{fmt.printable(f.label)}: {fmt.per_second(f.unit)}" for f in measured)
        raise UserError(f"these runs count throughput in different units ({by_unit}): compare runs of one unit")


def _run_table(recordings: list[Recording], labels: list[str], price_per_hour: float | None) -> tuple[list[str], list[list[str]]]:
    order = _by_preset(recordings)
    facts = [run_facts(recordings[i], price_per_hour) for i in order]
    check_one_unit(facts)
    unit = facts[0].unit if facts else "samples"
    baselines: dict[str | None, RunFacts] = {}
    versus = []
    for run in facts:
        baseline = baselines.setdefault(run.preset, run)
        versus.append("baseline" if baseline is run else noise_text(baseline, run))

    def row(name: str, cell) -> list[str]:
        return [name, *[cell(f) for f in facts]]

    rows = [
        row("machine", lambda f: f.machine),
        row("GPU", lambda f: f.gpu),
        row("preset", lambda f: f.preset or "-"),
        row("outcome", lambda f: f.outcome + (" (cut)" if f.cut else "")),
        row(f"throughput ({fmt.per_second(unit)})", figure_text),
        row("p5–p95", lambda f: f"{fmt.rate(f.throughput.p5)}–{fmt.rate(f.throughput.p95)}"),
        row("readings", lambda f: str(len(f.rates))),
        row("energy per sample", lambda f: value_text(f.energy_per_sample_j, "J")),
        row(f"cost per million {unit}", lambda f: usd(f.cost_per_million)),
        row("throttling", throttle_text),
        row("findings", findings_text),
        ["vs first run of its preset", *versus],
    ]
    return ["", *[labels[i] for i in order]], rows


def _check_cell(result, first) -> str:
    text = f"{value_text(result.value, result.unit)} ({result.status})"
    if first is not None and first is not result and isinstance(result.value, (int, float)) and isinstance(first.value, (int, float)) and first.value:
        text += f" {ratio_text(result.value / first.value)}"
    return text


def _verdict_cell(recording: Recording) -> str:
    recorded = check_summary(recording)
    if recorded is not None and recorded.verdict is not None:
        return recorded.verdict
    return "- (cut)" if recording.cut else "- (live)" if recording.live else "-"


def _check_table(recordings: list[Recording], labels: list[str]) -> tuple[list[str], list[list[str]]]:
    per_run = [{r.id: r for r in check_results(rec)} for rec in recordings]
    ids: list[str] = []
    for results in per_run:
        ids += [i for i in results if i not in ids]
    facts = [run_facts(rec) for rec in recordings]
    rows = [
        ["machine", *[f.machine for f in facts]],
        ["GPU", *[f.gpu for f in facts]],
        ["verdict", *[_verdict_cell(rec) for rec in recordings]],
    ]
    for check_id in ids:
        present = [results.get(check_id) for results in per_run]
        first = next((r for r in present if r is not None), None)
        name = f"{first.name} [{check_id}]" if first else check_id
        rows.append([name, *["-" if r is None else _check_cell(r, first) for r in present]])
    return ["check", *labels], rows


def compare_rows(recordings: list[Recording], price_per_hour: float | None = None, labels: list[str] | None = None) -> tuple[list[str], list[list[str]]]:
    """The comparison table: (header, rows), every cell a display string.  Runs: one
    column per run grouped by preset; check recordings: one row per check id.
    ``labels`` head the columns, one per recording in their order (the dashboard's
    run names); without them, the file names (:func:`column_labels`)."""
    if not recordings:
        return [""], []
    if labels is not None and len(labels) != len(recordings):
        raise ValueError(f"{len(labels)} labels for {len(recordings)} recordings")
    heads = column_labels(recordings) if labels is None else distinct(labels)
    checks = [is_check(r) for r in recordings]
    if all(checks):
        return _check_table(recordings, heads)
    if any(checks):
        odd = recordings[checks.index(True)].path
        raise UserError(f"{odd}: a `gputui check` recording; compare check recordings with each other, and runs with runs")
    return _run_table(recordings, heads, price_per_hour)


NARROWEST_RUN = 16  # a run's column narrower than this says too little: the table runs wider instead
GAP = "  "  # between a text table's columns


def share_widths(wanted: list[int], room: int, least: int) -> list[int]:
    """Widths for columns wanting ``wanted`` cells in ``room``: the narrow ones whole,
    the wide ones sharing what is left evenly, none cut below ``least``."""
    widths = list(wanted)
    left = room
    by_need = sorted(range(len(wanted)), key=wanted.__getitem__)
    for placed, column in enumerate(by_need):
        share = left // (len(wanted) - placed)
        widths[column] = min(wanted[column], max(share, least))
        left -= widths[column]
    return widths


def text_table(header: list[str], rows: list[list[str]], width: int | None = None) -> str:
    """Columns padded to their widest cell, for a terminal (cells escaped: a label is a
    file name, a cell a hostname or a finding's title).  Given the terminal's ``width``,
    a table wider than it has its wide columns share the width, their cells wrapped
    onto more lines within their column: nothing cut, no line past the edge (unless
    the runs are too many for columns of NARROWEST_RUN)."""
    header, rows = [for_terminal(cell) for cell in header], [[for_terminal(cell) for cell in row] for row in rows]
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    if width is not None and sum(widths) + len(GAP) * (len(widths) - 1) > width:
        names = min(widths[0], max(width // 3, 1))
        widths = [names, *share_widths(widths[1:], width - names - len(GAP) * (len(widths) - 1), NARROWEST_RUN)]
    lines: list[str] = []
    for line in [header, *rows]:
        cells = [textwrap.wrap(cell, w) or [""] for cell, w in zip(line, widths)]
        for n in range(max(len(c) for c in cells)):
            lines.append(GAP.join((c[n] if n < len(c) else "").ljust(w) for c, w in zip(cells, widths)).rstrip())
        if line is header:
            lines.append(GAP.join("-" * w for w in widths))
    return "\n".join(lines)

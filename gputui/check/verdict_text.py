"""The check's faces in text: one progress line per check, the verdict table (terminal
and Markdown), and JSON for machines."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TypedDict

from gputui.check.result import FAIL, OK, SKIPPED, STATUSES, WARN, CheckResult, Status, Verdict, with_bound
from gputui.escape import for_markdown, markdown_block
from gputui.fmt import printable
from gputui.record.schema import CheckSummary, Header

MARK: dict[Status, str] = {"ok": "ok", "warn": "WARN", "fail": "FAIL", "skipped": "skip", "info": "info"}


class VerdictJson(TypedDict, total=False):
    """The ``verdict`` of ``gputui check --json`` (gputui.record.schema.CheckSummary)."""

    verdict: str
    counts: dict[str, int]
    scope: str
    stopped: bool


class CheckJson(TypedDict):
    """What ``gputui check --json`` prints (:func:`to_json`), as a reader holds it: the
    header and each result as written (Header.to_dict, CheckResult.to_dict)."""

    header: Mapping[str, object]
    verdict: VerdictJson
    checks: list[Mapping[str, object]]


def value_text(value: float | str | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}" if abs(value) < 1 else f"{value:.1f}"
    elif isinstance(value, int):
        text = f"{value:,}"  # "24,106 MiB", as the floats read
    else:
        text = str(value)
    if unit == "share" and isinstance(value, (int, float)):
        return f"{value:.0%}"
    return f"{text} {unit}".strip()


CONTINUED = " " * len("[FAIL] ")  # a check's further lines start under its name


def progress_line(result: CheckResult) -> str:
    """``[ ok ] gpu0 Power limit: 700 W (expected 700 W)``: a check's first line, headless."""
    where = f"gpu{result.gpu} " if result.gpu is not None else ""
    line = f"[{MARK[result.status]:>4}] {where}{result.name}"
    if result.status == SKIPPED:
        return f"{line}: skipped, {result.cause}"
    line += f": {value_text(result.value, result.unit)}"
    if result.expected is not None:
        line += f" ({result.bound or 'expected'} {value_text(result.expected, result.unit)})"
    if result.detail:
        line += f"; {result.detail}"
    return line


def progress_lines(result: CheckResult, *, verbose: bool = False) -> list[str]:
    """A check as the headless face prints it: its first line, then for anything not ok
    the cause, what to do and where the expectation comes from, each on a line of its own
    (a reader told to act should not need ``--json``); ``verbose`` adds the expectation's
    source to every check.  Escaped for a terminal: causes name other people's processes."""
    lines = [progress_line(result)]
    not_ok = result.status != OK
    if not_ok and result.cause and result.status != SKIPPED:  # a skipped line already says why
        lines.append(f"{CONTINUED}Cause: {result.cause}")
    if not_ok and result.advice:
        lines.append(f"{CONTINUED}What to do: {result.advice}")
    if result.expected_source and (verbose or result.status in (WARN, FAIL)):
        lines.append(f"{CONTINUED}Expected from: {result.expected_source}")
    return [printable(line) for line in lines]


def verdict_line(results: list[CheckResult]) -> str:
    """``verdict: OK (27 ok, 2 warn)``; ``verdict: OK, host only (…)`` when no GPU was checked."""
    summary = verdict_summary(results)
    parts = ", ".join(f"{n} {s}" for s, n in (summary.counts or {}).items() if n)
    scope = f", {summary.scope}" if summary.scope else ""
    return f"verdict: {(summary.verdict or '?').upper()}{scope} ({parts})"


def _expected_text(result: CheckResult) -> str:
    if result.expected is None:
        return "-"
    text = with_bound(value_text(result.expected, result.unit), result.bound)
    ratio = result.ratio
    return f"{text} ({ratio:.0%})" if ratio is not None and result.unit != "share" else text


def _note(result: CheckResult) -> str:
    """Skipped: why. Not ok: what was measured, the cause and the advice. Else the detail."""
    if result.status == SKIPPED:
        return result.cause or ""
    parts = [result.detail] + ([result.cause, result.advice] if result.status in (WARN, FAIL) else [])
    return " — ".join(p for p in parts if p)


def table_rows(results: list[CheckResult]) -> list[list[str]]:
    return [[MARK[r.status], f"gpu{r.gpu}" if r.gpu is not None else "host", r.name, value_text(r.value, r.unit), _expected_text(r), _note(r)] for r in results]


TABLE_HEADER = ["status", "where", "check", "measured", "expected (measured/expected)", "notes"]


def markdown(results: list[CheckResult], header: Header) -> str:
    """The whole check as a Markdown document: machine, verdict, table, sources.  Every
    text in it is escaped as text (gputui.escape.for_markdown): a note names other
    people's processes, and the header the machine's own names."""
    lines = ["# gputui check", ""]
    host = header.host
    if host is None:
        lines.append("- Machine: ?, ?, ? cores available")
    else:
        machine = f"{host.hostname}, {host.cpu_model or '?'}, {host.cpu_available or host.cpu_logical or '?'} cores available"
        lines.append(f"- Machine: {for_markdown(machine)}")
    gpu_names = ", ".join(f"{g.index}: {g.name}" for g in header.gpu_list) or header.gpu_unavailable_reason or "none"
    lines.append(f"- GPUs: {for_markdown(gpu_names)}")
    versions = f"Driver {header.driver_version or '-'}, CUDA {header.cuda_version or '-'}, gputui {header.gputui or '?'}, started {header.started_at or '?'}"
    lines.append(f"- {for_markdown(versions)}")
    options = header.check.to_dict() if header.check is not None else {}
    if options:
        lines.append("- Options: " + for_markdown(", ".join(f"{k}={v}" for k, v in options.items() if v not in (None, [], False))))
    lines += ["", f"**{for_markdown(verdict_line(results))}**", ""]
    lines.append("| " + " | ".join(TABLE_HEADER) + " |")
    lines.append("|" + "---|" * len(TABLE_HEADER))
    for row in table_rows(results):
        lines.append("| " + " | ".join(for_markdown(cell).replace("|", "\\|") for cell in row) + " |")
    sources = sorted({r.expected_source for r in results if r.expected_source})
    if sources:
        lines += ["", "Expectations come from:", ""] + [f"- {markdown_block(for_markdown(s))}" for s in sources]
    return "\n".join(lines) + "\n"


def to_json(results: list[CheckResult], header: Header, summary: CheckSummary) -> str:
    return json.dumps(
        {"header": header.to_dict(), "verdict": summary.to_dict(), "checks": [r.to_dict() for r in results]}, indent=2, allow_nan=False, default=str
    )


GPU_CHECK_PREFIXES = ("gpu", "driver.", "cuda.", "micro.")


def gpu_checked(results: list[CheckResult]) -> bool:
    """Whether any check of a GPU, its driver or its benchmarks came to a verdict."""
    return any(r.status in (OK, WARN, FAIL) and (r.gpu is not None or r.id.startswith(GPU_CHECK_PREFIXES)) for r in results)


def verdict_summary(results: list[CheckResult]) -> CheckSummary:
    """The verdict and its counts; ``scope`` "host only" when every GPU check was skipped,
    so that a machine whose GPUs could not be tested never reads as a healthy GPU box."""
    counts: dict[str, int] = {s: sum(r.status == s for r in results) for s in STATUSES}
    verdict: Verdict = FAIL if counts["fail"] else WARN if counts["warn"] else OK
    return CheckSummary(verdict=verdict, counts=counts, scope="host only" if results and not gpu_checked(results) else None)

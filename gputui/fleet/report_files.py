"""The fleet report's faces: lines for a terminal, JSON, Markdown and HTML with plots."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, TypedDict

from gputui import fmt
from gputui.escape import for_plot
from gputui.fleet.peers import FleetReport, Node, Outlier
from gputui.lookback.document import Block, Bullets, Heading, Image, Paragraph, Table, to_html, to_markdown
from gputui.safe_write import write_atomic, write_atomic_with

# The columns a terminal has room for; Markdown and HTML show every measured check.
TERMINAL_CHECKS = ("micro.matmul_bf16", "micro.memory_bandwidth", "micro.h2d", "workload.resnet50_tuned")
PLOTTED = (("micro.matmul_bf16", "bf16 matmul"), ("workload.resnet50_tuned", "ResNet-50 (tuned)"))
OUTLIER_COLOUR, BAR_COLOUR = "#ff7f0e", "#1f77b4"
MEDIAN_COLOURS = ("#d62728", "#2ca02c", "#9467bd", "#8c564b")


def _short(check: str) -> str:
    return check.split(".", 1)[1]


def _where(o: Outlier) -> str:
    return o.node if o.gpu is None else f"{o.node} GPU{o.gpu}"


def outlier_text(o: Outlier) -> str:
    if o.shortfall is None:
        return f"{_where(o)}: {o.check} {o.value} where most {o.peers} have {o.median}"
    unit = f" {o.unit}" if o.unit else ""
    return f"{_where(o)}: {o.check} {fmt.rate(o.value)}{unit}, {o.shortfall:.0%} under the median {fmt.rate(o.median)} of its peers ({o.peers})"


def headline(report: FleetReport) -> str:
    counts: dict[str, int] = {}
    for node in report.nodes:
        counts[node.status] = counts.get(node.status, 0) + 1
    said = ", ".join(f"{n} {status}" for status, n in counts.items())
    flagged = report.flagged
    tail = f"{len(flagged)} outlier{'s' if len(flagged) != 1 else ''}: {', '.join(flagged)}" if flagged else "no outliers"
    shared = report.shared_names
    if shared:
        tail += f"; {len(shared)} name{'s' if len(shared) != 1 else ''} on several results: {', '.join(shared)}"
    return f"fleet: {len(report.nodes)} node{'s' if len(report.nodes) != 1 else ''} ({said}); {tail}"


def shared_text(name: str, names: list[str]) -> str:
    return (
        f"{name}: {len(names)} results carry this one node name, each kept: {', '.join(names)} (two nodes answer to it, or one node's result was given twice)"
    )


def skipped_lines(report: FleetReport) -> list[str]:
    """The notes for files of a folder that are no node results (for stderr)."""
    return [fmt.printable(f"note: {s.file}: skipped: {s.why}") for s in report.skipped]


def _rows(report: FleetReport, checks: list[str], with_cost: bool) -> tuple[list[str], list[list[str]]]:
    """One row per node and GPU (a node without GPU figures gets one row), the fleet
    median last."""
    header = ["node", "GPU", "status", *map(_short, checks), *(["USD per M samples"] if with_cost else [])]
    rows: list[list[str]] = []
    for node in report.nodes:
        gpus: list[int | None] = [*sorted({g for (_c, g) in node.values if g is not None})] or [None]
        for i, gpu in enumerate(gpus):
            cells = [node.name if i == 0 else "", "" if gpu is None else str(gpu), node.status if i == 0 else ""]
            cells += [_cell(node, check, gpu) for check in checks]
            if with_cost:
                cost = report.cost_per_million(node) if i == 0 else None
                cells.append(f"{cost:.3f}" if cost is not None else "")
            rows.append(cells)
    models = _row_models(report)
    for model, peer_groups in models.items():  # a median row per GPU model
        medians = [_median_of(report, check, peer_groups) for check in checks]
        label = "fleet median" if len(models) == 1 else f"median {model}"
        rows.append([label, "", "", *(fmt.rate(m) if m is not None else "" for m in medians), *([""] if with_cost else [])])
    return header, rows


def _median_of(report: FleetReport, check: str, peer_groups: list[str]) -> float | None:
    by_peers = report.medians.get(check, {})
    return next((by_peers[p][0] for p in peer_groups if p in by_peers), None)


def _row_models(report: FleetReport) -> dict[str, list[str]]:
    """Median rows: each GPU model with its peer groups (the model itself, and nodes of
    only that model, e.g. "4x NVIDIA H200"); a node of mixed GPUs gets a row of its own."""
    rows: dict[str, list[str]] = {}
    for peers in report.peer_groups:
        parts = peers.split(" + ")
        model = parts[0].split("x ", 1)[1] if len(parts) == 1 and "x " in parts[0] and parts[0].split("x ", 1)[0].isdigit() else peers
        rows.setdefault(model, []).append(peers)
    return rows


def _cell(node: Node, check: str, gpu: int | None) -> str:
    found = node.values.get((check, gpu)) or node.values.get((check, None))
    return fmt.rate(found[0]) if found else ""


def terminal_lines(report: FleetReport) -> list[str]:
    checks = [c for c in TERMINAL_CHECKS if c in report.medians]
    header, rows = _rows(report, checks, report.price is not None)
    widths = [max(len(fmt.printable(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [fmt.printable(headline(report)), ""]
    lines += ["  ".join(fmt.printable(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    return lines + _problems(report)


def _problems(report: FleetReport) -> list[str]:
    out: list[str] = []
    if report.shared_names:
        out += ["", "node names on several results:"]
        out += [f"  {fmt.printable(shared_text(name, names))}" for name, names in report.shared_names.items()]
    if report.outliers:
        out += ["", "outliers (more than 8 % under the fleet median, or a different PCIe link):"]
        out += [f"  {fmt.printable(outlier_text(o))}" for o in report.outliers]
    for node in report.nodes:
        if node.failed or node.reason:
            out += ["", f"{fmt.printable(node.name)}: {node.status}" + (f": {fmt.printable(node.reason)}" if node.reason else "")]
            out += [f"  failed: {fmt.printable(text)}" for text in node.failed]
    return out


class FleetNodeJson(TypedDict):
    node: str  # unique in the report: a name several results carry has the file after it
    file: str
    status: str
    reason: str | None
    gpus: int
    failed: list[str]
    cost_per_million_samples: float | None
    values: dict[str, dict[str, float]]  # check -> GPU index ("node" for a node-wide check) -> value


class MedianJson(TypedDict):
    median: float
    unit: str


class OutlierJson(TypedDict):
    node: str
    gpu: int | None
    check: str
    value: Any  # a number, or a PCIe link ("Gen4 x16")
    median: Any
    unit: str
    shortfall: float | None


class SkippedJson(TypedDict):
    file: str
    why: str


class FleetJson(TypedDict):
    """``gputui fleet report --json``."""

    nodes: list[FleetNodeJson]
    medians: dict[str, dict[str, MedianJson]]  # check -> peers -> its median
    outliers: list[OutlierJson]
    flagged: list[str]
    shared_names: dict[str, list[str]]  # a name several results carry -> their nodes' names in the report
    skipped: list[SkippedJson]
    price_per_node_hour: float | None
    exit_code: int


def to_json(report: FleetReport) -> FleetJson:
    return {
        "nodes": [
            {
                "node": n.name,
                "file": n.file,
                "status": n.status,
                "reason": n.reason or None,
                "gpus": n.gpus,
                "failed": n.failed,
                "cost_per_million_samples": report.cost_per_million(n),
                "values": {
                    check: {("node" if gpu is None else str(gpu)): value for (c, gpu), (value, _u) in n.values.items() if c == check}
                    for check in sorted({c for c, _ in n.values})
                },
            }
            for n in report.nodes
        ],
        "medians": {
            check: {peers: {"median": median, "unit": unit} for peers, (median, unit) in by_peers.items()} for check, by_peers in report.medians.items()
        },
        "outliers": [
            {"node": o.node, "gpu": o.gpu, "check": o.check, "value": o.value, "median": o.median, "unit": o.unit, "shortfall": o.shortfall}
            for o in report.outliers
        ],
        "flagged": report.flagged,
        "shared_names": report.shared_names,
        "skipped": [{"file": s.file, "why": s.why} for s in report.skipped],
        "price_per_node_hour": report.price,
        "exit_code": report.exit_code,
    }


def blocks(report: FleetReport, plots: list[tuple[str, str]]) -> list[Block]:
    header, rows = _rows(report, sorted(report.medians), report.price is not None)
    out: list[Block] = [Heading(1, "gputui fleet report"), Paragraph(headline(report)), Table(header, [list(r) for r in rows])]
    if report.shared_names:
        out += [Heading(2, "Node names on several results"), Bullets([shared_text(name, names) for name, names in report.shared_names.items()])]
    if report.outliers:
        out += [Heading(2, "Outliers"), Bullets([outlier_text(o) for o in report.outliers])]
    failed = [
        f"{n.name}: {n.status}" + (f": {n.reason}" if n.reason else "") + (f" ({'; '.join(n.failed)})" if n.failed else "")
        for n in report.nodes
        if n.failed or n.reason
    ]
    if failed:
        out += [Heading(2, "Failed checks and unreachable nodes"), Bullets(failed)]
    if report.skipped:
        out += [Heading(2, "Files skipped"), Bullets([f"{s.file}: {s.why}" for s in report.skipped])]
    for file, title in plots:
        out += [Heading(2, title), Image(file, title)]
    return out


def write_documents(report: FleetReport, out_dir: Path) -> list[Path]:
    plots = [(file, title) for check, title in PLOTTED if (file := plot(report, check, title, out_dir))]
    content = blocks(report, plots)
    write_atomic(out_dir / "fleet.md", to_markdown(content))
    write_atomic(out_dir / "fleet.html", to_html(content, "gputui fleet report", out_dir))
    return [out_dir / "fleet.md", out_dir / "fleet.html", *(out_dir / f for f, _ in plots)]


def plot(report: FleetReport, check: str, title: str, out_dir: Path) -> str | None:
    """Every GPU's value of ``check``, sorted, with the fleet median: a PNG in
    ``out_dir``; None when no node measured it."""
    from matplotlib.figure import Figure

    entries = sorted(
        ((v, f"{n.name} GPU{g}" if g is not None else n.name) for n in report.nodes for (c, g), (v, _u) in n.values.items() if c == check), reverse=True
    )
    if not entries:
        return None
    medians = report.medians[check]
    unit = next(iter(medians.values()))[1]
    flagged = {(o.node, o.gpu) for o in report.outliers if o.check == check}
    names = {f"{n} GPU{g}" if g is not None else n for n, g in flagged}
    fig = Figure(figsize=(8, max(2.0, 0.25 * len(entries) + 1.0)), dpi=100)
    ax = fig.add_subplot()
    labels = [label for _, label in entries]
    ax.barh(range(len(entries)), [v for v, _ in entries], color=[OUTLIER_COLOUR if label in names else BAR_COLOUR for label in labels])
    for i, (peers, (median, _unit)) in enumerate(sorted(medians.items())):  # one line per GPU model
        label = f"median {fmt.rate(median)} {unit}" + (f" ({peers})" if len(medians) > 1 else "")
        ax.axvline(median, color=MEDIAN_COLOURS[i % len(MEDIAN_COLOURS)], linestyle="--", label=for_plot(label))
    ax.set_yticks(range(len(entries)), labels=[for_plot(label) for label in labels], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(for_plot(f"{title} ({unit})"))
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    file = f"fleet-{_short(check)}.png"
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    write_atomic_with(out_dir / file, lambda handle: handle.write(buffer.getvalue()), binary=True)
    return file

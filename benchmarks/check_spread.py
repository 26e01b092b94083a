"""How much `gputui check`'s figures move between repeat runs on one healthy card, and the
verdicts they got (issue 23).

    python benchmarks/check_spread.py CHECK.json [CHECK.json ...] [--baselines-for MODEL]

Reads `gputui check --json` outputs and prints, per check with a number, the mean, the
standard deviation, the coefficient of variation, the range and each run's status, as a
Markdown table.  With ``--baselines-for``, also the TOML lines of a baseline entry for
MODEL (the median of the runs); ``--apply-to TOML`` writes those values into MODEL's
entry of that baselines file (replacing the metrics' old lines, keeping the rest).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

from gputui.check.result import name_and_gpu

# The GPU's own figures; pinned copies depend on the host (its PCIe and NUMA layout), so they
# are graded against the link instead (an H100 host varied 45-55 GB/s run to run, 2026-11-26)
BASELINE_METRICS = ("micro.matmul_bf16", "micro.matmul_fp16", "micro.matmul_tf32", "micro.memory_bandwidth")


def load(paths: list[Path]) -> list[dict]:
    return [json.loads(p.read_text()) for p in paths]


def spread_rows(checks: list[dict]) -> list[dict]:
    by_id: dict[str, list[dict]] = {}
    for check in checks:
        for result in check.get("checks", []):
            if isinstance(result.get("value"), (int, float)) and not isinstance(result.get("value"), bool):
                by_id.setdefault(result["id"], []).append(result)
    rows = []
    for check_id, results in by_id.items():
        values = [float(r["value"]) for r in results]
        mean = statistics.fmean(values)
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        rows.append(
            {
                "id": check_id,
                "unit": results[0].get("unit", ""),
                "runs": len(values),
                "mean": mean,
                "sd": sd,
                "cv": sd / mean if mean else None,
                "min": min(values),
                "max": max(values),
                "median": statistics.median(values),
                "statuses": [r["status"] for r in results],
            }
        )
    return rows


def markdown(checks: list[dict], rows: list[dict]) -> str:
    verdicts = ", ".join(c.get("verdict", {}).get("verdict", "?") for c in checks)
    lines = [
        f"{len(checks)} runs; verdicts: {verdicts}",
        "",
        "| check | unit | runs | mean | sd | CV | min | max | statuses |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: r["id"]):
        cv = f"{r['cv']:.2%}" if r["cv"] is not None else "-"
        statuses = ", ".join(sorted(set(r["statuses"])))
        lines.append(f"| {r['id']} | {r['unit']} | {r['runs']} | {r['mean']:.4g} | {r['sd']:.3g} | {cv} | {r['min']:.4g} | {r['max']:.4g} | {statuses} |")
    return "\n".join(lines) + "\n"


def baseline_lines(rows: list[dict], model: str) -> str:
    lines = [f'model = "{model}"']
    for r in sorted(rows, key=lambda r: r["id"]):
        name, gpu = name_and_gpu(r["id"])
        if name in BASELINE_METRICS and gpu == 0:
            lines.append(f"{name.split('.', 1)[1]} = {r['median']:.4g}")
    return "\n".join(lines) + "\n"


def apply_baselines(toml: Path, model: str, lines: str) -> None:
    """Put ``lines`` (``metric = value``) into MODEL's ``[[baseline]]`` entry of ``toml``."""
    text = toml.read_text()
    head = f'model = "{model}"\n'
    if head not in text:
        raise SystemExit(f"{toml}: no [[baseline]] entry for {model!r}")
    start = text.index(head) + len(head)
    end = text.find("[[baseline]]", start)
    end = len(text) if end < 0 else end
    entry = text[start:end]
    values = [line for line in lines.splitlines() if line and not line.startswith("model =")]
    for line in values:
        key = line.split(" = ")[0]
        entry = re.sub(rf"^{key} = .*\n", "", entry, flags=re.MULTILINE)
    entry = "\n".join(values) + "\n" + entry
    toml.write_text(text[:start] + entry + text[end:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checks", nargs="+", type=Path)
    parser.add_argument("--baselines-for", metavar="MODEL")
    parser.add_argument("--apply-to", type=Path, metavar="TOML", help="write the baselines into this file (with --baselines-for)")
    args = parser.parse_args()
    checks = load(args.checks)
    rows = spread_rows(checks)
    sys.stdout.write(markdown(checks, rows))
    if args.baselines_for:
        lines = baseline_lines(rows, args.baselines_for)
        sys.stdout.write("\n" + lines)
        if args.apply_to:
            apply_baselines(args.apply_to, args.baselines_for, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())

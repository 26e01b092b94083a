"""Where the test suite's CPU goes: a pytest plugin, and a summary of what it wrote.

Each test's wall time and CPU (the pytest process's own, and its waited-for children's,
from ``resource.getrusage``) go to one JSON line per test, a file per xdist worker:

    SUITE_CPU_DIR=out PYTHONPATH=benchmarks python -m pytest -p suite_cpu -n auto -m "not serial"
    python benchmarks/suite_cpu.py out            # by folder, by file, and the costliest tests

A test's threads count in its own process's CPU; a child it starts and does not wait for
(a daemon, a detached run) is not counted, so the sum falls short of ``/usr/bin/time``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

_out: IO[str] | None = None


def _cpu_s() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _out
    if _out is None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _out = open(Path(os.environ["SUITE_CPU_DIR"]) / f"{worker}.jsonl", "a", encoding="utf8")
    started, (own0, kids0) = time.monotonic(), _cpu_s()
    yield
    (own1, kids1) = _cpu_s()
    line = {"id": item.nodeid, "wall": time.monotonic() - started, "own": own1 - own0, "children": kids1 - kids0}
    _out.write(json.dumps(line) + "\n")
    _out.flush()


def _table(title: str, groups: dict[str, list[dict[str, Any]]], top: int) -> None:
    print(f"\n{title}: CPU s, wall s, tests")
    ranked = sorted(groups.items(), key=lambda kv: -sum(r["own"] + r["children"] for r in kv[1]))
    for name, rows in ranked[:top]:
        cpu = sum(r["own"] + r["children"] for r in rows)
        print(f"{cpu:8.1f} {sum(r['wall'] for r in rows):8.1f} {len(rows):5d}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Summarize what the suite_cpu plugin wrote.")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    rows = [json.loads(line) for file in sorted(args.folder.glob("*.jsonl")) for line in file.open(encoding="utf8")]
    cpu = sum(r["own"] + r["children"] for r in rows)
    print(f"{len(rows)} tests: {cpu:,.0f} s of CPU, {sum(r['wall'] for r in rows):,.0f} s of their wall times added up")
    by_folder: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_file: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        file = row["id"].split("::")[0]
        by_folder[str(Path(file).parent)].append(row)
        by_file[file].append(row)
    _table("by folder", by_folder, args.top)
    _table("by file", by_file, args.top)
    _table("by test", {r["id"]: [r] for r in rows}, args.top)


if __name__ == "__main__":
    main()

"""No circles in the import graph (issue 27): computed with grimp, import-linter's graph
library, which counts imports inside functions too (the lazy ones that keep Textual and
torch out of headless runs).  A planted circle is found, so the check can fail."""

from __future__ import annotations

import shutil
import sys

import pytest

from tests.support.process import REPO

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (pip install -e '.[test]'): import cycles NOT checked")


def cycles(package: str) -> list[list[str]]:
    """The graph's strongly connected components of two or more modules (Tarjan's)."""
    graph = grimp.build_graph(package, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in sorted(graph.modules):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_gputui_has_no_import_cycles_lazy_imports_included():
    assert cycles("gputui") == []


def test_a_planted_lazy_cycle_is_found(tmp_path, monkeypatch):
    shutil.copytree(REPO / "gputui", tmp_path / "gputui", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "gputui" / "gpus" / "models.py", "a", encoding="utf-8") as fh:
        fh.write("\n\ndef _planted():\n    from gputui.check import result  # a lazy import back up\n")
    with open(tmp_path / "gputui" / "check" / "result.py", "a", encoding="utf-8") as fh:
        fh.write("\nfrom gputui.gpus import models  # planted\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "gputui" or m.startswith("gputui.")]:
        monkeypatch.delitem(sys.modules, name)
    assert ["gputui.check.result", "gputui.gpus.models"] in cycles("gputui")

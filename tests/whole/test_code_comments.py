"""Comments explain code: no comment or docstring in gputui/ names the machine a figure
was measured on, an issue number, or a measurement's figures.  Those belong in the docs
(docs/performance.md, "Figures behind the code's choices") and in git log.

Only comments (tokenize's COMMENT tokens) and docstrings (of modules, classes and
functions) are scanned: GPU names in the catalog's data and in user-facing strings are
the product's behaviour, not narration.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from tests.support.process import REPO

PATTERNS = {
    "machine": re.compile(
        # "this VM", "this repo's VM", "the 2-core VM"
        r"\b(?:this|the|a|our|one)\s+(?:repo(?:sitory)?'s\s+)?(?:\d+-core\s+)?VM\b"
        # "the H200 box", "a 16-core box"
        r"|\b(?:[A-Z]{1,2}\d{3}|\d+-core)\s+(?:box|VM|machine)\b"
        # "on an H200", "measured on the H100", "from two A100s"
        r"|\b(?:on|from|beside)\s+(?:an?|the|two|one|this)\s+(?:NVIDIA\s+)?(?:[ABHLTV]|GH|GB|RTX\s?)\d{2,4}s?\b"
    ),
    "issue number": re.compile(r"\bissues?\s*#?\d+|\(#\d+\)|\b(?:PR|pull request)\s*#?\d+", re.IGNORECASE),
    "measurement": re.compile(
        # a timing: "3.1 ms", "131 µs" (Keras's "50ms/step" in a parser's examples is not one)
        r"\d(?:[.,]\d+)?\s*(?:µs|μs|us|ms)\b(?!/)"
        # "measured 85 %", "measured 54 B/s": a figure with its unit, in the same clause
        r"|\bmeasured\b[^.;:]{0,40}?\d[\d.,]*\s*(?:%|s\b|[KMG]?B/s)"
        # how it was measured
        r"|\bpy-spy\b|\bprofiled\b"
    ),
}


def comment_lines(path: Path) -> list[tuple[int, str]]:
    """Every comment and docstring line of ``path``, with its line number."""
    source = path.read_text(encoding="utf-8")
    lines = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        docstring = ast.get_docstring(node, clean=False)
        if docstring is None:
            continue
        first = node.body[0].lineno  # the docstring's expression: its first line
        lines.extend((first + offset, text) for offset, text in enumerate(docstring.splitlines()))
    return sorted(lines)


def offences(root: Path) -> list[str]:
    """``file:line: [kind] text`` for each comment or docstring line under ``root`` that a pattern matches."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for number, text in comment_lines(path):
            for kind, pattern in PATTERNS.items():
                if pattern.search(text):
                    found.append(f"{path.relative_to(root.parent)}:{number}: [{kind}] {text.strip()}")
    return found


def check(root: Path) -> None:
    found = offences(root)
    assert not found, (
        "comments and docstrings name a machine, an issue or a measurement; say why in one clause and move the figures "
        "to docs/performance.md#figures-behind-the-codes-choices:\n" + "\n".join(found)
    )


def test_no_machine_issue_or_measurement_in_comments() -> None:
    check(REPO / "gputui")


def test_the_patterns_catch_narration(tmp_path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "bad.py").write_text(
        '"""A module.\n\nMeasured on the H200: 3.1 ms a call (issue 25)."""\n\n'
        "X = 1  # this VM, 54 B/s\n\n\n"
        "def f():\n"
        '    """Fixed in (#41)."""\n'
        '    return "NVIDIA H200 on an H100"  # a user-facing string is not scanned\n',
        encoding="utf-8",
    )
    found = offences(package)
    assert [line.split(" [")[0] for line in found] == ["pkg/bad.py:3:"] * 3 + ["pkg/bad.py:5:", "pkg/bad.py:9:"]
    assert {line.split("[")[1].split("]")[0] for line in found} == {"machine", "issue number", "measurement"}

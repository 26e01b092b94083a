"""The recording the replay tests play (a test helper, no tests), whole or cut as a killed
recorder leaves it."""

from __future__ import annotations

from pathlib import Path

from tests.support.process import REPO

INPUT_BOUND = REPO / "docs" / "recordings" / "torch-resnet50-input-bound.jsonl"


def cut_copy(tmp_path: Path, keep_lines: int = 60) -> Path:
    """The fixture as a killed recorder leaves it: no summary, the last line half written."""
    lines = INPUT_BOUND.read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(lines[:keep_lines]) + lines[keep_lines][:40], encoding="utf-8")
    return path

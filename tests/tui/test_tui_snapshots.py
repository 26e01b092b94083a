"""SVG snapshots of the dashboard at 80×24, 120×40, 160×48 and 200×60 (and 80×24 in the
high-contrast theme; 8 GPUs at 80×24 and 200×60, also as 8 data-parallel ranks), fed by deterministic sessions: fixed times, GPU samples from
the real GpuTelemetry reading tests/support/fake_nvml.py, a fixed host sample.

Each snapshot is stored twice in tests/snapshots/: the SVG (what it looks like) and
the screen's text (what a diff can show).  After an intended change, regenerate with
``GPUTUI_UPDATE_SNAPSHOTS=1 python -m pytest tests/tui/test_tui_snapshots.py`` and look at
the SVGs before committing them.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from gputui.record.schema import Baseline
from tests.support.process import REPO
from tests.support.snapshots import eight_gpus, render

SNAPSHOTS = REPO / "tests" / "snapshots"
UPDATE = os.environ.get("GPUTUI_UPDATE_SNAPSHOTS") == "1"


@pytest.mark.parametrize(
    "size, theme",
    [((80, 24), None), ((120, 40), None), ((160, 48), None), ((200, 60), None), ((80, 24), "gputui-high-contrast")],
    ids=["80x24", "120x40", "160x48", "200x60", "80x24-high-contrast"],
)
def test_dashboard_snapshot(size, theme, tmp_path):
    name = f"dashboard_{size[0]}x{size[1]}" + (f"_{theme}" if theme else "")
    check_snapshot(name, *render(size, tmp_path, theme), tmp_path)


@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=["80x24", "200x60"])
def test_dashboard_snapshot_with_eight_gpus(size, tmp_path):
    check_snapshot(f"dashboard_8gpu_{size[0]}x{size[1]}", *render(size, tmp_path, None, eight_gpus()), tmp_path)


@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=["80x24", "200x60"])
def test_dashboard_snapshot_of_eight_ranks_with_a_straggler(size, tmp_path):
    """A data-parallel run on 8 GPUs: each row's rank and samples/s, rank 5 the straggler,
    the scaling against a one-GPU baseline in the totals row."""
    from tests.support.ddp import ddp_factory, straggler_finding

    factory = ddp_factory(eight_gpus(), world=8, slow_rank=5, findings=[straggler_finding(5)])
    baseline = Baseline(samples_per_sec=400.0, source="one.jsonl")
    check_snapshot(f"dashboard_8ranks_{size[0]}x{size[1]}", *render(size, tmp_path, None, eight_gpus(), factory, baseline), tmp_path)


def check_snapshot(name: str, text: str, svg: str, tmp_path: Path) -> None:
    text_file, svg_file = SNAPSHOTS / f"{name}.txt", SNAPSHOTS / f"{name}.svg"
    if UPDATE or not svg_file.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        text_file.write_text(text, encoding="utf-8")
        svg_file.write_text(svg, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"new snapshot written to {svg_file}: look at it, then run again")
        return
    expected_text = text_file.read_text(encoding="utf-8")
    if text != expected_text:
        (tmp_path / f"{name}.svg").write_text(svg, encoding="utf-8")
        diff = "\n".join(difflib.unified_diff(expected_text.splitlines(), text.splitlines(), "snapshot", "now", lineterm=""))
        pytest.fail(f"screen differs from {text_file} (new SVG: {tmp_path / name}.svg):\n{diff}")
    assert svg == svg_file.read_text(encoding="utf-8"), f"same text, different colours or styles than {svg_file}"


def test_snapshots_are_deterministic(tmp_path):
    first = render((80, 24), tmp_path / "a", None)
    second = render((80, 24), tmp_path / "b", None)
    assert first == second

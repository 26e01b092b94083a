"""The smoke workload's own summary line: what it measured, counted."""

from __future__ import annotations

from gputui.workloads.__main__ import main


def test_the_smoke_summary_counts_its_windows(capsys):
    assert main(["--framework", "smoke", "--batch-size", "2", "--steps", "3", "--warmup-steps", "1"]) == 0
    summary = capsys.readouterr().err.strip().splitlines()[-1]
    assert "median of 3 windows over 3 steps" in summary, summary

"""``gputui check``: is this rented machine healthy, and as fast as it should be for its GPU?

Stages, in order: preflight (no load, seconds), micro-benchmarks (PyTorch, about a
minute), standard workloads (short runs of the tuned presets and the host image
pipeline), each producing :class:`~gputui.check.result.CheckResult` values graded
against :mod:`~gputui.gpus.models` with the thresholds in
:mod:`~gputui.check.thresholds`.  Nothing here imports Textual.
"""

# What other packages may import (the check's run, its results, options, thresholds and how they read); tests/whole/test_package_faces.py holds them to it.
__all__ = ["check_run", "result", "stage_context", "thresholds", "verdict_text"]

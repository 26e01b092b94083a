"""``gputui check``: is this rented machine healthy, and as fast as it should be for its GPU?

Stages, in order: preflight (no load, seconds), micro-benchmarks (PyTorch, about a
minute), standard workloads (short runs of the tuned presets and the host image
pipeline), each producing :class:`~gputui.check.result.CheckResult` values graded
against :mod:`~gputui.gpus.models` with the thresholds in
:mod:`~gputui.check.thresholds`.  Nothing here imports Textual.
"""

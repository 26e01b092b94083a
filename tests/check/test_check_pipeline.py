"""The check's host-pipeline stage runs the worker's pipeline child by module name
(``python -m gputui.workloads.pipeline_rate``): the check imports none of it, and the
rate it grades comes from the child's protocol line."""

from __future__ import annotations

import dataclasses

import pytest

from gputui.check import workload_stage
from gputui.check.result import INFO
from gputui.check.stage_context import CheckOptions, StageContext


def test_the_host_pipeline_stage_reads_the_rate_of_its_child(tmp_path, monkeypatch):
    pytest.importorskip("numpy")
    pytest.importorskip("PIL")
    monkeypatch.setenv("GPUTUI_CACHE_DIR", str(tmp_path))  # the child builds its small image set here
    monkeypatch.setattr(workload_stage, "PIPELINE_SECONDS", 1.0)  # quick: half of it
    one_core = dataclasses.replace(workload_stage.host_info(), cpu_available=1.0)
    monkeypatch.setattr(workload_stage, "host_info", lambda: one_core)
    reported = []
    ctx = StageContext(CheckOptions(quick=True), [], report=reported.append)
    result = workload_stage._host_pipeline(ctx, trained=None)
    assert result.status == INFO, result.cause
    assert result.id == "workload.host_pipeline" and result.unit == "images/s"
    assert result.value is not None and result.value > 0
    assert result.data["workers"] == 1

"""The headless core never imports Textual (--record works without the TUI stack), and
never imports the benchmark worker's child-only package, gputui.workloads."""

from __future__ import annotations

import subprocess
import sys

from tests.support.process import REPO

CORE_MODULES = [
    "gputui.cli.main",
    "gputui.session.session",
    "gputui.record.recording",
    "gputui.session.summary",
    "gputui.presets.preset",
    "gputui.run.runner",
    "gputui.run.output_stream",
    "gputui.run.outcome",
    "gputui.run.throughput",
    "gputui.session.progress",
    "gputui.presets.store",
    "gputui.cli.preset_cli",
    "gputui.safe_write",
    "gputui.record.history",
    "gputui.cli.runs_cli",
    "gputui.cli.replay_cli",
    "gputui.telemetry.gpu",
    "gputui.telemetry.host",
    "gputui.protocol",
    "gputui.catalog",
    "gputui.check.preflight",
    "gputui.check.xid_results",
    "gputui.check.check_run",
    "gputui.cli.check_cli",
    "gputui.check.micro_stage",
    "gputui.check.workload_stage",
    "gputui.lookback.report",
    "gputui.lookback.compare",
    "gputui.lookback.export",
    "gputui.metrics.live",
    "gputui.metrics.families",
    "gputui.metrics.server",
]

# Child-only code (python -m ...): it must not pull in Textual either.
WORKER_MODULES = ["gputui.workloads.smoke", "gputui.workloads.pipeline_rate"]


def _modules_loaded_by_importing(modules: list[str], prefix: str) -> list[str]:
    """The modules named ``prefix`` or under it that importing ``modules`` loads, in a
    fresh interpreter (this test process has imported everything already)."""
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + f"print(','.join(sorted(m for m in sys.modules if m == {prefix!r} or m.startswith({prefix + '.'!r}))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return [m for m in result.stdout.strip().split(",") if m]


def test_core_imports_no_textual_in_a_fresh_interpreter():
    assert _modules_loaded_by_importing(CORE_MODULES + WORKER_MODULES, "textual") == []
    # And the check itself can fail: importing textual shows up.
    probe = subprocess.run([sys.executable, "-c", "import textual, sys; print('textual' in sys.modules)"], capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "True"


def test_the_core_never_loads_the_benchmark_worker_package():
    # The protocol and the catalog are core modules; gputui.workloads is child-only code.
    assert _modules_loaded_by_importing(CORE_MODULES, "gputui.workloads") == []
    # And the check itself can fail: the worker's own modules load their package.
    assert "gputui.workloads" in _modules_loaded_by_importing(WORKER_MODULES, "gputui.workloads")


def test_the_package_roots_stay_lazy():
    # gputui/__init__ imports nothing; gputui.diagnosis loads its engine and rules only
    # when a name is asked for; the presets read the settings, a leaf, alone
    assert _modules_loaded_by_importing(["gputui"], "gputui") == ["gputui"]
    assert _modules_loaded_by_importing(["gputui.presets.preset"], "gputui.diagnosis") == []
    assert _modules_loaded_by_importing(["gputui.presets.preset"], "gputui.diagnosis_settings") == ["gputui.diagnosis_settings"]
    assert _modules_loaded_by_importing(["gputui.diagnosis"], "gputui.diagnosis") == ["gputui.diagnosis"]
    # And the check itself can fail: asking the package for the engine loads every rule.
    assert "gputui.diagnosis.rules.clocks" in _modules_loaded_by_importing(["gputui.diagnosis.engine"], "gputui.diagnosis")

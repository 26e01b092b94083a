"""The headless core never imports Textual: --record works without the TUI stack."""

from __future__ import annotations

import subprocess
import sys

from tests.support.process import REPO

CORE_MODULES = [
    "gputui.cli",
    "gputui.session",
    "gputui.record",
    "gputui.summary",
    "gputui.presets",
    "gputui.runner",
    "gputui.output_stream",
    "gputui.outcome",
    "gputui.throughput",
    "gputui.progress",
    "gputui.preset_store",
    "gputui.preset_cli",
    "gputui.safe_write",
    "gputui.history",
    "gputui.lookback.runs_cli",
    "gputui.lookback.replay_cli",
    "gputui.telemetry.gpu",
    "gputui.telemetry.host",
    "gputui.workloads.protocol",
    "gputui.workloads.smoke",
    "gputui.check.preflight",
    "gputui.check.xid",
    "gputui.check.runner",
    "gputui.check.cli",
    "gputui.check.micro_stage",
    "gputui.check.workload_stage",
    "gputui.check.pipeline",
    "gputui.lookback.report",
    "gputui.lookback.compare",
    "gputui.lookback.export",
    "gputui.metrics.live",
    "gputui.metrics.families",
    "gputui.metrics.server",
]


def test_core_imports_no_textual_in_a_fresh_interpreter():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in CORE_MODULES)
        + "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        + "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
    # And the check itself can fail: importing textual shows up.
    probe = subprocess.run([sys.executable, "-c", "import textual, sys; print('textual' in sys.modules)"], capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "True"

"""``gputui tune`` started from the dashboard (gputui.live.spawn.start_tune): a process of
its own session (a closed terminal or a quit dashboard stops nothing), its log and report
readable by their owner alone, the preset's environment and folder passed on."""

from __future__ import annotations

import os
import stat
import sys

from gputui.live.spawn import start_tune
from tests.support.process import gputui_env


def test_a_tune_runs_in_its_own_session_with_a_private_log_and_report(tmp_path, monkeypatch):
    for key, value in gputui_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    script = tmp_path / "work" / "plain.py"
    script.parent.mkdir()
    script.write_text("import os\nprint('HERE', os.getcwd(), os.environ['FROM_PRESET'], flush=True)\n")
    process, log, report = start_tune([sys.executable, "plain.py"], tmp_path / "tunes", "20261129-170000", env={"FROM_PRESET": "yes"}, cwd=str(script.parent))
    assert os.getsid(process.pid) == process.pid != os.getsid(0)
    assert process.wait(timeout=120) == 0, log.read_text()
    text = log.read_text()
    assert "gputui tune: the probe saw no PyTorch training in this command" in text
    for path in (log, report):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE((tmp_path / "tunes").stat().st_mode) == 0o700
    recording = next((tmp_path / "state" / "gputui" / "runs").glob("*trial-1.jsonl")).read_text()
    assert f"HERE {script.parent} yes" in recording  # the trial ran in the preset's folder, with its environment

"""The recording's disk fills up: one clear line, exit 74, the child stopped, and what
was written still readable.  ENOSPC is injected below the Recorder (a file that takes
a fixed number of bytes, then refuses the rest as a full disk does), and for real with
``/dev/full``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gputui.cli.main import RECORD_WRITE_FAILED
from gputui.errors import UserError
from gputui.record.recorder import Recorder
from gputui.record.recording import read_recording
from tests.support.dashboard import app_for, isolated  # noqa: F401  (a fixture)
from tests.support.leftovers import no_leftovers  # noqa: F401  (the fixture)
from tests.support.presets import slow_presets
from tests.support.process import gputui_env, run_gputui
from tests.support.records import make_header, make_summary
from tests.support.tui import run_async, wait_until

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
    pytest.mark.usefixtures("no_leftovers"),
]

# gputui's own CLI, with the recording's file on a "disk" that holds BUDGET bytes.
FULL_DISK_MAIN = textwrap.dedent(
    """
    import builtins, errno, os, sys
    import gputui.record.recorder

    BUDGET = int(os.environ["FAULT_DISK_BYTES"])

    class FullDisk:
        def __init__(self, real):
            self._real, self._used = real, 0

        def write(self, text):
            room = BUDGET - self._used
            if len(text) > room:
                self._real.write(text[:max(room, 0)])  # what fits is written: a cut line
                self._real.flush()
                self._used = BUDGET
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self._used += len(text)
            return self._real.write(text)

        def __getattr__(self, name):
            return getattr(self._real, name)

    def small_disk_open(path, *args, **kwargs):
        real = builtins.open(path, *args, **kwargs)
        return FullDisk(real) if str(path) == sys.argv[1] else real

    gputui.record.recorder.open = small_disk_open
    from gputui.cli.main import main
    raise SystemExit(main(sys.argv[2:]))
    """
)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("gputui: error:")]


def test_a_disk_that_fills_mid_run_stops_the_run_with_one_line_and_keeps_what_was_written(tmp_path):
    out = tmp_path / "r.jsonl"
    args = ["--presets", str(slow_presets(tmp_path)), "--record", str(out), "--preset", "slow", "--interval", "0.1", "--no-history", "--headless"]
    env = dict(gputui_env(tmp_path), FAULT_DISK_BYTES="30000")  # the header and some samples fit
    result = subprocess.run(
        [sys.executable, "-c", FULL_DISK_MAIN, str(out), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == RECORD_WRITE_FAILED == 74, result.stderr
    assert "Traceback" not in result.stderr
    assert error_lines(result.stderr) == [f"gputui: error: {out}: cannot write the recording (No space left on device); the run was stopped"]
    rec = read_recording(out)  # readable to its last whole line
    assert rec.cut and rec.summary is None
    assert rec.samples and out.stat().st_size == 30000
    # no_leftovers: the slow child (which runs for 1,000 s) was stopped.


def test_recording_to_dev_full_is_one_line_and_starts_nothing(tmp_path):
    result = run_gputui(
        ["--presets", str(slow_presets(tmp_path)), "--record", "/dev/full", "--force", "--preset", "slow", "--no-history", "--headless"], tmp_path
    )
    assert result.returncode == 74, result.stderr
    assert "Traceback" not in result.stderr
    assert error_lines(result.stderr) == ["gputui: error: /dev/full: cannot write the recording (No space left on device); the run was stopped"]


def test_without_force_dev_full_is_refused_as_an_existing_file(tmp_path):
    result = run_gputui(["--record", "/dev/full", "--duration", "1", "--no-history"], tmp_path)
    assert result.returncode == 2 and error_lines(result.stderr) == [
        "gputui: error: /dev/full: already exists; not overwriting it (add --force to replace it, or pick another file)"
    ]


def test_the_recorder_reports_a_failed_write_once_and_never_raises(tmp_path):
    errors: list[str] = []
    recorder = Recorder(Path("/dev/full"), on_error=errors.append)
    recorder.on_header(make_header({"schema": 1}))
    recorder.on_summary(make_summary({"duration_s": 1.0}))
    recorder.close()
    assert errors == ["/dev/full: cannot write the recording (No space left on device)"]
    assert recorder.error == errors[0]


def test_a_recording_folder_that_cannot_be_written_is_one_line(tmp_path):
    with pytest.raises(UserError, match="cannot write the recording"):
        Recorder(tmp_path / "missing" / "r.jsonl")


def test_the_dashboard_stops_the_run_and_says_why_when_the_recording_cannot_be_written(isolated, tmp_path):  # noqa: F811
    app = app_for(isolated, tmp_path, record_path=Path("/dev/full"), record_force=True, start_preset="smoke-long")

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            run = await wait_until(pilot, lambda: app.state.run, what="run started")
            await wait_until(pilot, lambda: run.ended, what="the run stopped", timeout=60)
            notes = [text for stream, text in app.state.log if stream == "note"]
            assert "/dev/full: cannot write the recording (No space left on device); the run was stopped" in notes
            assert run.outcome is None  # the header could not be written: the child never started
            assert app.is_running  # the dashboard stays: only the run stopped
            await app.quit_now()

    run_async(scenario())

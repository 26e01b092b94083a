"""``gputui --headless --record FILE -- CMD``: the command's own output reaches the user
whole, in a log and on a real terminal (tmux), with gputui's live line out of its way."""

from __future__ import annotations

import json
import re
import sys
import textwrap

import pytest

from gputui.record import events as ev
from gputui.record.recording import read_recording
from tests.support.process import run_gputui, try_read, wait_for
from tests.support.tmux import needs_tmux, tmux  # noqa: F401  (tmux: the fixture)

LIVE_LINE = r"\s+[\d.]+s \|"  # gputui's live line: the seconds, then its fields

# A training script's habits: log lines on both streams, a tqdm bar (tqdm's own
# format, drawn by tqdm itself), warnings, and a traceback at the end.
SCRIPT = textwrap.dedent(
    """
    import sys, time, warnings
    from tqdm import tqdm
    print("epoch 0: loading", flush=True)
    warnings.warn("a library's warning")
    for step in tqdm(range(30), desc="train", mininterval=0):
        time.sleep(0.04)
    for step in range(5):
        print(f"step {step}: loss {1 / (step + 1):.3f}", flush=True)
        print(f"stderr line {step}", file=sys.stderr, flush=True)
        time.sleep(0.05)
    raise RuntimeError("the script's own last words")
    """
)


def test_off_a_terminal_every_line_of_the_command_reaches_the_log_and_the_recording(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    done = run_gputui(["--headless", "--record", "r.jsonl", "--", sys.executable, "train.py"], tmp_path)
    assert done.returncode == 1, done.stderr
    out = done.stdout
    for line in ["epoch 0: loading", "UserWarning: a library's warning", "step 4: loss 0.200", "stderr line 4", "Traceback (most recent call last):"]:
        assert line in out, out
    assert re.search(r"train: 100%\|[^\n]*\| 30/30", out)  # the bar's final state, ended by tqdm's own newline
    assert out.rstrip().endswith("RuntimeError: the script's own last words")
    assert "\x1b" not in out  # colours and cursor moves are for terminals
    # gputui's own lines stay on stderr, the summary included
    assert "gputui summary" in done.stderr and "gputui summary" not in out
    recorded = [e.payload.text for e in read_recording(tmp_path / "r.jsonl").events if e.kind == ev.OUTPUT]
    assert "step 4: loss 0.200" in recorded and "RuntimeError: the script's own last words" in recorded


def test_quiet_leaves_out_the_live_line_not_the_output_nor_the_summary(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    done = run_gputui(["--headless", "--quiet", "--record", "r.jsonl", "--", sys.executable, "train.py"], tmp_path)
    assert "step 4: loss 0.200" in done.stdout
    assert "gputui summary" in done.stderr
    assert "gputui: running" not in done.stderr and not re.search("(?m)^" + LIVE_LINE, done.stderr)


@pytest.mark.serial
@needs_tmux
def test_on_a_terminal_the_output_scrolls_above_gputuis_status_row(tmux, tmp_path):  # noqa: F811
    (tmp_path / "train.py").write_text(SCRIPT.replace("range(30)", "range(150)"))
    gputui = ["env", "TERM=tmux-256color", sys.executable, "-m", "gputui", "--headless", "--record", "r.jsonl", "--", sys.executable, "train.py"]
    tmux.start_command([*gputui, ";", "sleep", "60"], size=(100, 40))  # the pane outlives gputui
    # while the bar runs: the bar in the output's rows, gputui's live line in the last row
    rows = tmux.wait_for(r"train:\s+\d+%").string.split("\n")
    assert len(rows) >= 40 and re.match(LIVE_LINE, rows[39]), "\n".join(rows)
    # at the end: the command's lines whole, then the summary, and the last row freed
    screen = tmux.wait_for(r"gputui summary[\s\S]*duration", timeout=60).string
    for line in ["step 4: loss 0.200", "stderr line 4", "RuntimeError: the script's own last words"]:
        assert line in screen, screen
    assert not any(re.match(LIVE_LINE, row) for row in screen.split("\n")), screen


@pytest.mark.serial
@needs_tmux
def test_a_closed_terminal_stops_neither_the_command_nor_its_recording(tmux, tmp_path):  # noqa: F811
    (tmp_path / "train.py").write_text(
        "import time\nfor i in range(40):\n    print(f'step {i}: 250 samples/sec', flush=True)\n    time.sleep(0.1)\nprint('finished cleanly')\n"
    )
    tmux.start(["--headless", "--record", "r.jsonl", "--", sys.executable, "train.py"], size=(100, 20))
    tmux.wait_for(r"step 5:")
    tmux.kill_server()  # the SSH session drops: the terminal, and the output's reader, are gone
    recording = wait_for(lambda: (r := try_read(tmp_path / "r.jsonl")) is not None and r.summary is not None and r, timeout=30)
    assert recording.summary.outcome.kind == "exited" and recording.summary.outcome.exit_code == 0
    assert [e.payload.text for e in recording.events if e.kind == ev.OUTPUT][-1] == "finished cleanly"


def test_off_a_terminal_a_command_without_record_runs_headless_into_the_history(tmp_path):
    done = run_gputui(["--", sys.executable, "-c", "print('hello from the script')"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello from the script\n" and "gputui summary" in done.stderr
    (kept,) = json.loads(run_gputui(["runs", "--json"], tmp_path).stdout)
    assert kept["outcome"] == "ok"

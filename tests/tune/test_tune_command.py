"""``gputui tune -- CMD`` as a user runs it, on a real PyTorch loop whose training
samples wait on a slow source (tests/data/tune/sleepy_loader.py): trials in fresh
processes, each kept in the run history under the tune's name, a trial that fails
reported as a result, a fed loop stopped after one trial, and bad input refused in one line."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from pathlib import Path

import pytest

from gputui.record.recording import read_recording
from tests.support.process import REPO, run_gputui, start_gputui, wait_for

LOOP = str(REPO / "tests" / "data" / "tune" / "sleepy_loader.py")
TRIAL = ["--trial-seconds", "4"]  # the shortest a trial may go: enough one-second windows for an interval


def tune(tmp_path: Path, *flags: str, loop: tuple[str, ...] = ()) -> tuple[dict, str]:
    done = run_gputui(["tune", *TRIAL, "--json", *flags, "--", sys.executable, LOOP, *loop], tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), done.stderr


@pytest.fixture(scope="module")
def by_hand(tmp_path_factory) -> tuple[dict, str, Path]:
    """The loop as written (no workers), then with two: a grid given by hand."""
    home = tmp_path_factory.mktemp("tune")
    result, progress = tune(home, "--workers", "2", "--report", str(home / "tune.md"))
    return result, progress, home


def test_workers_feed_a_waiting_loop_and_the_gain_comes_with_its_interval(by_hand):
    result, _, _ = by_hand
    written, two = result["trials"]
    assert written["settings"]["num_workers"] == 0 and two["settings"]["num_workers"] == 2
    assert two["workers_seen"] == 2  # the training windows ran on two workers: the probe's count
    assert written["data_wait"] > 0.9
    gain = two["gain"]
    assert gain["low"] > 1.3 and gain["low"] <= gain["ratio"] <= gain["high"]  # two sleepers at once: about twice as fast
    assert result["chosen"] == 2 and result["change"] == "DataLoader(num_workers=2) for the training loader"


def test_each_trial_is_kept_in_the_history_named_after_the_tune(by_hand):
    result, _, home = by_hand
    kept = [Path(t["recording"]) for t in result["trials"]]
    assert all(path.is_file() for path in kept)
    names = [read_recording(path).header.preset.name for path in kept]
    stamp = names[0].split("(tune ")[1].split(",")[0]
    assert names == [f"sleepy_loader.py (tune {stamp}, trial {n})" for n in (1, 2)]
    records = list((home / "state" / "gputui" / "tunes").glob("tune-*.json"))
    assert [r.name for r in records] == [f"tune-{stamp}.json"]
    assert stat.S_IMODE(records[0].stat().st_mode) == 0o600  # the command line is the user's own
    assert json.loads(records[0].read_text())["trials"][1]["recording"] == str(kept[1])


def test_progress_goes_to_stderr_a_line_a_trial_and_the_report_has_its_plot(by_hand):
    _, progress, home = by_hand
    ended = [line for line in progress.splitlines() if line.startswith("gputui tune: trial") and "samples/s" in line]
    assert len(ended) == 2 and "2 workers" in ended[1]
    report = (home / "tune.md").read_text()
    assert "| 2 | 2 workers |" in report and "![throughput against DataLoader workers" in report
    assert (home / "tune.png").read_bytes().startswith(b"\x89PNG")


def test_a_fed_loop_stops_after_one_trial_not_input_bound(tmp_path):
    result, _ = tune(tmp_path, loop=("--sleep-ms", "0", "--work-ms", "20"))
    assert result["verdict"] == "not_input_bound" and len(result["trials"]) == 1
    assert result["headline"].startswith("not input-bound")


def test_a_command_without_pytorch_is_told_what_tune_cannot_change(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import time\nfor step in range(40):\n    time.sleep(0.1)\n    print(f'step {step}', flush=True)\n")
    done = run_gputui(["tune", *TRIAL, "--", sys.executable, str(script)], tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the probe saw no PyTorch training in this command" in done.stdout


OWN_BATCHES = """
import time
import torch

def get_batch():  # nanoGPT's name for it: the loop makes its own batches, slowly
    time.sleep(0.05)
    return torch.randn(4, 8)

model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(100000):
    model(get_batch()).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
"""


def test_a_loop_making_its_own_batches_is_told_what_tune_cannot_change(tmp_path):
    script = tmp_path / "own.py"
    script.write_text(OWN_BATCHES)
    done = run_gputui(["tune", *TRIAL, "--", sys.executable, str(script)], tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the loop makes its own batches, with no DataLoader" in done.stdout


def test_a_trial_that_fails_with_too_many_open_files_is_a_result(tmp_path):
    result, progress = tune(tmp_path, "--workers", "2", loop=("--fd-headroom", "6"))
    written, failed = result["trials"]
    assert written["failure"] is None and written["rate"] > 0
    assert "Too many open files" in failed["failure"] and failed["rate"] is None
    assert result["chosen"] == 1  # the failed setting is never the answer
    assert any("trial 2 of at most 8, 2 workers: failed: exited with code 1:" in line and "Too many open files" in line for line in progress.splitlines())


def test_ctrl_c_ends_the_tune_with_the_trials_so_far(tmp_path):
    tuning = start_gputui(["tune", "--trial-seconds", "30", "--", sys.executable, LOOP], tmp_path)  # at least 15 s: Ctrl-C comes within it
    runs = tmp_path / "state" / "gputui" / "runs"
    wait_for(lambda: any(runs.glob("*trial-1.jsonl")) and os.path.getsize(next(runs.glob("*trial-1.jsonl"))) > 2000, timeout=120)
    time.sleep(2)
    tuning.send_signal(signal.SIGINT)
    out, err = tuning.communicate(timeout=60)
    assert tuning.returncode == 130, err[-2000:]
    assert "trial 1 of at most 8" in err and "trial 2" not in err
    assert "as written" in out  # the table of what it measured


@pytest.mark.parametrize(
    "args, error",
    [
        (["tune"], "tune: expected your training command after --"),
        (["tune", "--", "ls", "-l"], "tune: ls does not run Python"),
        (["tune", "--workers", "2,x", "--", "python", "t.py"], "argument --workers: expected whole numbers separated by commas"),
        (["tune", "--prefetch", "0", "--", "python", "t.py"], "argument --prefetch: expected batches per worker, 1 or more"),
        (["tune", "--pin-memory", "yes", "--", "python", "t.py"], "argument --pin-memory: expected on, off or both"),
        (["tune", "--trial-seconds", "nan", "--", "python", "t.py"], "argument --trial-seconds: expected a number of seconds greater than 0"),
        (["tune", "--report", "out.txt", "--", "python", "t.py"], "--report out.txt: expected a file ending in .md or .html"),
        (["tune", "--max-trials", "0", "--", "python", "t.py"], "--max-trials: expected 1 or more"),
        (["tune", "--report", "no/such/folder/t.html", "--", "python", "t.py"], "--report no/such/folder/t.html: no/such/folder is not a directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, error):
    done = run_gputui(args, tmp_path)
    assert done.returncode == 2
    assert error in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr

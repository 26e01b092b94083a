"""The benchmark and helper scripts still run against today's gputui.

They live outside the package and no test imported them, so a refactor could break one
unseen (app_scale.py still built events the old way until this test). The CPU-only ones
run here at toy sizes and their figures are checked for shape; the GPU ones at least
parse their arguments and import what they use (``--help``).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.process import REPO

RECORDING = REPO / "docs" / "recordings" / "h200-torch-resnet50.jsonl"
NO_TORCH = importlib.util.find_spec("torch") is None


def run_script(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_long_run_reports_flat_memory_and_file_size_for_a_short_feed(tmp_path):
    done = run_script("benchmarks/long_run.py", "--hours", "0.02", "--gpus", "2", "--cores", "4", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "long-run.json").read_text())
    assert result["samples"] == 72  # 0.02 h at 1 Hz
    assert len(result["rss_mib"]) == 21  # 20 checkpoints along the feed, and its end
    assert 0 < 2 * result["bytes_per_gpu_sample"] < result["bytes_per_sample"]  # two GPUs and the host in each line
    assert 0 < result["gzip_ratio"] < 1
    assert not (tmp_path / "long-run.jsonl").exists()  # only the figures are kept
    assert "bytes per GPU-sample" in (tmp_path / "long-run.md").read_text()


def test_app_scale_measures_frames_and_memory_by_simulated_hour(tmp_path):
    done = run_script("benchmarks/app_scale.py", "--gpus", "2", "--cores", "8", "--frames", "3", "--hours", "1", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "app-scale.json").read_text())
    assert result["frames"] == 3 and result["frame_ms_median"] > 0
    assert [hour for hour, _ in result["rss_mib_by_hour"]] == [0, 1]


def test_frame_profile_prints_the_cost_of_a_redraw_and_where_it_went(tmp_path):
    out = tmp_path / "frame.prof"
    done = run_script("benchmarks/frame_profile.py", "--frames", "2", "--cores", "4", "--top", "60", "--out", out)
    assert done.returncode == 0, done.stderr
    assert "ms of CPU a redraw, under the profiler (2 redraws, 140x40, 4 cores)" in done.stdout
    assert "refresh_dashboard" in done.stdout and out.stat().st_size > 0


def test_tui_cost_times_the_dashboard_s_functions_by_thread_and_profiles_the_window(tmp_path):
    """--thread-times and --cprofile in one short run of the dashboard over the NVML test
    double: the functions' CPU by thread (each event-loop callback by what it serves,
    the collector by generation), cProfile's listing of the window, and the CPU of the
    run's own process, which the dashboard follows."""
    done = run_script(
        "benchmarks/tui_cost.py",
        *("--fake-gpus", "1", "--fake-cores", "4", "--warmup", "4", "--seconds", "4", "--size", "100x30"),
        *("--thread-times", "--cprofile", "--out", tmp_path),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "tui-cost.json").read_text())[0]
    rows = {(row["function"], row["thread"]): row for row in result["thread_times"]}
    assert rows[("DashboardApp.refresh_dashboard", "MainThread")]["calls_per_s"] > 0, sorted(rows)
    # The run is a process of its own: the dashboard reads its recording (the sampler's cost is run_process's).
    assert any(function == "FollowedRun._tell" and row["cpu_ms_per_s"] > 0 for (function, _), row in rows.items()), sorted(rows)
    assert result["run_process"]["cpu_percent_of_one_core"] > 0
    assert any(function.startswith("loop: Timer._run_timer") and thread == "MainThread" for function, thread in rows)
    assert json.loads((tmp_path / "running-100x30.thread-times.json").read_text())
    listing = (tmp_path / result["cprofile"]).read_text()
    assert "cProfile over a 4 s window" in listing and "function calls" in listing


def test_gpu_check_run_twice_in_one_call_keeps_both_runs_results(tmp_path):
    """The device returns $OUT's files once the call ends: a second gpu-check.sh in the
    same call packs into results-2.tgz and adds to the log, not over the first's."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OUT": str(tmp_path / "out")}
    # A copy, in a tree of its own: a checkout's .whl/ holds the device's wheels, for its Python.
    (tmp_path / "tree" / "scripts").mkdir(parents=True)
    script = shutil.copy(REPO / "scripts" / "gpu-check.sh", tmp_path / "tree" / "scripts")
    for _ in range(2):
        done = subprocess.run(["bash", str(script), "no-such-step"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "out").glob("*.tgz")) == ["results-2.tgz", "results.tgz"]
    assert (tmp_path / "out" / "log.txt").read_text().count("unknown step no-such-step") == 2


def test_summarize_makes_a_table_row_per_recording_and_refuses_a_missing_one_in_one_line(tmp_path):
    done = run_script("benchmarks/summarize.py", RECORDING)
    assert done.returncode == 0, done.stderr
    table = done.stdout.splitlines()
    assert table[0].startswith("| preset |") and len(table) == 3
    assert table[2].startswith("| `torch-resnet50` |")

    missing = run_script("benchmarks/summarize.py", tmp_path / "nope.jsonl")
    assert missing.returncode == 2
    assert missing.stderr.strip().count("\n") == 0 and "nope.jsonl" in missing.stderr and "Traceback" not in missing.stderr


def test_replay_screenshot_draws_a_recording(tmp_path):
    out = tmp_path / "shot.svg"
    done = run_script("scripts/replay-screenshot.py", RECORDING, out, "--size", "100x30")
    assert done.returncode == 0, done.stderr
    svg = out.read_text(encoding="utf-8")
    assert svg.lstrip().startswith("<svg") and "gputui" in svg


@pytest.mark.skipif(NO_TORCH, reason='benchmarks/probe_step_cost.py trains with torch, which is not installed here (pip install ".[torch]")')
def test_probe_step_cost_prints_what_the_probe_adds_to_a_step():
    """Two pairs of short runs, one of each in each order; the script exits non-zero where
    the probe did not load in a probed run or loaded in an unprobed one."""
    done = run_script("benchmarks/probe_step_cost.py", "--quick", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "probe cost per step (one batch and one optimizer step): " in done.stdout, done.stdout
    pairs = [line for line in done.stdout.splitlines() if line.startswith("pair ")]
    assert len(pairs) == 2 and pairs[0].split(": ")[1].startswith("without") and pairs[1].split(": ")[1].startswith("with ")
    assert "share of a 22 ms step: " in done.stdout and "machine: " in done.stdout and "torch " in done.stdout


def test_probe_toggle_ab_pairs_each_runs_blocks_within_that_run():
    """Two runs whose blocks carry the same numbers: each pair is a run's own two blocks
    (the probe on at 99 steps/s against off at 100), never one run's block against the other's."""
    from benchmarks.probe_toggle_ab import Block, pair_changes

    first = [Block(0, True, 99.0, 99.0, None), Block(1, False, 100.0, 100.0, None)]
    second = [Block(0, True, 49.5, 49.5, None), Block(1, False, 50.0, 50.0, None), Block(2, False, 50.0, 50.0, None)]  # block 3 left out
    assert [round(c, 6) for found in (first, second) for c in pair_changes(found, "rate")] == [-0.01, -0.01]


def test_probe_toggle_ab_blocks_time_the_steps_between_their_boundaries():
    from benchmarks.probe_toggle_ab import blocks

    steps = [0.1 * i for i in range(1, 40)]  # 10 steps a second from 0.1 s to 3.9 s
    cpu = [0.05 * i for i in range(1, 20)] + [0.95 + 0.06 * i for i in range(1, 21)]  # 50 ms a step, then 60
    found = blocks(steps, [(0.0, True), (2.0, False), (4.0, True)], cpu)
    assert [(b.number, b.on) for b in found] == [(0, True), (1, False)]
    assert all(abs(b.rate - 10.0) < 1e-6 and abs(b.typical - 10.0) < 1e-6 for b in found)
    assert [round(b.cpu_us or 0) for b in found] == [50_000, 60_000]


@pytest.mark.skipif(NO_TORCH, reason='benchmarks/probe_toggle_ab.py runs a torch loop, which is not installed here (pip install ".[torch]")')
def test_probe_toggle_ab_switches_the_probe_in_a_real_loop_and_compares_its_blocks(monkeypatch):
    """One short probed run of the Python-bound loop, switched every 0.5 s from 1 s after
    its first step (however long a loaded machine takes to import torch): its blocks
    alternate on, off, off, on, the probe reported, and the figures are summarized."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # torch's intra-op threads on a loaded CPU slowed its steps to a few a second
    loop = [sys.executable, "benchmarks/own_training/torch_tqdm_loop.py", "--variant", "python-bound", "--seconds", "15"]
    done = run_script("benchmarks/probe_toggle_ab.py", "--quick", "--", *loop, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    run = next(line for line in done.stdout.splitlines() if line.startswith("run 1: "))
    assert "fed by a DataLoader: yes" in run and " 0 probe reports" not in run, run
    states = {int(m.group(1)): m.group(2) for m in re.finditer(r"block +(\d+) (on |off)", done.stdout)}
    pattern = ["on ", "off", "off", "on "]
    assert len(states) >= 3 and all(state == pattern[number % 4] for number, state in states.items()), states
    assert "steps/s over each 0.5 s block: on " in done.stdout and "steps/s at each block's median step: on " in done.stdout


@pytest.mark.parametrize(
    "script",
    [
        "benchmarks/gpu_loop.py",
        # imports torch before it parses its arguments (gpu_loop.py answers --help without it)
        pytest.param(
            "benchmarks/matmul_bench.py",
            marks=pytest.mark.skipif(NO_TORCH, reason='benchmarks/matmul_bench.py imports torch, which is not installed here (pip install ".[torch]")'),
        ),
        "benchmarks/perturb.py",
        "benchmarks/sample_cost.py",
        "benchmarks/sampler_table.py",
        "benchmarks/tui_cost.py",
        "scripts/dashboard-screens.py",
    ],
)
def test_gpu_and_terminal_benchmarks_import_and_parse_their_arguments(script):
    done = run_script(script, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")


def test_suite_cpu_counts_a_tests_own_cpu_and_its_childs_and_summarizes_them(tmp_path):
    """The suite's CPU profiler as a plugin of a real pytest run: a test spinning in its own
    process and one whose child spins each get their CPU on the right side."""
    tests = tmp_path / "test_spin.py"
    tests.write_text(
        "import subprocess, sys, time\n"
        "SPIN = 'import time\\nend = time.process_time() + 0.4\\nwhile time.process_time() < end: pass'\n"
        "def test_own():\n    exec(SPIN)\n"
        "def test_child():\n    subprocess.run([sys.executable, '-c', SPIN], check=True)\n"
        "def test_idle():\n    time.sleep(0.3)\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    env = {"PATH": "/usr/bin:/bin", "SUITE_CPU_DIR": str(out), "PYTHONPATH": str(REPO / "benchmarks")}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu", "-p", "no:cacheprovider", str(tests)]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["id"].split("::")[1]: r for r in map(json.loads, (out / "main.jsonl").read_text().splitlines())}
    assert rows["test_own"]["own"] >= 0.35 and rows["test_own"]["children"] < 0.1, rows
    assert rows["test_child"]["children"] >= 0.35 and rows["test_child"]["own"] < 0.3, rows
    assert rows["test_idle"]["wall"] >= 0.3 and rows["test_idle"]["own"] + rows["test_idle"]["children"] < 0.2, rows
    summary = run_script("benchmarks/suite_cpu.py", out, "--top", "2")
    assert summary.returncode == 0, summary.stderr
    assert summary.stdout.startswith("3 tests: ") and "by folder" in summary.stdout and "test_spin.py::test_own" in summary.stdout

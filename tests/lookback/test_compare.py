"""gputui compare: runs side by side, the bootstrap noise test, check recordings, the CLI."""

from __future__ import annotations

import csv
import io
import json
import random
import re
from pathlib import Path

import pytest

from gputui.errors import UserError
from gputui.lookback.compare import compare_rows
from gputui.lookback.load import load_recording, measured_rates
from gputui.lookback.noise import ratio_of_medians
from tests.support.lookback import OWN_TRAINING, RECORDINGS, TRACES, two_check_recordings, without_gpus, write_lines
from tests.support.process import run_gputui


def row(rows: list[list[str]], name: str) -> list[str]:
    return next(r for r in rows if r[0] == name)


def with_preset(source: Path, dest: Path, preset: str, rate_of=None) -> Path:
    """A copy of ``source`` under another preset name; ``rate_of(i, rate)`` rewrites measured readings."""
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    records[0]["preset"] = {**(records[0].get("preset") or {}), "name": preset}
    index = 0
    for record in records:
        if record.get("event") == "throughput" and not record.get("final") and record.get("phase") in (None, "measure"):
            if rate_of is not None:
                record["samples_per_sec"] = rate_of(index, record["samples_per_sec"])
            index += 1
    if rate_of is not None:
        records = records[:-1]  # no stale summary: the figures are rebuilt from the new readings
    return write_lines(dest, records)


def test_clearly_different_runs_are_a_real_difference():
    fast = load_recording(RECORDINGS / "torch-resnet50.jsonl")  # 1790 samples/s, tf32
    slow = load_recording(RECORDINGS / "torch-resnet50-fp32-strict.jsonl")  # 850 samples/s, same preset name
    header, rows = compare_rows([fast, slow], price_per_hour=3.0)
    assert header == ["", "torch-resnet50", "torch-resnet50-fp32-strict"]
    assert row(rows, "preset")[1:] == ["torch-resnet50", "torch-resnet50"]
    assert row(rows, "throughput (samples/s)")[1:] == ["1,790", "850"]
    versus = row(rows, "vs first run of its preset")
    assert versus[1] == "baseline"
    assert re.fullmatch(r"×0\.47 \[0\.4\d–0\.4\d\], real: slower", versus[2]), versus[2]
    # $3/h: 3 / 3600 / 1790.47 * 1e6 = $0.4654
    assert row(rows, "cost per million samples")[1] == "$0.4654"
    assert row(rows, "energy per sample")[1:] == ["0.25 J", "0.60 J"]


def test_a_resampling_of_the_same_series_is_within_noise(tmp_path):
    source = RECORDINGS / "torch-resnet50-input-bound.jsonl"
    readings = measured_rates(load_recording(source))
    draw = random.Random(7)
    resampled = [draw.choice(readings) for _ in readings]
    other = with_preset(source, tmp_path / "again.jsonl", "torch-resnet50-input-bound", lambda i, _r: resampled[i])
    header, rows = compare_rows([load_recording(source), load_recording(other)])
    verdict = row(rows, "vs first run of its preset")[2]
    assert verdict.endswith("within noise"), verdict
    low, high = (float(x) for x in re.search(r"\[([\d.]+)–([\d.]+)\]", verdict).groups())
    assert low <= 1.0 <= high


def test_ratio_of_medians_is_deterministic_and_brackets_the_ratio():
    a = [100.0 + (i % 7) for i in range(50)]
    b = [110.0 + (i % 5) for i in range(40)]
    first, second = ratio_of_medians(a, b), ratio_of_medians(a, b)
    assert first == second
    assert first.low < first.ratio < first.high and first.low > 1.0
    assert first.verdict() == "real: faster"
    same = ratio_of_medians(a, list(reversed(a)))
    assert same.ratio == 1.0 and same.within_noise
    few = ratio_of_medians([1.0, 2.0], b)
    assert not few.known and few.verdict().startswith("too few readings")
    assert ratio_of_medians([], b) is None


def test_runs_line_up_by_preset(tmp_path):
    a1 = RECORDINGS / "torch-resnet50.jsonl"
    b = TRACES / "healthy_synthetic.jsonl"
    a2 = with_preset(RECORDINGS / "torch-resnet50-fp32-strict.jsonl", tmp_path / "a2.jsonl", "torch-resnet50")
    header, rows = compare_rows([load_recording(p) for p in (a1, b, a2)])
    assert header[1:] == ["torch-resnet50", "a2", "healthy_synthetic"]  # a2 moves beside its preset's first run
    assert row(rows, "preset")[1:] == ["torch-resnet50", "torch-resnet50", "healthy_synthetic"]
    versus = row(rows, "vs first run of its preset")
    assert versus[1] == "baseline" and "real: slower" in versus[2] and versus[3] == "baseline"


def test_given_labels_head_the_columns_in_the_preset_order_the_file_names_would(tmp_path):
    a1 = RECORDINGS / "torch-resnet50.jsonl"
    b = TRACES / "healthy_synthetic.jsonl"
    a2 = with_preset(RECORDINGS / "torch-resnet50-fp32-strict.jsonl", tmp_path / "a2.jsonl", "torch-resnet50")
    recordings = [load_recording(p) for p in (a1, b, a2)]
    header, _ = compare_rows(recordings, labels=["#1 resnet", "#2 synthetic", "#3 resnet"])  # the dashboard's run names
    assert header == ["", "#1 resnet", "#3 resnet", "#2 synthetic"]
    header, _ = compare_rows(recordings[:2], labels=["11-21 08:00 resnet"] * 2)  # two kept in one minute
    assert header[1:] == ["11-21 08:00 resnet (1)", "11-21 08:00 resnet (2)"]
    with pytest.raises(ValueError):
        compare_rows(recordings, labels=["#1 resnet"])


def test_check_recordings_take_given_labels_too(tmp_path):
    a, b = two_check_recordings(tmp_path)
    header, _ = compare_rows([load_recording(a), load_recording(b)], labels=["11-21 07:29 check", "11-21 08:00 check"])
    assert header == ["check", "11-21 07:29 check", "11-21 08:00 check"]


def test_throttling_and_findings_rows():
    header, rows = compare_rows([load_recording(TRACES / "thermal_crossing.jsonl"), load_recording(TRACES / "power_capped.jsonl")])
    assert row(rows, "throttling")[1] == "GPU0: SwThermalSlowdown 25%"
    assert row(rows, "throttling")[2].startswith("GPU0: SwPowerCap 83%")
    assert "critical: GPU0 thermal throttling" in row(rows, "findings")[1]


def test_a_run_without_a_gpu_has_no_throttling_figure(tmp_path):
    cpu_only = without_gpus(RECORDINGS / "torch-resnet50.jsonl", tmp_path / "cpu.jsonl")
    header, rows = compare_rows([load_recording(RECORDINGS / "torch-resnet50.jsonl"), load_recording(cpu_only)])
    assert row(rows, "throttling")[1] == "none"  # a GPU sampled, never throttled
    assert row(rows, "throttling")[2] == "not measured (no GPU)"


def test_check_recordings_line_up_check_by_check(tmp_path):
    a, b = two_check_recordings(tmp_path)
    header, rows = compare_rows([load_recording(a), load_recording(b)])
    assert header == ["check", "node-a", "node-b"]
    assert row(rows, "machine")[1].startswith("node-a") and row(rows, "machine")[2].startswith("node-b")
    assert row(rows, "verdict")[1:] == ["ok", "fail"]
    assert row(rows, "power limit [gpu0.power_limit]")[1:] == ["700 W (ok)", "450 W (fail) ×0.64"]
    assert row(rows, "bf16 matmul [micro.gpu0.matmul_bf16]")[1:] == ["800 TFLOPS (ok)", "600 TFLOPS (warn) ×0.75"]
    assert row(rows, "shared memory [host.shm]")[1:] == ["64 GiB (ok)", "-"]
    assert row(rows, "disk read [host.disk]")[1:] == ["-", "- (skipped)"]


def test_a_check_recording_and_a_run_are_not_compared(tmp_path):
    a, _b = two_check_recordings(tmp_path)
    with pytest.raises(UserError, match=r"node-a\.jsonl: a `gputui check` recording"):
        compare_rows([load_recording(RECORDINGS / "torch-resnet50.jsonl"), load_recording(a)])


def test_cli_csv_and_markdown(tmp_path):
    files = [str(RECORDINGS / "torch-resnet50.jsonl"), str(RECORDINGS / "torch-resnet50-fp32-strict.jsonl")]
    result = run_gputui(["compare", *files, "--csv", "--price", "2"], tmp_path)
    assert result.returncode == 0, result.stderr
    table = list(csv.reader(io.StringIO(result.stdout)))
    assert table[0] == ["", "torch-resnet50", "torch-resnet50-fp32-strict"]
    assert row(table[1:], "throughput (samples/s)")[1:] == ["1,790", "850"]
    markdown = run_gputui(["compare", *files, "--markdown"], tmp_path)
    assert markdown.returncode == 0
    assert markdown.stdout.splitlines()[1] == "|---|---|---|"
    plain = run_gputui(["compare", *files], tmp_path)
    assert plain.returncode == 0 and "real: slower" in plain.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["only-one.jsonl"], r"compare: expected two recordings or more, got 1"),
        (["missing.jsonl", "missing2.jsonl"], r"missing\.jsonl: no such file"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    result = run_gputui(["compare", *args], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), result.stderr


def test_a_job_that_stalls_between_bursts_is_compared_by_its_mean():
    """The starved Keras run (script: 621 samples/s; median of its bursts 797) and the fed
    one (script: 6,016) sit side by side by their means, each marked."""
    runs = [load_recording(OWN_TRAINING / f"keras_fit-{variant}.jsonl") for variant in ("starved", "fed")]
    _, rows = compare_rows(runs, price_per_hour=None)
    assert row(rows, "throughput (samples/s)")[1:] == ["623 (mean: bursty)", "5,992 (mean)"]

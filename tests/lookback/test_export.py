"""gputui export: one row per sample and GPU, as CSV and Parquet, documented columns."""

from __future__ import annotations

import csv
import os
import re
import stat
import subprocess
import sys

import pytest

from gputui.lookback.export import COLUMNS, write_csv, write_parquet
from gputui.lookback.load import load_recording
from tests.support.lookback import RECORDINGS, TRACES, cut_copy
from tests.support.process import REPO, gputui_env, run_gputui


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_csv_has_a_row_per_sample_and_gpu_with_host_and_latest_throughput(tmp_path):
    recording = load_recording(RECORDINGS / "torch-resnet50.jsonl")
    out = tmp_path / "run.csv"
    assert write_csv(recording, out) == len(recording.samples)  # one GPU
    rows = read_csv(out)
    assert list(rows[0]) == [c.name for c in COLUMNS]
    assert len(rows) == len(recording.samples)
    readings = [e for e in recording.events_of("throughput") if not e.data.get("final")]
    for row, sample in zip(rows, recording.samples):
        gpu = sample.gpus[0]
        assert float(row["t"]) == sample.t and row["gpu"] == "0"
        assert float(row["temp_c"]) == gpu.temp_c and int(row["memory_used"]) == gpu.memory_used
        assert row["throttle_reasons"] == "|".join(gpu.throttle_reasons)
        assert float(row["host_cpu_percent"]) == sample.host.cpu_percent
        before = [e for e in readings if e.t <= sample.t]
        if before:
            assert float(row["samples_per_sec"]) == before[-1].data["samples_per_sec"]
            assert row["throughput_phase"] == before[-1].data.get("phase", "")
        else:
            assert row["samples_per_sec"] == ""  # absent, never 0
    # GPM appears from the second sample on: the first row leaves it empty.
    assert rows[0]["sm_active"] == "" and rows[1]["sm_active"] != ""


def test_run_cpu_by_role_sums_the_processes(tmp_path):
    recording = load_recording(RECORDINGS / "torch-resnet50-input-bound.jsonl")
    write_csv(recording, tmp_path / "run.csv")
    rows = read_csv(tmp_path / "run.csv")
    index, sample = next((i, s) for i, s in enumerate(recording.samples) if any(p.role == "worker" and p.cpu_percent for p in s.host.processes))
    workers = sum(p.cpu_percent or 0 for p in sample.host.processes if p.role == "worker")
    assert float(rows[index]["run_worker_cpu_percent"]) == pytest.approx(workers)
    assert int(rows[index]["run_workers"]) == sum(p.role == "worker" for p in sample.host.processes)


def test_parquet_round_trips_with_types_and_nulls(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    recording = load_recording(TRACES / "thermal_crossing.jsonl")
    out = tmp_path / "run.parquet"
    count = write_parquet(recording, out)
    table = pq.read_table(out)
    assert table.num_rows == count == len(recording.samples)
    assert table.column_names == [c.name for c in COLUMNS]
    assert str(table.schema.field("temp_c").type) == "double"
    assert str(table.schema.field("memory_used").type) == "int64"
    assert str(table.schema.field("gpu_lost").type) == "bool"
    temps = table.column("temp_c").to_pylist()
    assert temps == [s.gpus[0].temp_c for s in recording.samples]
    assert table.column("samples_per_sec").to_pylist()[0] is None


def test_a_cut_recording_exports_what_it_holds(tmp_path):
    cut = cut_copy(TRACES / "power_capped.jsonl", tmp_path / "cut.jsonl")
    recording = load_recording(cut)
    assert write_csv(recording, tmp_path / "cut.csv") == len(recording.samples) > 0
    result = run_gputui(["export", str(cut), "--csv", str(tmp_path / "cli.csv")], tmp_path)
    assert result.returncode == 0, result.stderr
    assert re.match(r".*cli\.csv: \d+ rows \(the recording was cut: the last line", result.stdout)


def test_every_column_is_documented():
    doc = (REPO / "docs" / "report.md").read_text(encoding="utf-8")
    for column in COLUMNS:
        assert f"| `{column.name}` |" in doc, column.name


def test_parquet_without_pyarrow_is_one_line_and_exit_2(tmp_path):
    blocker = tmp_path / "block"
    (blocker / "pyarrow").mkdir(parents=True)
    (blocker / "pyarrow" / "__init__.py").write_text("raise ImportError('pyarrow is blocked in this test')\n")
    env = gputui_env(tmp_path)
    env["PYTHONPATH"] = str(blocker) + ":" + env["PYTHONPATH"]
    result = subprocess.run(
        [sys.executable, "-m", "gputui", "export", str(TRACES / "power_capped.jsonl"), "--parquet", str(tmp_path / "x.parquet")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == ("gputui: error: --parquet: needs pyarrow, which is not installed: pip install pyarrow")
    assert not (tmp_path / "x.parquet").exists()


@pytest.mark.parametrize(
    "setup, message",
    [
        ("missing", r"missing\.jsonl: no such file"),
        ("directory", r"is a directory, expected a file to write"),
        ("empty", r"empty\.jsonl: empty file, not a gputui recording"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, setup, message):
    source, out = TRACES / "power_capped.jsonl", tmp_path / "out.csv"
    if setup == "missing":
        source = tmp_path / "missing.jsonl"
    elif setup == "directory":
        out = tmp_path
    else:
        source = tmp_path / "empty.jsonl"
        source.write_text("")
    result = run_gputui(["export", str(source), "--csv", str(out)], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), result.stderr


def test_export_replaces_an_existing_file_only_with_force_and_writes_into_a_fifo(tmp_path):
    """Issue 26: export overwrote silently (--record asks for --force), and a device named
    as OUT was replaced by a regular file; now a file needs --force and a FIFO (like a
    device) is written into, never replaced."""
    recording = RECORDINGS / "torch-resnet50.jsonl"
    out = tmp_path / "samples.csv"
    out.write_text("keep me\n")
    refused = run_gputui(["export", str(recording), "--csv", str(out)], tmp_path)
    assert refused.returncode == 2 and "already exists" in refused.stderr and "--force" in refused.stderr
    assert out.read_text() == "keep me\n"
    forced = run_gputui(["export", str(recording), "--csv", str(out), "--force"], tmp_path)
    assert forced.returncode == 0 and out.read_text().startswith("t,")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    refused = run_gputui(["export", str(recording), "--csv", str(fifo)], tmp_path)  # nobody reads it
    assert refused.returncode == 2 and "a FIFO with no reader" in refused.stderr and stat.S_ISFIFO(fifo.stat().st_mode)


def test_csv_dash_writes_the_table_to_stdout_and_the_count_to_stderr(tmp_path):
    source = RECORDINGS / "torch-resnet50.jsonl"
    done = run_gputui(["export", str(source), "--csv", "-"], tmp_path)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(done.stdout.splitlines()))
    assert len(rows) == len(load_recording(source).samples) and list(rows[0]) == [c.name for c in COLUMNS]
    assert done.stderr.strip() == f"{len(rows)} rows"
    assert not (tmp_path / "-").exists()

"""Records declared once (issue 27): the header and the summary are dataclasses
(gputui.record.schema) that the recorder writes and the reader checks and builds; every
recording committed under docs/ reads into them and writes back the same lines."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gputui.check.stage_context import CheckOptions
from gputui.errors import UserError
from gputui.record.recorder import Recorder
from gputui.record.recording import read_recording
from gputui.record.schema import CheckSettings, Header, RunSettings, Summary
from tests.support.lookback import RECORDINGS
from tests.support.process import REPO

DOCS_RECORDINGS = sorted(p for p in REPO.glob("docs/**/*.jsonl*") if p.name.endswith((".jsonl", ".jsonl.gz")))
SOURCE = RECORDINGS / "torch-resnet50.jsonl"


def lines_of(path: Path) -> list[dict[str, Any]]:
    text = gzip.decompress(path.read_bytes()).decode() if path.name.endswith(".gz") else path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line]


def as_written(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "type"}


def same_line(written: dict[str, Any], original: dict[str, Any]) -> None:
    """What the recorder writes of an object read from ``original``: every key it had,
    with its value, in its order; keys an older gputui left out come back null only."""
    assert {k: written[k] for k in original} == original
    assert [k for k in written if k in original] == list(original)
    assert all(value is None for key, value in written.items() if key not in original), [k for k in written if k not in original]


def test_there_are_committed_recordings_to_hold_the_schema_to():
    assert len(DOCS_RECORDINGS) > 20
    assert any(p.name.endswith(".gz") for p in DOCS_RECORDINGS)


@pytest.mark.parametrize("path", DOCS_RECORDINGS, ids=[str(p.relative_to(REPO / "docs")) for p in DOCS_RECORDINGS])
def test_every_committed_recording_reads_typed_and_writes_back_its_lines(path, tmp_path):
    recording = read_recording(path)
    assert isinstance(recording.header, Header)
    assert recording.summary is None or isinstance(recording.summary, Summary)
    records = lines_of(path)
    same_line(recording.header.to_dict(), as_written(records[0]))
    if recording.summary is not None:
        same_line(recording.summary.to_dict(), as_written(records[-1]))
    # written by the recorder and read back: equal objects
    copy = tmp_path / "copy.jsonl"
    recorder = Recorder(copy)
    recorder.on_header(recording.header)
    if recording.summary is not None:
        recorder.on_summary(recording.summary)
    recorder.close()
    again = read_recording(copy)
    assert again.header == recording.header and again.summary == recording.summary


def test_a_fresh_header_and_summary_round_trip_through_their_dicts():
    header = Header(gputui="x", interval=0.5, command=["python", "train.py"], check=CheckSettings(quick=True, skip=["micro"]))
    summary = Summary(window="all", samples=3, workload=RunSettings(model="resnet50", extra={"flops_per_sample": 4.1e9}))
    assert Header.from_dict(header.to_dict()) == header
    assert Summary.from_dict(summary.to_dict()) == summary
    assert summary.to_dict()["workload"] == {"model": "resnet50", "flops_per_sample": 4.1e9}
    assert summary.to_dict()["outcome"] is None  # written as null, as the session always wrote it
    assert "check" not in summary.to_dict() and "phases" not in summary.to_dict()  # absent, as before


def test_keys_it_has_no_field_for_are_let_through_and_written_back(tmp_path):
    records = lines_of(SOURCE)
    records[0]["from_a_newer_gputui"] = {"anything": [1, 2]}
    records[-1]["energy_by_phase"] = {"measure": 12.5}
    records[-1]["throughput"]["newer_statistic"] = "text"
    path = tmp_path / "newer-keys.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    recording = read_recording(path)
    assert recording.summary is not None and recording.summary.throughput is not None
    assert recording.header.extra == {"from_a_newer_gputui": {"anything": [1, 2]}}
    assert recording.summary.extra == {"energy_by_phase": {"measure": 12.5}}
    assert recording.summary.throughput.median == records[-1]["throughput"]["median"]
    assert recording.header.to_dict()["from_a_newer_gputui"] == {"anything": [1, 2]}
    assert recording.summary.to_dict()["energy_by_phase"] == {"measure": 12.5}


def test_the_workloads_keys_come_back_in_the_order_it_wrote_them():
    workload = {"framework": "torch", "model": "resnet50", "batch_size": 256, "precision": "bf16", "pipeline": "synthetic", "flops_per_sample": 4.1e9}
    settings = RunSettings.from_dict(workload)
    assert settings.batch_size == 256 and settings.setting("flops_per_sample") == 4.1e9 and settings.setting("image_size") is None
    assert list(settings.to_dict()) == list(workload)


def with_line_value(tmp_path: Path, line: int, keys: list[Any], value: Any) -> Path:
    records = lines_of(SOURCE)
    target = records[line]
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    path = tmp_path / "wrong.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "line, keys, value, message",
    [
        (-1, ["throughput", "median"], "fast", r"summary\.throughput\.median: expected a number, got a string"),
        (-1, ["throughput", "reported"], [], r"summary\.throughput\.reported: expected an object, got a list"),
        (-1, ["gpus", 0, "util_gpu", "max"], True, r"summary\.gpus\[0\]\.util_gpu\.max: expected a number, got true"),
        (-1, ["host", "max_workers"], 1.5, r"summary\.host\.max_workers: expected a whole number, got a number"),
        (-1, ["workload", "batch_size"], "64", r"summary\.workload\.batch_size: expected a whole number, got a string"),
        (-1, ["check"], {"counts": {"ok": "3"}}, r"summary\.check\.counts\.ok: expected a whole number, got a string"),
        (0, ["baseline"], {"samples_per_sec": "fast"}, r"header\.baseline\.samples_per_sec: expected a number, got a string"),
        (0, ["check"], {"gpus": ["0"]}, r"header\.check\.gpus\[0\]: expected a whole number, got a string"),
        (0, ["gpus", 0, "name"], 7, r"header\.gpus\[0\]\.name: expected a string, got a number"),
    ],
)
def test_a_wrong_type_is_refused_in_one_line_naming_the_file_line_and_key(tmp_path, line, keys, value, message):
    path = with_line_value(tmp_path, line, keys, value)
    number = 1 if line == 0 else len(lines_of(SOURCE))
    with pytest.raises(UserError) as refused:
        read_recording(path)
    assert re.fullmatch(rf"{re.escape(str(path))}:{number}: {message}", str(refused.value)), str(refused.value)


def test_an_events_keys_are_held_to_its_payloads_type(tmp_path):
    records = lines_of(SOURCE)
    started = next(i for i, r in enumerate(records) if r.get("event") == "started")
    records[started]["pid"] = "4242"
    path = tmp_path / "wrong-event.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with pytest.raises(UserError, match=rf"^{re.escape(str(path))}:{started + 1}: event\.pid: expected a whole number, got a string$"):
        read_recording(path)


def test_the_headers_check_options_are_the_checks_own():
    """A new option of ``gputui check`` is declared in the header's CheckSettings too."""
    options = {f.name for f in dataclasses.fields(CheckOptions)} - {"config"}
    recorded = {f.name for f in dataclasses.fields(CheckSettings)} - {"extra", "key_order"}
    assert recorded == options

"""Recordings: what is written reads back equal; a cut file reads up to its last whole line."""

from __future__ import annotations

import json

import pytest

from gputui import events as ev
from gputui.errors import UserError
from gputui.events import Event
from gputui.model import GpuProcess, GpuSample, HostSample, ProcessSample, Sample
from gputui.record import Recorder, read_recording


def make_sample(t: float) -> Sample:
    return Sample(
        t=t,
        gpus=[
            GpuSample(
                index=0, util_gpu=97.0, temp_c=66.0, throttle_reasons=["SwPowerCap"], throttle_mask=4, processes=[GpuProcess(pid=42, used_memory=1 << 30)]
            ),
            GpuSample(index=1, lost=True),
        ],
        host=HostSample(cpu_percent=12.5, per_core=[10.0, 15.0], processes=[ProcessSample(pid=42, role="main", cpu_percent=99.0, rss=1 << 28)]),
    )


def test_round_trip_is_lossless(tmp_path):
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header({"schema": 1, "gpus": []})
    samples = [make_sample(0.0), make_sample(1.0)]
    recorder.on_sample(samples[0])
    recorder.on_event(Event(t=0.5, kind=ev.THROUGHPUT, data={"samples_per_sec": 10.0, "source": "gputui"}))
    recorder.on_sample(samples[1])
    recorder.on_summary({"throughput": {"median": 10.0}})

    recording = read_recording(path)
    assert recording.cut is None
    assert recording.header == {"schema": 1, "gpus": []}
    assert recording.samples == samples
    assert recording.events == [Event(t=0.5, kind=ev.THROUGHPUT, data={"samples_per_sec": 10.0, "source": "gputui"})]
    assert recording.summary == {"throughput": {"median": 10.0}}
    # Absent values are not written at all.
    first_sample = json.loads(path.read_text().splitlines()[1])
    assert "power_w" not in first_sample["gpus"][0]


def test_non_finite_numbers_are_written_as_null(tmp_path):
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header({"x": float("nan")})
    recorder.close()
    assert read_recording(path).header == {"x": None}


def test_each_line_is_on_disk_as_soon_as_it_is_written(tmp_path):
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header({"schema": 1})
    recorder.on_sample(make_sample(0.0))
    # Not closed: another reader sees both whole lines already.
    recording = read_recording(path)
    assert len(recording.samples) == 1
    assert recording.cut == "no summary: the recorder was stopped before it could finish"
    recorder.close()


def test_a_cut_last_line_is_dropped_and_reported(tmp_path):
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header({"schema": 1})
    recorder.on_sample(make_sample(0.0))
    recorder.close()
    with open(path, "a") as f:
        f.write('{"type":"sample","t":1.0,"gp')
    recording = read_recording(path)
    assert len(recording.samples) == 1
    assert "cut while being written" in recording.cut


@pytest.mark.parametrize(
    "content, expected",
    [
        ("", "empty file"),
        ('{"type":"sample","t":0}\n', ":1: not a gputui recording (expected a header line first)"),
        ('{"type":"header"}\nnot json\n', ":2: not a gputui recording line"),
    ],
)
def test_bad_files_give_one_line_errors(tmp_path, content, expected):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(UserError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        read_recording(path)

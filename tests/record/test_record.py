"""Recordings: what is written reads back equal; a cut file reads up to its last whole line."""

from __future__ import annotations

import json
import types

import pytest

from gputui.errors import UserError
from gputui.model import Throughput
from gputui.record import events as ev
from gputui.record.events import make_event
from gputui.record.recorder import Recorder
from gputui.record.recording import read_recording
from gputui.record.schema import Header, Summary, ThroughputSummary
from gputui.run.outcome import Outcome
from tests.support.lookback import TRACES
from tests.support.recording import make_sample


def test_round_trip_is_lossless(tmp_path):
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header(Header(schema=1, gpus=[]))
    samples = [make_sample(0.0), make_sample(1.0)]
    recorder.on_sample(samples[0])
    recorder.on_event(make_event(0.5, ev.THROUGHPUT, {"samples_per_sec": 10.0, "source": "gputui"}))
    recorder.on_sample(samples[1])
    recorder.on_summary(Summary(throughput=ThroughputSummary(median=10.0)))

    recording = read_recording(path)
    assert recording.cut is None
    assert recording.header == Header(schema=1, gpus=[])
    assert recording.samples == samples
    assert recording.events == [make_event(0.5, ev.THROUGHPUT, {"samples_per_sec": 10.0, "source": "gputui"})]
    assert recording.summary == Summary(throughput=ThroughputSummary(median=10.0))
    # Absent values are not written at all.
    first_sample = json.loads(path.read_text().splitlines()[1])
    assert "power_w" not in first_sample["gpus"][0]


def test_non_finite_numbers_are_written_as_null(tmp_path):
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header(Header(interval=float("nan"), extra={"x": float("nan")}))
    recorder.close()
    header = read_recording(path).header
    assert header.interval is None and header.extra == {"x": None}


def test_a_sample_is_on_disk_once_the_session_catches_up_and_other_records_at_once(tmp_path, monkeypatch):
    """Routine lines (samples, readings, output) wait for the session to catch up (one
    write call a batch of news, gputui.session.session.DISPATCH_BATCH_S), or
    FLUSH_HELD_S; the header, a finding or the outcome go out at once, with them."""
    import gputui.record.recorder as recording_module

    clock = [100.0]
    monkeypatch.setattr(recording_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header(Header(schema=1))
    assert read_recording(path).header is not None  # not closed: another reader sees it already
    recorder.on_sample(make_sample(0.0))
    recorder.on_event(make_event(0.5, ev.THROUGHPUT, {"samples_per_sec": 10.0, "source": "gputui"}))
    assert read_recording(path).samples == []
    recorder.on_idle()
    recording = read_recording(path)
    assert len(recording.samples) == 1 and len(recording.events) == 1
    recorder.on_sample(make_sample(1.0))
    recorder.on_event(make_event(1.0, ev.FINDING, {"id": "idle-run-1", "kind": "idle", "state": "open", "severity": "warning", "title": "idle"}))
    assert len(read_recording(path).samples) == 2  # the finding took the sample before it along
    for i in range(5):  # a session that never catches up (a flood): flushed FLUSH_HELD_S after the oldest held line
        clock[0] += recording_module.FLUSH_HELD_S / 4
        recorder.on_sample(make_sample(2.0 + i))
    assert len(read_recording(path).samples) >= 6
    recorder.close()
    assert len(read_recording(path).samples) == 7


def test_output_is_on_disk_once_the_session_catches_up_or_with_the_next_record(tmp_path):
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header(Header(schema=1))

    def texts() -> list[str]:
        return [e.data["text"] for e in read_recording(path).events if e.kind == ev.OUTPUT]

    def output(text: str) -> ev.Event:
        return make_event(0.1, ev.OUTPUT, {"stream": "stdout", "text": text})

    recorder.on_event(output("alone"))
    recorder.on_idle()  # the session's queue is empty
    assert texts() == ["alone"]
    burst = [f"line {i}" for i in range(200)]
    for text in burst:
        recorder.on_event(output(text))
    recorder.on_event(make_event(1.0, ev.PHASE, {"phase": "measure"}))
    assert texts() == ["alone", *burst]
    recorder.on_event(output("last"))
    recorder.on_idle()
    assert texts() == ["alone", *burst, "last"]
    recorder.close()


def test_a_cut_last_line_is_dropped_and_reported(tmp_path):
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header(Header(schema=1))
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


def test_todays_recording_reads_back_typed_and_writes_out_identically(tmp_path):
    """A recording written by gputui's Recorder (the DDP scaling fixture) loads into typed
    payloads and, written again, is the same bytes line for line."""
    source = TRACES / "scaling" / "ddp_balanced.jsonl"
    recording = read_recording(source)
    kinds = {type(e.payload) for e in recording.events}
    assert ev.Fields not in kinds
    assert {ev.Started, ev.PhaseChange, ev.WorkloadInfo, Throughput, Outcome} <= kinds
    event_lines = [line for line in source.read_text().splitlines() if line.startswith('{"type":"event"')]
    copy = tmp_path / "copy.jsonl"
    recorder = Recorder(copy)
    for event in recording.events:
        recorder.on_event(event)
    recorder.close()
    assert copy.read_text().splitlines() == event_lines


def test_unknown_kinds_and_keys_load_and_write_back(tmp_path):
    """A newer gputui's event kind and an extra key on a known kind survive a round trip."""
    new_kind = {"t": 1.0, "event": "power_cap_changed", "watts": 500}
    extra_key = {"t": 2.0, "event": "phase", "phase": "measure", "step": 40}
    first, second = ev.event_from_dict(new_kind), ev.event_from_dict(extra_key)
    assert isinstance(first.payload, ev.Fields) and first.payload.fields == {"watts": 500}
    assert isinstance(second.payload, ev.PhaseChange) and second.payload.phase == "measure"
    assert ev.event_to_dict(first) == new_kind and ev.event_to_dict(second) == extra_key

"""Following a recording as it is written: whole lines only, each checked, the end
seen at the summary or when the recorder has let go of the file."""

from __future__ import annotations

import gzip

import pytest

from gputui.errors import UserError
from gputui.model import Sample
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.follow import RecordingTail
from gputui.record.recorder import Recorder
from gputui.record.schema import Header, Summary


def header() -> Header:
    return Header(schema=1, gputui="test", started_at="2026-11-29T10:00:00+00:00", interval=1.0)


def recorded_lines(tmp_path) -> list[bytes]:
    """A recording's lines as a Recorder writes them: header, sample, phase, summary."""
    path = tmp_path / "whole.jsonl"
    recorder = Recorder(path)
    recorder.on_header(header())
    recorder.on_sample(Sample(t=1.0))
    recorder.on_event(Event(t=2.0, kind=ev.PHASE, payload=ev.PhaseChange("measure")))
    recorder.on_summary(Summary())
    return path.read_bytes().splitlines(keepends=True)


def test_lines_are_read_as_they_come_and_a_line_half_written_waits_for_its_end(tmp_path):
    head, sample, phase, summary = recorded_lines(tmp_path)
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"")
    tail = RecordingTail(path)
    assert tail.read() == []

    def write(data: bytes) -> None:
        with open(path, "ab") as raw:
            raw.write(data)

    write(head + sample)
    assert [type(item) for item in tail.read()] == [Header, Sample]
    write(phase[:20])  # half a line, as a write in progress leaves it for a moment
    assert tail.read() == []
    write(phase[20:])
    (event,) = tail.read()
    assert isinstance(event, Event) and event.kind == ev.PHASE
    write(summary)
    assert [type(item) for item in tail.read()] == [Summary] and tail.ended
    write(head)  # nothing after a summary is read: the recording has ended
    assert tail.read() == []


def test_the_writer_holds_the_file_until_the_summary(tmp_path):
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    tail = RecordingTail(path)
    assert not tail.writer_gone()  # nothing written yet, but a recorder has it
    recorder.on_header(header())
    recorder.on_summary(Summary())
    assert len(tail.read()) == 2 and tail.ended and tail.writer_gone()


def test_a_recorder_gone_without_a_summary_lets_go_of_the_file(tmp_path):
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header(header())
    tail = RecordingTail(path)
    assert len(tail.read()) == 1 and not tail.writer_gone()
    recorder.close()  # as the kernel closes it for a killed process
    assert tail.writer_gone() and not tail.ended


def test_a_bad_line_is_one_error_naming_the_file_and_line(tmp_path):
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header(header())
    recorder.close()
    with open(path, "a") as raw:
        raw.write('{"type":"sample","t":"soon"}\n')
    tail = RecordingTail(path)
    with pytest.raises(UserError, match=r"r\.jsonl:2: sample\.t: expected a number"):
        tail.read()


def test_a_compressed_recording_is_refused_in_one_line(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    path.write_bytes(gzip.compress(b""))
    with pytest.raises(UserError, match="a compressed recording cannot be followed"):
        RecordingTail(path)


def test_catching_up_on_a_long_recording_reads_every_event_and_the_latest_samples_only(tmp_path, monkeypatch):
    from gputui.record import follow

    monkeypatch.setattr(follow, "READ_CHUNK", 4096)  # a long run in miniature: many reads' worth
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header(header())
    for i in range(400):
        recorder.on_sample(Sample(t=float(i)))
        recorder.on_event(Event(t=float(i), kind=ev.PHASE, payload=ev.PhaseChange(f"phase {i}")))
    recorder.on_idle()
    tail = RecordingTail(path, recent_samples=10)
    items = []
    while more := tail.read():
        items += more
    samples = [item.t for item in items if isinstance(item, Sample)]
    phases = [item.payload.phase for item in items if isinstance(item, Event)]
    assert phases == [f"phase {i}" for i in range(400)]  # every event, in order
    assert samples == sorted(samples) and samples[-1] == 399.0  # the newest ones, in order
    assert 10 <= len(samples) < 100 and tail.samples_passed_over == 400 - len(samples)
    recorder.on_sample(Sample(t=400.0))  # caught up: every new sample is read
    recorder.on_sample(Sample(t=401.0))
    recorder.on_idle()
    assert [item.t for item in tail.read()] == [400.0, 401.0]

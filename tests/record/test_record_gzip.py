"""``--record run.jsonl.gz``: the same JSON Lines, gzip-compressed, read back by every reader;
a stream cut by a killed recorder reads to its last whole line and says it was cut."""

from __future__ import annotations

import errno
import gzip
import os
import shutil
import sys

import pytest

import gputui.record.recorder
from gputui.errors import UserError
from gputui.lookback.load import load_recording
from gputui.record import events as ev
from gputui.record.events import make_event
from gputui.record.history import read_kept_run
from gputui.record.recorder import Recorder
from gputui.record.recording import is_live, read_recording
from gputui.record.schema import Header, Summary, ThroughputSummary
from tests.support.leftovers import no_leftovers  # noqa: F401  (the fixture)
from tests.support.lookback import RECORDINGS
from tests.support.process import run_gputui
from tests.support.recording import make_sample

pytestmark = pytest.mark.usefixtures("no_leftovers")

GZIP_MAGIC = b"\x1f\x8b"


def write_run(path, samples: int = 50, close: bool = True) -> Recorder:
    """A session's recording: after each sample the session has caught up (on_idle),
    which is when routine lines are flushed."""
    recorder = Recorder(path)
    recorder.on_header(Header(schema=1, gpus=[]))
    for i in range(samples):
        recorder.on_sample(make_sample(float(i)))
        if i == 10:
            recorder.on_event(make_event(10.5, ev.THROUGHPUT, {"samples_per_sec": 10.0, "source": "gputui"}))
        recorder.on_idle()
    if close:
        recorder.on_summary(Summary(throughput=ThroughputSummary(median=10.0)))
    return recorder


@pytest.fixture
def sync_every_line(monkeypatch):
    """Sync-flush (and fsync) after every line, as a recorder running for seconds would
    have done by the time it is killed."""
    monkeypatch.setattr(gputui.record.recorder, "FSYNC_EVERY_S", 0.0)


def test_round_trip_reads_back_what_the_plain_file_holds(tmp_path):
    write_run(tmp_path / "r.jsonl.gz")
    write_run(tmp_path / "r.jsonl")
    assert (tmp_path / "r.jsonl.gz").read_bytes()[:2] == GZIP_MAGIC
    assert gzip.decompress((tmp_path / "r.jsonl.gz").read_bytes()) == (tmp_path / "r.jsonl").read_bytes()
    packed, plain = read_recording(tmp_path / "r.jsonl.gz"), read_recording(tmp_path / "r.jsonl")
    assert packed.cut is None
    assert (packed.header, packed.samples, packed.events, packed.summary) == (plain.header, plain.samples, plain.events, plain.summary)
    assert len(packed.samples) == 50


def test_compressed_is_much_smaller_than_plain_even_when_synced_every_line(tmp_path, sync_every_line):
    write_run(tmp_path / "r.jsonl.gz", samples=500)
    write_run(tmp_path / "r.jsonl", samples=500)
    ratio = (tmp_path / "r.jsonl.gz").stat().st_size / (tmp_path / "r.jsonl").stat().st_size
    assert ratio < 0.25, ratio


def test_a_recorder_still_writing_leaves_every_synced_line_readable(tmp_path, sync_every_line):
    path = tmp_path / "r.jsonl.gz"
    recorder = write_run(path, samples=20, close=False)  # mid-run: no trailer yet
    recording = read_recording(path)
    assert len(recording.samples) == 20
    assert recording.live and recording.cut is None  # still being written: it ends where the run has got to
    assert is_live(path)  # the advisory lock is held on the .gz as on a plain file
    recorder.close()
    assert not is_live(path)
    assert read_recording(path).cut == "no summary: the recorder was stopped before it could finish"


def test_the_header_is_readable_before_the_first_sync_interval_ends(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    recorder = Recorder(path)
    recorder.on_header(Header(schema=1))  # the first line is synced at once
    assert read_recording(path).header == Header(schema=1)
    recorder.close()


@pytest.mark.parametrize("share", [0.3, 0.6, 0.9])
def test_a_stream_cut_mid_way_reads_its_whole_lines_and_says_cut(tmp_path, sync_every_line, share):
    whole = tmp_path / "whole.jsonl.gz"
    write_run(whole, samples=200, close=False)
    expected = read_recording(whole).samples
    data = whole.read_bytes()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: int(len(data) * share)])
    recording = read_recording(cut)
    assert 0 < len(recording.samples) < len(expected)
    assert recording.samples == expected[: len(recording.samples)]
    assert recording.cut is not None and "cut while being written" in recording.cut
    assert recording.summary is None


def test_a_file_named_gz_that_is_not_gzip_is_one_line(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    shutil.copy(RECORDINGS / "torch-resnet50.jsonl", path)
    with pytest.raises(UserError, match=r"r\.jsonl\.gz: not a gzip file \(the name ends in \.gz"):
        read_recording(path)
    result = run_gputui(["report", str(path)], tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [f"gputui: error: {path}: not a gzip file (the name ends in .gz; expected a gzip-compressed recording)"]


def test_an_existing_gz_is_not_overwritten_without_force(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    write_run(path)
    before = path.read_bytes()
    with pytest.raises(UserError, match="already exists"):
        Recorder(path, overwrite=False)
    assert path.read_bytes() == before


class FullDisk:
    """A binary file on a disk with room for ``budget`` bytes; then ENOSPC, as a full disk."""

    def __init__(self, real, budget: int) -> None:
        self._real, self._room = real, budget

    def write(self, data: bytes) -> int:
        if len(data) > self._room:
            self._real.write(data[: self._room])
            self._real.flush()
            self._room = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= len(data)
        return self._real.write(data)

    def __getattr__(self, name):
        return getattr(self._real, name)


def test_a_full_disk_is_one_error_and_what_was_written_stays_readable(tmp_path, monkeypatch, sync_every_line):
    path = tmp_path / "r.jsonl.gz"
    real_open = open
    monkeypatch.setattr(gputui.record.recorder, "open", lambda p, *a, **k: FullDisk(real_open(p, *a, **k), 3000), raising=False)
    errors: list[str] = []
    recorder = Recorder(path, on_error=errors.append)
    recorder.on_header(Header(schema=1))
    for i in range(200):
        recorder.on_sample(make_sample(float(i)))
        recorder.on_idle()
    recorder.on_summary(Summary(duration_s=1.0))
    assert errors == [f"{path}: cannot write the recording (No space left on device)"]
    assert path.stat().st_size == 3000
    monkeypatch.undo()  # the disk is readable again
    recording = read_recording(path)
    assert recording.samples and recording.summary is None and recording.cut


def test_gputui_runs_lists_a_compressed_recording_with_its_outcome(tmp_path, sync_every_line):
    source = RECORDINGS / "torch-resnet50.jsonl"
    path = tmp_path / "run.jsonl.gz"
    path.write_bytes(gzip.compress(source.read_bytes()))
    packed, plain = read_kept_run(path), read_kept_run(source)
    assert (packed.outcome, packed.median, packed.label, packed.cut) == (plain.outcome, plain.median, plain.label, None)
    recorder = write_run(tmp_path / "cut.jsonl.gz", close=False)
    assert read_kept_run(tmp_path / "cut.jsonl.gz").outcome == "running"  # the recorder holds its lock
    recorder.close()  # stopped before its summary
    stopped = read_kept_run(tmp_path / "cut.jsonl.gz")
    assert (stopped.outcome, stopped.cut) == ("cut", "no summary: the recorder was stopped before it could finish")


def test_headless_record_to_gz_then_report_and_export_read_it(tmp_path):
    out = tmp_path / "x.jsonl.gz"
    result = run_gputui(["--headless", "--record", str(out), "--duration", "1.5", "--interval", "0.25", "--no-history"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:2] == GZIP_MAGIC
    gzip.decompress(out.read_bytes())  # a whole gzip stream, trailer included
    recording = load_recording(out)
    assert recording.cut is None and recording.summary is not None
    assert len(recording.samples) >= 3
    assert recording.events_of(ev.STOPPING)[0].data["reason"] == "duration reached"
    report = run_gputui(["report", str(out)], tmp_path)
    assert report.returncode == 0, report.stderr
    exported = run_gputui(["export", str(out), "--csv", str(tmp_path / "x.csv")], tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert len((tmp_path / "x.csv").read_text().splitlines()) > len(recording.samples)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_same_recording_reports_the_same_compressed_or_not(tmp_path):
    source = RECORDINGS / "torch-resnet50-input-bound.jsonl"
    plain, packed = tmp_path / "run.jsonl", tmp_path / "run.jsonl.gz"
    shutil.copy(source, plain)
    packed.write_bytes(gzip.compress(source.read_bytes()))
    a, b = run_gputui(["report", str(plain)], tmp_path), run_gputui(["report", str(packed)], tmp_path)
    assert a.returncode == b.returncode == 0, b.stderr
    assert a.stdout == b.stdout

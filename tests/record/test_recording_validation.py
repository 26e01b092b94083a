"""Readers trust no shape (issue 26, class 4): a recording whose fields have the wrong
types, whose JSON is nested 100,000 deep, or that is a gzip bomb is one line naming the
file, the line and the key, and what was expected, exit code 2, through every face that
reads recordings (report, compare, export, --baseline, read_recording for replay and
the diagnosis); ``gputui runs`` lists it as unreadable, says why on stderr, and exits 0."""

from __future__ import annotations

import functools
import json
import re
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from gputui.cli.main import main
from gputui.errors import UserError
from gputui.record import gzip_lines
from gputui.record.gzip_lines import GZIP_WBITS, GzipChunks
from gputui.record.history import runs_dir
from gputui.record.recording import read_recording
from gputui.session.baseline import baseline_from_recording
from tests.support.lookback import RECORDINGS

SOURCE = RECORDINGS / "torch-resnet50.jsonl"
LINES = SOURCE.read_text(encoding="utf-8").splitlines(keepends=True)
LAST = len(LINES)  # the summary's line number
DEEP = "[" * 100_000 + "]" * 100_000


def with_value(path: Path, line: int, keys: list[Any], value: Any) -> Path:
    """SOURCE with ``keys`` (a path into line ``line``, 1-based) set to ``value``."""
    lines = list(LINES)
    record = json.loads(lines[line - 1])
    target = record
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    lines[line - 1] = json.dumps(record) + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def with_line(path: Path, line: int, text: str) -> Path:
    lines = list(LINES)
    lines[line - 1] = text + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    return path


@functools.cache
def bomb_bytes(megabytes: int) -> bytes:
    """A real header, then ``megabytes`` MiB of 1 KB lines of zeros: ~1,000 times smaller
    on disk.  Compressed as a stream, a MiB at a time, as an attacker's tool would."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, GZIP_WBITS)
    block = (b"0" * 1023 + b"\n") * 1024
    parts = [compressor.compress(LINES[0].encode("utf-8"))]
    parts += [compressor.compress(block) for _ in range(megabytes)]
    return b"".join([*parts, compressor.flush()])


def gzip_bomb(path: Path, megabytes: int = 200) -> Path:
    path.write_bytes(bomb_bytes(megabytes))
    return path


# (name, how the file is made, what the error says after FILE:)
CASES = [
    ("preset-a-string", lambda p: with_value(p, 1, ["preset"], "torch-resnet50"), r":1: header\.preset: expected an object, got a string"),
    ("preset-name-a-list", lambda p: with_value(p, 1, ["preset", "name"], ["a", "b"]), r":1: header\.preset\.name: expected a string, got a list"),
    ("started-at-a-number", lambda p: with_value(p, 1, ["started_at"], 1763711342), r":1: header\.started_at: expected a string, got a number"),
    (
        "median-a-string",
        lambda p: with_value(p, LAST, ["throughput", "median"], "fast"),
        rf":{LAST}: summary\.throughput\.median: expected a number, got a string",
    ),
    ("outcome-kind-a-list", lambda p: with_value(p, LAST, ["outcome", "kind"], ["exited"]), rf":{LAST}: summary\.outcome\.kind: expected a string, got a list"),
    ("nested-100000-deep", lambda p: with_line(p, 1, DEEP), r":1: JSON nested too deeply to be a gputui recording line"),
    (
        "nested-100000-deep-in-the-summary",
        lambda p: with_line(p, LAST, '{"type":"summary","workload":' + DEEP + "}"),
        rf":{LAST}: JSON nested too deeply to be a gputui recording line",
    ),
    ("gzip-bomb", gzip_bomb, r": not read: it decompresses to over 250 times its compressed size"),
]
IDS = [name for name, _make, _message in CASES]


def make(tmp_path: Path, name: str, how) -> Path:
    return how(tmp_path / (f"{name}.jsonl.gz" if name == "gzip-bomb" else f"{name}.jsonl"))


def one_line_error(capsys, code: int, path: Path, message: str) -> None:
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gputui: error: {path}"), err
    assert re.search(message, lines[0]), lines[0]


@pytest.mark.parametrize("name, how, message", CASES, ids=IDS)
def test_report_refuses_in_one_line_naming_the_file_line_and_key(tmp_path, capsys, name, how, message):
    path = make(tmp_path, name, how)
    one_line_error(capsys, main(["report", str(path), "--out", str(tmp_path / "out")]), path, message)


@pytest.mark.parametrize("name, how, message", CASES, ids=IDS)
def test_compare_refuses_in_one_line_naming_the_file_line_and_key(tmp_path, capsys, name, how, message):
    path = make(tmp_path, name, how)
    one_line_error(capsys, main(["compare", str(path), str(SOURCE)]), path, message)


@pytest.mark.parametrize("name, how, message", CASES, ids=IDS)
def test_export_refuses_in_one_line_naming_the_file_line_and_key(tmp_path, capsys, name, how, message):
    path = make(tmp_path, name, how)
    one_line_error(capsys, main(["export", str(path), "--csv", str(tmp_path / "out.csv")]), path, message)


@pytest.mark.parametrize("name, how, message", CASES, ids=IDS)
def test_baseline_and_read_recording_refuse_naming_the_file_line_and_key(tmp_path, name, how, message):
    # read_recording is what replay and python -m gputui.diagnosis read through
    path = make(tmp_path, name, how)
    for read in (read_recording, baseline_from_recording):
        with pytest.raises(UserError) as refused:
            read(path)
        assert str(refused.value).startswith(str(path)) and re.search(message, str(refused.value))
        assert "\n" not in str(refused.value)


@pytest.mark.parametrize("name, how, message", CASES, ids=IDS)
def test_runs_lists_the_file_as_unreadable_says_why_and_exits_0(tmp_path, capsys, name, how, message):
    folder = runs_dir()
    folder.mkdir(parents=True)
    with_value(folder / "good.jsonl", 1, ["gputui"], "0.1.0")
    path = make(folder, name, how)
    assert main(["runs"]) == 0
    out, err = capsys.readouterr()
    rows = {line.split()[-1]: line for line in out.splitlines()[1:]}
    assert "unreadable" in rows[path.name] and "unreadable" not in rows["good.jsonl"], out
    # the runs listing reads the first and the last line only: the summary's line is "last line"
    where = message.replace(rf":{LAST}: ", ": last line: ")
    assert re.fullmatch(rf"gputui: unreadable: {re.escape(str(path))}{where}.*", err.strip()), err


def test_a_gzip_bomb_is_refused_within_a_second(tmp_path):
    path = gzip_bomb(tmp_path / "bomb.jsonl.gz", megabytes=400)
    started = time.monotonic()
    with pytest.raises(UserError, match="decompresses to over 250 times"):
        read_recording(path)
    assert time.monotonic() - started < 1.0


def test_decompression_is_bounded_in_bytes_and_time_whatever_the_ratio(tmp_path, monkeypatch):
    path = tmp_path / "run.jsonl.gz"
    path.write_bytes(zlib.compress(SOURCE.read_bytes(), wbits=GZIP_WBITS))
    monkeypatch.setattr(gzip_lines, "MAX_BYTES", 10_000)
    with pytest.raises(UserError, match=rf"^{re.escape(str(path))}: not read: it decompresses to over 10,000 bytes"):
        read_recording(path)
    monkeypatch.setattr(gzip_lines, "MAX_BYTES", 1 << 30)
    monkeypatch.setattr(gzip_lines, "MAX_SECONDS", -1.0)
    with pytest.raises(UserError, match=rf"^{re.escape(str(path))}: not read: decompressing it took over"):
        read_recording(path)


def test_a_big_compressed_recording_of_a_real_ratio_still_reads_whole(tmp_path):
    # ~70 MB of recording lines, past where the ratio cap starts (64 MiB); repeated whole
    # files lie farther apart than deflate's 32 KB window, so the ratio stays a real one
    plain = SOURCE.read_bytes() * 1200
    path = tmp_path / "big.jsonl.gz"
    path.write_bytes(zlib.compress(plain, level=1, wbits=GZIP_WBITS))
    with open(path, "rb") as handle:
        chunks = GzipChunks(path, handle)
        assert sum(len(chunk) for chunk in chunks) == len(plain) and not chunks.cut


def test_a_line_longer_than_the_cap_is_one_line(tmp_path, monkeypatch, capsys):
    from gputui.record import recording as record

    monkeypatch.setattr(record, "MAX_LINE_BYTES", 1000)
    path = with_value(tmp_path / "long.jsonl", 1, ["preset", "description"], "x" * 2000)
    one_line_error(capsys, main(["report", str(path)]), path, r":1: a line of [\d,]+ bytes \(expected at most 1,000")


@pytest.mark.parametrize(
    "line, keys, value, message",
    [
        (1, ["preset", "reference"], [{"gpu": ["H200"]}], r"header\.preset\.reference: expected a list or an object or null, got a list"),
        (1, ["attach_pid"], "42", r"header\.attach_pid: expected a whole number, got a string"),
        (LAST, ["gpus"], None, r"summary\.gpus: expected a list, got null"),
        (LAST, ["gpus", 0, "index"], "0", r"summary\.gpus\[0\]\.index: expected a whole number, got a string"),
        (LAST, ["findings"], [{"kind": "x", "id": 3}], r"summary\.findings\[0\]\.id: expected a string, got a number"),
        (LAST, ["phases"], [{"phase": 1}], r"summary\.phases\[0\]\.phase: expected a string, got a number"),
        (LAST, ["throughput", "ranks"], [{"median": 1.0}], r"summary\.throughput\.ranks\[0\]\.rank: expected a whole number \(it is missing\)"),
    ],
)
def test_every_field_a_face_reads_is_held_to_its_type(tmp_path, line, keys, value, message):
    path = with_value(tmp_path / "run.jsonl", line, keys, value)
    with pytest.raises(UserError, match=rf"^{re.escape(str(path))}:{line}: {message}"):
        read_recording(path)


def test_every_recording_in_the_repository_still_reads():
    from tests.support.process import REPO

    paths = [p for p in REPO.glob("docs/**/*.jsonl*") if p.name.endswith((".jsonl", ".jsonl.gz"))]
    assert len(paths) > 20
    for path in paths:
        read_recording(path)

"""Bad input never gives a traceback: presets files fuzzed (deep nesting included),
out-of-range arguments, recordings cut at any byte or with any byte changed."""

from __future__ import annotations

import os
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.cli.main import main
from gputui.errors import UserError
from gputui.presets.preset import parse_text
from gputui.record.recording import read_recording
from tests.support.lookback import TRACES

TRACE = TRACES / "input_bound_1worker.jsonl"
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# --- presets files ------------------------------------------------------------------------

KEYS = [
    "command",
    "framework",
    "model",
    "batch_size",
    "timeout",
    "env",
    "gpus",
    "reference",
    "diagnosis",
    "description",
    "cwd",
    "steps",
    "workers",
    "precision",
    "x",
]
SCALARS = st.sampled_from(
    ['"a"', "1", "-1", "0", "1.5", "inf", "-inf", "nan", "true", "[]", "{}", '"\\u0000"', "1979-05-27", '["python", "-c", "pass"]', "{a = 1}", "1e400", "0x10"]
)


@st.composite
def nested(draw) -> str:
    """An array or inline table nested from 1 to 3,000 deep (RecursionError territory)."""
    depth = draw(st.sampled_from([1, 2, 10, 100, 999, 1000, 1001, 3000]))
    inner = draw(SCALARS)
    if draw(st.booleans()):
        return "[" * depth + inner + "]" * depth
    return "{a = " * depth + inner + "}" * depth


VALUES = st.one_of(SCALARS, nested())
LINES = st.one_of(
    st.builds(lambda name: f"[presets.{name}]", st.sampled_from(["x", "smoke", '"a b"', "x.y", ""])),
    st.just("[diagnosis]"),
    st.builds(lambda key, value: f"{key} = {value}", st.sampled_from(KEYS), VALUES),
    st.builds(lambda key, value: f"presets.x.{key} = {value}", st.sampled_from(KEYS), VALUES),
    st.text(string.printable, max_size=30),
    st.text(max_size=10),
)


@FUZZ
@given(lines=st.lists(LINES, max_size=8))
def test_a_fuzzed_presets_file_loads_or_is_one_line_naming_it(tmp_path, lines):
    path = tmp_path / "presets.toml"
    text = "\n".join(lines) + "\n"
    try:
        parse_text(text, path)
    except UserError as exc:
        message = str(exc)
        assert message.startswith(f"{path}"), message
        assert "\n" not in message, message


@pytest.mark.parametrize("depth", [1000, 5000, 100_000])
@pytest.mark.parametrize("where", ["presets.x.env = {v}", "[presets.x]\ncommand = {v}", "[diagnosis]\nx = {v}", "x = {v}"])
def test_arrays_and_tables_nested_deeply_anywhere_are_one_line(tmp_path, where, depth):
    path = tmp_path / "presets.toml"
    for value in ("[" * depth + "1" + "]" * depth, "{a=" * depth + "1" + "}" * depth):
        with pytest.raises(UserError, match=f"^{path}: "):
            parse_text(where.format(v=value) + "\n", path)


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1e400"])
def test_a_preset_timeout_must_be_finite(tmp_path, value):
    path = tmp_path / "presets.toml"
    with pytest.raises(UserError, match=r"\[presets.x\].timeout: expected a finite number greater than 0"):
        parse_text(f'[presets.x]\ncommand = ["true"]\ntimeout = {value}\n', path)


# --- arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--interval", "inf"], "--interval: expected a number of seconds from 0.1 to 3600, got inf"),
        (["--interval", "nan"], "--interval: expected a number of seconds from 0.1 to 3600, got nan"),
        (["--interval", "1e300"], "--interval: expected a number of seconds from 0.1 to 3600, got 1e+300"),
        (["--interval=-1"], "--interval: expected 0.1 s or more, got -1.0"),
        (["--duration", "nan"], "--duration: expected a finite number of seconds greater than 0, got nan"),
        (["--duration", "inf"], "--duration: expected a finite number of seconds greater than 0, got inf"),
        (["--duration=-inf"], "--duration: expected a finite number of seconds greater than 0, got -inf"),
        (["--pid", "99999999999"], "--pid: expected a process id from 1 to "),
        (["--pid", "0"], "--pid: expected a process id from 1 to "),
        (["--pid=-5"], "--pid: expected a process id from 1 to "),
    ],
)
def test_out_of_range_arguments_are_one_line_and_exit_2(tmp_path, capsys, args, expected):
    out = tmp_path / "r.jsonl"
    assert main(["--record", str(out), "--headless", "--no-history", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gputui: error: {expected}") and err.count("\n") == 1, err
    assert not out.exists()


def test_a_pid_that_is_not_running_is_one_line(tmp_path, capsys):
    with open("/proc/sys/kernel/pid_max") as f:
        pid = int(f.read())  # the largest pid: almost never in use
    if os.path.exists(f"/proc/{pid}"):
        pytest.skip("the largest pid is in use here")
    assert main(["--record", str(tmp_path / "r.jsonl"), "--headless", "--no-history", "--pid", str(pid)]) == 2
    assert capsys.readouterr().err == f"gputui: error: --pid: no process {pid} is running\n"


# --- recordings --------------------------------------------------------------------------

TRACE_BYTES = TRACE.read_bytes()


def _read_or_one_line(path: Path) -> None:
    try:
        read_recording(path)
    except UserError as exc:
        assert str(exc).startswith(f"{path}") and "\n" not in str(exc), str(exc)


@FUZZ
@given(cut=st.integers(0, len(TRACE_BYTES)))
def test_a_recording_cut_at_any_byte_reads_to_its_last_whole_line_or_is_one_line(tmp_path, cut):
    path = tmp_path / "cut.jsonl"
    path.write_bytes(TRACE_BYTES[:cut])
    _read_or_one_line(path)
    whole = TRACE_BYTES[:cut].count(b"\n")
    if whole >= 1:  # the header is whole: it reads, and what is whole is all there
        rec = read_recording(path)
        kept = 1 + len(rec.samples) + len(rec.events) + (rec.summary is not None)
        assert kept == whole
        assert (rec.cut is None) == (cut == len(TRACE_BYTES))


@FUZZ
@given(at=st.integers(0, len(TRACE_BYTES) - 1), byte=st.integers(0, 255))
def test_a_recording_with_any_byte_changed_reads_or_is_one_line(tmp_path, at, byte):
    path = tmp_path / "corrupt.jsonl"
    path.write_bytes(TRACE_BYTES[:at] + bytes([byte]) + TRACE_BYTES[at + 1 :])
    _read_or_one_line(path)


@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n\x00\x00", b"not json\n", b"[1, 2]\n", b"\xff\xfe\n", b'{"type": "header", "schema": 2}\n', b"\n\n\n"])
def test_files_that_are_not_recordings_are_one_line(tmp_path, content):
    path = tmp_path / "odd.jsonl"
    path.write_bytes(content)
    with pytest.raises(UserError):
        read_recording(path)
    _read_or_one_line(path)

"""Recordings read back: JSON Lines that :class:`~gputui.record.recorder.Recorder` wrote
as a session ran, each line checked.

Line 1 is the header, then ``sample`` and ``event`` lines in time order, then one
``summary`` line.  A file cut by SIGKILL or a power loss reads back up to its last whole
line, and the reader says it was cut; a path ending in ``.gz`` is read transparently.
The format is documented in docs/record-format.md.
"""

from __future__ import annotations

import json
import logging

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux: recordings just are not marked live
    fcntl = None  # type: ignore[assignment]
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.errors import UserError
from gputui.model import Sample, from_dict
from gputui.protocol import JsonObject
from gputui.record import events as ev
from gputui.record.codec import Wrong, check
from gputui.record.events import Event
from gputui.record.gzip_lines import MAX_BYTES, is_gzip_path, read_gzip
from gputui.record.schema import EVENT_SHAPES, SCHEMA_VERSION, Header, Summary
from gputui.text_files import open_regular_file, read_bytes_bounded

log = logging.getLogger(__name__)


@dataclass
class Recording:
    path: Path
    header: Header
    samples: list[Sample] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    summary: Summary | None = None
    cut: str | None = None  # why the file ends early, if it does
    live: bool = False  # a recorder is still writing it: it ends where the run has got to

    def events_of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]


def recording_stem(path: Path) -> str:
    """The file's name without ``.jsonl`` or ``.jsonl.gz``: how reports label a run."""
    return path.name.removesuffix(".gz").removesuffix(".jsonl")


class NewerFormat(UserError):
    """A recording from a newer gputui: ``gputui runs`` lists it as such, not as unreadable."""


def check_schema(path: Path, header: JsonObject) -> None:
    """A header from a newer gputui is one clear line, not a misreading.  (A header
    without a schema is read as the current format.)"""
    schema = header.get("schema", SCHEMA_VERSION)
    if isinstance(schema, bool) or not isinstance(schema, int):
        raise UserError(f"{path}:1: not a gputui recording (the header's schema is not a version number)")
    if schema > SCHEMA_VERSION:
        raise NewerFormat(f"{path}:1: recording format {schema} is newer than this gputui reads (up to {SCHEMA_VERSION}): upgrade gputui")
    if schema < 1:
        raise UserError(f"{path}:1: not a gputui recording (format {schema} was never written; expected 1 to {SCHEMA_VERSION})")


def is_live(path: Path) -> bool:
    """A Recorder is writing this file now (it holds the file's lock)."""
    if fcntl is None:
        return False
    try:
        with open(path, "rb") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            except OSError:
                return False
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    except OSError:
        return False
    return False


# --- Reading: a file gputui did not write (or one edited since) is refused in one line ---
# The one validating reader: every face that reads a recording (report, compare, export,
# replay, --baseline, the diagnosis, and `gputui runs`, which reads only the header and the
# last line) parses each line with parse_line and holds it to its kind's shape with
# check_line.  The shapes are the dataclasses the reader builds (gputui.record.schema, the
# Sample, the event payloads), so that nothing downstream meets a string where it counts
# on a number.  A field of the wrong type makes the whole file refused (one line naming
# the file, the line, the key, what was expected and what was found) rather than
# dropped: a report that silently left out a figure would look like a run that never
# had one.  Keys the classes have no field for are let through (kept in the header's and
# the summary's ``extra``): a newer gputui's.

MAX_LINE_BYTES = 16 * 1024 * 1024  # gputui's lines are a few KB; a sample of 8 GPUs and a big process tree ~50 KB


def _check_header(record: JsonObject) -> None:
    check(record, Header, "header")
    from gputui.diagnosis_settings import KEYS, check_value  # diagnosis is heavier than this reader

    for key, value in (record.get("diagnosis") or {}).items():
        if key in KEYS:
            try:
                check_value(key, value)
            except ValueError as exc:
                raise Wrong(f"header.diagnosis.{key}", str(exc), value) from None


@dataclass(frozen=True)
class _EventLine:
    """What every event line has; its kind's keys are checked against EVENT_SHAPES."""

    t: float
    event: str


def _check_event(record: JsonObject) -> None:
    check(record, _EventLine, "event")
    shape = EVENT_SHAPES.get(record["event"])
    if shape is not None:
        check(record, shape, "event")


_LINE_SHAPES: dict[str, Callable[[JsonObject], None]] = {
    "header": _check_header,
    "sample": lambda record: check(record, Sample, "sample"),
    "event": _check_event,
    "summary": lambda record: check(record, Summary, "summary"),
}


def check_line(where: str, kind: Any, record: JsonObject) -> None:
    """Hold a parsed line (its ``type`` popped into ``kind``) to its kind's shape; a
    UserError ``WHERE: summary.throughput.median: expected a number, got a
    string`` otherwise.  ``where`` is ``FILE:LINE``."""
    shape = _LINE_SHAPES.get(kind) if isinstance(kind, str) else None
    try:
        if shape is None:
            raise Wrong("type", '"header", "sample", "event" or "summary"', kind)
        shape(record)
    except Wrong as exc:
        raise UserError(f"{where}: {exc}") from None


def _refuse_constant(name: str) -> None:
    raise Wrong(name, "a finite number or null (JSON has no NaN or Infinity, and gputui writes neither)")


def parse_line(where: str, line: bytes) -> JsonObject:
    """One line as a JSON object, or a UserError starting with ``where`` (``FILE:LINE``)."""
    if len(line) > MAX_LINE_BYTES:
        raise UserError(f"{where}: a line of {len(line):,} bytes (expected at most {MAX_LINE_BYTES:,}; gputui's lines are a few KB)")
    try:
        record = json.loads(line, parse_constant=_refuse_constant)
    except Wrong as exc:
        raise UserError(f"{where}: {exc}") from None
    except RecursionError:  # json's C decoder gives up near Python's recursion limit (~1,000 deep)
        raise UserError(f"{where}: JSON nested too deeply to be a gputui recording line") from None
    except ValueError:  # bad JSON, or bytes that are not UTF-8
        raise UserError(f"{where}: not a gputui recording line (expected a JSON object)") from None
    if not isinstance(record, dict):
        raise UserError(f"{where}: not a gputui recording line (expected a JSON object)")
    return record


def read_header_line(path: Path, line: bytes) -> Header:
    """The first line as a checked header: a UserError naming the file for anything
    else, or for a header from a newer gputui (check_schema's message)."""
    record = parse_line(f"{path}:1", line)
    if record.pop("type", None) != "header":
        raise UserError(f"{path}:1: not a gputui recording (expected a header line first)")
    check_schema(path, record)
    check_line(f"{path}:1", "header", record)
    return Header.from_dict(record)


def read_header(path: Path) -> Header:
    """A recording's header alone (its first line), checked as read_recording checks it."""
    try:
        with open_regular_file(path, "recording") as handle:
            first = handle.readline(MAX_LINE_BYTES + 1)
    except OSError as exc:
        raise UserError(f"{path}: cannot read the recording ({exc.strerror})") from None
    if not first.endswith(b"\n"):
        raise UserError(f"{path}: no whole header line yet" if len(first) <= MAX_LINE_BYTES else f"{path}:1: a line of over {MAX_LINE_BYTES:,} bytes")
    return read_header_line(path, first)


STREAM_CUT = "the compressed stream ends early: the file was cut while being written"


def read_recording_bytes(path: Path) -> tuple[bytes, bool]:
    """The recording's JSON Lines as bytes (a ``.gz`` file decompressed, within
    gzip_lines' bounds), and whether a compressed stream was cut before its end."""
    try:
        with open_regular_file(path, "recording") as handle:  # a FIFO is refused, not waited on
            if not is_gzip_path(path):
                return read_bytes_bounded(handle, path, "recording", MAX_BYTES), False
            return read_gzip(path, handle)
    except OSError as exc:
        raise UserError(f"{path}: cannot read the recording ({exc.strerror})") from None


def read_recording(path: Path) -> Recording:
    """Load a recording.  A file cut mid-run loads up to its last whole line."""
    raw, stream_cut = read_recording_bytes(path)
    lines = raw.split(b"\n")
    recording: Recording | None = None
    cut = STREAM_CUT if stream_cut else None
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        cut = f"the last line ({len(lines)}) is incomplete: the file was cut while being written"
        lines.pop()
    for number, line in enumerate(lines, start=1):
        if recording is None:
            recording = Recording(path=path, header=read_header_line(path, line))
            continue
        item = read_body_line(f"{path}:{number}", line)
        if isinstance(item, Sample):
            recording.samples.append(item)
        elif isinstance(item, Event):
            recording.events.append(item)
        else:
            recording.summary = item
    if recording is None:
        if raw:  # bytes, but not one whole line: not "empty", and not a recording either
            raise UserError(f"{path}: not a gputui recording: no complete line in its {len(raw):,} bytes")
        raise UserError(f"{path}: empty file, not a gputui recording")
    if recording.summary is None and is_live(path):
        recording.live = True  # still being written: its last line may be on its way, not cut
        return recording
    if recording.summary is None and cut is None:
        cut = "no summary: the recorder was stopped before it could finish"
    recording.cut = cut
    return recording


def read_body_line(where: str, line: bytes) -> Sample | Event | Summary:
    """A line after the header, checked and typed; a UserError starting with ``where``
    (``FILE:LINE``) for anything else, a second header included."""
    record = parse_line(where, line)
    kind = record.pop("type", None)
    check_line(where, kind, record)
    if kind == "sample":
        return from_dict(Sample, record)
    if kind == "event":
        return ev.event_from_dict(record)
    if kind == "summary":
        return Summary.from_dict(record)
    raise UserError(f'{where}: type: expected "sample", "event" or "summary" (the header is line 1 alone)')

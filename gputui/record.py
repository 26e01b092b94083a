"""Recordings: JSON Lines written as a session runs, and read back.

Line 1 is the header, then ``sample`` and ``event`` lines in time order, then one
``summary`` line.  Every line is flushed as it is written (and fsynced at most once a
second), so a file cut by SIGKILL or a power loss reads back up to its last whole line,
and the reader says it was cut.  The format is documented in docs/record-format.md.
"""

from __future__ import annotations

import json
import math
import os
import time

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux: recordings just are not marked live
    fcntl = None  # type: ignore[assignment]
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gputui.errors import UserError
from gputui.events import Event, Observer
from gputui.model import Sample, from_dict, to_dict

SCHEMA_VERSION = 1
FSYNC_EVERY_S = 1.0


def _finite(obj: Any) -> Any:
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def exists_message(path: Path) -> str:
    return f"{path}: already exists; not overwriting it (add --force to replace it, or pick another file)"


def check_record_target(path: Path, force: bool) -> None:
    """Refuse, before anything starts, to record over an existing file without --force."""
    if not force and (path.exists() or path.is_symlink()):
        raise UserError(exists_message(path))


class Recorder(Observer):
    """Writes a session to a JSON Lines file.

    Without ``overwrite`` an existing file is never replaced (the file is created
    exclusively, so a file appearing since the check is not clobbered either).  While
    it writes, the recorder holds an advisory lock on the file (released by the
    kernel even on SIGKILL), so readers can tell a live recording from a cut one.
    """

    def __init__(self, path: Path, *, overwrite: bool = True) -> None:
        self.path = path
        try:
            self._file: IO[str] = open(path, "w" if overwrite else "x", encoding="utf-8")
        except FileExistsError:
            raise UserError(exists_message(path)) from None
        except OSError as exc:
            raise UserError(f"{path}: cannot write the recording ({exc.strerror})") from None
        if fcntl is not None:
            try:
                fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                pass  # someone is reading it right now: the mark is only a hint
        self._last_sync = 0.0

    def _write(self, record: dict[str, Any]) -> None:
        if self._file.closed:
            return
        self._file.write(json.dumps(_finite(record), separators=(",", ":"), allow_nan=False) + "\n")
        self._file.flush()
        now = time.monotonic()
        if now - self._last_sync >= FSYNC_EVERY_S:
            os.fsync(self._file.fileno())
            self._last_sync = now

    def on_header(self, header: dict[str, Any]) -> None:
        self._write({"type": "header", **header})

    def on_sample(self, sample: Sample) -> None:
        self._write({"type": "sample", **to_dict(sample)})

    def on_event(self, event: Event) -> None:
        self._write({"type": "event", "t": round(event.t, 4), "event": event.kind, **event.data})

    def on_summary(self, summary: dict[str, Any]) -> None:
        self._write({"type": "summary", **summary})
        self.close()

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()


@dataclass
class Recording:
    path: Path
    header: dict[str, Any]
    samples: list[Sample] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    cut: str | None = None  # why the file ends early, if it does

    def events_of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]


def check_schema(path: Path, header: dict[str, Any]) -> None:
    """A header from a newer gputui is one clear line, not a misreading.  (A header
    without a schema is read as the current format.)"""
    schema = header.get("schema", SCHEMA_VERSION)
    if isinstance(schema, bool) or not isinstance(schema, int):
        raise UserError(f"{path}:1: not a gputui recording (the header's schema is not a version number)")
    if schema > SCHEMA_VERSION:
        raise UserError(f"{path}:1: recording format {schema} is newer than this gputui reads "
                        f"(up to {SCHEMA_VERSION}): upgrade gputui")


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


def read_recording(path: Path) -> Recording:
    """Load a recording.  A file cut mid-run loads up to its last whole line."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot read the recording ({exc.strerror})") from None
    lines = raw.split(b"\n")
    recording: Recording | None = None
    cut = None
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        cut = f"the last line ({len(lines)}) is incomplete: the file was cut while being written"
        lines.pop()
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("not an object")
        except ValueError:
            raise UserError(f"{path}:{number}: not a gputui recording line (expected a JSON object)") from None
        kind = record.pop("type", None)
        if recording is None:
            if kind != "header":
                raise UserError(f"{path}:{number}: not a gputui recording (expected a header line first)")
            check_schema(path, record)
            recording = Recording(path=path, header=record)
        elif kind == "sample":
            recording.samples.append(from_dict(Sample, record))
        elif kind == "event":
            recording.events.append(Event(t=record.pop("t", 0.0), kind=record.pop("event", "?"), data=record))
        elif kind == "summary":
            recording.summary = record
    if recording is None:
        raise UserError(f"{path}: empty file, not a gputui recording")
    if recording.summary is None and cut is None:
        cut = "no summary: the recorder was stopped before it could finish"
    recording.cut = cut
    return recording

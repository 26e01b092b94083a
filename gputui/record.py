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


class Recorder(Observer):
    """Writes a session to a JSON Lines file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._file: IO[str] = open(path, "w", encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{path}: cannot write the recording ({exc.strerror})") from None
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

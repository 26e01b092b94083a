"""Recordings: JSON Lines written as a session runs, and read back.

Line 1 is the header, then ``sample`` and ``event`` lines in time order, then one
``summary`` line.  Every line is flushed as it is written (and fsynced at most once a
second), so a file cut by SIGKILL or a power loss reads back up to its last whole line,
and the reader says it was cut.  A path ending in ``.gz`` is written gzip-compressed
(gputui/gzip_lines.py), sync-flushed at the fsync cadence, and read back transparently.
The format is documented in docs/record-format.md.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import json
import logging
import os
import time
import types
import typing

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux: recordings just are not marked live
    fcntl = None  # type: ignore[assignment]
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gputui import events as ev
from gputui.errors import UserError
from gputui.events import Event, Observer
from gputui.gzip_lines import GzipLineWriter, is_gzip_path, read_gzip
from gputui.model import GpuInfo, HostInfo, Sample, Throughput, from_dict, to_dict
from gputui.protocol import json_safe

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
FSYNC_EVERY_S = 1.0


def exists_message(path: Path) -> str:
    return f"{path}: already exists; not overwriting it (add --force to replace it, or pick another file)"


def check_record_target(path: Path, force: bool) -> None:
    """Refuse, before anything starts, to record over an existing file without --force."""
    if not force and (path.exists() or path.is_symlink()):
        raise UserError(exists_message(path))


def _json_line(record: dict[str, Any]) -> str:
    """One line of the recording.  NaN and infinity are rare (a driver's glitch), so the
    record is walked for them only when the plain encoding refuses one."""
    try:
        return json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
    except ValueError:
        return json.dumps(json_safe(record), separators=(",", ":"), allow_nan=False) + "\n"


class Recorder(Observer):
    """Writes a session to a JSON Lines file.

    Without ``overwrite`` an existing file is never replaced (the file is created
    exclusively, so a file appearing since the check is not clobbered either).  While
    it writes, the recorder holds an advisory lock on the file (released by the
    kernel even on SIGKILL), so readers can tell a live recording from a cut one.

    A failed write (disk full, I/O error, ``/dev/full``) never raises into the session:
    the recorder stops writing, keeps what is on disk (readable to its last whole
    line), sets :attr:`error` to one line saying why, and calls ``on_error`` with it once,
    so that whoever drives the session can stop the run.
    """

    def __init__(self, path: Path, *, overwrite: bool = True, on_error: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.on_error = on_error
        self.error: str | None = None
        try:
            self._gzip: GzipLineWriter | None = None
            if is_gzip_path(path):
                self._gzip = GzipLineWriter(open(path, "wb" if overwrite else "xb"))
                self._file: IO[str] | GzipLineWriter = self._gzip
            else:
                self._file = open(path, "w" if overwrite else "x", encoding="utf-8")
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
        try:
            self._file.write(_json_line(record))
            self._file.flush()
            now = time.monotonic()
            if now - self._last_sync >= FSYNC_EVERY_S:
                self._sync()
                self._last_sync = now
        except OSError as exc:
            self._fail(exc)

    def _sync(self) -> None:
        if self._gzip is not None:
            # The lines since the last sync become decodable only now: a gzip recording
            # killed mid-run loses at most the last FSYNC_EVERY_S of lines, not every
            # line since the start.  Not per line: each sync flush ends a deflate block.
            self._gzip.sync_flush()
        try:
            os.fsync(self._file.fileno())
        except OSError as exc:
            if exc.errno != errno.EINVAL:  # a device or pipe that cannot be synced is no failure
                raise

    def _fail(self, exc: OSError) -> None:
        """Stop writing; say why once.  Closing may fail again on the same buffered bytes."""
        try:
            self._file.close()
        except OSError:
            pass
        if self.error is not None:
            return
        self.error = f"{self.path}: cannot write the recording ({exc.strerror or exc})"
        log.info("%s", self.error)  # the owner shows it (on_error); stderr may be a dashboard
        if self.on_error is not None:
            self.on_error(self.error)

    def on_header(self, header: dict[str, Any]) -> None:
        self._write({"type": "header", **header})

    def on_sample(self, sample: Sample) -> None:
        self._write({"type": "sample", **to_dict(sample)})

    def on_event(self, event: Event) -> None:
        self._write({"type": "event", **ev.event_to_dict(event)})

    def on_summary(self, summary: dict[str, Any]) -> None:
        self._write({"type": "summary", **summary})
        self.close()

    def close(self) -> None:
        if not self._file.closed:
            try:
                if self._gzip is not None:
                    self._gzip.finish()
                self._file.flush()
                self._sync()
                self._file.close()
            except OSError as exc:
                self._fail(exc)


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


def recording_stem(path: Path) -> str:
    """The file's name without ``.jsonl`` or ``.jsonl.gz``: how reports label a run."""
    return path.name.removesuffix(".gz").removesuffix(".jsonl")


def check_schema(path: Path, header: dict[str, Any]) -> None:
    """A header from a newer gputui is one clear line, not a misreading.  (A header
    without a schema is read as the current format.)"""
    schema = header.get("schema", SCHEMA_VERSION)
    if isinstance(schema, bool) or not isinstance(schema, int):
        raise UserError(f"{path}:1: not a gputui recording (the header's schema is not a version number)")
    if schema > SCHEMA_VERSION:
        raise UserError(f"{path}:1: recording format {schema} is newer than this gputui reads (up to {SCHEMA_VERSION}): upgrade gputui")
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
# The shapes the reader holds lines to: what gputui writes, so that nothing downstream
# (diagnosis, reports, replay) meets a string where it counts on a number.  Keys not
# listed are let through: they are text or numbers no reader relies on.

_RUN_SETTINGS: dict[str, Any] = {  # what diagnosis reads from the preset and the workload line
    "framework": str | None,
    "model": str | None,
    "device": str | None,
    "pipeline": str | None,
    "precision": str | None,
    "batch_size": int | None,
    "workers": int | None,
    "find_max_batch": bool | None,
}
HEADER_FIELDS: dict[str, Any] = {
    "schema": int,
    "interval": float | None,
    "started_at": str | None,
    "gputui": str | None,
    "host": HostInfo | None,
    "gpus": list[GpuInfo] | None,
    "driver_version": str | None,
    "cuda_version": str | None,
    "gpu_unavailable_reason": str | None,
    "preset": (_RUN_SETTINGS, None),
    "command": list[str] | None,
    "env": dict[str, str] | None,
    "env_redacted": list[str] | None,
    "cwd": str | None,
    "attach_pid": int | None,
    "diagnosis": dict | None,
}
EVENT_FIELDS: dict[str, Any] = {
    ev.STARTED: {"pid": int | None, "command": list[str] | None},
    ev.WORKLOAD: _RUN_SETTINGS,
    ev.PHASE: {"phase": str | None},
    ev.THROUGHPUT: Throughput,
    ev.RANK_THROUGHPUT: Throughput,
    ev.OUTPUT: {"stream": str | None, "text": str | None},
    ev.OOM: {"message": str | None, "batch_size": int | None},
    ev.OUTCOME: {"kind": str, "ok": bool | None, "exit_code": int | None, "signal": str | None, "message": str | None, "duration_s": float | None},
    ev.STOPPING: {"reason": str | None},
    ev.FINDING: {
        "id": str,
        "kind": str,
        "state": str | None,
        "severity": str | None,
        "title": str | None,
        "since": float | None,
        "until": float | None,
        "evidence": dict | None,
        "advice": list[str] | None,
        "gpu": int | None,
    },
}
SUMMARY_FIELDS: dict[str, Any] = {
    "duration_s": float | None,
    "outcome": dict | None,
    "throughput": dict | None,
    "gpus": list[dict] | None,
    "findings": list[dict] | None,
}
_NAMES = {int: "a whole number", float: "a number", str: "a string", bool: "true or false", list: "a list", dict: "an object", type(None): "null"}


class _Wrong(Exception):
    """A value of the wrong shape: ``where`` (a dotted key) and what was expected."""

    def __init__(self, where: str, expected: str) -> None:
        super().__init__(f"{where}: expected {expected}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    required = {f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    return {f.name: (hints[f.name], f.name in required) for f in dataclasses.fields(cls)}


def _describe(hint: Any) -> str:
    if isinstance(hint, tuple):
        return " or ".join(_describe(type(None) if arg is None else arg) for arg in hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(hint))
    if isinstance(hint, dict) or dataclasses.is_dataclass(hint):
        return "an object"
    return _NAMES.get(typing.get_origin(hint) or hint, "a value")


def _check(value: Any, hint: Any, where: str) -> None:
    """Raise _Wrong unless ``value`` fits ``hint``: a type, ``X | None``, ``list[X]``,
    ``dict[str, X]``, a dataclass, a dict of key -> hint (every key optional), or a
    tuple of such hints (None in it: null)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if isinstance(hint, tuple):  # (a dict of key -> hint, None): that object, or null
        origin, args = typing.Union, tuple(type(None) if arg is None else arg for arg in hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        others = [arg for arg in args if arg is not type(None)]
        if len(others) == 1:  # X | None: say what inside X is wrong
            return _check(value, others[0], where) if value is not None else _fail(where, hint)
        if not any(_fits(value, arg, where) for arg in others):
            _fail(where, hint)
        return
    if isinstance(hint, dict) or dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise _Wrong(where, "an object")
        fields = {k: (h, False) for k, h in hint.items()} if isinstance(hint, dict) else _hints(hint if isinstance(hint, type) else type(hint))
        for key, (inner, required) in fields.items():
            if key in value:
                _check(value[key], inner, f"{where}.{key}" if where else key)
            elif required:
                raise _Wrong(f"{where}.{key}" if where else key, f"{_describe(inner)} (it is missing)")
        return
    if origin is list:
        if not isinstance(value, list):
            raise _Wrong(where, "a list")
        for index, item in enumerate(value):
            _check(item, args[0], f"{where}[{index}]")
        return
    if origin is dict:
        if not isinstance(value, dict):
            raise _Wrong(where, "an object")
        for key, item in value.items():
            _check(item, args[1], f"{where}.{key}")
        return
    if hint is Any:
        return
    if isinstance(value, bool) and hint is not bool:  # JSON true is no number
        raise _Wrong(where, _describe(hint))
    if hint is float and isinstance(value, (int, float)):
        return
    if not isinstance(value, hint):
        raise _Wrong(where, _describe(hint))


def _fits(value: Any, hint: Any, where: str) -> bool:
    try:
        _check(value, hint, where)
    except _Wrong:
        return False
    return True


def _fail(where: str, hint: Any) -> None:
    raise _Wrong(where, _describe(hint))


def _check_header(record: dict[str, Any]) -> None:
    _check(record, HEADER_FIELDS, "")
    from gputui.diagnosis.settings import KEYS, check_value  # diagnosis is heavier than this reader

    for key, value in (record.get("diagnosis") or {}).items():
        if key in KEYS:
            try:
                check_value(key, value)
            except ValueError as exc:
                raise _Wrong(f"diagnosis.{key}", str(exc)) from None


def _check_event(record: dict[str, Any]) -> None:
    _check(record, {"t": float, "event": str}, "")
    for key in ("t", "event"):
        if key not in record:
            raise _Wrong(key, f"{_describe(float if key == 't' else str)} (it is missing)")
    _check(record, EVENT_FIELDS.get(record["event"], {}), "")


def _refuse_constant(name: str) -> None:
    raise _Wrong(name, "a finite number or null (JSON has no NaN or Infinity, and gputui writes neither)")


def _parse(path: Path, number: int, line: bytes) -> dict[str, Any]:
    """One line as a JSON object, or a UserError naming the line."""
    try:
        record = json.loads(line, parse_constant=_refuse_constant)
    except _Wrong as exc:
        raise UserError(f"{path}:{number}: {exc}") from None
    except RecursionError:
        raise UserError(f"{path}:{number}: JSON nested too deeply to be a gputui recording line") from None
    except ValueError:  # bad JSON, or bytes that are not UTF-8
        raise UserError(f"{path}:{number}: not a gputui recording line (expected a JSON object)") from None
    if not isinstance(record, dict):
        raise UserError(f"{path}:{number}: not a gputui recording line (expected a JSON object)")
    return record


STREAM_CUT = "the compressed stream ends early: the file was cut while being written"


def read_recording_bytes(path: Path) -> tuple[bytes, bool]:
    """The recording's JSON Lines as bytes (a ``.gz`` file decompressed), and whether a
    compressed stream was cut before its end."""
    try:
        if not is_gzip_path(path):
            return path.read_bytes(), False
        with open(path, "rb") as handle:
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
        record = _parse(path, number, line)
        kind = record.pop("type", None)
        try:
            if recording is None:
                if kind != "header":
                    raise UserError(f"{path}:{number}: not a gputui recording (expected a header line first)")
                check_schema(path, record)
                _check_header(record)
                recording = Recording(path=path, header=record)
            elif kind == "sample":
                _check(record, Sample, "")
                recording.samples.append(from_dict(Sample, record))
            elif kind == "event":
                _check_event(record)
                recording.events.append(ev.event_from_dict(record))
            elif kind == "summary":
                _check(record, SUMMARY_FIELDS, "")
                recording.summary = record
            else:
                raise _Wrong("type", '"sample", "event" or "summary"')
        except _Wrong as exc:
            raise UserError(f"{path}:{number}: {exc}") from None
    if recording is None:
        if raw:  # bytes, but not one whole line: not "empty", and not a recording either
            raise UserError(f"{path}: not a gputui recording: no complete line in its {len(raw):,} bytes")
        raise UserError(f"{path}: empty file, not a gputui recording")
    if recording.summary is None and cut is None:
        cut = "no summary: the recorder was stopped before it could finish"
    recording.cut = cut
    return recording

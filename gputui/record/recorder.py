"""The recorder: a session written to a JSON Lines file as it runs.

Line 1 is the header, then ``sample`` and ``event`` lines in time order, then one
``summary`` line.  Routine lines (samples, readings, output) are flushed together when
the session has caught up, at most a second apart; any other line at once; the file is
fsynced at most once a second.  So a file cut by SIGKILL or a power loss reads back up to
its last whole line (:mod:`gputui.record.recording` reads it).  A path ending in ``.gz``
is written gzip-compressed (gputui/record/gzip_lines.py), sync-flushed at the fsync cadence.
The format is documented in docs/record-format.md.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import time

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux: recordings just are not marked live
    fcntl = None  # type: ignore[assignment]
from collections.abc import Callable
from pathlib import Path
from typing import IO

from gputui.errors import UserError
from gputui.model import Sample, to_dict
from gputui.protocol import JsonObject, json_safe
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.gzip_lines import GzipLineWriter, is_gzip_path
from gputui.record.observer import Observer
from gputui.record.schema import Header, Summary
from gputui.safe_write import refusal_for, refusal_of_kind

log = logging.getLogger(__name__)

FSYNC_EVERY_S = 1.0
# Routine lines (samples and ev.ROUTINE_EVENTS: readings, output, the probe's windows)
# are flushed together when the session has caught up (on_idle: once a batch of news,
# gputui.session.session.DISPATCH_BATCH_S), or this long after the first of them while
# it has not (a child's flood); any other record goes out at once, with the lines
# before it.  A write call per line was half the session's time under a million lines,
# and at a few lines a second each is a system call costing far more than in a burst.
FLUSH_HELD_S = 1.0
# How long the recorder waits for its file's lock: the others who take it (a reader
# asking whether the file is live, a prune about to remove it) hold it for an instant.
LOCK_WAIT_S = 10.0
_LOCK_RETRY_S = 0.01
_OPEN_TRIES = 5  # a file removed under us before we held its lock (a prune) is made anew


def exists_message(path: Path) -> str:
    return f"{path}: already exists; not overwriting it (add --force to replace it, or pick another file)"


def check_record_target(path: Path, force: bool) -> None:
    """Refuse, before anything starts, to record over an existing file without --force,
    and onto what no writer of gputui writes (gputui.safe_write: a directory, a block
    device, a socket), with or without it."""
    if not force and (path.exists() or path.is_symlink()):
        raise UserError(exists_message(path))
    refusal = refusal_for(path)
    if refusal is not None:
        raise UserError(f"{path}: cannot write the recording ({refusal.strerror})")


def _json_line(record: JsonObject) -> str:
    """One line of the recording.  NaN and infinity are rare (a driver's glitch), so the
    record is walked for them only when the plain encoding refuses one."""
    try:
        return json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
    except ValueError:
        return json.dumps(json_safe(record), separators=(",", ":"), allow_nan=False) + "\n"


def _opened_locked(path: str, flags: int) -> int:
    """open()'s opener: the file opened with its lock held (see the Recorder), and only
    then emptied, so that a file another recorder is writing is refused, not cut short.
    A file it creates is 0600 (one it replaces keeps its mode)."""
    for _ in range(_OPEN_TRIES):
        refusal = refusal_for(Path(path))  # never opened: opening a device can do things of its own
        if refusal is not None:
            raise refusal
        try:
            # Not blocking: a FIFO with no reader is refused at once, not waited on forever.
            fd = os.open(path, (flags & ~os.O_TRUNC) | os.O_NONBLOCK | os.O_NOCTTY, 0o600)
        except OSError as exc:
            if exc.errno == errno.ENXIO and stat.S_ISFIFO(_mode_of(path)):
                raise OSError(errno.ENXIO, "a FIFO with no reader", path) from None
            raise
        try:
            os.set_blocking(fd, True)
            refusal = refusal_of_kind(Path(path), stat.S_IFMT(os.fstat(fd).st_mode))  # what was opened, should it have changed since
            if refusal is not None:
                raise refusal
            if _lock_for_life(fd, Path(path)):
                if flags & os.O_TRUNC and stat.S_ISREG(os.fstat(fd).st_mode):
                    os.ftruncate(fd, 0)
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # removed before we held it: made anew, nothing written to it yet
    raise UserError(f"{path}: cannot write the recording (it was removed each time it was made)")


def _mode_of(path: str) -> int:
    try:
        return os.stat(path).st_mode
    except OSError:
        return 0


def _lock_for_life(fd: int, path: Path) -> bool:
    """Take ``fd``'s exclusive lock, waiting for an instant's holder (up to LOCK_WAIT_S);
    True once held while ``path`` still names the file (False: a prune removed it before
    we held the lock, and the caller makes it anew).  A file that is not a regular one (a
    device, a pipe: ``/dev/null`` may be shared by many runs) is not locked.  UserError
    when another process holds the lock all along: a live recording, not to be clobbered."""
    info = os.fstat(fd)
    if fcntl is None or not stat.S_ISREG(info.st_mode):
        return True
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise UserError(f"{path}: another process is writing it (it holds the file's lock); not writing it as well") from None
            time.sleep(_LOCK_RETRY_S)
        except OSError:
            return True  # a file system without locks: the mark is only missing, not wrong
    try:
        now = os.stat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)


class Recorder(Observer):
    """Writes a session to a JSON Lines file.

    Without ``overwrite`` an existing file is never replaced (the file is created
    exclusively, so a file appearing since the check is not clobbered either).  For as
    long as it writes, the recorder holds an exclusive advisory lock on the file (taken
    before its first line, waited for when someone holds it for an instant; released by
    the kernel even on SIGKILL): readers tell a live recording from a cut one by it, and
    a prune never removes a file whose lock it cannot take.

    A new file is created readable by its owner alone (0600): a recording holds the
    run's command line and its whole output, no other user's business; an existing one
    replaced with ``overwrite`` keeps its mode.

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
                self._gzip = GzipLineWriter(open(path, "wb" if overwrite else "xb", opener=_opened_locked))
                self._file: IO[str] | GzipLineWriter = self._gzip
            else:
                self._file = open(path, "w" if overwrite else "x", encoding="utf-8", opener=_opened_locked)
        except FileExistsError:
            raise UserError(exists_message(path)) from None
        except OSError as exc:
            raise UserError(f"{path}: cannot write the recording ({exc.strerror})") from None
        self._last_sync = 0.0
        self._held_since: float | None = None  # when the oldest line not yet flushed was written

    def _write(self, record: JsonObject, *, may_wait: bool = False) -> None:
        """Write one line; ``may_wait``: a routine line, flushed with the next other
        record, when the session is idle, or FLUSH_HELD_S after the oldest held line."""
        if self._file.closed:
            return
        try:
            self._file.write(_json_line(record))
            if may_wait:
                now = time.monotonic()
                if self._held_since is None:
                    self._held_since = now
                if now - self._held_since < FLUSH_HELD_S:
                    return
            self._flush()
        except OSError as exc:
            self._fail(exc)

    def _flush(self) -> None:
        self._file.flush()
        self._held_since = None
        now = time.monotonic()
        if now - self._last_sync >= FSYNC_EVERY_S:
            self._sync()
            self._last_sync = now

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

    def on_header(self, header: Header) -> None:
        self._write({"type": "header", **header.to_dict()})

    def on_sample(self, sample: Sample) -> None:
        self._write({"type": "sample", **to_dict(sample)}, may_wait=True)

    def on_event(self, event: Event) -> None:
        self._write({"type": "event", **ev.event_to_dict(event)}, may_wait=event.kind in ev.ROUTINE_EVENTS)

    def on_summary(self, summary: Summary) -> None:
        self._write({"type": "summary", **summary.to_dict()})
        self.close()

    def on_idle(self) -> None:
        if self._held_since is not None and not self._file.closed:
            try:
                self._flush()
            except OSError as exc:
                self._fail(exc)

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

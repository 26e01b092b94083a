"""Run history: every run the dashboard or ``--record`` makes is also kept as a
recording in ``$XDG_STATE_HOME/gputui/runs/`` (``~/.local/state/gputui/runs/``), a
folder its user alone can open (0700, as is ``$XDG_STATE_HOME/gputui``), of files its
user alone can read (0600): a looser folder or file is tightened when a run starts.

The history copy is written by a second :class:`~gputui.record.recorder.Recorder` as the run
goes, so a killed run still leaves its file.  A size cap (500 MB unless
``GPUTUI_HISTORY_MAX_MB`` says otherwise) prunes the oldest runs when a new one
starts.  ``--no-history`` or ``GPUTUI_NO_HISTORY=1`` turns it off.  Listing reads
only a file's first line (the header) and its last (the summary), so a long history
lists fast (a ``.jsonl.gz`` copied in is decompressed as a stream to find its last line),
and holds both to the shapes every reader uses (gputui.record.recording's ``parse_line`` and
``check_line``): a file that fails is listed as unreadable, with the reason.  No Textual here.
"""

from __future__ import annotations

import datetime as dt
import errno
import io
import os
import re
import stat
import time

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux: recordings are not marked live
    fcntl = None  # type: ignore[assignment]
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gputui.errors import UserError
from gputui.fmt import gpu_summary, short_gpu_name
from gputui.protocol import JsonObject
from gputui.record.gzip_lines import GzipChunks, is_gzip_path
from gputui.record.recorder import Recorder
from gputui.record.recording import MAX_LINE_BYTES, NewerFormat, check_line, is_live, parse_line, read_header_line
from gputui.record.schema import Header, Summary
from gputui.run.outcome import Outcome
from gputui.text_files import open_regular_file

NO_HISTORY_ENV = "GPUTUI_NO_HISTORY"
MAX_MB_ENV = "GPUTUI_HISTORY_MAX_MB"
DEFAULT_MAX_MB = 500.0
MB = 1000**2
SUFFIX = ".jsonl"
TAIL_CHUNK = 64 * 1024  # a summary line is a few KB; read more only when it is longer


def state_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """gputui's folder in the user's state home, which holds the run history and the live runs."""
    state_home = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "gputui"


def runs_dir(environ: Mapping[str, str] = os.environ) -> Path:
    return state_dir(environ) / "runs"


def make_private_folder(folder: Path) -> None:
    """``folder`` made if missing, and it and its files readable by their owner alone
    (0700, 0600): the runs in it hold whole command lines and outputs.  Parents it makes
    are 0700 too (as the XDG base directory rules ask), and gputui's own state folder is
    kept so.  A folder or file of ours left looser by an older gputui (or copied in) is
    tightened; a folder of another user's is refused (OSError)."""
    missing = []
    for parent in (folder, *folder.parents):
        if parent.exists():
            break
        missing.append(parent)
    for parent in reversed(missing):
        try:
            parent.mkdir(mode=0o700)
        except FileExistsError:
            pass  # made meanwhile by another gputui: checked below like any other
    folders = [folder.parent, folder] if folder.parent == state_dir() else [folder]
    for each in folders:
        info = each.stat()
        if info.st_uid != os.geteuid():
            raise PermissionError(errno.EPERM, f"owned by another user (uid {info.st_uid})", str(each))
        if info.st_mode & 0o077:
            each.chmod(0o700)
    _tighten_files(folder)


def _tighten_files(folder: Path) -> None:
    """The files in ``folder`` that others could read made 0600 (the owner's bits kept)."""
    uid = os.geteuid()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return  # a folder we may write but not list: what it holds is ours to keep as it is
    for entry in entries:
        try:
            if not entry.is_file(follow_symlinks=False):
                continue  # a link is not followed: what it points to is not ours to change
            info = entry.stat(follow_symlinks=False)
            if info.st_mode & 0o077 and info.st_uid == uid:
                os.chmod(entry.path, stat.S_IMODE(info.st_mode) & 0o700)
        except OSError:
            continue  # gone meanwhile (pruned, a live copy removed): nothing to tighten


def history_disabled(no_history_flag: bool, environ: Mapping[str, str] = os.environ) -> bool:
    value = environ.get(NO_HISTORY_ENV, "").strip().lower()
    return no_history_flag or value not in ("", "0", "false", "no", "off")


def cap_bytes(environ: Mapping[str, str] = os.environ) -> int:
    raw = environ.get(MAX_MB_ENV, "").strip()
    if not raw:
        return int(DEFAULT_MAX_MB * MB)
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):  # inf and nan too: int() of either raises
        raise UserError(f"{MAX_MB_ENV}: expected a finite size in MB greater than 0, got {raw!r}")
    return int(value * MB)


def outcome_word(outcome: Outcome | None) -> str:
    """How a finished run ended, in a word: ok, exit 3, stopped, oom, ..."""
    if outcome is None:
        return "ended"
    if outcome.ok:
        return "ok"
    if outcome.kind == "exited":
        return f"exit {outcome.exit_code}"
    return outcome.kind or "ended"


def label_for(preset_name: str | None, attach_pid: int | None) -> str:
    """What a run is of: its preset's name, or what it watched."""
    if preset_name:
        return preset_name
    return f"pid {attach_pid}" if attach_pid else "watch"


def run_label(header: Header) -> str:
    if header.check is not None:
        return "check"  # a gputui check: its header carries the check's options
    return label_for(header.preset_name, header.attach_pid)


@dataclass
class KeptRun:
    """One kept recording, as far as its header and summary line tell."""

    path: Path
    size: int
    started_at: str | None = None  # UTC, ISO 8601, from the header
    label: str = "?"
    gpus: list[str] = field(default_factory=list)
    outcome: str = "?"  # outcome_word, or "cut", "running", "unreadable", "newer format"
    message: str | None = None  # how the run ended, in a line ("stopped: by gputui stop (pid 4242)")
    figure: float | None = None  # the run's throughput figure (ThroughputSummary.run_figure), in ``unit``s per second
    figure_kind: str | None = None  # what the figure is: "mean" or "median"
    median: float | None = None  # the median of its throughput readings
    unit: str | None = None  # samples (also when absent), tokens or steps
    findings: int | None = None
    cut: str | None = None  # why the file ends early
    problem: str | None = None  # why it could not be read

    @property
    def started(self) -> dt.datetime | None:
        if self.started_at:
            try:
                return dt.datetime.fromisoformat(self.started_at)
            except ValueError:
                pass
        return None

    def sort_key(self) -> float:
        """Start time; a file without one sorts by when it was last written."""
        started = self.started
        if started is not None:
            return started.timestamp()
        try:
            return self.path.stat().st_mtime
        except OSError:
            return 0.0

    def local_time(self) -> str:
        started = self.started
        return started.astimezone().strftime("%Y-%m-%d %H:%M") if started else "?"

    def gpu_text(self, short: bool = True) -> str:
        names = [short_gpu_name(n) for n in self.gpus] if short else self.gpus
        return gpu_summary(names) or "no GPU"

    def to_json(self) -> JsonObject:
        return {
            "path": str(self.path),
            "name": self.path.name,
            "started_at": self.started_at,
            "preset": self.label,
            "gpus": self.gpus,
            "outcome": self.outcome,
            "message": self.message,
            "figure": self.figure,
            "figure_kind": self.figure_kind,
            "median": self.median,
            "unit": self.unit or "samples",
            "findings": self.findings,
            "cut": self.cut,
            "problem": self.problem,
            "size_bytes": self.size,
        }


def _too_long(path: Path) -> UserError:
    return UserError(f"{path}: a line of over {MAX_LINE_BYTES:,} bytes (expected at most that; gputui's lines are a few KB)")


def _last_line(path: Path, handle, size: int) -> tuple[bytes | None, bool]:
    """(the last whole line, whether the file ends with a newline)."""
    if size == 0:
        return None, False
    handle.seek(size - 1)
    whole = handle.read(1) == b"\n"
    chunk = TAIL_CHUNK
    while True:
        start = max(0, size - chunk)
        handle.seek(start)
        tail = handle.read(size - start)
        body = tail[:-1] if whole else tail
        cut_at = body.rfind(b"\n")
        if cut_at >= 0 or start == 0:
            return (body[cut_at + 1 :] if whole else None), whole
        if chunk > MAX_LINE_BYTES:
            raise _too_long(path)
        chunk *= 4


def _plain_ends(path: Path, size: int) -> tuple[bytes, bytes | None, bool]:
    """(the first line, the last whole line, whether it ends with a newline) of a plain file."""
    with open_regular_file(path, "recording") as handle:  # a FIFO in the folder is not waited on
        first = handle.readline(MAX_LINE_BYTES + 1)
        if len(first) > MAX_LINE_BYTES:
            raise _too_long(path)
        return (first, *_last_line(path, handle, size))


def _gzip_ends(path: Path) -> tuple[bytes, bytes | None, bool]:
    """(the first line, the last whole line, whether it ends with a newline) of a ``.gz``
    recording.  It has no seekable end, so it is decompressed as a stream (within
    gzip_lines' bounds), keeping only the first line and the tail from the last whole
    line on."""
    head = tail = b""
    with open_regular_file(path, "recording") as handle:
        for chunk in GzipChunks(path, handle):
            if b"\n" not in head and len(head) <= MAX_LINE_BYTES:
                head += chunk
            tail += chunk
            end = tail.rfind(b"\n")
            start = tail.rfind(b"\n", 0, end) if end > 0 else -1
            if start >= 0:
                tail = tail[start + 1 :]
            elif len(tail) > 2 * MAX_LINE_BYTES:  # no line ends in it: one line is too long
                raise _too_long(path)
    last, whole = _last_line(path, io.BytesIO(tail), len(tail))
    return head.split(b"\n", 1)[0], last, whole


def _read_ends(path: Path, size: int) -> tuple[bytes, bytes | None, bool]:
    return _gzip_ends(path) if is_gzip_path(path) else _plain_ends(path, size)


def _summary_of(path: Path, last: bytes | None) -> Summary | None:
    """The last line as a checked summary; None when it is another kind of line (the
    file ends before its summary).  A UserError when it is not a recording line, or a
    summary of the wrong shape."""
    if last is None:
        return None
    where = f"{path}: last line"
    record = parse_line(where, last)
    kind = record.pop("type", None)
    check_line(where, kind, record)
    return Summary.from_dict(record) if kind == "summary" else None


def read_kept_run(path: Path) -> KeptRun:
    """What ``gputui runs`` shows of one file: its header and last line only, held to the
    same shapes as a whole read (gputui.record.recording); a file that fails is listed as
    ``unreadable`` with the one-line reason in :attr:`KeptRun.problem`."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        return KeptRun(path=path, size=0, outcome="unreadable", problem=exc.strerror or str(exc))
    run = KeptRun(path=path, size=size)
    try:
        first, last, whole = _read_ends(path, size)
        header = read_header_line(path, first)
    except OSError as exc:
        run.outcome, run.problem = "unreadable", exc.strerror or str(exc)
        return run
    except NewerFormat as exc:
        run.outcome, run.problem = "newer format", str(exc)
        return run
    except UserError as exc:
        run.outcome, run.problem = "unreadable", str(exc)
        return run
    run.started_at = header.started_at
    run.label = run_label(header)
    run.gpus = [g.name for g in header.gpu_list]
    try:
        summary = _summary_of(path, last)
    except UserError as exc:
        run.outcome, run.problem = "unreadable", str(exc)
        return run
    if summary is None:
        live = is_live(path)
        run.outcome = "running" if live else "cut"
        if not live:
            run.cut = (
                "no summary: the recorder was stopped before it could finish" if whole else "the last line is incomplete: the file was cut while being written"
            )
        return run
    run.outcome = outcome_word(summary.outcome) if summary.outcome else "watched"
    run.message = summary.outcome.message if summary.outcome else None
    if summary.check is not None:
        run.outcome = f"check {summary.check.verdict or '?'}"
    throughput = summary.throughput
    if throughput is not None:
        run.figure, run.median, run.unit = throughput.run_figure, throughput.median, throughput.unit
        if run.figure is not None:
            run.figure_kind = "mean" if throughput.mean_is_figure else "median"
    run.findings = len(summary.findings or [])
    return run


def list_kept_runs(folder: Path) -> list[KeptRun]:
    """Every recording in ``folder``, newest first; an absent folder has none."""
    try:
        paths = [p for p in folder.iterdir() if p.name.endswith((SUFFIX, SUFFIX + ".gz")) and p.is_file()]
    except OSError:
        return []
    runs = [read_kept_run(p) for p in paths]
    runs.sort(key=lambda r: (r.sort_key(), r.path.name), reverse=True)
    return runs


def _safe_name(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.")[:80] or "run"


def new_recorder(folder: Path, label: str, now: Callable[[], float] = time.time) -> Recorder:
    """A private Recorder for a new run in ``folder``, named when it started and what it
    runs (``20261129-101502-resnet50.jsonl``, then ``-2``, ``-3``... within one second):
    the name ``gputui runs`` lists and ``attach``, ``replay`` and ``report`` take."""
    stamp = dt.datetime.fromtimestamp(now()).strftime("%Y%m%d-%H%M%S")
    base = f"{stamp}-{_safe_name(label)}"
    for n in range(1, 1000):
        path = folder / f"{base}{'' if n == 1 else f'-{n}'}{SUFFIX}"
        try:
            return Recorder(path, overwrite=False)
        except UserError:
            if not path.exists():
                raise
    raise UserError(f"{folder}: too many runs named {base}")


def remove_unless_live(path: Path) -> bool:
    """Remove ``path`` unless a Recorder is writing it; True when it is gone.

    Liveness is the recorder's lock, taken here too, and held while the file is removed:
    the listing's word for it ("running") was read a moment ago, and a run that was just
    starting had then made its file but not yet written its header (listed as unreadable).
    A recorder waits for an instant's holder, and makes its file anew should it be
    removed before it held the lock (gputui.record.recorder)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return True  # removed meanwhile (another prune)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        path.unlink()  # a link in the folder is no run's: removing it touches nothing it points to
        return True
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
        info, now = os.fstat(fd), os.stat(path, follow_symlinks=False)
        if (info.st_dev, info.st_ino) != (now.st_dev, now.st_ino):
            return False  # replaced since it was listed: the new file is judged next time
        path.unlink()
        return True
    except FileNotFoundError:
        return True
    finally:
        os.close(fd)  # the lock goes with it


@dataclass
class Pruned:
    removed: list[KeptRun]
    kept: list[KeptRun]

    @property
    def freed(self) -> int:
        return sum(r.size for r in self.removed)


class RunHistory:
    """The runs folder: new history files, and pruning."""

    def __init__(self, folder: Path, cap: int = int(DEFAULT_MAX_MB * MB)) -> None:
        self.folder = folder
        self.cap = cap
        self._warned = False

    @classmethod
    def from_environment(cls, no_history_flag: bool = False, environ: Mapping[str, str] = os.environ) -> RunHistory | None:
        """The history the user asked for, or None when they opted out."""
        if history_disabled(no_history_flag, environ):
            return None
        return cls(runs_dir(environ), cap_bytes(environ))

    def runs(self) -> list[KeptRun]:
        return list_kept_runs(self.folder)

    def start_recording(self, label: str, warn: Callable[[str], None], now: Callable[[], float] = time.time) -> Recorder | None:
        """A Recorder for a new run's history file, after pruning to the cap; None
        (with one warning, the first time) when the folder cannot be written."""
        try:
            make_private_folder(self.folder)
            self.prune_to_cap()
            return new_recorder(self.folder, label, now)
        except (OSError, UserError) as exc:
            if not self._warned:
                self._warned = True
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                warn(f"run history off: cannot write to {self.folder} ({reason})")
            return None

    def prune_to_cap(self) -> Pruned:
        """Remove the oldest runs until the rest fit in the cap."""
        runs = self.runs()
        total = sum(r.size for r in runs)
        doomed = []
        for run in reversed(runs):  # oldest first
            if total <= self.cap:
                break
            if run.outcome == "running":
                continue
            doomed.append(run)
            total -= run.size
        return self._remove(runs, doomed)

    def prune(self, keep: int | None = None, older_than_days: float | None = None, now: Callable[[], float] = time.time) -> Pruned:
        """Remove all but the newest ``keep`` runs, and runs older than the days given."""
        runs = self.runs()
        cutoff = now() - older_than_days * 86400 if older_than_days is not None else None
        doomed = []
        for i, run in enumerate(runs):
            if run.outcome == "running":
                continue
            if (keep is not None and i >= keep) or (cutoff is not None and run.sort_key() < cutoff):
                doomed.append(run)
        return self._remove(runs, doomed)

    def _remove(self, runs: list[KeptRun], doomed: list[KeptRun]) -> Pruned:
        removed = []
        for run in doomed:
            try:
                if not remove_unless_live(run.path):
                    continue  # a recorder holds it: a live run's, whatever its lines say so far
            except OSError:
                continue  # left for next time; a run starting must not fail on it
            removed.append(run)
        gone = {r.path for r in removed}
        return Pruned(removed=removed, kept=[r for r in runs if r.path not in gone])

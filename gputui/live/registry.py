"""Where live runs are listed: one entry per run, in a folder only its user can open.

``$XDG_STATE_HOME/gputui/live/`` (``~/.local/state/gputui/live/``), mode 0700, holds for
each run that is going ``NAME.json`` (its :class:`LiveRun`: the process that owns it, the
file viewers follow) and, while asked, ``NAME.stop`` (gputui.live.stop_request).  Not
``$XDG_RUNTIME_DIR``: systemd-logind removes ``/run/user/UID`` when the user's last
session ends, and a dropped SSH session is often exactly that (tmux keeps its sockets
in ``/tmp/tmux-UID`` for the same reason).

An entry is live while its process is: the same pid with the same start time, so a pid
reused after a crash is not taken for the run.  An entry whose process is gone (a
SIGKILLed run) is stale: listing removes it, and the run reads as ended (its recording
as cut).  Entries are written atomically, 0600, by the run itself.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from gputui.errors import UserError
from gputui.protocol import JsonObject
from gputui.record.history import make_private_folder, state_dir
from gputui.safe_write import write_atomic

ENTRY_SUFFIX = ".json"
START_TIME_SLACK_S = 0.05  # psutil's create_time is read from /proc in clock ticks


def live_dir(environ: Mapping[str, str] = os.environ) -> Path:
    return state_dir(environ) / "live"


def process_start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), None when there is none
    (or only its zombie, which has ended and waits for its parent to collect it)."""
    try:
        process = psutil.Process(pid)
        return None if process.status() == psutil.STATUS_ZOMBIE else process.create_time()
    except psutil.Error:
        return None


@dataclass(frozen=True)
class LiveRun:
    """One run that is going, as its entry says."""

    name: str  # the run's name: its history file's stem ("20261129-101502-resnet50")
    pid: int  # the process that owns the run (its Session, samplers and recorder)
    pid_started: float  # that process's start time: a reused pid is not this run
    started_at: str  # UTC, ISO 8601
    label: str  # what it runs: a preset's name, "pid 123", "watch"
    recording: Path  # the file viewers follow (the history copy, or a private one)
    record_path: Path | None = None  # --record FILE
    kept_path: Path | None = None  # its copy in the run history
    detached: bool = False  # started apart from any terminal (the dashboard's runs, --detach)
    notes: tuple[str, ...] = ()  # what its start had to say (no history, ...)

    def alive(self) -> bool:
        started = process_start_time(self.pid)
        return started is not None and abs(started - self.pid_started) <= START_TIME_SLACK_S

    def elapsed_s(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.pid_started)

    def to_json(self) -> JsonObject:
        data = asdict(self)
        data["notes"] = list(self.notes)
        for key in ("recording", "record_path", "kept_path"):
            data[key] = None if data[key] is None else str(data[key])
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LiveRun:
        """An entry as written by :meth:`to_json`; ValueError for anything else."""
        try:
            paths = {key: None if data.get(key) is None else Path(data[key]) for key in ("record_path", "kept_path")}
            run = cls(
                name=str(data["name"]),
                pid=int(data["pid"]),
                pid_started=float(data["pid_started"]),
                started_at=str(data["started_at"]),
                label=str(data["label"]),
                recording=Path(data["recording"]),
                detached=bool(data.get("detached", False)),
                notes=tuple(str(note) for note in data.get("notes") or []),
                **paths,
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a live run entry: {exc}") from None
        if "/" in run.name or run.name.startswith("."):
            raise ValueError(f"not a live run's name: {run.name!r}")
        return run


class Registry:
    """The live runs folder."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or live_dir()

    def prepare(self) -> Path:
        """The folder, made if missing and private (0700); OSError if it cannot be."""
        make_private_folder(self.folder)
        return self.folder

    def entry_path(self, name: str) -> Path:
        return self.folder / f"{name}{ENTRY_SUFFIX}"

    def add(self, run: LiveRun) -> None:
        """List ``run`` (OSError if the folder cannot be written)."""
        self.prepare()
        write_atomic(self.entry_path(run.name), json.dumps(run.to_json(), indent=1) + "\n", private=True)

    def remove(self, run: LiveRun) -> None:
        """The run has ended: its entry, a stop request it did not read and its private
        follow copy go (the history copy and the --record file stay)."""
        doomed = [self.entry_path(run.name), self.folder / f"{run.name}.stop"]
        if run.recording.parent == self.folder:
            doomed.append(run.recording)
        for path in doomed:
            try:
                path.unlink()
            except OSError:
                pass

    def runs(self) -> list[LiveRun]:
        """The runs that are going, oldest first; stale entries are removed."""
        try:
            paths = sorted(p for p in self.folder.iterdir() if p.name.endswith(ENTRY_SUFFIX))
        except OSError:
            return []  # no folder yet (no run was ever started), or not ours to read
        found = []
        for path in paths:
            try:
                run = LiveRun.from_json(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue  # half a file can't be (entries are replaced whole): not one of ours
            if run.alive():
                found.append(run)
            else:
                self.remove(run)
        found.sort(key=lambda run: run.pid_started)
        return found

    def find(self, text: str) -> LiveRun:
        """The live run ``text`` names: its name (or the start of it), its pid, or one of
        its files; a UserError saying what is live otherwise."""
        runs = self.runs()
        if not runs:
            raise UserError(f"{text}: no run is live (gputui runs lists the ended ones)")
        wanted = text.removesuffix(".jsonl")
        exact = [run for run in runs if wanted in (run.name, str(run.pid)) or _names_file(run, text)]
        matches = exact or [run for run in runs if run.name.startswith(wanted) or run.label == text]
        if len(matches) == 1:
            return matches[0]
        known = ", ".join(run.name for run in runs)
        if not matches:
            raise UserError(f"{text}: no live run of that name or pid (live: {known})")
        raise UserError(f"{text}: names {len(matches)} live runs; expected one of: {', '.join(run.name for run in matches)}")


def _names_file(run: LiveRun, text: str) -> bool:
    try:
        given = Path(text).resolve()
    except (OSError, RuntimeError):
        return False
    return any(path is not None and path.resolve() == given for path in (run.recording, run.record_path, run.kept_path))

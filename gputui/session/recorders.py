"""Where a run is written, wired once for the headless recorder and the dashboard: the
--record file, whose write error stops the run (a recording is the point of it), and the
history copy, whose write error only warns (the user's own file still counts)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.record.history import RunHistory, label_for
from gputui.record.recording import Recorder

if TYPE_CHECKING:
    from gputui.presets.preset import Preset
    from gputui.session.session import Session


def run_recorders(
    session: Session,
    *,
    record_path: Path | None,
    overwrite: bool,
    history: RunHistory | None,
    preset: Preset | None,
    attach_pid: int | None,
    warn: Callable[[str], None],
    on_record_error: Callable[[str], None] | None = None,
) -> tuple[Recorder | None, Recorder | None]:
    """(the --record file's Recorder, the history copy's), either None where not asked
    for or, for the copy, where the history folder cannot be written (``warn`` said so).
    A --record file that cannot be opened is a UserError.  ``on_record_error`` hears a
    write error of the --record file before the run is stopped."""
    recording = None
    if record_path is not None:

        def stop(text: str) -> None:
            if on_record_error is not None:
                on_record_error(text)
            session.stop("cannot write the recording")

        recording = Recorder(record_path, overwrite=overwrite, on_error=stop)
    kept = history.start_recording(label_for(preset.name if preset else None, attach_pid), warn=warn) if history is not None else None
    if kept is not None:
        kept.on_error = lambda text: warn(f"run history copy: {text}")
    return recording, kept

"""The one-GPU baseline a data-parallel run's scaling is judged against, taken from a
recording of the same preset (``gputui --record run.jsonl --baseline one-gpu.jsonl``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gputui.errors import UserError


def baseline_from_recording(path: Path) -> dict[str, Any]:
    """``{"samples_per_sec", "source", "preset"}`` from a recording's summary: its
    measured median throughput.  The recording must be of a run on one GPU (no
    data-parallel ranks); a UserError naming the file says what is wrong otherwise."""
    from gputui.record import read_recording

    recording = read_recording(path)  # a UserError naming the file when it is not one
    throughput = (recording.summary or {}).get("throughput") or {}
    rate = throughput.get("median")
    if not isinstance(rate, (int, float)) or rate <= 0:
        raise UserError(f"--baseline {path}: expected a finished recording with a measured throughput in its summary")
    if (throughput.get("world_size") or 1) > 1:
        raise UserError(f"--baseline {path}: expected a one-GPU run, got one on {throughput['world_size']} ranks")
    return {"samples_per_sec": float(rate), "source": str(path),
            "preset": ((recording.header or {}).get("preset") or {}).get("name")}

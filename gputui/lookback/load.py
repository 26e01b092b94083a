"""Reading a recording for a look back, and recovering what a cut one lacks.

``gputui.record.recording.read_recording`` reads the lines; this adds what report, compare and
export need on top: a refusal of recordings from a newer format, the summary rebuilt
from samples and events when the file was cut before its summary line, and the
findings (re-diagnosed for recordings made without the diagnosis).
"""

from __future__ import annotations

import heapq
from pathlib import Path
from typing import Any

from gputui.errors import UserError
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.recording import SCHEMA_VERSION, Recording, read_recording
from gputui.session.summary import SummaryBuilder

CHECK_EVENT = ev.CHECK  # one recording event per check result


def load_recording(path: Path) -> Recording:
    """Read ``path``; a UserError (one line) for a missing file, a file that is not a
    recording, or one written by a newer gputui."""
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if path.is_dir():
        raise UserError(f"{path}: is a directory, expected a recording (.jsonl or .jsonl.gz)")
    recording = read_recording(path)
    schema = recording.header.get("schema")
    if not isinstance(schema, int):
        raise UserError(f"{path}:1: not a gputui recording (the header has no schema version)")
    if schema > SCHEMA_VERSION:
        raise UserError(f"{path}:1: recording format {schema} is newer than this gputui reads (up to {SCHEMA_VERSION}): upgrade gputui")
    return recording


def _in_time_order(recording: Recording):
    """Samples and events merged by time, events first on ties (a phase change
    announced with a sample applies to it), as the session emitted them."""
    tagged_events = ((e.t, 0, i, e) for i, e in enumerate(recording.events))
    tagged_samples = ((s.t, 1, i, s) for i, s in enumerate(recording.samples))
    for _t, which, _i, item in heapq.merge(tagged_events, tagged_samples, key=lambda x: x[:3]):
        yield which == 0, item


def run_summary(recording: Recording) -> dict[str, Any]:
    """The recording's summary, its throughput figure counted by today's rule (see
    :func:`todays_figure`); for a cut file, the same summary rebuilt from what it has."""
    if recording.summary is not None:
        return todays_figure(recording, recording.summary)
    builder = SummaryBuilder()
    for is_event, item in _in_time_order(recording):
        if is_event:
            builder.on_event(item)
        else:
            builder.on_sample(item)
    return builder.build()


#: The parts of a summary's throughput that come from how its figure is counted.
FIGURE_KEYS = ("mean", "figure", "bursty")


def todays_figure(recording: Recording, summary: dict[str, Any]) -> dict[str, Any]:
    """A recorded summary with its figure counted again from its readings: summaries from
    before the ``figure`` (gputui.model.run_figure) counted a job's start-up in its mean,
    and are otherwise known by their median.  Everything else stays as recorded."""
    throughput = summary.get("throughput")
    if not throughput or "figure" in throughput:
        return summary
    builder = SummaryBuilder()
    for event in recording.events_of(ev.THROUGHPUT):
        builder.on_event(event)
    counted = builder.build()["throughput"]
    kept = {key: value for key, value in throughput.items() if key not in FIGURE_KEYS}
    return {**summary, "throughput": {**kept, **{key: counted[key] for key in FIGURE_KEYS if key in counted}}}


def measured_rates(recording: Recording) -> list[float]:
    """The measured throughput readings (warm-up and the tool's final figure left out;
    every reading for tools without phases): the series the summary's median covers."""
    builder = SummaryBuilder()
    for event in recording.events_of(ev.THROUGHPUT):
        builder.on_event(event)
    return list(builder.rates)


def recorded_findings(recording: Recording) -> tuple[list[dict[str, Any]], bool]:
    """Each finding in its final state, and whether they were re-diagnosed here.

    The summary's list when there is one; for a cut file, the latest update of each
    finding event; for a recording made without the diagnosis (no ``diagnosis``
    settings in its header), a replay of today's diagnosis over its samples."""
    if recording.summary is not None and "findings" in recording.summary:
        return list(recording.summary["findings"]), False
    latest: dict[str, dict[str, Any]] = {}
    for event in recording.events_of(ev.FINDING):
        latest[_finding_id(event, len(latest))] = ev.payload_fields(event.payload)
    if latest or "diagnosis" in recording.header or is_check(recording):
        return list(latest.values()), False
    from gputui.diagnosis.engine import replay_recording

    replayed: dict[str, dict[str, Any]] = {}
    for event in replay_recording(recording):
        replayed[_finding_id(event, len(replayed))] = ev.payload_fields(event.payload)
    return list(replayed.values()), True


def _finding_id(event: Event, number: int) -> str:
    return event.payload.id if isinstance(event.payload, ev.Finding) else str(number)


def is_check(recording: Recording) -> bool:
    """A ``gputui check`` recording: its header carries the check's options."""
    return "check" in recording.header


def check_results(recording: Recording) -> list:
    """The recording's check results (CheckResult), in the order they were made."""
    from gputui.check.result import CheckResult

    return [CheckResult.from_dict(ev.payload_fields(e.payload)) for e in recording.events_of(CHECK_EVENT)]

"""Reading a recording for a look back, and recovering what a cut one lacks.

``gputui.record.recording.read_recording`` reads the lines; this adds what report, compare and
export need on top: a refusal of recordings from a newer format, the summary rebuilt
from samples and events when the file was cut before its summary line, and the
findings (re-diagnosed for recordings made without the diagnosis).
"""

from __future__ import annotations

import dataclasses
import heapq
import os
import stat
from pathlib import Path

from gputui.errors import UserError
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.recording import Recording, read_recording
from gputui.record.schema import CheckSummary, Summary
from gputui.session.summary import SummaryBuilder

CHECK_EVENT = ev.CHECK  # one recording event per check result


def find_recording(path: Path) -> Path:
    """FILE as given; else the kept run of that name (as ``gputui runs`` lists it), or the
    live run (its name, or its start)."""
    if path.is_absolute() or len(path.parts) > 1 or os.path.lexists(path):
        return path
    from gputui.record.history import SUFFIX, runs_dir

    for name in (path.name, path.name + SUFFIX):
        kept = runs_dir() / name
        if kept.exists():
            return kept
    from gputui.live.registry import Registry

    try:
        return Registry().find(path.name).recording
    except UserError:
        return path  # "no such file" says it best


def load_recording(path: Path) -> Recording:
    """Read ``path`` (or the run of that name: find_recording); a UserError (one line) for
    a missing file, a file that is not a recording, or one written by a newer gputui.  A
    live run's reads as far as it has got (``Recording.live``)."""
    path = find_recording(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:  # a folder of another user's: Permission denied
        raise UserError(f"{path}: cannot read the recording ({exc.strerror})") from None
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"{path}: is a directory, expected a recording (.jsonl or .jsonl.gz)")
    return read_recording(path)  # its header's schema checked (check_schema)


def _in_time_order(recording: Recording):
    """Samples and events merged by time, events first on ties (a phase change
    announced with a sample applies to it), as the session emitted them."""
    tagged_events = ((e.t, 0, i, e) for i, e in enumerate(recording.events))
    tagged_samples = ((s.t, 1, i, s) for i, s in enumerate(recording.samples))
    for _t, which, _i, item in heapq.merge(tagged_events, tagged_samples, key=lambda x: x[:3]):
        yield which == 0, item


def run_summary(recording: Recording) -> Summary:
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


def todays_figure(recording: Recording, summary: Summary) -> Summary:
    """A recorded summary with its figure counted again from its readings: summaries from
    before the ``figure`` (ThroughputSummary.run_figure) counted a job's start-up in its
    mean, and are otherwise known by their median.  Everything else stays as recorded."""
    throughput = summary.throughput
    if throughput is None or throughput.figure is not None:
        return summary
    builder = SummaryBuilder()
    for event in recording.events_of(ev.THROUGHPUT):
        builder.on_event(event)
    counted = builder.build().throughput
    assert counted is not None  # the builder always counts one
    recounted = {key: getattr(counted, key) for key in FIGURE_KEYS}
    return dataclasses.replace(summary, throughput=dataclasses.replace(throughput, **recounted))


def measured_rates(recording: Recording) -> list[float]:
    """The measured throughput readings (warm-up and the tool's final figure left out;
    every reading for tools without phases): the series the summary's median covers."""
    builder = SummaryBuilder()
    for event in recording.events_of(ev.THROUGHPUT):
        builder.on_event(event)
    return list(builder.rates)


def recorded_findings(recording: Recording) -> tuple[list[ev.Finding], bool]:
    """Each finding in its final state, and whether they were re-diagnosed here.

    The summary's list when there is one; for a cut file, the latest update of each
    finding event; for a recording made without the diagnosis (no ``diagnosis``
    settings in its header), a replay of today's diagnosis over its samples."""
    if recording.summary is not None and recording.summary.findings is not None:
        return list(recording.summary.findings), False
    latest = _latest_findings(recording.events_of(ev.FINDING))
    if latest or recording.header.diagnosis is not None or is_check(recording):
        return latest, False
    from gputui.diagnosis import replay_recording

    return _latest_findings(replay_recording(recording)), True


def _latest_findings(events: list[Event]) -> list[ev.Finding]:
    """The latest update of each finding, in the order they first came."""
    latest: dict[str, ev.Finding] = {}
    for event in events:
        if isinstance(event.payload, ev.Finding):
            latest[event.payload.id] = event.payload
    return list(latest.values())


def check_summary(recording: Recording) -> CheckSummary | None:
    """A check recording's verdict and counts, where its summary was written."""
    return recording.summary.check if recording.summary is not None else None


def is_check(recording: Recording) -> bool:
    """A ``gputui check`` recording: its header carries the check's options."""
    return recording.header.check is not None


def check_results(recording: Recording) -> list:
    """The recording's check results (CheckResult), in the order they were made."""
    from gputui.check.result import CheckResult

    return [CheckResult.from_dict(ev.payload_fields(e.payload)) for e in recording.events_of(CHECK_EVENT)]

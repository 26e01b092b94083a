"""Headers and summaries for tests, written as a recording holds them (a dict) and
built as the reader builds them: held to the schema first, so a test cannot hand a
face a shape no recording could have."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from gputui.record.codec import check, from_record
from gputui.record.recording import Recording
from gputui.record.schema import CheckSummary, Header, PresetRecord, Summary, ThroughputSummary
from gputui.run.outcome import Outcome

T = TypeVar("T")


def _built(cls: type[T], data: dict[str, Any], where: str) -> T:
    check(data, cls, where)
    return from_record(cls, data)


def make_header(data: dict[str, Any] | None = None, **fields: Any) -> Header:
    """A Header from a recording's header line (less its ``type``) and/or keyword fields."""
    return _built(Header, {**(data or {}), **fields}, "header")


def make_summary(data: dict[str, Any] | None = None, **fields: Any) -> Summary:
    """A Summary from a recording's summary line (less its ``type``) and/or keyword fields."""
    return _built(Summary, {**(data or {}), **fields}, "summary")


def outcome_of(recording: Recording) -> Outcome:
    """A finished recording's outcome (the test fails where it has none)."""
    assert recording.summary is not None and recording.summary.outcome is not None, recording.cut
    return recording.summary.outcome


def throughput_of(summary: Summary | None) -> ThroughputSummary:
    """A summary's throughput (the test fails where it has none)."""
    assert summary is not None and summary.throughput is not None
    return summary.throughput


def with_preset(recording: Recording, **changes: Any) -> Recording:
    """``recording`` with its header's preset changed (a key it has no field for goes in
    its ``extra``, as the reader would put it); the same Recording, for chaining."""
    preset = recording.header.preset or PresetRecord()
    fields = {k: v for k, v in changes.items() if k in preset.__dataclass_fields__}
    extra = {**preset.extra, **{k: v for k, v in changes.items() if k not in fields}}
    recording.header = dataclasses.replace(recording.header, preset=dataclasses.replace(preset, **fields, extra=extra))
    return recording


def check_of(recording: Recording) -> CheckSummary:
    """A check recording's verdict (the test fails where its summary has none)."""
    assert recording.summary is not None and recording.summary.check is not None, recording.cut
    return recording.summary.check

"""The events a Session tells its observers (gputui.record.observer) and writes to a
recording: one frozen payload class per kind."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from gputui.model import SAMPLES, Throughput, to_dict
from gputui.protocol import JsonObject
from gputui.run.outcome import Outcome

# Event kinds, in the order a run usually produces them.
STARTED = "started"  # the command was launched: pid, command
WORKLOAD = "workload"  # the workload's own start line: model, batch size, FLOPs per sample
PHASE = "phase"  # warm-up -> measure
THROUGHPUT = "throughput"  # one reading parsed from the output (a data-parallel run's: all ranks added)
RANK_THROUGHPUT = "rank_throughput"  # one rank's own reading in a data-parallel run (its ``rank``)
RESULT = "result"  # the workload's own final result line, whole
OUTPUT = "output"  # one line of the child's output (progress redraws are skipped)
OOM = "oom"  # the workload reported running out of memory
CHECK = "check"  # one gputui check result (gputui.check.result.CheckResult), kept whole
PROBE = "probe"  # the zero-code probe's report of one window of the training loop (gputui.probe)
PROBE_STATUS = "probe_status"  # the probe armed in a process, or switched itself off after an error
OUTCOME = "outcome"  # how the run ended
STOPPING = "stopping"  # gputui was asked to stop (key, signal, duration)
# A diagnosis finding opened, changed or closed.  Fields: id (stable for one finding),
# kind ("input_bound", "thermal", ...), state ("open" or "closed"), severity ("info",
# "warning", "critical"), title (one line), since, until (t, seconds), evidence (a dict
# of numbers), advice (a list of strings).
FINDING = "finding"
# News that comes steadily while a run goes: its readings, output lines and the probe's
# windows.  It can wait for the next batch: the dashboard draws it at its tick
# (gputui.view.bridge), the recorder flushes it when the session has caught up.
ROUTINE_EVENTS = frozenset({OUTPUT, THROUGHPUT, RANK_THROUGHPUT, PROBE})


# --- Payloads: one frozen dataclass per kind ----------------------------------------
# THROUGHPUT and RANK_THROUGHPUT carry gputui.model.Throughput; OUTCOME carries
# gputui.run.outcome.Outcome.  The workload's own protocol lines (WORKLOAD, RESULT, OOM)
# carry whatever keys the workload wrote, whole and in its order, so that a recording
# says exactly what the workload said; their classes name the keys gputui reads.


@dataclass(frozen=True)
class Started:
    pid: int | None = None
    command: list[str] | None = None


@dataclass(frozen=True)
class PhaseChange:
    phase: str | None = None


@dataclass(frozen=True)
class Output:
    stream: str | None = None
    text: str | None = None
    # A progress bar's redraw, ended by '\r': the next line of the output takes its place,
    # as on a terminal.  Absent for a line that ended.
    progress: bool | None = None


@dataclass(frozen=True)
class Stopping:
    reason: str | None = None


# A finding's closed vocabularies: strings on the wire, which the reader checks as strings
# (gputui.record.codec), so a newer gputui's words still read.
Severity = Literal["info", "warning", "critical"]
FindingState = Literal["open", "closed"]

# Its evidence: numbers and words by name, a list of words (straggler's reasons) or of such
# records (co_tenant's processes).  The reader builds its checks from type hints and cannot
# follow a recursive alias, so at run time evidence is any JSON object it lets through.
if TYPE_CHECKING:
    EvidenceValue = int | float | str | list[str] | list["Evidence"] | None
    Evidence = dict[str, EvidenceValue]
else:
    EvidenceValue = Any
    Evidence = dict[str, Any]


@dataclass(frozen=True)
class Finding:
    """One diagnosis finding as it opened, changed or closed."""

    id: str
    kind: str
    state: FindingState | None = "open"
    severity: Severity | None = None
    title: str | None = None
    since: float | None = None
    until: float | None = None
    evidence: Evidence | None = field(default_factory=dict)
    advice: list[str] | None = field(default_factory=list)
    gpu: int | None = None  # written only when the finding is one GPU's

    @property
    def is_open(self) -> bool:
        return self.state in (None, "open")


@dataclass(frozen=True)
class ProtocolLine:
    """A line the workload wrote through the protocol, kept whole (its keys in order)."""

    fields: Mapping[str, Any] = field(default_factory=dict)

    def _get(self, key: str, kind: type | tuple[type, ...]) -> Any:
        value = self.fields.get(key)
        if isinstance(value, bool) and kind is not bool:
            return None
        return value if isinstance(value, kind) else None


@dataclass(frozen=True)
class WorkloadInfo(ProtocolLine):
    """The workload's start line: model, batch size, pipeline, a data-parallel size."""

    @property
    def world_size(self) -> int | None:
        return self._get("world_size", int)

    @property
    def replicas(self) -> int | None:
        return self._get("replicas", int)

    def setting(self, key: str) -> Any:
        """One run setting it names (framework, pipeline, workers, ...), None when absent."""
        return self.fields.get(key)


@dataclass(frozen=True)
class Result(ProtocolLine):
    """The workload's own final result line."""

    @property
    def samples_per_sec(self) -> float | None:
        return self._get("samples_per_sec", (int, float))

    @property
    def peak_memory_bytes(self) -> int | float | None:
        return self._get("peak_memory_bytes", (int, float))

    @property
    def peak_memory_source(self) -> str | None:
        return self._get("peak_memory_source", str)

    @property
    def curve(self) -> Any:
        return self.fields.get("curve")


@dataclass(frozen=True)
class Oom(ProtocolLine):
    """The workload reported running out of memory."""

    @property
    def message(self) -> str | None:
        return self._get("message", str)

    @property
    def batch_size(self) -> int | None:
        return self._get("batch_size", int)


MIN_LOOKS = 10  # a window's share of data looks is read from at least this many looks


@dataclass(frozen=True)
class ProbeReport(ProtocolLine):
    """One window of a Python training loop, as the probe saw it: optimizer steps, the
    batches and samples fetched, and the time the loop waited for them."""

    @property
    def steps(self) -> int | None:
        return self._get("steps", int)

    @property
    def seconds(self) -> float | None:
        return self._get("seconds", (int, float))

    @property
    def evaluation(self) -> bool:
        """A window of evaluation: batches fetched with no backward or step between them
        (a window without the field is training, as the probe's first version sent)."""
        return self.fields.get("phase") == "evaluation"

    @property
    def ongoing(self) -> bool:
        """An evaluation window with more of the same evaluation to come."""
        return self.fields.get("ongoing") is True

    @property
    def data_wait_s(self) -> float | None:
        return self._get("data_wait_s", (int, float))

    @property
    def workers(self) -> int | None:
        return self._get("workers", int)

    @property
    def pid(self) -> int | None:
        return self._get("pid", int)

    @property
    def batches(self) -> int | None:
        return self._get("batches", int)

    @property
    def rank(self) -> int | None:
        """The data-parallel rank whose loop this window timed, where the probe knows it."""
        return self._get("rank", int)

    @property
    def looks(self) -> int | None:
        """How many times the probe's sampler looked at the loop's stack this window."""
        return self._get("looks", int)

    @property
    def data_looks(self) -> int | None:
        """How many of those looks found the loop doing data work itself."""
        return self._get("data_looks", int)

    @property
    def data_site(self) -> str | None:
        """The data work the sampler saw most, e.g. ``"get_batch (train.py:112)"``."""
        return self._get("data_site", str)

    @property
    def sampled_wait(self) -> bool:
        """True when the loop fetched no DataLoader batch and the data wait is the
        sampler's estimate (a nanoGPT-style ``get_batch()`` in the loop)."""
        looks, data = self.looks, self.data_looks
        return not self.batches and looks is not None and looks >= MIN_LOOKS and data is not None

    @property
    def loop_wait_s(self) -> float | None:
        """The time the loop spent on data this window: measured around each DataLoader
        batch where it fetched any, else estimated from the sampler's share of looks."""
        if self.sampled_wait and self.seconds:
            return self.seconds * min(1.0, (self.data_looks or 0) / (self.looks or 1))
        return self.data_wait_s

    @property
    def data_wait_share(self) -> float | None:
        """The share of the window the loop spent waiting for (or making) the next batch."""
        wait, seconds = self.loop_wait_s, self.seconds
        return min(1.0, wait / seconds) if wait is not None and seconds else None


@dataclass(frozen=True)
class ProbeStatus(ProtocolLine):
    """The probe armed in a process (``state`` "armed") or switched off (``"off"``, with
    the ``error`` that made it)."""


@dataclass(frozen=True)
class Fields(ProtocolLine):
    """The payload of a kind this module has no class for (``check`` results, a newer
    gputui's kinds): kept whole so that it is written back as it was read."""


Payload = Started | WorkloadInfo | PhaseChange | Throughput | Result | Output | Oom | ProbeReport | ProbeStatus | Outcome | Stopping | Finding | Fields

_CLASSES: dict[str, type] = {
    STARTED: Started,
    WORKLOAD: WorkloadInfo,
    PHASE: PhaseChange,
    THROUGHPUT: Throughput,
    RANK_THROUGHPUT: Throughput,
    RESULT: Result,
    OUTPUT: Output,
    OOM: Oom,
    PROBE: ProbeReport,
    PROBE_STATUS: ProbeStatus,
    OUTCOME: Outcome,
    STOPPING: Stopping,
    FINDING: Finding,
}
_DERIVED = {OUTCOME: {"ok"}}  # written for readers, computed again on reading


@dataclass(frozen=True)
class Event:
    t: float  # seconds since the session started
    kind: str
    payload: Payload
    # Keys a newer gputui wrote that this one has no field for: kept to be written back.
    extra: Mapping[str, Any] = field(default_factory=dict)
    # A live throughput reading, as observers hear it: the median of the run's readings so
    # far, this one included (SummaryBuilder.counted).  Not written to recordings.
    running_median: float | None = field(default=None, compare=False)

    @property
    def data(self) -> JsonObject:
        """The payload's keys as the recording writes them (a fresh copy), for tests and
        debugging; code reads the payload's attributes."""
        return {**payload_fields(self.payload), **self.extra}


def is_live_reading(event: Event) -> bool:
    """A throughput reading taken while the run goes (not the tool's own final figure)."""
    return event.kind == THROUGHPUT and isinstance(event.payload, Throughput) and not event.payload.final


# --- The recording's dicts: the recorder, the exporter and the JSON printers ----------


def payload_fields(payload: Payload) -> JsonObject:
    """A payload as the recording writes it (docs/record-format.md), keys in order."""
    if isinstance(payload, ProtocolLine):
        return dict(payload.fields)
    if isinstance(payload, Throughput):
        fields = to_dict(payload)  # None values left out
        if fields.get("unit") == SAMPLES:
            del fields["unit"]  # samples unless said otherwise, as in recordings made before units
        return fields
    if isinstance(payload, Outcome):
        return {
            "kind": payload.kind,
            "ok": payload.ok,
            "exit_code": payload.exit_code,
            "signal": payload.signal,
            "message": payload.message,
            "duration_s": round(payload.duration_s, 3) if payload.duration_s is not None else None,
        }
    out = {f.name: getattr(payload, f.name) for f in dataclasses.fields(payload)}
    if isinstance(payload, Finding) and payload.gpu is None:
        del out["gpu"]
    return out


def event_to_dict(event: Event) -> JsonObject:
    """An event as its recording line (less the ``type`` key)."""
    return {"t": round(event.t, 4), "event": event.kind, **payload_fields(event.payload), **event.extra}


def make_event(t: float, kind: str, fields: Mapping[str, Any]) -> Event:
    """The typed event for ``kind`` from its recorded ``fields``.  Keys this gputui has
    no field for are kept in ``extra``; kinds it has no class for become :class:`Fields`."""
    cls: Any = _CLASSES.get(kind)
    if cls is None:
        return Event(t, kind, Fields(dict(fields)))
    if issubclass(cls, ProtocolLine):
        return Event(t, kind, cls(dict(fields)))
    names = {f.name for f in dataclasses.fields(cls)}
    derived = _DERIVED.get(kind, set())
    known = {k: v for k, v in fields.items() if k in names}
    extra = {k: v for k, v in fields.items() if k not in names and k not in derived}
    try:
        return Event(t, kind, cls(**known), extra)
    except TypeError:  # a required key is missing: keep what there is, untyped
        return Event(t, kind, Fields(dict(fields)))


def event_from_dict(record: Mapping[str, Any]) -> Event:
    """A recording's event line (``t``, ``event`` and the payload's keys) as an Event."""
    fields = {k: v for k, v in record.items() if k not in ("type", "t", "event")}
    return make_event(float(record["t"]), str(record["event"]), fields)

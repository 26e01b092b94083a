"""gputui's JSON-lines protocol: how a benchmark worker tells gputui what it measured.

A protocol line is the marker, one space, and one JSON object on a single line::

    @gputui {"event": "start", "v": 1, "model": "resnet50", "batch_size": 32}
    @gputui {"event": "step", "phase": "warmup", "step": 1, "samples": 32, "seconds": 0.41}
    @gputui {"event": "step", "phase": "measure", "step": 11, "samples": 32, "seconds": 0.018}
    @gputui {"event": "result", "samples_per_sec": 1771.2, "p5": 1740.0, "p95": 1790.3, ...}
    @gputui {"event": "oom", "batch_size": 512, "message": "CUDA out of memory ..."}

``step`` lines may cover one step or a window of steps: ``samples / seconds`` is the
rate of that window.  ``phase`` is ``warmup`` or ``measure``; only measured windows
count towards the summary.

Both sides of the child boundary use this module: the benchmark worker
(``gputui.workloads``, child-only code) writes the lines and the core
(``gputui.run.throughput``, the session, ``gputui check``) reads them.  It imports nothing of
gputui and no ML framework (import-linter: ``protocol-and-catalog-are-leaves``).

Data-parallel runs (``torchrun``: one process per GPU) add ``rank`` and ``world_size``
to every line of every rank; gputui adds the ranks' rates into the run's throughput and
keeps each rank's own (gputui.run.throughput.RankTotals).  Lines without them are a
single-process run, as before::

    @gputui {"event": "step", "phase": "measure", "step": 11, "samples": 32, "seconds": 0.018, "rank": 1, "world_size": 2}
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO, TypedDict

MARKER = "@gputui "
VERSION = 1

WARMUP = "warmup"
MEASURE = "measure"
PHASES = (WARMUP, MEASURE)


def encode(event: str, **fields: Any) -> str:
    """One protocol line (without the newline)."""
    payload = {"event": event, **{k: v for k, v in fields.items() if v is not None}}
    return MARKER + json.dumps(payload, separators=(",", ":"), allow_nan=False)


def json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinity, at any depth, turned into None: JSON has
    neither (``encode`` refuses them, and a recording writes null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


#: A JSON object as ``json.loads`` gives it: the one type of the parse edge, where a
#: reader (the protocol, the recording, the live list) has not yet checked its keys.
JsonObject = dict[str, Any]


def decode(line: str) -> JsonObject | None:
    """The payload of a protocol line, or None for any other line (never raises)."""
    start = line.find(MARKER)
    if start < 0:
        return None
    try:
        payload = json.loads(line[start + len(MARKER) :])
    except (ValueError, RecursionError):
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("event"), str):
        return None
    return payload


def _number(value: Any) -> bool:
    """A JSON number (not a bool) that is finite (a whole number past float's range is not)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _rate(value: Any) -> bool:
    """A finite number > 0."""
    return _number(value) and value > 0


def _whole(value: Any) -> bool:
    """A JSON whole number >= 0 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _rate_or_none(value: Any) -> bool:
    """A rate, 0 (nothing measured) or null."""
    return value is None or (_number(value) and value >= 0)


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


# Per event, the fields gputui reads by type: (name, required, check).  A line whose
# fields fail these is not one of gputui's, whatever its marker says.
_FIELDS: dict[str, tuple[tuple[str, bool, Callable[[Any], bool]], ...]] = {
    "start": (("v", False, _whole), ("batch_size", False, _whole)),
    "step": (("samples", True, _rate), ("seconds", True, _rate), ("step", False, _whole), ("phase", False, _text)),
    "result": (("samples_per_sec", False, _rate_or_none),),
    "oom": (("message", False, _text), ("batch_size", False, _whole)),
    "trial": (("batch_size", True, _whole), ("fits", True, _flag)),
    "pipeline": (("images_per_sec", True, _rate_or_none),),
}
_RANK_FIELDS = ("rank", "world_size")
#: The events gputui's workloads write on their output.
OUTPUT_EVENTS = tuple(_FIELDS)


def read_line(line: str) -> JsonObject | None:
    """The payload of a well-formed protocol line on a run's output, or None (never
    raises).  Well-formed: the marker, then one JSON object of an event in OUTPUT_EVENTS
    whose fields have the types gputui reads.  Only such a line makes a run speak the
    protocol; any other line with the marker in it (a chat log naming @gputui, a
    half-written line) is ordinary output."""
    payload = decode(line)
    if payload is None or payload["event"] not in _FIELDS:
        return None
    for name, required, check in _FIELDS[payload["event"]]:
        if name in payload:
            if not check(payload[name]):
                return None
        elif required:
            return None
    if any(name in payload and not _whole(payload[name]) for name in _RANK_FIELDS):
        return None
    return payload


def rank_from_environment(environ: dict[str, str] | None = None) -> tuple[int | None, int | None]:
    """(rank, world_size) as torchrun sets them (RANK, WORLD_SIZE); (None, None) for a
    single process or values that are not whole numbers."""
    env = os.environ if environ is None else environ
    try:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    except (KeyError, ValueError):
        return None, None
    if world < 2 or not 0 <= rank < world:
        return None, None
    return rank, world


class Emitter:
    """Writes protocol lines to stdout (flushed at once, so gputui sees them live).
    With a ``rank`` and a ``world_size`` of 2 or more, every line carries both."""

    def __init__(self, stream: TextIO | None = None, *, rank: int | None = None, world_size: int | None = None) -> None:
        self._stream = stream or sys.stdout
        ranked = rank is not None and world_size is not None and world_size > 1
        self.rank = rank if ranked else None
        self.world_size = world_size if ranked else None

    def emit(self, event: str, **fields: Any) -> None:
        if self.rank is not None:
            fields = {**fields, "rank": self.rank, "world_size": self.world_size}
        self._stream.write(encode(event, **fields) + "\n")
        self._stream.flush()

    def start(self, **fields: Any) -> None:
        self.emit("start", v=VERSION, **fields)

    def step(self, phase: str, step: int, samples: float, seconds: float) -> None:
        self.emit("step", phase=phase, step=step, samples=samples, seconds=seconds)

    def result(self, **fields: Any) -> None:
        self.emit("result", **fields)

    def oom(self, **fields: Any) -> None:
        self.emit("oom", **fields)


# --- What the lines hold -------------------------------------------------------------
# The keys of the lines the workers write and gputui reads, declared once for both sides.
# On the wire every key may be missing (None is never written: ``encode`` leaves it out).


class RunInfo(TypedDict, total=False):
    """What a workload says of itself on its start, result and oom lines."""

    framework: str
    model: str
    precision: str
    device: str  # "cuda" or "cpu"
    peak_memory_source: str  # what peak_memory_bytes counts (the framework's allocator, ru_maxrss)


class StartLine(RunInfo, total=False):
    """``start``: the run's settings as the workload resolved them (batch_size, pipeline,
    image_size, ...); here the keys gputui reads by name."""

    batch_size: int
    flops_per_sample: float  # training FLOPs of one sample, where the workload counted them


class TrialLine(TypedDict):
    """One batch size tried by ``--find-max-batch`` (a ``trial`` line, and one point of a
    result's ``curve``)."""

    batch_size: int
    fits: bool
    samples_per_sec: float | None
    peak_memory_bytes: int | None
    message: str | None


class ResultLine(RunInfo, total=False):
    """``result``: the run's numbers (gputui.workloads.measure); a batch search's best
    batch and its curve; the smoke workload's checksum."""

    samples_per_sec: float  # the median of the measured windows' rates (or the tf-metal headline)
    p5: float
    p95: float
    mean: float  # measured samples / measured seconds
    steps: int
    batch_size: int
    windows: int
    samples: float
    seconds: float
    flops_per_sample: float  # training FLOPs of one sample, where the workload counted them
    achieved_tflops: float
    epochs: int
    statistic: str  # how samples_per_sec was computed
    method: str  # "steps" or "tf-metal"
    peak_memory_bytes: int
    mode: str  # "find-max-batch"
    max_batch_size: int
    best_batch_size: int
    best_samples_per_sec: float
    trials: int
    curve: list[TrialLine]
    checksum: int


class PipelineLine(TypedDict):
    """``pipeline``: the host image pipeline's rate (gputui.workloads.pipeline_rate)."""

    images_per_sec: float
    images: int
    seconds: float
    workers: int
    image_size: int
    augment: str

"""One check's result: what was measured, what was expected and why, and the verdict."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypedDict, cast

from gputui.check.result_data import CheckData, NoData
from gputui.protocol import JsonObject

Status = Literal["ok", "warn", "fail", "skipped", "info"]
Verdict = Literal["ok", "warn", "fail"]  # of several checks (``worst``), and of a whole check
Group = Literal["preflight", "micro", "workload", "under-load", "cost"]
Bound = Literal["at least", "at most"]

OK: Final = "ok"
WARN: Final = "warn"
FAIL: Final = "fail"
SKIPPED: Final = "skipped"  # could not be measured here; ``cause`` says why
INFO: Final = "info"  # a fact worth showing that has no expectation (versions, a GPU not in the table)
STATUSES: tuple[Status, ...] = (OK, WARN, FAIL, SKIPPED, INFO)

# Groups, in the order a check runs them.
PREFLIGHT: Final = "preflight"
MICRO: Final = "micro"
WORKLOAD: Final = "workload"
UNDER_LOAD: Final = "under-load"  # watched throughout the loaded stages: throttling, heat, XIDs
COST: Final = "cost"
GROUPS: tuple[Group, ...] = (PREFLIGHT, MICRO, WORKLOAD, UNDER_LOAD, COST)

# What ``expected`` is when it is not a target to reach: a floor or a ceiling. A ratio
# against either says nothing ("steal time 0 % is 0 % of the expected 5 %"), so none is given.
AT_LEAST: Final = "at least"
AT_MOST: Final = "at most"
BOUND_SIGN: dict[Bound, str] = {AT_LEAST: "≥", AT_MOST: "≤"}


_GPU_PART = re.compile(r"gpu(\d+)")


def name_and_gpu(check_id: str) -> tuple[str, int | None]:
    """A check's id without its GPU, and the GPU: ``micro.gpu0.matmul_bf16`` is
    (``micro.matmul_bf16``, 0), ``gpu1.pcie_link_loaded`` (``pcie_link_loaded``, 1), ``host.shm``
    (``host.shm``, None).  Fleets compare and Prometheus labels the same check by this name."""
    parts = check_id.split(".")
    gpus = [int(m.group(1)) for part in parts if (m := _GPU_PART.fullmatch(part))]
    if not gpus:
        return check_id, None
    return ".".join(part for part in parts if not _GPU_PART.fullmatch(part)), gpus[0]


def with_bound(text: str, bound: Bound | None) -> str:
    """An expected value as a table shows it: ``≤ 5.0 %`` for a ceiling, ``≥`` a floor."""
    return f"{BOUND_SIGN[bound]} {text}" if bound else text


@dataclass
class CheckResult:
    """One line of the verdict table; also one ``check`` event in the recording.

    ``id`` is stable across machines (``gpu0.power_limit``, ``host.shm``,
    ``micro.gpu0.matmul_bf16``) so that two machines' checks line up row by row.
    """

    id: str
    group: Group
    name: str
    status: Status
    value: float | str | None = None
    unit: str = ""
    expected: float | str | None = None
    expected_source: str | None = None  # where the expectation comes from
    gpu: int | None = None
    detail: str | None = None  # what was measured, in words (e.g. "Gen5 x16 while loaded")
    cause: str | None = None  # the likely cause when not ok; the reason when skipped
    advice: str | None = None  # what to do when not ok
    data: CheckData = field(default_factory=NoData)  # extra numbers (datasheet share, ...): gputui.check.result_data
    bound: Bound | None = None  # AT_LEAST or AT_MOST: ``expected`` is a floor or a ceiling

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown check status {self.status!r}")
        if self.bound not in (None, *BOUND_SIGN):
            raise ValueError(f"unknown bound {self.bound!r}")

    @property
    def ratio(self) -> float | None:
        """measured / expected, when both are numbers and the expectation is a target."""
        if self.bound is None and isinstance(self.value, (int, float)) and isinstance(self.expected, (int, float)) and self.expected:
            return self.value / self.expected
        return None

    def to_dict(self) -> JsonObject:
        """The result as JSON writes it (a ``check`` event, ``gputui check --json``): its one way out."""
        out: dict[str, object] = {"id": self.id, "group": self.group, "name": self.name, "status": self.status}
        for key in ("value", "unit", "expected", "expected_source", "bound", "gpu", "detail", "cause", "advice"):
            value = getattr(self, key)
            if value not in (None, ""):
                out[key] = value
        ratio = self.ratio
        if ratio is not None:
            out["ratio"] = round(ratio, 4)
        if self.data:
            out["data"] = self.data
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckResult:
        """Read back a ``check`` event (or a result of ``gputui check --json``): its one
        way in.  Unknown keys (newer writers) are ignored; the values are taken as written."""
        known = {
            k: data[k]
            for k in ("id", "group", "name", "status", "value", "unit", "expected", "expected_source", "bound", "gpu", "detail", "cause", "advice", "data")
            if k in data
        }
        if known.get("bound") not in (None, *BOUND_SIGN):
            del known["bound"]  # a newer writer's kind of bound: show the expectation plainly
        known.setdefault("group", PREFLIGHT)
        known.setdefault("name", known.get("id", "?"))
        if known.get("status") not in STATUSES:
            known["status"] = SKIPPED
        if "data" in known:
            known["data"] = cast(CheckData, known["data"])  # written by to_dict: one of result_data's shapes
        return cls(**known)


class ResultFields(TypedDict, total=False):
    """The fields of a result past its id, group, name, status and GPU: what a stage's
    result helper takes as keywords (``**fields: Unpack[ResultFields]``)."""

    value: float | str | None
    unit: str
    expected: float | str | None
    expected_source: str | None
    detail: str | None
    cause: str | None
    advice: str | None
    data: CheckData
    bound: Bound | None


def skipped(id: str, group: Group, name: str, reason: str, *, gpu: int | None = None) -> CheckResult:
    return CheckResult(id=id, group=group, name=name, status=SKIPPED, gpu=gpu, cause=reason)


def worst(statuses: list[Status]) -> Verdict:
    """The verdict of several checks: fail over warn over ok; only skipped/info is ok."""
    if FAIL in statuses:
        return FAIL
    if WARN in statuses:
        return WARN
    return OK


def exit_code(results: list[CheckResult]) -> int:
    """0 when every check is ok or warn (or skipped/info), 1 when one fails."""
    return 1 if any(r.status == FAIL for r in results) else 0

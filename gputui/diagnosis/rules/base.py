"""What every rule shares: :class:`Finding`, the :class:`Rule` interface and the small
helpers that turn a finding's series into evidence numbers.

A rule's :meth:`Rule.observe` returns an :class:`Observation` ``(level, obs)`` for one
sample: level 0 clear, 1 info, 2 warning, 3 critical, ``None`` when it cannot tell;
``obs`` holds the numbers the evidence is later computed from.  Holding and clearing
over time is not the rules' business: :mod:`gputui.diagnosis.hold` does it.
:meth:`Rule.describe` turns a finding's accumulated numbers into its
:class:`Description`: title, evidence and advice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal, NamedTuple

from gputui.diagnosis.context import Accum, Context, Obs, med, rnd
from gputui.diagnosis.hold import Hold
from gputui.diagnosis_settings import Settings
from gputui.model import GpuSample
from gputui.protocol import JsonObject
from gputui.record import events
from gputui.record.events import Evidence, EvidenceValue, FindingState, Severity

SEVERITIES: dict[int, Severity] = {1: "info", 2: "warning", 3: "critical"}
GIB = 1024**3
MIB = 1024**2
THERMAL_REASONS = ("SwThermalSlowdown", "HwThermalSlowdown")


@dataclass
class RuleFinding:
    id: str
    kind: str
    gpu: int | None
    severity: Severity
    since: float
    until: float
    opened_t: float
    state: FindingState = "open"
    level: int = 0
    acc: Accum = field(default_factory=Accum)
    rates: Accum = field(default_factory=Accum)
    baseline_rate: float | None = None
    count: int = 1  # event findings: how many times it happened
    data: JsonObject = field(default_factory=dict)  # event findings: what the event said (its JSON fields)
    title: str = ""
    evidence: Evidence = field(default_factory=dict)
    advice: list[str] = field(default_factory=list)

    def payload(self) -> events.Finding:
        """What a ``finding`` event says of it now (a frozen copy)."""
        return events.Finding(
            id=self.id,
            kind=self.kind,
            state=self.state,
            severity=self.severity,
            title=self.title,
            since=round(self.since, 4),
            until=round(self.until, 4),
            evidence=dict(self.evidence),
            advice=list(self.advice),
            gpu=self.gpu,
        )

    def series(self, key: str, since: float | None = None) -> list[float]:
        """This finding's values of ``key`` from ``since`` (default: its start) to its end."""
        return self.acc.values(key, until=self.until, since=self.since if since is None else since)

    def share(self, key: str, since: float | None = None) -> float | None:
        values = self.series(key, since)
        return sum(values) / len(values) if values else None

    def first_t(self, key: str) -> float | None:
        """When ``key`` was first non-zero within the finding."""
        values = self.acc.series.get(key)
        if values is None:
            return None
        for t, v in zip(self.acc.t, values):
            if t >= self.since and v == v and v > 0:
                return t
        return None

    def rate(self, since: float | None = None) -> float | None:
        return med(self.rates.values("rate", until=self.until, since=self.since if since is None else since))


@dataclass(frozen=True)
class Description:
    """What a rule says of a finding: a one-line title, the numbers behind it (written to
    the recording as they are) and advice, one line each."""

    title: str
    evidence: Evidence
    advice: list[str]


class Observation(NamedTuple):
    """What a rule saw in one sample: its level (0 clear, 1 info, 2 warning, 3 critical;
    None: cannot tell) and the numbers a finding's evidence is later computed from."""

    level: int | None
    obs: Obs


def clean(evidence: Mapping[str, EvidenceValue]) -> Evidence:
    """The evidence without its unknown (None) values."""
    return {k: v for k, v in evidence.items() if v is not None}


def percent(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return 100.0 * part / whole


def share_pct(value: float | None) -> float | None:
    return None if value is None else 100.0 * value


def gib(num: float | None) -> str:
    return "?" if num is None else f"{num / GIB:.1f}"


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def throughput_evidence(f: RuleFinding, since: float | None = None) -> Evidence:
    """Throughput during the finding (from ``since``), before it, and the drop."""
    during = f.rate(since)
    out: Evidence = {"samples_per_sec": rnd(during, 1)}
    if during is not None and f.baseline_rate:
        out["samples_per_sec_before"] = rnd(f.baseline_rate, 1)
        out["throughput_drop_pct"] = rnd(100.0 * (1 - during / f.baseline_rate), 1)
    return out


def clock_evidence(f: RuleFinding, ctx: Context, since: float | None = None) -> Evidence:
    """The SM clock during the finding (from ``since``) against its maximum, and the drop."""
    info = ctx.info_of(f.gpu)
    clock = med(f.series("sm_clock", since))
    top = info.sm_clock_max_mhz if info else None
    out: Evidence = {"sm_clock_median_mhz": rnd(clock, 0), "sm_clock_max_mhz": top}
    if clock is not None and top:
        out["clock_drop_pct"] = rnd(100.0 * (1 - clock / top), 1)
    return out


RuleScope = Literal["gpu", "run"]  # "gpu": one hold per GPU; "run": one for the run


class Rule:
    kind: ClassVar[str] = ""
    scope: ClassVar[RuleScope] = "gpu"
    during_warmup: ClassVar[bool] = False  # judged in warm-up and the start grace period too
    event_only: ClassVar[bool] = False  # fed by events, not samples
    include_lost: ClassVar[bool] = False  # per-GPU rules: also judge GPUs that stopped answering
    # What the rule needs to judge at all, in words ("a GPU's utilization"), where a run
    # may lack it and its question still stands; rules about a GPU itself leave it empty,
    # as without one they have nothing to judge.
    needs: ClassVar[str] = ""

    def lacking(self, ctx: Context) -> str | None:
        """Why this run cannot give the rule what it :attr:`needs` ("not judged on this
        machine"), None where it can.  What a rule needs is a GPU unless it says otherwise."""
        if not self.needs:
            return None
        if ctx.n_gpus == 0:
            return "not judged on this machine"
        if not ctx.run_uses_gpu:
            return "not judged: the run uses no GPU"
        return None

    def note(self, ctx: Context) -> str | None:
        """The summary's note for a rule that never judged this run: what it needs, and why
        it was not judged; None where the run did not lack it."""
        why = self.lacking(ctx)
        return f"{self.kind.replace('_', '-')}: needs {self.needs}; {why}" if why else None

    def hold(self, s: Settings) -> Hold:
        return Hold(s.open_after_s, s.close_after_s, s.hold_share, s.clear_share)

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        """``gpu``: the sample's GPU for a per-GPU rule (scope "gpu"), None for a run-wide one."""
        raise NotImplementedError

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        raise NotImplementedError

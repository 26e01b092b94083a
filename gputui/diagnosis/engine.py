"""The Diagnoser: fed a session's header, samples and events; returns findings as
frozen :class:`gputui.record.events.Finding` payloads of ``finding`` events."""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterable, Iterator

from gputui.diagnosis.context import BASELINE_S, Context, Obs, med
from gputui.diagnosis.hold import CLOSE, OPEN, RAISE, Hold
from gputui.diagnosis.rules import SEVERITIES, Rule, RuleFinding
from gputui.diagnosis.rules import make_rules as make_base_rules
from gputui.diagnosis.rules.straggler import make_scaling_rules
from gputui.diagnosis_settings import Settings
from gputui.model import Sample, Throughput
from gputui.protocol import MEASURE, WARMUP, JsonObject
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.recording import Recording
from gputui.record.schema import Header
from gputui.run.outcome import Outcome

log = logging.getLogger(__name__)

MIN_BASELINE_READINGS = 5  # fewer throughput readings before a finding: no "before" figure


class Diagnoser:
    """One per session.  Every ``on_*`` method returns the findings (payloads of the
    finding events) it caused, usually none; the caller emits them."""

    def __init__(self, settings: Settings | None = None, rules: list[Rule] | None = None) -> None:
        self.settings = settings or Settings()
        self.ctx = Context(self.settings)
        self.rules = make_base_rules() + make_scaling_rules() if rules is None else rules
        self._holds: dict[tuple[str, int | None], Hold] = {}
        self._open: dict[tuple[str, int | None], RuleFinding] = {}
        self._all: list[RuleFinding] = []
        self._numbers: dict[str, int] = {}
        self._finished = False
        self._judging_seen = False  # some sample was judged (past warm-up and the start grace period)
        self._judged: set[str] = set()  # kinds of the rules that could tell, in some sample

    # --- feeding -------------------------------------------------------------------
    def on_header(self, header: Header) -> None:
        self.ctx.on_header(header)

    def judging(self) -> bool:
        """Whether sample rules are judged now: the measured phase, or for runs that
        announce no phases, after the start grace period and outside an evaluation the
        probe saw."""
        ctx = self.ctx
        if ctx.ended or ctx.evaluating:
            return False
        if ctx.phase == MEASURE:
            return True
        if ctx.phase == WARMUP or ctx.expects_phases or ctx.first_t is None:
            return False
        if ctx.first_progress_t is not None:
            return True  # the job trains (it showed progress): start-up is over
        return ctx.now - ctx.first_t >= self.settings.start_grace_s

    def on_sample(self, sample: Sample) -> list[ev.Finding]:
        if not self.settings.enabled or self._finished:
            return []
        ctx = self.ctx
        try:
            ctx.on_sample(sample)
        except Exception:  # a diagnosis bug must never end a run
            log.exception("diagnosis could not read a sample; diagnosis is off for this run")
            self._finished = True
            return []
        if ctx.ended:
            return []
        judging = self.judging()
        self._judging_seen = self._judging_seen or judging
        out: list[ev.Finding] = []
        for rule in list(self.rules):
            if rule.event_only or not (judging or rule.during_warmup):
                continue
            targets = [(g.index, g) for g in sample.gpus if rule.include_lost or not g.lost] if rule.scope == "gpu" else [(None, None)]
            try:
                for index, gpu in targets:
                    level, obs = rule.observe(ctx, gpu)
                    if level is not None:
                        self._judged.add(rule.kind)
                    out += self._update(rule, index, sample.t, level, obs)
            except Exception:
                self._drop(rule)
        return out

    def _drop(self, rule: Rule) -> None:
        """A rule that raised is logged once and leaves the run; the others go on."""
        log.exception("diagnosis rule %s failed; it is off for the rest of this run", rule.kind)
        self.rules = [r for r in self.rules if r is not rule]
        for key in [k for k in self._open if k[0] == rule.kind]:
            del self._open[key]
        self.ctx.open_kinds.discard(rule.kind)

    def _update(self, rule: Rule, index: int | None, t: float, level: int | None, obs: Obs) -> list[ev.Finding]:
        key = (rule.kind, index)
        hold = self._holds.get(key)
        if hold is None:
            hold = self._holds[key] = rule.hold(self.settings)
        change = hold.update(t, level, obs)
        if change == OPEN:
            return [self._open_finding(rule, key, hold, t)]
        finding = self._open.get(key)
        if finding is None or level is None:
            return []
        finding.acc.add(t, obs)
        finding.until = hold.last_active_t if hold.last_active_t is not None else t
        if change == RAISE:
            finding.level = hold.level
            finding.severity = SEVERITIES[hold.level]
            return [self._describe(rule, finding)]
        if change == CLOSE:
            finding.state = "closed"
            del self._open[key]
            self.ctx.open_kinds = {k for k, _ in self._open}
            return [self._describe(rule, finding)]
        return []

    def _new(self, rule: Rule, index: int | None, since: float, t: float, level: int) -> RuleFinding:
        scope = f"gpu{index}" if index is not None else "run"
        number = self._numbers[f"{rule.kind}-{scope}"] = self._numbers.get(f"{rule.kind}-{scope}", 0) + 1
        finding = RuleFinding(
            id=f"{rule.kind}-{scope}-{number}", kind=rule.kind, gpu=index, severity=SEVERITIES[level], since=since, until=t, opened_t=t, level=level
        )
        before = self.ctx.rates_between(since - BASELINE_S, since - 1e-9)
        finding.baseline_rate = med(before) if len(before) >= MIN_BASELINE_READINGS else None
        for rt, rate in self.ctx.rates:
            if rt >= since:
                finding.rates.add(rt, {"rate": rate})
        self._all.append(finding)
        return finding

    def _open_finding(self, rule: Rule, key: tuple[str, int | None], hold: Hold, t: float) -> ev.Finding:
        assert hold.since is not None
        finding = self._new(rule, key[1], hold.since, t, hold.level)
        finding.until = hold.last_active_t if hold.last_active_t is not None else t
        for st, _level, obs in hold.window(hold.since):
            finding.acc.add(st, obs)
        self._open[key] = finding
        self.ctx.open_kinds.add(rule.kind)
        return self._describe(rule, finding)

    def _describe(self, rule: Rule, finding: RuleFinding) -> ev.Finding:
        try:
            said = rule.describe(finding, self.ctx)
            finding.title, finding.evidence, finding.advice = said.title, said.evidence, said.advice
        except Exception:  # say it with what we have rather than not at all
            log.exception("diagnosis rule %s could not describe its finding", rule.kind)
            finding.title = finding.title or finding.kind.replace("_", " ")
        return finding.payload()

    def on_event(self, event: Event) -> list[ev.Finding]:
        if not self.settings.enabled or self._finished:
            return []
        ctx, payload = self.ctx, event.payload
        if isinstance(payload, ev.PhaseChange):
            ctx.phase = payload.phase
        elif isinstance(payload, ev.WorkloadInfo):
            ctx.workload = dict(payload.fields)
            ctx.expects_phases = True
        elif isinstance(payload, Throughput) and not payload.final and payload.phase in (None, MEASURE):
            rate = float(payload.samples_per_sec)
            if event.kind == ev.THROUGHPUT:
                ctx.add_rate(event.t, rate, payload.unit)
                for finding in self._open.values():
                    finding.rates.add(event.t, {"rate": rate})
            elif event.kind == ev.RANK_THROUGHPUT:
                ctx.add_rank_rate(payload.rank, event.t, rate)
        elif isinstance(payload, ev.ProbeReport):
            ctx.add_probe(event.t, payload)
        elif isinstance(payload, ev.Oom):
            return self._safe_oom(event.t, dict(payload.fields))
        elif isinstance(payload, Outcome):
            ctx.ended = True
            # The oom finding keeps what the outcome said, as the recording writes it.
            said = ev.payload_fields(payload)
            if payload.kind == "oom":
                return self._safe_oom(event.t, said, from_outcome=True)
            pressure = ctx.last_memory_used_pct is not None and ctx.last_memory_used_pct >= self.settings.host_memory_pct
            if payload.kind == "signaled" and payload.signal == "SIGKILL" and (pressure or ("host_memory", None) in self._open):
                return self._safe_oom(event.t, {**said, "killed": "SIGKILL"})
        return []

    def _safe_oom(self, t: float, data: JsonObject, from_outcome: bool = False) -> list[ev.Finding]:
        try:
            return self._oom(t, data, from_outcome)
        except Exception:
            log.exception("diagnosis could not record an out-of-memory event")
            return []

    def _oom(self, t: float, data: JsonObject, from_outcome: bool = False) -> list[ev.Finding]:
        rule = next((r for r in self.rules if r.kind == "oom"), None)
        if rule is None:
            return []
        key = ("oom", None)
        finding = self._open.get(key)
        if finding is not None:
            if from_outcome:
                return []  # the outcome repeats the workload's own oom line
            finding.count += 1
            finding.until = t
            finding.data.update({k: v for k, v in data.items() if v is not None})
            return []  # counted; the final update carries it
        searching = bool(self.ctx.setting("find_max_batch"))
        finding = self._new(rule, None, t, t, 1 if searching and "killed" not in data else 3)
        finding.data = dict(data)
        sample = self.ctx.sample
        if sample is not None:
            pcts = [100.0 * g.memory_used / g.memory_total for g in sample.gpus if not g.lost and g.memory_used is not None and g.memory_total]
            if pcts:
                finding.data["gpu_memory_used_pct"] = max(pcts)
        self._open[key] = finding
        return [self._describe(rule, finding)]

    def finish(self) -> list[ev.Finding]:
        """The run ended: the final state of every finding still open (state "open",
        evidence over its whole length).  Call once, after the last sample and event."""
        if self._finished:
            return []
        self._finished = True
        out: list[ev.Finding] = []
        rules = {r.kind: r for r in self.rules}
        for finding in self._open.values():
            out.append(self._describe(rules[finding.kind], finding))
        return out

    # --- reading ----------------------------------------------------------------------
    def findings(self) -> list[ev.Finding]:
        """Every finding of the run, open and closed, in order of when each began."""
        return [f.payload() for f in sorted(self._all, key=lambda f: (f.since, f.id))]

    def notes(self) -> list[str]:
        """What the diagnosis could not judge, and why, one line each: the run as a whole
        when it ended before judging began, then each rule that never judged for want of
        what it needs (Rule.needs), once."""
        ctx = self.ctx
        if not self.settings.enabled or ctx.first_t is None:
            return []
        out = []
        if not self._judging_seen:
            if ctx.expects_phases or ctx.phase == WARMUP:
                why = "the run ended before its measured phase"
            elif ctx.first_progress_t is None:
                why = f"the run showed no progress and ended within the start grace period ({self.settings.start_grace_s:g} s, start_grace_s)"
            else:
                why = "the run ended before it could be judged"
            out.append(f"diagnosis: nothing but memory judged: {why}")
        for rule in self.rules:
            if rule.kind not in self._judged:
                note = rule.note(ctx)
                if note:
                    out.append(note)
        return out


def replay(
    header: Header, samples: Iterable[Sample], events: Iterable[Event], settings: Settings | None = None, diagnoser: Diagnoser | None = None
) -> list[Event]:
    """Diagnose a recorded run: samples and events merged by time (events first on
    ties, as a phase change announced with a sample applies to it).  Returns the
    ``finding`` events a live session would have emitted, the final updates last.
    ``diagnoser``: a fresh one to judge with instead (its notes are read afterwards)."""
    diagnoser = Diagnoser(settings) if diagnoser is None else diagnoser
    diagnoser.on_header(header)
    out: list[Event] = []
    tagged_events: Iterator[tuple[float, int, int, Event | Sample]] = ((e.t, 0, i, e) for i, e in enumerate(events) if e.kind != ev.FINDING)
    tagged_samples: Iterator[tuple[float, int, int, Event | Sample]] = ((s.t, 1, i, s) for i, s in enumerate(samples))
    t = 0.0
    for t, _kind, _i, item in heapq.merge(tagged_events, tagged_samples, key=lambda x: (x[0], x[1], x[2])):
        findings = diagnoser.on_event(item) if isinstance(item, Event) else diagnoser.on_sample(item)
        out += [Event(t=t, kind=ev.FINDING, payload=f) for f in findings]
    out += [Event(t=t, kind=ev.FINDING, payload=f) for f in diagnoser.finish()]
    return out


def replay_recording(recording: Recording, settings: Settings | None = None) -> list[Event]:
    """:func:`replay` over a :class:`gputui.record.recording.Recording`; settings default to the
    ones the recording's header says were used, else the defaults."""
    if settings is None:
        recorded = recording.header.diagnosis or {}
        settings = Settings.from_tables({k: v for k, v in recorded.items() if k in Settings.__dataclass_fields__})
    return replay(recording.header, recording.samples, recording.events, settings)

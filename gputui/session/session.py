"""A Session: one run (or one watch) from start to summary.

It owns the GPU and host samplers, the runner and the throughput parser, and tells
its observers what happens.  Three kinds of threads feed one queue: the sampler (on
its own fixed-rate timer), the runner's output readers, and a waiter for the run's
end.  ``run()`` drains that queue in the calling thread, so observers are called from
one thread, in order, and never block sampling.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psutil

from gputui import __version__, protocol
from gputui.diagnosis import Diagnoser
from gputui.diagnosis_settings import DEFAULTS as DIAGNOSIS_DEFAULTS
from gputui.diagnosis_settings import Settings as DiagnosisSettings
from gputui.errors import UserError
from gputui.model import HostSample, Sample, Throughput
from gputui.presets.preset import Preset
from gputui.protocol import JsonObject
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.observer import Observer
from gputui.record.redact import redact_argv, redact_env, redact_text
from gputui.record.schema import SCHEMA_VERSION, Baseline, CheckSettings, CheckSummary, Header, PresetRecord, Summary
from gputui.run.outcome import Outcome
from gputui.run.output_stream import OutputLine
from gputui.run.pseudo_terminal import OutputSink, size_of_own_terminal
from gputui.run.runner import Runner
from gputui.run.throughput import CLAIM_SOURCE, PROBE, ThroughputParser
from gputui.session.queue_items import EventPosted, LineRead, ProbeReported, QueueItem, RunEnded, SampleTaken, Wake
from gputui.session.summary import SummaryBuilder
from gputui.telemetry.gpu import GpuTelemetry, gpm_wanted
from gputui.telemetry.host import HostTelemetry, host_info
from gputui.telemetry.pinning import match_gpus

if TYPE_CHECKING:
    from gputui.probe import ProbeChannel

log = logging.getLogger(__name__)

MIN_INTERVAL_S = 0.1
# The host (per-core CPU, memory, disk, the run's process tree) is read at most this
# often; the samples between carry GPUs only.  The dashboard draws the CPU panel every
# 2-3 s (LIVE_REDRAW_S in gputui.tui.widgets.state_view), so a reading a second was half
# never seen; a share over 2 s is also steadier.  A reading is the dearest part of a tick
# after NVML's slow counters (docs/performance.md#figures-behind-the-codes-choices).
HOST_INTERVAL_S = 2.0
# Without GPUs the host is the whole sample: read once a second, as the diagnosis's
# windows expect of a sample stream.
HOST_ONLY_INTERVAL_S = 1.0
# The dispatch loop's longest wait for news: stop() wakes it (Wake), a duration ends it
# on time; with DISPATCH_BATCH_S it bounds how late it sees an attached process end.  A timed wake costs
# CPython CPU: at 0.2 s, 5 a second for nothing (docs/performance.md#figures-behind-the-codes-choices).
DISPATCH_WAIT_S = 1.0
# Once caught up, the dispatch gathers news this long before it handles more (a stop or
# the run's end cut it short).  Work done now and then costs far more than in a burst
# (cold caches, most likely; docs/performance.md#figures-behind-the-codes-choices).  A run printing a line every 0.3 s woke this thread four times a
# second; the dashboard folds news in once a second all the same.
DISPATCH_BATCH_S = 1.0
OUTPUT_EVENT_MAX_CHARS = 2000  # longer output lines are shortened in the recording
REDRAW_KEPT_EVERY_S = 1.0  # a progress bar's redraw is recorded at most this often
# Output lines still handled once a stop is asked.  A child that floods its output
# queues lines faster than they are recorded; handling the whole backlog would take
# minutes, and a quit would cut the recording before its outcome and summary.
STOP_BACKLOG_LINES = 2000
# A progress bar redraws up to ten times a second, more often while the job is fast:
# readings from the output closer together than this are left out, so the median weighs
# each moment of the run alike, not the fast ones more (and the recording stays small).
MIN_READING_GAP_S = 0.5


@dataclass
class SessionConfig:
    preset: Preset | None = None
    interval: float = 1.0
    duration: float | None = None  # stop after this many seconds (watch mode, or a cap)
    attach_pid: int | None = None  # watch this process tree (a job started elsewhere)
    # Every threshold of the diagnosis, merged from the files, the preset and the command
    # line (RunOptions.session_config).
    diagnosis: DiagnosisSettings = DIAGNOSIS_DEFAULTS
    # ``gputui check`` drives the session: its options go in the header, so the recording
    # says what kind of session it was.
    check: CheckSettings | None = None
    # A data-parallel run's one-GPU baseline (gputui.session.baseline): the summary's scaling.
    baseline: Baseline | None = None


class Session:
    def __init__(
        self,
        config: SessionConfig,
        *,
        gpu: GpuTelemetry | None = None,
        host: HostTelemetry | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if config.interval < MIN_INTERVAL_S:
            raise ValueError(f"interval must be at least {MIN_INTERVAL_S} s")
        self.config = config
        diagnosis = config.diagnosis
        self.gpu = gpu or GpuTelemetry(use_gpm=gpm_wanted(diagnosis.use_gpm), watch_xids=True)
        self.host = host or HostTelemetry()
        self._clock = clock
        self._observers: list[Observer] = []
        self._queue: queue.Queue[QueueItem] = queue.Queue()
        self._stop = threading.Event()
        self._hurry = threading.Event()  # a stop or the run's end: the dispatch stops gathering
        self._news_t: float | None = None  # when the news being handled came (see _now)
        self._stop_reason: str | None = None
        self._runner: Runner | None = None
        self._t0 = 0.0
        self._phase: str | None = None
        self._speaks_protocol = False
        self._watch_pids: list[int] = []
        self._lines_after_stop = 0
        self._lines_skipped = 0  # backlog lines left out after a stop (see STOP_BACKLOG_LINES)
        # The next tick reads the cumulative counters too: a phase changed, so the
        # summary's windows start on an exact energy and throttle-time reading.
        self._exact_next = False
        self._host_t: float | None = None  # when the host was last read (session seconds)
        self.summary_check: CheckSummary | None = None  # a check's verdict for the summary (set before run() ends)
        self.summary_builder = SummaryBuilder(baseline=config.baseline)
        self.outcome: Outcome | None = None
        self.diagnoser = Diagnoser(diagnosis)
        preset = config.preset
        self._parser = ThroughputParser(batch_size_hint=preset.throughput_batch_hint() if preset else None)
        self._probe: ProbeChannel | None = None  # the zero-code probe's channel, while a probed run goes
        self._output_sink: OutputSink | None = None  # where a user's command's output passes through
        self._redraw_kept_t: float | None = None  # when a progress bar's redraw was last recorded
        self._redraw_pending: tuple[str, str] | None = None  # (stream, text): a later redraw, not recorded yet
        self._last_reading_t: dict[str, float] = {}  # source -> when its last live reading was passed on

    def add_observer(self, observer: Observer) -> None:
        self._observers.append(observer)

    # -- Control (thread-safe; safe to call from a signal handler) -----------------
    def stop(self, reason: str = "stopped") -> None:
        if self._stop_reason is None:
            self._stop_reason = reason
        self._stop.set()
        self._queue.put(Wake())
        self._hurry.set()

    def post_event(self, kind: str, data: Mapping[str, Any]) -> None:
        """Emit an event from another thread (a driver such as ``gputui check``): it is
        written in order with the samples, from the session's own thread."""
        self._queue.put(EventPosted(kind, dict(data), self.elapsed))

    def pass_output_to(self, sink: OutputSink) -> None:
        """Before :meth:`run`: a user's command's output goes to ``sink`` as it comes,
        unchanged, besides being read and recorded."""
        self._output_sink = sink

    def resize_terminal(self, columns: int, rows: int) -> None:
        """The terminal the output passes to changed size: so does the command's."""
        if self._runner is not None:
            self._runner.resize_terminal(columns, rows)

    def watch(self, pids: list[int]) -> None:
        """Follow these processes' trees in the host samples (runs the session did not
        start itself); thread-safe."""
        self._watch_pids = list(pids)

    @property
    def elapsed(self) -> float:
        return self._clock() - self._t0

    # -- The run ------------------------------------------------------------------
    def run(self) -> Summary:
        """Blocks until the run ends (or the duration passes, or stop()); returns the summary."""
        self._t0 = self._clock()
        self.gpu.open()
        try:
            self._pin_gpus()
        except UserError:
            self.gpu.close()
            raise
        sampler = threading.Thread(target=self._sample_loop, name="gputui-sampler", daemon=True)
        try:
            self._emit_header()
            self._start_runner()
            sampler.start()
            self._dispatch_until_done()
        finally:
            self._stop.set()
            if self._runner is not None:
                self._runner.stop(self._stop_reason or "stopped")
                self.outcome = self._runner.wait()
            if sampler.is_alive():
                sampler.join(timeout=5)
            if sampler.ident is not None and not sampler.is_alive():
                self._final_sample()
            self._drain()  # lines and samples that arrived while stopping
            self._emit_readings(self._parser.finish(self._now))  # what the output's last line held back
            if self._probe is not None:
                self._probe.close()  # the run has ended: nothing more to hear
            if self.outcome is not None:
                # Its message may quote the run's last output line, which is stored as well.
                self.outcome = dataclasses.replace(self.outcome, message=redact_text(self.outcome.message)) if self.outcome.message else self.outcome
                self._emit_event(ev.OUTCOME, self.outcome)
            self._emit_findings(self.diagnoser.finish())
            built = self.summary_builder.build()
            summary = dataclasses.replace(
                built,
                # as the summary lists them: the events' keys but ``gpu`` (their ids name it)
                findings=[dataclasses.replace(f, gpu=None) for f in self.diagnoser.findings()],
                notes=[*(built.notes or []), *self.diagnoser.notes()] or None,
                output_lines_skipped=self._lines_skipped or None,
                check=self.summary_check,
            )
            for observer in self._observers:  # the builder itself has nothing to add
                observer.on_summary(summary)
            self.gpu.close()
        return summary

    def _pin_gpus(self) -> None:
        """Telemetry and findings cover only the GPUs a preset pins (``gpus = [0, 1]``)."""
        preset = self.config.preset
        selectors = preset.gpu_selectors() if preset else []
        if not selectors or not self.gpu.available:
            return  # no NVML (a CPU box): nothing to narrow, and the child decides
        indices, unmatched = match_gpus(self.gpu.infos, selectors)
        if unmatched:
            assert preset is not None
            have = ", ".join(f"{i.index} ({i.uuid})" if i.uuid else str(i.index) for i in self.gpu.infos) or "none"
            raise UserError(
                f"{preset.source}: [presets.{preset.name}].gpus: no GPU {unmatched[0]!r} on this machine (expected an index or a unique UUID prefix of: {have})"
            )
        self.gpu.keep_only(indices)

    def _start_runner(self) -> None:
        preset = self.config.preset
        if preset is None or self._stop.is_set():  # stopped already (the header could not be written)
            return
        env = preset.child_env()
        if preset.probed():
            from gputui.probe import ProbeChannel

            self._probe = ProbeChannel()
            env.update(self._probe.env(env))
            self._probe.start(lambda text: self._queue.put(ProbeReported(text, self.elapsed)))
        sink = self._output_sink
        self._runner = Runner(
            preset.argv(),
            env=env,
            cwd=preset.cwd,
            timeout=preset.timeout,
            on_line=lambda line: self._queue.put(LineRead(line, self.elapsed)),
            # A user's own command prints as on a terminal (its progress bars live);
            # gputui's workloads speak to gputui alone.
            terminal=None if preset.is_workload else (sink.child_size() if sink else size_of_own_terminal()),
            on_bytes=sink.output if sink and not preset.is_workload else None,
        )
        self._runner.start()
        if self._probe is not None and self._runner.pid is not None:
            self._probe.watch(self._runner.pid)  # the probe's lines come from the run's process tree alone
        waiter = threading.Thread(target=self._wait_for_runner, name="gputui-waiter", daemon=True)
        waiter.start()
        self._emit_event(ev.STARTED, ev.Started(pid=self._runner.pid, command=redact_argv(preset.argv())))

    def _wait_for_runner(self) -> None:
        assert self._runner is not None
        self._queue.put(RunEnded(self._runner.wait()))
        self._hurry.set()

    def _dispatch_until_done(self) -> None:
        deadline = self._t0 + self.config.duration if self.config.duration else None
        while True:
            if self._stop.is_set():
                self._drain(limit=self._queue.qsize())  # what arrived before the stop comes first
                self._emit_event(ev.STOPPING, ev.Stopping(self._stop_reason))
                return
            if deadline is not None and self._clock() >= deadline:
                self._stop_reason = self._stop_reason or "duration reached"
                self._emit_event(ev.STOPPING, ev.Stopping(self._stop_reason))
                return
            if self._runner is None and self.config.attach_pid is not None and not _job_running(self.config.attach_pid):
                self._emit_event(ev.STOPPING, ev.Stopping(f"process {self.config.attach_pid} ended"))
                return
            wait = DISPATCH_WAIT_S if deadline is None else max(0.0, min(DISPATCH_WAIT_S, deadline - self._clock()))
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:
                continue
            if isinstance(item, RunEnded):
                self.outcome = item.outcome
                self._runner = None  # it has ended: nothing to stop
                return
            self._handle(item)
            if self._queue.empty():
                for observer in self._observers:
                    observer.on_idle()
                gather = DISPATCH_BATCH_S if deadline is None else max(0.0, min(DISPATCH_BATCH_S, deadline - self._clock()))
                self._hurry.wait(gather)

    def _drain(self, limit: int | None = None) -> None:
        """Handle what is queued (at most ``limit`` items: a flooding child never empties it)."""
        handled = 0
        while limit is None or handled < limit:
            handled += 1
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, RunEnded):
                self.outcome = self.outcome or item.outcome
            elif isinstance(item, LineRead) and self._backlog_full():
                self._lines_skipped += 1
            else:
                self._handle(item)

    def _backlog_full(self) -> bool:
        """After a stop: have enough of the queued output lines been handled?"""
        if not self._stop.is_set():
            return False
        self._lines_after_stop += 1
        return self._lines_after_stop > STOP_BACKLOG_LINES

    def _handle(self, item: QueueItem) -> None:
        # the events it makes are of when it came (a sample: when it was taken)
        self._news_t = item.sample.t if isinstance(item, SampleTaken) else getattr(item, "t", None)
        try:
            match item:
                case SampleTaken(sample):
                    self.summary_builder.on_sample(sample)
                    for observer in self._observers:
                        observer.on_sample(sample)
                    self._emit_findings(self.diagnoser.on_sample(sample))
                case LineRead(line):
                    self._handle_line(line)
                case ProbeReported(text):
                    self._handle_probe(text)
                case EventPosted(kind, data, t):
                    self._emit(ev.make_event(t, kind, data))
                case RunEnded() | Wake():
                    pass  # the dispatch loop and the drain take the end; a wake-up only wakes
            self._keep_pending_redraw()
        finally:
            self._news_t = None

    @property
    def _now(self) -> float:
        """When the news being handled came (else now): events and gputui-timed rates use it."""
        return self.elapsed if self._news_t is None else self._news_t

    # -- Output lines -----------------------------------------------------------------
    def _show_redraw(self, stream: str, text: str) -> None:
        """A bar's current state, for a viewer's output pane: recorded at most once a
        second (each replaces the one before: more would only grow the recording), a
        later one once that second is up (_keep_pending_redraw)."""
        if self._redraw_kept_t is None or self._now - self._redraw_kept_t >= REDRAW_KEPT_EVERY_S:
            self._keep_redraw(stream, text)
        else:
            self._redraw_pending = (stream, text)

    def _keep_redraw(self, stream: str, text: str) -> None:
        self._redraw_kept_t, self._redraw_pending = self._now, None
        self._emit_event(ev.OUTPUT, ev.Output(stream, redact_text(text, limit=OUTPUT_EVENT_MAX_CHARS), progress=True))

    def _keep_pending_redraw(self) -> None:
        """A bar that stops redrawing within a second of its last recorded state (a burst,
        then a slow step) has its latest state recorded once that second is up: a
        viewer's pane shows what the terminal shows, not the burst's first redraw."""
        if self._redraw_pending is not None and self._redraw_kept_t is not None and self._now - self._redraw_kept_t >= REDRAW_KEPT_EVERY_S:
            self._keep_redraw(*self._redraw_pending)

    def _handle_line(self, line: OutputLine) -> None:
        text = line.text
        if line.open:  # shown only: it is read once it ends
            self._show_redraw(line.stream, text)
            return
        payload = protocol.read_line(text)  # a well-formed protocol line; a mere "@gputui" is output
        is_protocol = payload is not None
        if is_protocol:
            self._speaks_protocol = True
            self._handle_protocol(payload)
        elif not line.progress:
            self._emit_event(ev.OUTPUT, ev.Output(line.stream, redact_text(text, limit=OUTPUT_EVENT_MAX_CHARS)))
            self._redraw_kept_t = self._redraw_pending = None
        else:
            self._show_redraw(line.stream, text)
        if self._speaks_protocol and not is_protocol:
            return  # a run that speaks our protocol is measured by it alone, not by its log lines
        readings = self._parser.feed(text, self._now)
        if is_protocol and not (self.config.preset is not None and self.config.preset.is_workload):
            # a user's script's own result line: its claim, which gputui did not measure
            readings = [dataclasses.replace(r, source=CLAIM_SOURCE) if r.final else r for r in readings]
        self._emit_readings(readings)

    def _handle_probe(self, text: str) -> None:
        """A datagram from the probe in the child: recorded whole, and its window a
        throughput reading (the parser decides whether it owns the run's throughput)."""
        payload = protocol.decode(text)
        if payload is None:
            return
        fields = {k: v for k, v in payload.items() if k != "event"}
        if payload["event"] == PROBE:
            self._emit_event(ev.PROBE, ev.ProbeReport(fields))
            self._emit_readings(self._parser.feed_probe(payload, self._now))
        elif payload["event"] == ev.PROBE_STATUS:
            self._emit_event(ev.PROBE_STATUS, ev.ProbeStatus(fields))
            self._parser.probe_status(payload)

    def _emit_readings(self, readings: list[Throughput]) -> None:
        for reading in readings:
            if self._too_soon(reading):
                continue
            if reading.rank is not None:  # one rank's own; the ranks' total follows once all reported
                self._emit_event(ev.RANK_THROUGHPUT, reading)
                continue
            if reading.phase and reading.phase != self._phase:
                self._phase = reading.phase
                self._emit_event(ev.PHASE, ev.PhaseChange(reading.phase))
            self._emit_event(ev.THROUGHPUT, reading)

    def _too_soon(self, reading: Throughput) -> bool:
        """A redraw of a progress bar within MIN_READING_GAP_S of the last reading of its
        source.  Windows that say how long they cover (gputui's protocol, the probe) and
        final figures always count."""
        if reading.final or reading.seconds is not None or reading.rank is not None:
            return False
        now = self._now
        last = self._last_reading_t.get(reading.source)
        if last is not None and now - last < MIN_READING_GAP_S:
            return True
        self._last_reading_t[reading.source] = now
        return False

    def _handle_protocol(self, payload: JsonObject | None) -> None:
        if payload is None:
            return
        kind = payload.get("event")
        fields = {k: v for k, v in payload.items() if k != "event"}
        if kind == "start":
            if fields.get("rank", 0) == 0:  # every rank of a data-parallel run starts alike: say it once
                self._emit_event(ev.WORKLOAD, ev.WorkloadInfo(fields))
        elif kind == "result":
            self._emit_event(ev.RESULT, ev.Result(fields))
        elif kind == "oom":
            self._emit_event(ev.OOM, ev.Oom(fields))
            if self._runner is not None:
                self._runner.mark_oom(str(fields.get("message", "the workload ran out of memory")))

    # -- Samples ------------------------------------------------------------------------
    def _sample_loop(self) -> None:
        interval = self.config.interval
        next_tick = self._clock()
        while not self._stop.is_set():
            try:
                sample = self._take_sample()
                if sample.gpus or sample.host is not None:  # without GPUs, a tick between host readings holds nothing
                    self._queue.put(SampleTaken(sample))
            except Exception:  # a sampler bug must not end the run; say it once per tick
                log.exception("sampling failed")
            next_tick += interval
            delay = next_tick - self._clock()
            if delay < 0:  # fell behind (a slow tick): skip ahead rather than burst
                next_tick = self._clock()
                delay = 0
            self._stop.wait(delay)

    def _take_sample(self, exact: bool = False) -> Sample:
        exact, self._exact_next = exact or self._exact_next, False
        t = round(self.elapsed, 4)
        gpus = self.gpu.sample(exact)
        return Sample(t=t, gpus=gpus, host=self._host_sample(t, exact, HOST_INTERVAL_S if gpus else HOST_ONLY_INTERVAL_S))

    def _host_sample(self, t: float, exact: bool, every_s: float) -> HostSample | None:
        """The host part, read at most once every ``every_s`` (and on exact ticks): the
        machine-wide parts and the process tree cost three to four times a GPU reading,
        and a CPU share over a tenth of a second says little more than one over a second."""
        due = self._host_t is None or t - self._host_t >= every_s - self.config.interval / 2
        if not (due or exact):
            return None
        self._host_t = t
        root = self._runner.pid if self._runner is not None else self.config.attach_pid
        return self.host.sample([root] if root else list(self._watch_pids))

    def _final_sample(self) -> None:
        """One last sample at the run's end, with exact counter readings, so the
        summary's energy and throttle times cover the run to its end."""
        try:
            self._queue.put(SampleTaken(self._take_sample(exact=True)))
        except Exception:  # as in the sampler loop: a sampler bug must not lose the summary
            log.exception("sampling failed")

    # -- Emitting -----------------------------------------------------------------------
    def _receivers(self) -> list[Observer]:
        """Who hears the header and the summary: the session's own summary builder and the
        observers (samples and events reach the builder first, in _handle and _emit)."""
        return [self.summary_builder, *self._observers]

    def _emit_event(self, kind: str, payload: ev.Payload) -> None:
        self._emit(Event(t=self._now, kind=kind, payload=payload))

    def _emit(self, event: Event) -> None:
        if event.kind == ev.PHASE:
            self._exact_next = True
        event = self.summary_builder.counted(event)  # a live reading now carries the running median
        for observer in self._observers:
            observer.on_event(event)
        if event.kind != ev.FINDING:
            self._emit_findings(self.diagnoser.on_event(event))

    def _emit_findings(self, findings: list[ev.Finding]) -> None:
        for finding in findings:
            self._emit_event(ev.FINDING, finding)

    def _emit_header(self) -> None:
        header = self.build_header()
        self.diagnoser.on_header(header)
        for observer in self._receivers():
            observer.on_header(header)

    def build_header(self) -> Header:
        preset = self.config.preset
        # Secret values (API keys, tokens) stay out of the file: the names show they were set.
        env, env_redacted = redact_env(preset.child_env()) if preset else (None, [])
        described: PresetRecord | None = preset.describe(redacted=True) if preset else None
        return Header(
            schema=SCHEMA_VERSION,
            gputui=__version__,
            started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            interval=self.config.interval,
            host=host_info(),
            driver_version=self.gpu.driver_version,
            cuda_version=self.gpu.cuda_version,
            gpus=list(self.gpu.infos),
            gpu_unavailable_reason=self.gpu.unavailable_reason,
            preset=described,
            command=redact_argv(preset.argv()) if preset else None,
            env=env,
            env_redacted=env_redacted,
            cwd=(preset.cwd or os.getcwd()) if preset else None,
            attach_pid=self.config.attach_pid,
            probe=preset.probed() if preset and not preset.is_workload else None,
            python=sys.version.split()[0],
            diagnosis=self.diagnoser.settings.to_dict(),
            # the dashboard and the exporter judge the scaling live against it, a replay too
            baseline=self.config.baseline,
            check=self.config.check,
        )


def _job_running(pid: int) -> bool:
    """Whether the watched job still runs.  A zombie has ended: it only waits for its
    parent to collect its exit status, which a parent that never calls wait() never does."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # psutil.ZombieProcess too
        return False
    except psutil.Error:  # not ours to read: it is there, so still running
        return True

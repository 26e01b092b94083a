"""One ``gputui check`` from start to verdict.

A Session samples telemetry (and diagnoses it) the whole time, in its own thread, as
for any run; the stages run one after another in the calling thread and report each
check, which the Session writes in order with the samples.  So a check is an ordinary
recording: header (with ``check`` options), samples, one ``check`` event per result,
and a summary whose ``check`` field holds the verdict.
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gputui.check import verdict_text as render
from gputui.check.cost import cost_results
from gputui.check.result import CheckResult, exit_code
from gputui.check.stage_context import CHECK_EVENT, STAGE_EVENT, CheckOptions, StageContext, StageState, gpus_under_test
from gputui.check.under_load import LoadWatcher, load_results
from gputui.diagnosis_settings import Settings as DiagnosisSettings
from gputui.record.observer import Observer
from gputui.record.schema import CheckSettings, CheckSummary, Header
from gputui.session.assemble import SessionParts
from gputui.session.session import SessionConfig
from gputui.telemetry.nvml import Nvml

# name -> (module, function); loaded lazily so a stage's imports cost nothing until it runs
STAGES: dict[str, tuple[str, str]] = {
    "preflight": ("gputui.check.preflight", "run_preflight_stage"),
    "micro": ("gputui.check.micro_stage", "run_micro_stage"),
    "workload": ("gputui.check.workload_stage", "run_workload_stage"),
}
LOADED_STAGES = ("micro", "workload")  # the GPUs are under load: heat, throttling, XIDs count


@dataclass
class CheckReport:
    results: list[CheckResult]
    header: Header
    summary: CheckSummary  # the verdict and its counts
    stopped: bool = False

    @property
    def exit_code(self) -> int:
        return exit_code(self.results)


class CheckListener:
    """What a face (the headless lines, the dashboard's Check screen) hears; called
    from the thread that runs the check."""

    def on_stage(self, stage: str, state: StageState) -> None:
        pass

    def on_result(self, result: CheckResult) -> None:
        pass


class CheckRun:
    def __init__(
        self,
        options: CheckOptions,
        *,
        observers: Sequence[Observer] = (),
        listener: CheckListener | None = None,
        parts: SessionParts | None = None,
        gpu=None,
        host=None,
        nvml_module: Any = None,
        stages: dict[str, Callable[[StageContext], None]] | None = None,
    ):
        self.options = options
        self.listener = listener or CheckListener()
        diagnosis = DiagnosisSettings.from_tables(options.config.diagnosis if options.config is not None else None)
        if parts is None:  # telemetry instances handed in (tests), else this machine's
            parts = SessionParts(gpu=None if gpu is None else (lambda: gpu), host=None if host is None else (lambda: host))
        self.session = parts.build(SessionConfig(interval=options.interval, diagnosis=diagnosis, check=_options_record(options)))
        for observer in observers:
            self.session.add_observer(observer)
        self.load = LoadWatcher()
        self.session.add_observer(self.load)
        self._header = _HeaderKeeper()
        self.session.add_observer(self._header)
        self._nvml_module = nvml_module
        self._stages = stages
        self._ctx: StageContext | None = None
        self._stop_requested = threading.Event()

    def stop(self) -> None:
        """Thread-safe (the signal relay calls it from its own thread): the running stage ends early."""
        self._stop_requested.set()
        if self._ctx is not None:
            self._ctx.stop()

    def run(self) -> CheckReport:
        session = self.session
        session.gpu.open()  # the GPUs must be known before the stages are planned
        nvml = Nvml(self._nvml_module)
        nvml_ok = session.gpu.available and nvml.init() is None
        gpus = gpus_under_test(session.gpu.infos, self.options.gpus)
        ctx = StageContext(
            self.options,
            gpus,
            report=self._report,
            post_event=session.post_event,
            watch=session.watch,
            gpu_unavailable_reason=self._gpu_reason(gpus),
            nvml=nvml if nvml_ok else None,
            co_runners=self.load.co_runners_text,
        )
        self._ctx = ctx
        if self._stop_requested.is_set():
            ctx.stop()
        sampler = threading.Thread(target=session.run, name="gputui-check-session", daemon=True)
        sampler.start()
        try:
            self._run_stages(ctx)
        finally:
            results = list(ctx.results)
            summary = render.verdict_summary(results)
            session.summary_check = dataclasses.replace(summary, stopped=ctx.stopped.is_set())
            session.stop("check finished")
            sampler.join(timeout=60)
            if nvml_ok:
                nvml.shutdown()
        return CheckReport(results=results, header=self._header.header, summary=summary, stopped=ctx.stopped.is_set())

    def _gpu_reason(self, gpus) -> str | None:
        if not self.session.gpu.available:
            return self.session.gpu.unavailable_reason
        if not gpus:
            wanted = ",".join(map(str, self.options.gpus or []))
            return f"none of the GPUs asked for ({wanted}) exists" if self.options.gpus else "NVML found no GPU"
        return None

    def _run_stages(self, ctx: StageContext) -> None:
        xid = None
        for name in self._planned_stages():
            if ctx.stopped.is_set():
                break
            if name in LOADED_STAGES and xid is None:
                xid = self._start_xid(ctx)
                self.load.begin()
            self._stage_event(name, "start")
            self._stage_function(name)(ctx)
            self._stage_event(name, "end")
        self.load.end()
        if xid is not None:
            from gputui.check.xid_results import xid_results

            for result in xid_results(xid.stop(), ctx.gpus):
                ctx.report(result)
        if ctx.gpus and any(name in LOADED_STAGES for name in self._planned_stages()):
            for result in load_results(self.load, ctx.gpus):
                ctx.report(result)
        # the price is the instance's: split over every GPU it has, not only those checked
        for result in cost_results(ctx.results, self.options.price_per_hour, len(self.session.gpu.infos)):
            ctx.report(result)

    def _planned_stages(self) -> list[str]:
        names = list(self._stages) if self._stages is not None else list(STAGES)
        return [n for n in names if n not in self.options.skip and not (n == "workload" and self.options.quick)]

    def _stage_function(self, name: str) -> Callable[[StageContext], None]:
        if self._stages is not None:
            return self._stages[name]
        module, function = STAGES[name]
        return getattr(importlib.import_module(module), function)

    def _start_xid(self, ctx: StageContext):
        if not ctx.gpus or ctx.nvml is None:
            return None
        from gputui.telemetry.xid_watcher import XidWatcher

        watcher = XidWatcher([g.index for g in ctx.gpus], nvml_module=self._nvml_module)
        watcher.start()
        return watcher

    def _stage_event(self, stage: str, state: StageState) -> None:
        self.session.post_event(STAGE_EVENT, {"stage": stage, "state": state})
        self.listener.on_stage(stage, state)

    def _report(self, result: CheckResult) -> None:
        self.session.post_event(CHECK_EVENT, result.to_dict())
        self.listener.on_result(result)


def _options_record(options: CheckOptions) -> CheckSettings:
    # The loaded config is not an option: the header says which file (presets_file).
    return CheckSettings(
        quick=options.quick,
        price_per_hour=options.price_per_hour,
        gpus=options.gpus,
        skip=sorted(options.skip),
        workdir=str(options.workdir),
        interval=options.interval,
        presets_file=str(options.presets_file) if options.presets_file else None,
    )


class _HeaderKeeper(Observer):
    def __init__(self) -> None:
        self.header = Header()

    def on_header(self, header: Header) -> None:
        self.header = header

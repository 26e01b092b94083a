"""What every stage of a check gets: the options, the GPUs under test, a way to report a
result, and a way to run a child process whose protocol lines it reads.

A stage is a function ``stage(ctx: StageContext) -> None`` that calls
``ctx.report(result)`` for each check.  Stages run one after another in a worker
thread while the Session samples telemetry beside them; ``report`` is thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gputui import protocol
from gputui.check.result import CheckResult
from gputui.gpus.models import GpuModel, find_model
from gputui.model import GpuInfo
from gputui.presets.preset import Config
from gputui.record import events as ev
from gputui.run.outcome import Outcome
from gputui.run.output_stream import OutputLine
from gputui.run.runner import Runner

CHECK_EVENT = ev.CHECK  # one recording event per check result
STAGE_EVENT = "check_stage"  # a stage started or ended: {"stage": ..., "state": "start"|"end"}
StageState = Literal["start", "end"]


@dataclass
class CheckOptions:
    quick: bool = False
    price_per_hour: float | None = None  # USD
    gpus: list[int] | None = None  # None: every GPU NVML sees
    skip: set[str] = field(default_factory=set)  # stage names to leave out
    workdir: Path = field(default_factory=Path.cwd)
    interval: float = 1.0
    presets_file: Path | None = None  # an extra presets file (--presets)
    # The presets files as read once by the face that starts the check (None: the
    # workload stage reads them itself, and diagnosis uses its defaults).
    config: Config | None = None


@dataclass
class GpuUnderTest:
    info: GpuInfo
    model: GpuModel | None  # None: not in the datasheet table ("no reference")

    @property
    def index(self) -> int:
        return self.info.index


class StageContext:
    def __init__(
        self,
        options: CheckOptions,
        gpus: list[GpuUnderTest],
        *,
        report: Callable[[CheckResult], None],
        post_event: Callable[[str, Mapping[str, object]], None] = lambda kind, data: None,
        watch: Callable[[list[int]], None] = lambda pids: None,
        gpu_unavailable_reason: str | None = None,
        nvml: Any = None,
        co_runners: Callable[[int], str | None] = lambda gpu: None,
    ) -> None:
        self.options = options
        self.gpus = gpus
        self._report = report
        self.post_event = post_event
        self._watch = watch
        self.gpu_unavailable_reason = gpu_unavailable_reason
        self.nvml = nvml  # the check's own gputui.telemetry.nvml.Nvml (initialised), or None
        # Others' processes seen on a GPU so far under load, in words ("" none, None unknown)
        self.co_runners = co_runners
        self.stopped = threading.Event()
        self.results: list[CheckResult] = []
        self._lock = threading.Lock()
        self._runner: Runner | None = None

    def report(self, result: CheckResult) -> None:
        with self._lock:
            self.results.append(result)
        self._report(result)

    def stop(self) -> None:
        """Ask the stages to end early (Ctrl-C, the app's Stop): the running child is stopped."""
        self.stopped.set()
        runner = self._runner
        if runner is not None:
            runner.stop("check stopped")

    def run_child(
        self,
        argv: list[str],
        on_payload: Callable[[Mapping[str, object]], None],
        *,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        on_line: Callable[[OutputLine], None] | None = None,
    ) -> Outcome:
        """Run ``argv`` to its end (or the timeout, or stop()), passing each protocol
        payload (``@gputui {...}`` line) to ``on_payload``; the host sampler follows
        the child's process tree meanwhile."""
        if self.stopped.is_set():
            return Outcome(kind="stopped", message="check stopped")

        def deliver(line: OutputLine) -> None:
            payload = protocol.decode(line.text)
            if payload is not None:
                on_payload(payload)
            elif on_line is not None:
                on_line(line)

        runner = Runner(argv, env=env, timeout=timeout, on_line=deliver)
        self._runner = runner
        try:
            runner.start()
            if runner.pid is not None:
                self._watch([runner.pid])
            outcome = runner.wait()
        finally:
            self._watch([])
            self._runner = None
            runner.close()
        assert outcome is not None
        return outcome


def gpus_under_test(infos: list[GpuInfo], wanted: list[int] | None) -> list[GpuUnderTest]:
    return [GpuUnderTest(info=info, model=find_model(info.name, info.memory_total)) for info in infos if wanted is None or info.index in wanted]

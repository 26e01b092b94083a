"""What the command line asks of a run, checked once for every face that starts one (the
headless recorder, the dashboard, ``gputui check``'s price): a bad value is one line and
exit code 2 before anything starts.

- :class:`RunOptions`: the one value the faces hand on, built once by
  :meth:`RunOptions.from_command_line` (or by a test), which makes each run's
  :class:`~gputui.session.session.SessionConfig`;

- :func:`check_run_options`: ``--interval``, ``--duration``, ``--pid``, ``--batch-size``
  and ``--`` as a run can use them;
- :func:`chosen_preset`: the preset, or the command after ``--`` made into one;
- :func:`check_price` and :func:`command_line_diagnosis`: ``--price`` as a number and as
  ``[diagnosis]`` settings.

The ``--serve-metrics`` endpoint is started by the exporter itself
(:func:`gputui.metrics.server.start_metrics`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputui.errors import UserError

if TYPE_CHECKING:
    from gputui.presets.preset import Config, Preset
    from gputui.record.schema import Baseline
    from gputui.session.session import SessionConfig

MAX_INTERVAL_S = 3600.0  # a sampler that sleeps longer than an hour is a typo


def _no_presets() -> Config:
    from gputui.presets.preset import Config

    return Config(presets={}, diagnosis={})


@dataclass(frozen=True)
class RunOptions:
    """What the user asked of the runs of this invocation, checked: the headless recorder
    and the dashboard start every session from it (:meth:`session_config`)."""

    config: Config = field(default_factory=_no_presets)  # the presets and the files' [diagnosis] table
    preset: Preset | None = None  # what to run first (--preset, or the command after --); None: watch
    interval: float = 1.0
    duration: float | None = None  # a cap on each run, and on watching an attached job
    attach_pid: int | None = None  # --pid: a job started elsewhere, watched until it ends
    diagnosis_overrides: dict[str, Any] | None = None  # the command line's (--price): they win over the files
    baseline: Baseline | None = None  # --baseline FILE: what the runs of ``preset`` scale against
    baseline_run: bool = False  # --baseline-run: measure that baseline first, on one GPU
    record_path: Path | None = None  # --record FILE
    record_force: bool = False  # --force: replace it

    @classmethod
    def from_command_line(cls, args: argparse.Namespace) -> RunOptions:
        """Every run option of ``args`` checked, the presets files read, the preset chosen
        and a --baseline recording read: a bad one is a UserError in one line."""
        from gputui.presets.preset import load_config
        from gputui.session.baseline import baseline_from_recording, check_baseline_options

        check_run_options(args)
        config = load_config(extra=args.presets)  # watching needs the files' [diagnosis] table too
        preset = chosen_preset(args, config)
        check_baseline_options(args.baseline, args.baseline_run, preset)
        return cls(
            config=config,
            preset=preset,
            interval=args.interval,
            duration=args.duration,
            attach_pid=args.pid,
            diagnosis_overrides=command_line_diagnosis(args),
            baseline=baseline_from_recording(args.baseline) if args.baseline is not None else None,
            baseline_run=args.baseline_run,
            record_path=args.record,
            record_force=args.force,
        )

    @property
    def presets(self) -> dict[str, Preset]:
        return self.config.presets

    @property
    def price_per_hour(self) -> float | None:
        """--price, where given."""
        return (self.diagnosis_overrides or {}).get("price_per_hour")

    def session_config(
        self, preset: Preset | None, *, attach_pid: int | None = None, baseline: Baseline | None = None, cap_watching: bool = False
    ) -> SessionConfig:
        """One session's config: a run of ``preset``, watching ``attach_pid``, or (neither)
        watching the machine.  Runs and attached jobs get the --duration cap, and watching
        the machine too with ``cap_watching`` (headless: --duration is how long to watch;
        the dashboard watches until a run starts).  The runs of the chosen preset scale
        against its --baseline unless ``baseline`` is given."""
        from gputui.session.session import SessionConfig

        capped = cap_watching or preset is not None or attach_pid is not None
        if baseline is None and preset is not None and self.preset is not None and preset.name == self.preset.name:
            baseline = self.baseline
        return SessionConfig(
            preset=preset,
            interval=self.interval,
            duration=self.duration if capped else None,
            attach_pid=attach_pid,
            diagnosis=self.config.diagnosis,
            diagnosis_overrides=self.diagnosis_overrides,
            baseline=baseline,
        )


def check_price(price: float | None) -> float | None:
    """``--price`` (USD per hour) as given, or a UserError in one line."""
    if price is not None and not (math.isfinite(price) and price > 0):
        raise UserError(f"--price: expected a price per hour greater than 0, got {price}")
    return price


def chosen_preset(args: argparse.Namespace, config) -> Preset | None:
    """What this invocation runs: the command after ``--`` (a preset made on the spot,
    added to ``config.presets`` so the dashboard finds it by name), else ``--preset``,
    with ``--batch-size`` and ``--no-probe`` applied; None to watch."""
    from gputui.presets.preset import get_preset

    probe = False if args.no_probe else None
    if args.run_command is not None:
        from gputui.presets.command_preset import command_preset

        preset = command_preset(args.run_command, config.presets, batch_size=args.batch_size, probe=probe)
    elif args.preset:
        preset = get_preset(config.presets, args.preset)
        if args.batch_size is not None or probe is not None:
            preset = dataclasses.replace(preset, batch_size_hint=args.batch_size or preset.batch_size_hint, probe=preset.probe if probe is None else probe)
    else:
        return None
    config.presets[preset.name] = preset
    args.preset = preset.name
    return preset


def command_line_diagnosis(args: argparse.Namespace) -> dict[str, Any] | None:
    """``[diagnosis]`` settings given on the command line (``--price``): for the headless
    recorder and the dashboard alike, they win over every file and preset table."""
    price = check_price(args.run_price)
    return {"price_per_hour": price} if price else None


def check_run_options(args: argparse.Namespace) -> None:
    """``--interval``, ``--duration`` and ``--pid`` as a run can use them, or a UserError
    in one line (inf, nan and pids the kernel cannot have included)."""
    from gputui.session.session import MIN_INTERVAL_S

    interval = args.interval
    if not math.isfinite(interval) or interval > MAX_INTERVAL_S:
        raise UserError(f"--interval: expected a number of seconds from {MIN_INTERVAL_S} to {MAX_INTERVAL_S:g}, got {interval}")
    if interval < MIN_INTERVAL_S:
        raise UserError(f"--interval: expected {MIN_INTERVAL_S} s or more, got {interval}")
    if args.batch_size is not None and args.batch_size < 1:
        raise UserError(f"--batch-size: expected a whole number of samples per step, 1 or more, got {args.batch_size}")
    if args.run_command is not None and (args.preset or args.pid is not None):
        raise UserError("--: runs the command after it; not with --preset or --pid (one run at a time)")
    duration = args.duration
    if duration is not None and not (math.isfinite(duration) and duration > 0):
        raise UserError(f"--duration: expected a finite number of seconds greater than 0, got {duration}")
    pid = args.pid
    if pid is not None:
        if not 1 <= pid <= _pid_max():
            raise UserError(f"--pid: expected a process id from 1 to {_pid_max()}, got {pid}")
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            raise UserError(f"--pid: no process {pid} is running") from None
        except PermissionError:
            pass  # someone else's process: watching it is still fine


def _pid_max() -> int:
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 4_194_304  # Linux's upper limit for pid_max

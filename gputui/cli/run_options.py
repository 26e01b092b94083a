"""From the command line's arguments to the plain values a run is made of, checked once for
every face that starts one (the headless recorder, the dashboard): a bad value is one line
and exit code 2 before anything starts.

- :func:`run_options`: the :class:`~gputui.session.options.RunOptions` the faces hand on;
- :func:`run_wiring`: where the runs' readings go (:class:`~gputui.live.wiring.RunWiring`);
- :func:`check_run_options`: ``--interval``, ``--duration``, ``--pid``, ``--batch-size``
  and ``--`` as a run can use them;
- :func:`chosen_preset`: the preset, or the command after ``--`` made into one;
- :func:`check_price`: ``--price`` as a number.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from typing import TYPE_CHECKING

from gputui.errors import UserError
from gputui.session.options import RunOptions

if TYPE_CHECKING:
    from gputui.live.wiring import RunWiring
    from gputui.presets.preset import Config, Preset

MAX_INTERVAL_S = 3600.0  # a sampler that sleeps longer than an hour is a typo


def run_options(args: argparse.Namespace) -> RunOptions:
    """Every run option of ``args`` checked, the presets files read, the preset chosen
    and a --baseline recording read: a bad one is a UserError in one line."""
    from gputui.presets.preset import load_config
    from gputui.session.baseline import baseline_from_recording, check_baseline_options

    check_run_options(args)
    config = load_config(extra=args.presets)  # watching needs the files' [diagnosis] table too
    preset = chosen_preset(args, config)
    check_baseline_options(args.baseline, args.baseline_run, preset)
    return RunOptions(
        config=config,
        preset=preset,
        interval=args.interval,
        duration=args.duration,
        attach_pid=args.pid,
        price_per_hour=check_price(args.run_price),
        baseline=baseline_from_recording(args.baseline) if args.baseline is not None else None,
        baseline_run=args.baseline_run,
    )


def run_wiring(args: argparse.Namespace, options: RunOptions) -> RunWiring:
    """The run history (None with --no-history), the --record file and the exporter's
    address, as every face that records a run wires them."""
    from gputui.live.wiring import RunWiring
    from gputui.record.history import RunHistory

    return RunWiring(
        history=RunHistory.from_environment(args.no_history),
        record_path=args.record,
        record_force=args.force,
        metrics_address=args.serve_metrics,
        price_per_hour=options.price_per_hour,
    )


def check_price(price: float | None) -> float | None:
    """``--price`` (USD per hour) as given, or a UserError in one line."""
    if price is not None and not (math.isfinite(price) and price > 0):
        raise UserError(f"--price: expected a price per hour greater than 0, got {price}")
    return price


def chosen_preset(args: argparse.Namespace, config: Config) -> Preset | None:
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
    return preset


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

"""What the command line asks of a run, checked once for every face that starts one (the
headless recorder, the dashboard, ``gputui check``'s price): a bad value is one line and
exit code 2 before anything starts.

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
from typing import TYPE_CHECKING, Any

from gputui.errors import UserError

if TYPE_CHECKING:
    from gputui.presets.load import Preset

MAX_INTERVAL_S = 3600.0  # a sampler that sleeps longer than an hour is a typo


def check_price(price: float | None) -> float | None:
    """``--price`` (USD per hour) as given, or a UserError in one line."""
    if price is not None and not (math.isfinite(price) and price > 0):
        raise UserError(f"--price: expected a price per hour greater than 0, got {price}")
    return price


def chosen_preset(args: argparse.Namespace, config) -> Preset | None:
    """What this invocation runs: the command after ``--`` (a preset made on the spot,
    added to ``config.presets`` so the dashboard finds it by name), else ``--preset``,
    with ``--batch-size`` and ``--no-probe`` applied; None to watch."""
    from gputui.presets.load import get_preset

    probe = False if args.no_probe else None
    if args.run_command is not None:
        from gputui.presets.command import command_preset

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

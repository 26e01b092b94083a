"""From the command line to the dashboard: ``gputui`` [--preset NAME] [--record FILE] [--theme NAME]: every option checked before the screen opens, the exporter started, the app run."""

from __future__ import annotations

import argparse
import sys

from gputui.errors import UserError
from gputui.presets.load import load_config
from gputui.session.baseline import check_baseline_options
from gputui.session.options import check_run_options, chosen_preset, command_line_diagnosis


def run_dashboard(args: argparse.Namespace) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UserError("the dashboard needs a terminal: use --record FILE to record headless")
    check_run_options(args)
    from gputui.record.history import RunHistory
    from gputui.record.recording import check_record_target

    if args.record is not None:
        check_record_target(args.record, args.force)  # before the screen opens, not at the first run
    history = RunHistory.from_environment(args.no_history)
    config = load_config(extra=args.presets)  # read once: the presets and the [diagnosis] table
    preset = chosen_preset(args, config)  # a wrong name: one line, before the screen opens
    check_baseline_options(args.baseline, args.baseline_run, preset)
    baseline = dashboard_baseline(args)

    from gputui.metrics.server import start_metrics  # only where a run starts: prometheus_client is not light

    metrics = start_metrics(args)  # a port in use is a one-line error before the screen opens
    from gputui.tui.app import make_app  # Textual loads only now

    app = make_app(
        config.presets,
        interval=args.interval,
        duration=args.duration,
        attach_pid=args.pid,
        diagnosis=config.diagnosis,
        diagnosis_overrides=command_line_diagnosis(args),
        start_preset=args.preset,
        record_path=args.record,
        theme=args.theme,
        handle_signals=True,
        record_force=args.force,
        history=history,
        confirm_quit=not args.no_confirm_quit,
        baseline=baseline,
        baseline_run=args.baseline_run,
    )
    if metrics is not None:
        app.supervisor.add_observer(metrics.live)
    try:
        code = app.run()
    finally:
        # Normally done on unmount; here too in case Textual itself failed.
        app.shutdown_sessions(app.exit_reason or "dashboard closed")
        app.supervisor.wait_closed(30)
        if metrics is not None:
            metrics.close()
    if args.record is not None:
        note = f"recorded to {args.record}" if app.recorded else f"nothing recorded to {args.record}: no run was started"
        print(f"gputui: {note}", file=sys.stderr)
    return dashboard_exit_code(app, code)


def dashboard_baseline(args: argparse.Namespace) -> dict | None:
    """--baseline FILE: the one-GPU baseline the --preset's runs scale against."""
    if args.baseline is None:
        return None
    if not args.preset:
        raise UserError("--baseline: expected --preset NAME too (the data-parallel preset it is the one-GPU baseline of)")
    from gputui.session.baseline import baseline_from_recording

    return baseline_from_recording(args.baseline)


def dashboard_exit_code(app, returned: object) -> int:
    """What the process exits with: the code the app returned (0, or a signal's); after
    a crash Textual returns None and sets ``return_code`` (1), which must not become 0."""
    if isinstance(returned, int):
        return returned
    return app.return_code or 0

"""From the command line to the dashboard: ``gputui`` [--preset NAME] [--record FILE] [--theme NAME]
(and ``gputui attach``): every option checked before the screen opens, the exporter
started, the app run, with each run it starts in a process of its own (gputui.live)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from gputui.cli.run_options import run_options, run_wiring
from gputui.console import say
from gputui.errors import UserError
from gputui.session.options import RunOptions

if TYPE_CHECKING:
    from gputui.live.registry import LiveRun


def run_dashboard(args: argparse.Namespace, attach_to: LiveRun | None = None) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UserError("the dashboard needs a terminal: use --record FILE to record headless")
    from gputui.record.recorder import check_record_target

    if args.record is not None:
        check_record_target(args.record, args.force)  # before the screen opens, not at the first run
    options = run_options(args)  # a wrong name: one line, before the screen opens
    check_dashboard_options(options)
    wiring = run_wiring(args, options)
    metrics = wiring.metrics(announce=None if args.quiet else say)  # a port in use: one line before the screen opens
    from gputui.live.spawn import start_detached
    from gputui.tui.live_app import DashboardLook, DashboardParts, make_app  # Textual loads only now

    look = DashboardLook(theme=args.theme, handle_signals=True, confirm_quit=not args.no_confirm_quit)
    app = make_app(options, DashboardParts(wiring=wiring, run_launcher=start_detached), look, attach_to=attach_to)
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
    going = [followed.live for followed in app.supervisor.left_running if followed.live is not None and followed.live.alive()]
    if args.record is not None:
        note = f"recorded to {args.record}" if app.recorded else f"nothing recorded to {args.record}: no run was started"
        if any(live.record_path is not None for live in going):
            note = f"recording to {args.record}: the run goes on"
        print(f"gputui: {note}", file=sys.stderr)
    say_still_going(going)
    return dashboard_exit_code(app, code)


def say_still_going(going: list[LiveRun]) -> None:
    """The runs the dashboard leaves going, and how to get back to them."""
    from gputui.escape import for_terminal

    for live in going:
        name = for_terminal(live.name)
        say(f"gputui: {name} goes on (pid {live.pid}): gputui attach {name} to watch it again, gputui stop {name} to stop it")


def check_dashboard_options(options: RunOptions) -> None:
    """What the dashboard asks beyond a headless run: --baseline names the preset whose
    runs scale against it (the dashboard runs others too)."""
    if options.baseline is not None and options.preset is None:
        raise UserError("--baseline: expected --preset NAME too (the data-parallel preset it is the one-GPU baseline of)")


def dashboard_exit_code(app, returned: object) -> int:
    """What the process exits with: the code the app returned (0, or a signal's); after
    a crash Textual returns None and sets ``return_code`` (1), which must not become 0."""
    if isinstance(returned, int):
        return returned
    return app.return_code or 0

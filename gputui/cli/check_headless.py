"""``gputui check`` without the dashboard: a line per check as it completes, then the
verdict (or JSON), the check kept in the run history and, where asked, in a recording, a
Markdown table and a Prometheus text file.  Loaded by ``check_cli.run`` only (the check's
modules are not light)."""

from __future__ import annotations

import sys
from pathlib import Path

from gputui.check import verdict_text as render
from gputui.check.check_run import CheckListener, CheckRun
from gputui.check.result import CheckResult
from gputui.check.stage_context import CheckOptions, StageState
from gputui.escape import for_terminal
from gputui.run.signal_relay import STOP_SIGNALS

WRITE_FAILED = 74  # sysexits' EX_IOERR, as for a recording that cannot be written
# The files the check writes at its end, by option: what each is, for the one line
# that says it cannot be written (at the start, or should the write still fail).
OUTPUT_FILES = {"--markdown": "cannot write the Markdown report", "--metrics-file": "cannot write the metrics"}


class ProgressLines(CheckListener):
    """A line per stage as it starts and per check as it completes, followed by the
    check's cause and what to do when it is not ok (``verbose``: and by every
    expectation's source)."""

    def __init__(self, stream, *, verbose: bool = False) -> None:
        self.stream = stream
        self.verbose = verbose

    def on_stage(self, stage: str, state: StageState) -> None:
        if state == "start":
            print(f"gputui check: {stage}", file=self.stream, flush=True)

    def on_result(self, result: CheckResult) -> None:
        print("\n".join("  " + line for line in render.progress_lines(result, verbose=self.verbose)), file=self.stream, flush=True)


def run_check_cli(
    options: CheckOptions,
    *,
    record: Path | None,
    as_json: bool,
    markdown: Path | None,
    metrics_file: Path | None = None,
    quiet: bool = False,
    verbose: bool = False,
    force: bool = False,
    no_history: bool = False,
) -> int:
    """The headless face: a line per check as it completes, then the verdict (or JSON).
    The check is kept in the run history like any run, and in ``record`` if given."""
    from gputui.live.wiring import RunWiring
    from gputui.record.history import RunHistory
    from gputui.safe_write import write_atomic

    wiring = RunWiring(history=RunHistory.from_environment(no_history), record_path=record, record_force=force)
    # A full disk loses the recording, not the verdict: say so at once and go on.
    recording, kept = wiring.recorders(
        "check",
        warn=lambda text: print(f"gputui: warning: {for_terminal(text)}", file=sys.stderr),  # a path the user typed, a folder's name
        on_record_error=lambda text: print(f"gputui: warning: {for_terminal(text)}; the check goes on", file=sys.stderr),
    )
    recorders = [r for r in (recording, kept) if r is not None]
    # Progress goes to stderr with --json (stdout is for the machine), else to stdout.
    listener = CheckListener() if quiet else ProgressLines(sys.stderr if as_json else sys.stdout, verbose=verbose)
    metrics = None
    if metrics_file is not None:
        from gputui.metrics.live import LiveMetrics

        metrics = LiveMetrics(options.price_per_hour)
    check = CheckRun(options, observers=[*recorders, *([metrics] if metrics else [])], listener=listener)
    relay = wiring.stop_signals(STOP_SIGNALS, lambda _signum: check.stop())  # nohup's ignored SIGHUP stays ignored
    received = relay.received
    try:
        report = check.run()
    finally:
        relay.close()
        for recorder in recorders:
            recorder.close()
    # Each path was claimed before the check began (check_cli); what fails only now (a
    # disk that filled meanwhile) loses that file, never the verdict.
    failed = []
    if markdown is not None:
        try:
            write_atomic(markdown, render.markdown(report.results, report.header))
        except OSError as exc:
            failed.append(f"{markdown}: {OUTPUT_FILES['--markdown']} ({exc.strerror or exc})")
    if metrics is not None and metrics_file is not None:
        from gputui.metrics.families import write_metrics_file

        try:
            write_metrics_file(metrics_file, metrics)
        except OSError as exc:
            failed.append(f"{metrics_file}: {OUTPUT_FILES['--metrics-file']} ({exc.strerror or exc})")
    if as_json:
        print(render.to_json(report.results, report.header, report.summary))
    else:
        print(render.verdict_line(report.results) + (" (stopped early)" if report.stopped else ""))
    for line in failed:
        print(f"gputui: error: {for_terminal(line)}", file=sys.stderr)
    if failed:
        return WRITE_FAILED
    if report.stopped:
        return 128 + received[0] if received else 130  # as the shell reports a death by that signal
    return report.exit_code

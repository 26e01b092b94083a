"""The live dashboard app and its one factory, :func:`make_app`, used by the CLI and tests.
What it shares with a replay (state, screens, redraw, themes) is
:class:`~gputui.tui.app_base.DashboardApp`.

A run the dashboard starts lives in a process of its own (``DashboardParts.run_launcher``:
the command line's starts it detached, gputui.live), which the dashboard follows through
its recording: quitting, a hangup or a SIGKILL leave it going, ``s`` asks before it stops
it, and the Runs list offers the live runs started elsewhere (Enter attaches).  Without a
launcher (tests on fake telemetry) runs are Sessions in this process, stopped on quit.

Threads: the Textual event loop draws; one thread worker runs the
:class:`~gputui.view.supervisor.SessionSupervisor` loop, which runs one session at a
time.  News waits in each session's :class:`~gputui.view.bridge.SessionBridge`: the
app folds it into :class:`~gputui.view.state.DashboardState` at its redraw tick (once a
second) and redraws the changed panels, so neither the redraw rate nor the app's
wake-ups follow the sampling or reporting rate; a run starting or ending comes at once,
as a :class:`SessionNews` message.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from textual.app import SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.theme import Theme

from gputui.errors import UserError
from gputui.live.wiring import RunWiring
from gputui.record.history import KeptRun, label_for, read_kept_run
from gputui.record.observer import Observer
from gputui.session.assemble import SessionParts
from gputui.tui.app_base import REFRESH_S, DashboardApp, app_themes
from gputui.tui.screens.stop_screen import STOP, StopRunScreen
from gputui.tui.user_settings import settings_path as default_settings_path
from gputui.view import state as st
from gputui.view.baseline_first import BaselineFirst
from gputui.view.bridge import SessionBridge
from gputui.view.supervisor import SessionFactory, SessionSupervisor, SessionTicket, followed

if TYPE_CHECKING:  # the session side loads in the session thread, after the first frame
    from gputui.check.check_run import CheckListener, CheckRun
    from gputui.check.stage_context import CheckOptions
    from gputui.live.followed import FollowedRun
    from gputui.live.host import HostSpec
    from gputui.live.registry import LiveRun
    from gputui.session.options import RunOptions
    from gputui.session.session import Session
    from gputui.tui.screens.check import CheckFactory

STOP_WAIT_S = 20.0  # the runner's TERM grace (5 s) and KILL, with room to spare
LIVE_POLL_S = 5.0  # how often the Runs list looks for live runs started elsewhere
TUNE_POLL_S = 2.0  # how often a tune started here is looked at, to say its verdict when it ends
EXIT_GRACE_S = 5.0  # what Textual gets to restore the terminal once the sessions are closed
QUIT_CONFIRM_S = 5.0  # a second q within this confirms quitting while a run is going
HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class SessionNews(Message):
    """Something happened in a session: call ``bridge.take()`` for the news."""

    def __init__(self, bridge: SessionBridge) -> None:
        super().__init__()
        self.bridge = bridge


class GpuTuiApp(DashboardApp):
    """The live dashboard: sessions run presets (and watch) while it is open."""

    BINDINGS = [Binding("k", "check", "Check", id="check"), Binding("x", "run_command", "Command", id="run_command")]
    RUNS_PRESETS = True

    def __init__(
        self,
        options: RunOptions,
        *,
        make_session: SessionFactory,
        make_check: CheckFactory,
        wiring: RunWiring,
        themes: dict[str, Theme],
        theme_problems: list[str],
        look: DashboardLook,
        run_launcher: RunLauncher | None = None,
        attach_to: LiveRun | None = None,
    ) -> None:
        self.make_check = make_check
        super().__init__(
            presets=options.presets,
            themes=themes,
            theme_problems=theme_problems,
            settings_file=look.settings_file or default_settings_path(),
            theme=look.theme,
            refresh_interval=look.refresh_interval,
        )
        self.options = options
        self._run_launcher = run_launcher
        self.supervisor = SessionSupervisor(
            make_session, self._observers_for, self._session_ended, options=options, make_run=self._make_run if run_launcher else None
        )
        self._attach_first = attach_to
        self._tunes: list[tuple[subprocess.Popen[bytes], Path, Path]] = []  # tunes started from a summary: (process, log, report)
        self._live_names: frozenset[str] | None = None  # the live runs the Runs list was last read with
        start_preset = options.preset.name if options.preset else None
        self._start_preset = start_preset
        self.dashboard.initial_preset = start_preset
        self._recorder: Observer | None = None  # the --record file's, while a run in this process writes it
        self.recorded = False  # a recording was started (and is finished once the app ends)
        self._recorded_serial: int | None = None
        self.wiring = wiring
        self.history = wiring.history
        self._kept: dict[int, Observer] = {}  # history recorders by session serial
        self._handle_signals = look.handle_signals
        self._bridges: dict[int, SessionBridge] = {}
        self._last_preset: str | None = start_preset
        self._quitting = False
        self._watchdog_armed = False
        self.confirm_quit = look.confirm_quit
        self._quit_asked_at: float | None = None
        # --baseline-run: the preset's one-GPU twin runs first (a UserError when it is not data-parallel)
        self._baseline_first = BaselineFirst(options.preset) if options.baseline_run and options.preset else None

    # -- Start and stop ---------------------------------------------------------------
    def start_source(self) -> None:
        if self._attach_first is not None:
            self.attach(self._attach_first)
        elif self._baseline_first is not None:
            self.state.note(f"--baseline-run: measuring the one-GPU baseline first: {self._baseline_first.twin.name}")
            self.supervisor.start_run(self._baseline_first.twin)
        elif self._start_preset:
            self.start_preset(self._start_preset)
        # Sessions start once the first frame is out: opening NVML and spawning the run
        # would otherwise compete with it for the interpreter.
        self.call_after_refresh(self.run_worker, self.supervisor.loop, name="sessions", thread=True, exit_on_error=False)
        self.call_after_refresh(self.load_history)
        if self._run_launcher is not None:
            self.set_interval(LIVE_POLL_S, self._look_for_live_runs)
        if self._handle_signals:
            self._install_signal_handlers()

    def load_history(self) -> None:
        """Read the kept runs and the live ones for the Runs list, off the UI thread."""
        history = self.history
        watch_live = self._run_launcher is not None

        def read() -> None:
            from gputui.live.registry import Registry

            live = Registry().runs() if watch_live else []
            runs = history.runs() if history is not None else []
            kept = {run.path for run in runs}
            runs += [read_kept_run(run.recording) for run in live if run.recording not in kept]  # live with no history copy
            self.call_from_thread(self._show_runs, runs, live)

        if history is not None or watch_live:
            self.run_worker(read, name="history", thread=True, exit_on_error=False, group="history", exclusive=True)

    def _show_runs(self, runs: list[KeptRun], live: list[LiveRun]) -> None:
        self._live_names = frozenset(run.name for run in live)
        self.state.set_history(runs, live)

    def _look_for_live_runs(self) -> None:
        """A run started or ended elsewhere (another terminal, a detached one): list it."""
        from gputui.live.registry import Registry

        names = frozenset(run.name for run in Registry().runs())
        if names != self._live_names:
            self._live_names = names
            self.load_history()

    async def on_unmount(self) -> None:
        # The benchmark's whole process group is stopped before the app is gone, and
        # a recording gets its summary; the session thread says when both are done.
        self.shutdown_sessions(self.exit_reason or "quit")
        closed = await asyncio.to_thread(self.supervisor.wait_closed, STOP_WAIT_S)
        # Still running, the session thread is writing them and closes them itself;
        # closing them under it would cut its last lines ("write to closed file").
        for recorder in [self._recorder, *self._kept.values()] if closed else []:
            if recorder is not None:
                recorder.close()
        if self._handle_signals:
            loop = asyncio.get_running_loop()
            for sig in HANDLED_SIGNALS:
                loop.remove_signal_handler(sig)

    def shutdown_sessions(self, reason: str) -> None:
        self._quitting = True
        self.supervisor.shutdown(reason)

    def quit_needs_asking(self) -> bool:
        if not self.confirm_quit or not self.state.live_run or self.supervisor.current_outlives_viewer:
            return False  # nothing to lose: a run of its own process goes on
        now = time.monotonic()
        if self._quit_asked_at is not None and now - self._quit_asked_at <= QUIT_CONFIRM_S:
            return False  # the second press: confirmed
        self._quit_asked_at = now
        self.notify(
            f"A run is going: press q again (or Ctrl+C) within {QUIT_CONFIRM_S:.0f} s to stop it and quit (gputui --no-confirm-quit never asks).",
            severity="warning",
            timeout=QUIT_CONFIRM_S,
        )
        return True

    async def quit_now(self) -> None:
        self.exit_reason = self.exit_reason or "quit"
        self.shutdown_sessions(self.exit_reason)
        self._arm_exit_watchdog(0)
        self.exit(0)

    def _arm_exit_watchdog(self, code: int) -> None:
        """Leave even if Textual cannot: when the terminal is gone (a dropped SSH
        link), Textual's writer thread dies on EIO and its shutdown then waits for it
        forever.  Only for a real process (``handle_signals``), never inside tests."""
        if not self._handle_signals or self._watchdog_armed:
            return
        self._watchdog_armed = True

        def watch() -> None:
            self.supervisor.wait_closed(STOP_WAIT_S)  # the benchmark group is gone first
            time.sleep(EXIT_GRACE_S)
            os._exit(code)

        threading.Thread(target=watch, name="gputui-exit-watchdog", daemon=True).start()

    def _install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in HANDLED_SIGNALS:
            if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
                continue  # under nohup: keep going, as the user asked
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        self.exit_reason = f"received {signal.Signals(sig).name}"
        self.shutdown_sessions(self.exit_reason)
        self._arm_exit_watchdog(128 + int(sig))
        self.exit(128 + int(sig))

    # -- Sessions (the observers run in the session thread) ----------------------------
    def _make_run(self, ticket: SessionTicket, options: RunOptions) -> FollowedRun:
        """A preset's run in a process of its own (started by the supervisor's loop), the
        first one writing the --record file, as headless does."""
        from gputui.live.followed import FollowedRun
        from gputui.live.host import HostSpec

        assert self._run_launcher is not None
        record_path = self._record_path_for(ticket)
        self.recorded = self.recorded or record_path is not None
        run_options = dataclasses.replace(options, preset=ticket.preset, attach_pid=None, baseline_run=False)
        spec = HostSpec(
            options=run_options, wiring=dataclasses.replace(self.wiring, record_path=record_path, metrics_address=None), progress=False, detached=True
        )
        launcher = self._run_launcher
        return FollowedRun(lambda: launcher(spec))

    def _record_path_for(self, ticket: SessionTicket) -> Path | None:
        """--record FILE for the first run, as headless (not a --baseline-run's twin)."""
        measuring_baseline = self._baseline_first is not None and ticket.preset is self._baseline_first.twin
        return self.wiring.record_path if not (self.recorded or measuring_baseline) else None

    def _observers_for(self, session: Session | FollowedRun, ticket: SessionTicket) -> list[Observer]:
        bridge = SessionBridge(ticket, lambda woken: self.post_message(SessionNews(woken)))
        self._bridges[ticket.serial] = bridge
        bridge.started()
        observers: list[Observer] = [bridge]
        if followed(session):  # it writes its recordings itself
            session.when_started(lambda live: self._followed(ticket, bridge, live))
            return observers
        if not (ticket.is_run or ticket.attach_pid):
            return observers  # watching an idle machine is neither recorded nor kept
        record_path = self._record_path_for(ticket)
        here = cast("Session", session)  # a run in this process: its recorders are this dashboard's
        label = label_for(ticket.preset.name if ticket.preset else None, ticket.attach_pid)

        def record_error(text: str) -> None:
            bridge.note(f"{text}; the run was stopped")
            here.stop("cannot write the recording")

        # Only the first run writes the --record file; the dashboard's later ones are kept only.
        wiring = dataclasses.replace(self.wiring, record_path=record_path)
        try:
            recording, kept = wiring.recorders(label, warn=bridge.note, on_record_error=record_error)
        except UserError as exc:  # the --record file could not be opened: the run goes on, kept but not recorded
            bridge.note(f"not recording: {exc}")
            self.recorded = True
            recording, kept = dataclasses.replace(wiring, record_path=None).recorders(label, warn=bridge.note, on_record_error=record_error)
        if recording is not None:
            self.recorded = True
            self._recorded_serial = ticket.serial
            self._recorder = recording
            observers.insert(0, recording)
            bridge.recording(str(record_path))
        if kept is not None:
            self._kept[ticket.serial] = kept
            observers.insert(0, kept)
            bridge.kept(str(kept.path))
        return observers

    def _followed(self, ticket: SessionTicket, bridge: SessionBridge, live: LiveRun) -> None:
        """A run of its own process has started (or been attached to): what it writes, where."""
        for note in live.notes:
            bridge.note(note)
        if live.record_path is not None and ticket.live is None:  # this dashboard's --record file
            self._recorded_serial = ticket.serial
            bridge.recording(str(live.record_path))
        if live.kept_path is not None:
            bridge.kept(str(live.kept_path))

    def _session_ended(self, ticket: SessionTicket, error: BaseException | None) -> None:
        if self._recorder is not None and self._recorded_serial == ticket.serial:
            self._recorder.close()  # idempotent; a failed session wrote no summary line
        kept = self._kept.pop(ticket.serial, None)
        if kept is not None:
            kept.close()
        bridge = self._bridges.pop(ticket.serial, None)
        if bridge is not None:
            bridge.ended(error)

    def recording_of(self, run: st.RunView) -> Path | None:
        if run.kept_path is None and self._recorded_serial == run.ticket.serial:
            return self.wiring.record_path
        return run.kept_path

    def on_session_news(self, message: SessionNews) -> None:
        self._fold_news(message.bridge)
        self.news_arrived()

    def take_news(self) -> None:
        for bridge in list(self._bridges.values()):  # a copy: the session thread removes ended ones
            self._fold_news(bridge)

    def _fold_news(self, bridge: SessionBridge) -> None:
        items = bridge.take()
        if not items:
            return
        for run in self.state.apply(bridge.ticket, items):
            if run.kept_path is not None:
                self.load_history()
            if self._baseline_first is not None and self._baseline_first.is_twin(run):
                self._baseline_measured(run)  # no summary over it: the real run starts now
            elif not self._quitting and run is self.state.run:
                self.show_summary_when_seen(run)

    def _baseline_measured(self, twin_run: st.RunView) -> None:
        """--baseline-run: the one-GPU twin ended; its median is the baseline the preset's run scales against."""
        assert self._baseline_first is not None
        first, self._baseline_first = self._baseline_first, None
        try:
            baseline = first.baseline_from(twin_run)
        except UserError as error:  # it measured nothing (it failed, or ended in its warm-up)
            self.state.note(f"{error}; {first.target.name} was not started")
            self.notify(str(error), severity="error")
            return
        self.supervisor.set_baseline(baseline)
        self.state.note(f"{first.describe(baseline)}; starting {first.target.name}")
        if not self._quitting:
            self.start_preset(first.target.name)

    # -- Actions ----------------------------------------------------------------------
    def start_preset(self, name: str) -> None:
        preset = self.presets.get(name)
        if preset is None:
            self.notify(f"no preset named {name!r}", severity="error")
            return
        if self.supervisor.start_run(preset) is None:
            self.notify("A run is going: press s to stop it first.", severity="warning")
            return
        if preset.probed():
            from gputui.probe import NOTICE

            self.state.note(NOTICE)
        self._last_preset = name

    def can_stop(self) -> bool:
        return bool(self.state.live_run)

    def can_run_again(self) -> bool:
        return self._last_preset is not None and not self.state.live_run

    def action_stop_run(self) -> None:
        """``s``: asks first; y stops the run (its whole process group)."""
        run = self.state.live_run
        if run is None:
            self.notify("Nothing is running.")
            return

        def answered(choice: str | None) -> None:
            if choice == STOP:
                self.stop_run()

        self.push_screen(StopRunScreen(run.label, self.supervisor.current_outlives_viewer), answered)

    def stop_run(self) -> None:
        """Stop the run now, saying who asked (its outcome names the dashboard)."""
        from gputui.live.stop_request import asked_by

        try:
            stopped = self.supervisor.stop_run(asked_by("the dashboard"))
        except UserError as exc:  # it ended meanwhile, or its process is not ours
            self.notify(str(exc), severity="warning")
            return
        if not stopped:
            self.notify("Nothing is running.")
            return
        cancelled = self._baseline_first.cancel() if self._baseline_first is not None else None
        if cancelled:
            self.state.note(cancelled)

    def attach(self, live: LiveRun) -> None:
        """Show ``live`` (a run started elsewhere) from its start, then as it goes."""
        from gputui.record.recording import read_header
        from gputui.view.replay_player import preset_from_header

        try:
            preset = preset_from_header(read_header(live.recording), live.recording)
        except (UserError, OSError) as exc:
            self.notify(f"{live.name}: cannot attach: {exc}", severity="error")
            return
        if self.supervisor.attach(live, preset) is None:
            self.notify("A run is shown: stop it (s) or quit, then attach.", severity="warning")
            return
        # r runs its preset again where this dashboard has one of that name (a command run elsewhere may not be)
        self._last_preset = preset.name if preset.name in self.presets else None

    def open_run(self, entry: st.RunView | KeptRun) -> None:
        """Enter on the Runs list: a live run started elsewhere is attached to; any other shows its summary."""
        live = self.state.live_runs.get(entry.path) if isinstance(entry, KeptRun) else None
        if live is not None:
            self.attach(live)
            return
        super().open_run(entry)

    def can_tune(self, run: st.RunView) -> bool:
        """An ended, input-bound run of the user's own Python command (probed): ``gputui
        tune`` can try its DataLoader's settings."""
        findings = (run.summary.findings if run.summary is not None else None) or list(run.findings.values())
        return run.ended and run.preset.probed() and any(f.kind == "input_bound" for f in findings)

    def start_tune(self, run: st.RunView) -> None:
        """``gputui tune`` on the run's command, in a process of its own: its trials show
        in Runs as they run, and a notice says its verdict when it ends."""
        from gputui.live.spawn import start_tune
        from gputui.record.history import state_dir

        preset = run.preset
        try:
            process, log, report = start_tune(preset.argv(), state_dir() / "tunes", time.strftime("%Y%m%d-%H%M%S"), env=preset.env, cwd=preset.cwd)
        except OSError as exc:
            self.notify(f"gputui tune could not start: {exc}", severity="error")
            return
        self._tunes.append((process, log, report))
        if len(self._tunes) == 1:
            self.set_interval(TUNE_POLL_S, self._watch_tunes)
        self.notify(f"gputui tune started (pid {process.pid}): its trials show in Runs as they run; log {log}; report {report} when it ends.", timeout=15)

    def _watch_tunes(self) -> None:
        for tune in [t for t in self._tunes if t[0].poll() is not None]:
            self._tunes.remove(tune)
            process, log, report = tune
            said = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("gputui tune: ") and " report written to " not in line]
            verdict = said[-1].removeprefix("gputui tune: ") if said else f"exit code {process.returncode}"
            self.notify(f"gputui tune ended: {verdict}" + (f"; report {report}" if report.exists() else f"; log {log}"), timeout=30)

    def action_run_again(self) -> None:
        if self._last_preset is None:
            self.notify("No run yet: pick a preset and press Enter.")
            return
        self.start_preset(self._last_preset)

    def action_run_command(self) -> None:
        """``x``: any command, run as ``gputui -- CMD`` runs it, or saved as a preset."""
        from gputui.tui.screens.command_screen import RUN, CommandScreen

        def answered(answer: tuple[str, list[str]] | None) -> None:
            if answer is None:
                return
            from gputui.presets.command_preset import command_preset

            action, argv = answer
            try:
                preset = command_preset(argv, self.presets)
            except UserError as exc:
                self.notify(str(exc), severity="error")
                return
            if action == RUN:
                self.presets[preset.name] = preset
                self.dashboard.list_preset(preset.name)  # the side panel describes what runs
                self.start_preset(preset.name)
            else:
                from gputui.tui.screens.editor import PresetEditorScreen

                self.push_screen(PresetEditorScreen(preset, new=True))

        self.push_screen(CommandScreen(), answered)

    def action_check(self) -> None:
        from gputui.tui.screens.check import CheckScreen

        def busy() -> str | None:
            return "A run is going: stop it (s) before checking the machine." if self.state.live_run else None

        def make_check(options: CheckOptions, listener: CheckListener) -> CheckRun:
            check = self.make_check(options, listener)
            for observer in self.supervisor.every_session:  # the --serve-metrics feed: check results become metrics
                check.session.add_observer(observer)
            return check

        self.push_screen(CheckScreen(make_check, busy_reason=busy))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Stop run", "Stop the running benchmark and its process group (s)", self.action_stop_run)
        yield SystemCommand("Run again", "Run the last preset again (r)", self.action_run_again)
        yield SystemCommand("Check this machine", "Is it healthy and as fast as it should be for its GPU? (k)", self.action_check)


@dataclass(frozen=True)
class DashboardParts:
    """What the dashboard is built from: each session's parts (tests pass telemetry on a
    fake NVML, a fixed host sampler and clock), or a whole scripted ``session_factory`` or
    ``check_factory``; the wiring that keeps every run (the command line passes the user's
    history; tests keep none unless they ask)."""

    session: SessionParts = SessionParts()  # each session's telemetry and clock (this machine's)
    session_factory: SessionFactory | None = None
    check_factory: CheckFactory | None = None
    wiring: RunWiring = RunWiring()  # the run history, --record FILE (the first run's)
    run_launcher: RunLauncher | None = None  # starts a run in a process of its own; None: runs here


RunLauncher = Callable[["HostSpec"], "LiveRun"]


@dataclass(frozen=True)
class DashboardLook:
    """How the dashboard looks and behaves on this terminal."""

    theme: str | None = None  # --theme, else the settings file's
    settings_file: Path | None = None  # where the theme choice is kept (tests: a temporary one)
    user_themes_dir: Path | None = None
    refresh_interval: float = REFRESH_S
    handle_signals: bool = False  # TERM/HUP/INT stop the runs and quit (the command line's)
    confirm_quit: bool = True  # a run in this process (tests): a second q confirms; False (--no-confirm-quit): one q stops it


def make_app(options: RunOptions, parts: DashboardParts | None = None, look: DashboardLook | None = None, *, attach_to: LiveRun | None = None) -> GpuTuiApp:
    """The dashboard, ready to ``run()`` or ``run_test()``: the runs ``options`` asks for
    (RunOptions: the presets, the preset to start, --record, --baseline, ...), built
    from ``parts``, looking as ``look`` says; showing the live run ``attach_to`` first."""
    parts = parts or DashboardParts()
    look = look or DashboardLook()
    session_parts = parts.session
    make_session = parts.session_factory or session_parts.build

    def check_factory(check_options: CheckOptions, listener: CheckListener) -> CheckRun:
        from gputui.check.check_run import CheckRun

        check_options.interval = options.interval
        check_options.config = options.config
        return CheckRun(check_options, listener=listener, parts=session_parts)

    themes, problems = app_themes(look.theme, look.user_themes_dir)
    return GpuTuiApp(
        options,
        make_session=make_session,
        make_check=parts.check_factory or check_factory,
        wiring=parts.wiring,
        themes=themes,
        theme_problems=problems,
        look=look,
        run_launcher=parts.run_launcher,
        attach_to=attach_to,
    )

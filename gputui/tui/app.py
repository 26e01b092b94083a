"""The dashboard app and its one factory, :func:`make_app`, used by the CLI and tests.

Threads: the Textual event loop draws; one thread worker runs the
:class:`~gputui.tui.supervisor.SessionSupervisor` loop, which runs one Session at a
time.  News reaches the app only as :class:`~gputui.tui.bridge.SessionNews`
messages; the app folds it into :class:`~gputui.tui.state.DashboardState` at once and
redraws changed panels on a 0.5 s timer, so the redraw rate does not follow the
sampling rate.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App, ScreenStackError, SystemCommand, UnknownModeError
from textual.binding import Binding
from textual.filter import LineFilter
from textual.screen import Screen
from textual.theme import Theme

from gputui.assemble import SessionParts
from gputui.errors import UserError
from gputui.events import Observer
from gputui.presets import Config, Preset
from gputui.tui import state as st
from gputui.tui.baseline_first import BaselineFirst
from gputui.tui.bridge import SessionBridge, SessionNews
from gputui.tui.messages import CompareRuns, OpenRun, RefreshDashboard, StartPreset
from gputui.tui.palette import SafeCommandPalette
from gputui.tui.screens.dashboard import DashboardScreen
from gputui.tui.screens.findings import FindingsScreen
from gputui.tui.screens.summary import SummaryScreen
from gputui.tui.settings import load_settings, save_setting
from gputui.tui.settings import settings_path as default_settings_path
from gputui.tui.supervisor import SessionFactory, SessionSupervisor, SessionTicket
from gputui.tui.themes import DEFAULT_THEME, AnsiMutedDim, load_themes
from gputui.tui.widgets.base import StateView
from gputui.tui.widgets.gpu import GpuGrid

if TYPE_CHECKING:  # the session side loads in the session thread, after the first frame
    from gputui.check.context import CheckOptions
    from gputui.check.runner import CheckListener, CheckRun
    from gputui.history import KeptRun, RunHistory
    from gputui.record import Recorder
    from gputui.session import Session
    from gputui.telemetry.gpu import GpuTelemetry
    from gputui.telemetry.host import HostTelemetry
    from gputui.tui.screens.check import CheckFactory

REFRESH_S = 0.5  # redraw at most twice a second, whatever the sampling rate
STOP_WAIT_S = 20.0  # the runner's TERM grace (5 s) and KILL, with room to spare
EXIT_GRACE_S = 5.0  # what Textual gets to restore the terminal once the sessions are closed
QUIT_CONFIRM_S = 5.0  # a second q within this confirms quitting while a run is going
HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class DashboardApp(App[int]):
    """What a live dashboard and a replay share: the state, the dashboard screen and its
    widgets, the summary, findings and compare views, themes and settings.  Where the
    news comes from (sessions, or a recording) is the subclass's business."""

    CSS_PATH = "app.tcss"
    TITLE = "gputui"
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("ctrl+q", "quit", "Quit", id="quit_ctrl_q", show=False, priority=True),
        # Textual turns Ctrl-C into a key (the terminal is raw): make it quit, as users expect
        # (not in the preset editor, where text fields copy with it: see check_action).
        Binding("ctrl+c", "quit", "Quit", id="quit_ctrl_c", show=False, priority=True),
        # Esc closes Textual's Keys panel (palette: "Keys"), enabled only while it is open.
        Binding("escape", "hide_help_panel", "Close keys", id="close_keys_panel", show=False, priority=True),
        Binding("t", "next_theme", "Theme", id="next_theme"),
        Binding("question_mark,f1", "help", "Help", id="help", key_display="?"),
        Binding("ctrl+p", "command_palette", "Commands", id="command_palette", show=False, priority=True),
    ]

    def __init__(
        self,
        *,
        presets: dict[str, Preset],
        themes: dict[str, Theme],
        theme_problems: list[str],
        settings_file: Path,
        theme: str | None,
        refresh_interval: float,
    ) -> None:
        super().__init__()
        self.presets = presets
        self.state = st.DashboardState()
        self._themes = themes
        self._startup_notes = list(theme_problems)
        self._settings_file = settings_file
        self._requested_theme = theme
        self._refresh_interval = refresh_interval
        self._seen_machine: tuple | None = None
        self._saved_theme: str | None = None  # the theme settings.toml has (or needs not have)
        self.exit_reason: str | None = None
        self.key_overrides: dict[str, str] = {}  # settings.toml's [keys]: binding id -> key(s)
        self._footer_state: tuple | None = None
        self._seen_milestone: tuple | None = None
        self.dashboard = DashboardScreen(presets, lambda: self.state)  # a replay swaps self.state
        self._muted_dim = AnsiMutedDim()

    # -- Start -------------------------------------------------------------------------
    def on_mount(self) -> None:
        for theme in self._themes.values():
            self.register_theme(theme)
        self._apply_settings()
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        self.push_screen(self.dashboard)
        self.start_source()
        self.set_interval(self._refresh_interval, self.refresh_dashboard)
        for note in self._startup_notes:
            self.notify(note, severity="warning", timeout=8)

    def start_source(self) -> None:
        """Start feeding the state: sessions, or a recording."""

    def refresh_dashboard(self, force: bool = False) -> None:
        """The redraw tick: panels whose sections changed redraw themselves."""
        dashboard = self.dashboard
        if not dashboard.is_mounted or not self.is_running:
            return  # not up yet, or closing: the shutdown takes the dashboard's widgets before its timers
        try:
            top = self.screen
        except (ScreenStackError, UnknownModeError):
            return  # no screen any more: the redraw timer fired while the app shuts down
        milestone = self.milestone()
        if top is not dashboard and not force:
            # Under a modal (summary, findings) Textual repaints the whole screen for
            # any change beneath it: ~8 KB/s at 140x40.  The panels catch up in one
            # repaint when the dashboard is back on top (DashboardScreen.on_screen_resume);
            # a run starting or ending, or its recording being finished, costs one
            # repaint now (the top line shows above the modal).
            if milestone == self._seen_milestone:
                return
            force = True
        self._seen_milestone = milestone
        # GPU panels come and go with the machine's GPUs, not with every sample.
        reason = (self.state.header or {}).get("gpu_unavailable_reason")
        machine = (tuple(sorted(self.state.gpus)), reason, self.state.versions[st.HEADER])
        if machine != self._seen_machine:
            self._seen_machine = machine
            dashboard.query_one(GpuGrid).sync_panels(self.state, reason)
            dashboard.show_highlighted_preset()
        for view in dashboard.query(StateView):
            view.sync(force)
        footer_state = self.footer_state()
        if footer_state != self._footer_state:
            self._footer_state = footer_state
            self.refresh_bindings()  # the footer shows the keys that apply now

    def milestone(self) -> tuple:
        """What is worth one repaint even under a modal: runs starting and ending, and
        the recording's state (not the elapsed time or samples, which change every tick)."""
        last = self.state.run
        return (len(self.state.runs), last.outcome_word if last else None, self.state.recording_state)

    # -- Which keys apply now (the footer shows only those) -----------------------------
    def footer_state(self) -> tuple[bool, ...]:
        """What decides which of the dashboard's keys apply."""
        return tuple(self.applicable_actions().values())

    def applicable_actions(self) -> dict[str, bool]:
        """The dashboard's actions that depend on the state, and whether each applies now."""
        return {
            "stop_run": self.can_stop(),
            "run_again": self.can_run_again(),
            "show_findings": bool(self.state.findings()),
            "show_summary": any(run.ended for run in self.state.runs),
        }

    def can_stop(self) -> bool:
        return False  # a replay runs nothing

    def can_run_again(self) -> bool:
        return False

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "quit":
            return not self.editing()  # no single key drops an edit: the editor's Esc asks first
        if action == "hide_help_panel":
            return bool(self.screen.query("HelpPanel"))
        return self.applicable_actions().get(action, True)

    def editing(self) -> bool:
        """A preset editor is open (perhaps under one of its dialogs)."""
        from gputui.tui.screens.editor import PresetEditorScreen

        return any(isinstance(screen, PresetEditorScreen) for screen in self.screen_stack)

    # -- Quitting: a run going asks first -------------------------------------------------
    async def action_quit(self) -> None:
        if not self.quit_needs_asking():
            await self.quit_now()

    def quit_needs_asking(self) -> bool:
        """True when quitting now would lose work; the user has been told how to confirm."""
        return False  # a replay loses nothing

    async def quit_now(self) -> None:
        """Quit without asking (scripts, tests, a confirmed quit)."""
        self.exit()

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None, time_format: str | None = None) -> str | None:
        """The palette's Screenshot: saved here or in $GPUTUI_SCREENSHOT_DIR, and the
        notification says where (Textual's own wrote to a ~/Downloads servers lack)."""
        from gputui.tui.screenshot import save_screenshot_file, screenshot_dir

        folder = Path(path) if path else screenshot_dir()
        try:
            saved = save_screenshot_file(self, folder, filename)
        except OSError as exc:
            self.notify(f"screenshot not saved: {folder}: {exc.strerror or exc}", title="Screenshot", severity="error", timeout=8)
            return None
        self.notify(f"screenshot saved to {saved}", title="Screenshot", timeout=6)
        return str(saved)

    def action_help(self) -> None:
        from gputui.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.key_overrides))

    # -- What screens and widgets ask (gputui.tui.messages) -------------------------------
    def on_start_preset(self, message: StartPreset) -> None:
        self.start_preset(message.name)

    def on_refresh_dashboard(self, message: RefreshDashboard) -> None:
        self.refresh_dashboard()

    def on_open_run(self, message: OpenRun) -> None:
        self.open_run(message.entry)

    def on_compare_runs(self, message: CompareRuns) -> None:
        self.compare_runs(message.entries)

    # -- What the dashboard's keys ask (a replay runs nothing) ---------------------------
    def start_preset(self, name: str) -> None:
        self.notify("A replay runs nothing.")

    def action_stop_run(self) -> None:
        self.notify("A replay runs nothing.")

    def action_run_again(self) -> None:
        self.notify("A replay runs nothing.")

    def action_show_findings(self) -> None:
        found = self.state.findings()
        ordered = self.state.open_findings() + [f for f in found.values() if f.get("state", "open") != "open"]
        self.push_screen(FindingsScreen(ordered))

    def action_show_summary(self) -> None:
        ended = [run for run in self.state.runs if run.ended]
        if not ended:
            self.notify("No run has ended yet.")
            return
        self.show_summary(ended[-1], self.state.gpu_names())

    def show_summary(self, run: st.RunView, gpu_names: list[str]) -> None:
        def after(choice: str | None) -> None:
            if choice != "again":
                return
            if run.number:
                self.action_run_again()
            elif run.preset.name in self.presets:  # a kept run: its own preset, if it still exists
                self.start_preset(run.preset.name)
            else:
                self.notify(f"No preset named {run.preset.name!r} here to run again.")

        self.push_screen(SummaryScreen(run, gpu_names), after)

    # -- The Runs list: this session's runs and the kept ones ----------------------------
    def recording_of(self, run: st.RunView) -> Path | None:
        """The file a run of this session was recorded to, if any."""
        return run.kept_path

    def open_run(self, entry: st.RunView | KeptRun) -> None:
        """Enter on the Runs list: the run's summary (a kept run's from its file)."""
        if isinstance(entry, st.RunView):
            if not entry.ended:
                self.notify(f"{entry.label} has not ended yet.")
                return
            self.show_summary(entry, self.state.gpu_names())
            return
        self.run_worker(lambda: self._load_past_summary(entry.path), name="past-run", thread=True, exit_on_error=False)

    def _load_past_summary(self, path: Path) -> None:
        from gputui.record import read_recording
        from gputui.tui.replay import ReplayPlayer

        try:
            player = ReplayPlayer(read_recording(path))
        except UserError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error", timeout=8)
            return
        player.seek(player.end_t)
        if player.state.run is None:
            self.call_from_thread(self.notify, f"{path.name}: no run in this recording")
            return
        self.call_from_thread(self.show_summary, player.state.run, player.state.gpu_names())

    def compare_runs(self, entries: list[st.RunView | KeptRun]) -> None:
        """Two runs marked with c on the Runs list: their comparison table."""
        paths = []
        for entry in entries:
            path = self.recording_of(entry) if isinstance(entry, st.RunView) else entry.path
            if path is None:
                self.notify(f"{entry.label} has no recording to compare (the run history is off)", severity="warning")
                return
            paths.append(path)
        self.run_worker(lambda: self._load_comparison(paths), name="compare", thread=True, exit_on_error=False)

    def _load_comparison(self, paths: list[Path]) -> None:
        from gputui.record import read_recording
        from gputui.tui.screens.compare import CompareScreen

        try:
            from gputui.lookback.compare import compare_rows
        except ImportError:
            self.call_from_thread(self.notify, "Comparing runs needs gputui.lookback.compare, which this build does not have.", severity="warning", timeout=8)
            return
        try:
            header, rows = compare_rows([read_recording(p) for p in paths])
        except UserError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error", timeout=8)
            return
        self.call_from_thread(self.push_screen, CompareScreen(header, rows, [p.name for p in paths]))

    # -- Themes -----------------------------------------------------------------------
    def _apply_settings(self) -> None:
        settings, problem = load_settings(self._settings_file)
        if problem:
            self._startup_notes.append(problem)
        if settings.keys:
            self.key_overrides = dict(settings.keys)
            self.set_keymap(settings.keys)  # [keys] in settings.toml: binding id = "key"
        for name in (self._requested_theme, settings.theme, DEFAULT_THEME):
            if name and name in self.available_themes:
                self.theme = name
                if name == self._requested_theme and name != settings.theme:
                    self._save_theme(name)  # --theme is a choice too: remember it
                # from here on, only changes are written (a first start writes no file)
                self._saved_theme = name
                return
            if name:
                self._startup_notes.append(f"unknown theme {name!r}; using {DEFAULT_THEME}")

    def _remember_theme(self, theme: Theme) -> None:
        for view in self.dashboard.query(StateView):
            view.invalidate()  # their cached cells hold the old theme's colours
        if theme.name != self._saved_theme:
            self._save_theme(theme.name)
            self._saved_theme = theme.name

    def _save_theme(self, name: str) -> None:
        try:
            save_setting(self._settings_file, "theme", name)
        except (OSError, ValueError) as exc:
            self.notify(f"theme not saved: {exc}", severity="warning", timeout=8)

    def get_line_filters(self) -> Sequence[LineFilter]:
        filters = list(super().get_line_filters())
        if self.current_theme.ansi:
            filters.append(self._muted_dim)
        return filters

    def gputui_themes(self) -> list[str]:
        """The themes `t` cycles through: ours and the user's, the default first."""
        names = sorted(self._themes, key=lambda n: (n != DEFAULT_THEME, n))
        return names or [self.theme]

    def action_next_theme(self) -> None:
        names = self.gputui_themes()
        index = names.index(self.theme) + 1 if self.theme in names else 0
        self.theme = names[index % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def action_command_palette(self) -> None:
        # Textual's own, made safe against keys that reach it before it is drawn; and
        # without Textual's fixed id, which Ctrl-P, Esc, Ctrl-P in one burst would
        # give twice (the closed one is not yet removed): DuplicateIds.
        # is_open takes App[object], and App is invariant in its return type (ours: int)
        if self.use_command_palette and not SafeCommandPalette.is_open(self):  # type: ignore[arg-type]
            self.push_screen(SafeCommandPalette())

    def search_themes(self) -> None:
        """The palette's "Change theme": Textual's theme search, in the safe palette."""
        from textual.theme import ThemeProvider

        self.push_screen(SafeCommandPalette(providers=[ThemeProvider], placeholder="Search for themes…"))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Next theme", "Cycle through gputui's themes (t)", self.action_next_theme)
        yield SystemCommand("Findings", "What holds the run back, with evidence and advice (f)", self.action_show_findings)
        yield SystemCommand("Help", "gputui's keys, by screen (? or F1)", self.action_help)


class GpuTuiApp(DashboardApp):
    """The live dashboard: sessions run presets (and watch) while it is open."""

    BINDINGS = [Binding("k", "check", "Check", id="check")]

    def __init__(
        self,
        *,
        presets: dict[str, Preset],
        make_session: SessionFactory,
        themes: dict[str, Theme],
        theme_problems: list[str],
        settings_file: Path,
        theme: str | None,
        start_preset: str | None,
        record_path: Path | None,
        interval: float,
        duration: float | None,
        attach_pid: int | None,
        diagnosis: dict | None,
        refresh_interval: float,
        diagnosis_overrides: dict | None = None,
        handle_signals: bool,
        record_force: bool = False,
        history: RunHistory | None = None,
        make_check: CheckFactory,
        confirm_quit: bool = True,
        baseline: dict | None = None,
        baseline_run: bool = False,
    ) -> None:
        self.make_check = make_check
        super().__init__(
            presets=presets, themes=themes, theme_problems=theme_problems, settings_file=settings_file, theme=theme, refresh_interval=refresh_interval
        )
        self.supervisor = SessionSupervisor(
            make_session,
            self._observers_for,
            self._session_ended,
            interval=interval,
            duration=duration,
            attach_pid=attach_pid,
            diagnosis=diagnosis,
            diagnosis_overrides=diagnosis_overrides,
            baseline=baseline,
            baseline_preset=start_preset,
        )
        self._start_preset = start_preset
        self.dashboard.initial_preset = start_preset
        self._record_path = record_path
        self._record_force = record_force
        self._recorder: Recorder | None = None
        self.recorded = False  # a recording was started (and is finished once the app ends)
        self._recorded_serial: int | None = None
        self.history = history
        self._kept: dict[int, Recorder] = {}  # history recorders by session serial
        self._handle_signals = handle_signals
        self._bridges: dict[int, SessionBridge] = {}
        self._last_preset: str | None = start_preset
        self._quitting = False
        self._watchdog_armed = False
        self.confirm_quit = confirm_quit
        self._quit_asked_at: float | None = None
        # --baseline-run: the preset's one-GPU twin runs first (a UserError when it is not data-parallel)
        self._baseline_first = BaselineFirst(presets[start_preset]) if baseline_run and start_preset else None

    # -- Start and stop ---------------------------------------------------------------
    def start_source(self) -> None:
        if self._baseline_first is not None:
            self.state.note(f"--baseline-run: measuring the one-GPU baseline first: {self._baseline_first.twin.name}")
            self.supervisor.start_run(self._baseline_first.twin)
        elif self._start_preset:
            self.start_preset(self._start_preset)
        # Sessions start once the first frame is out: opening NVML and spawning the run
        # would otherwise compete with it for the interpreter.
        self.call_after_refresh(self.run_worker, self.supervisor.loop, name="sessions", thread=True, exit_on_error=False)
        self.call_after_refresh(self.load_history)
        if self._handle_signals:
            self._install_signal_handlers()

    def load_history(self) -> None:
        """Read the kept runs for the Runs list, off the UI thread."""
        history = self.history
        if history is None:
            return

        def read() -> None:
            runs = history.runs()
            self.call_from_thread(self.state.set_history, runs)

        self.run_worker(read, name="history", thread=True, exit_on_error=False, group="history", exclusive=True)

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
        if not self.confirm_quit or not self.state.live_run:
            return False
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
    def _observers_for(self, session: Session, ticket: SessionTicket) -> list[Observer]:
        bridge = SessionBridge(ticket, self.post_message, session.recent_median)
        self._bridges[ticket.serial] = bridge
        bridge.started()
        observers: list[Observer] = [bridge]
        if not (ticket.is_run or ticket.attach_pid):
            return observers  # watching an idle machine is neither recorded nor kept
        measuring_baseline = self._baseline_first is not None and ticket.preset is self._baseline_first.twin
        if self._record_path is not None and not self.recorded and not measuring_baseline:  # --record: the run, as headless
            self.recorded = True
            self._recorded_serial = ticket.serial
            from gputui.record import Recorder

            try:
                self._recorder = Recorder(self._record_path, overwrite=self._record_force, on_error=lambda text: self._recording_failed(session, bridge, text))
            except UserError as exc:
                bridge.note(f"not recording: {exc}")
            else:
                observers.insert(0, self._recorder)
                bridge.recording(str(self._record_path))
        if self.history is not None:
            from gputui.history import label_for

            kept = self.history.start_recording(label_for(ticket.preset.name if ticket.preset else None, ticket.attach_pid), warn=bridge.note)
            if kept is not None:
                self._kept[ticket.serial] = kept
                observers.insert(0, kept)
                bridge.kept(str(kept.path))
        return observers

    @staticmethod
    def _recording_failed(session: Session, bridge: SessionBridge, text: str) -> None:
        """The disk filled up (or --record /dev/full): the run stops, as headless, and the
        output pane says why; what was written stays readable.  Called on the session's thread."""
        bridge.note(f"{text}; the run was stopped")
        session.stop("cannot write the recording")

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
            return self._record_path
        return run.kept_path

    def on_session_news(self, message: SessionNews) -> None:
        ended = self.state.apply(message.bridge.ticket, message.bridge.take())
        for run in ended:
            if run.kept_path is not None:
                self.load_history()
            if self._baseline_first is not None and self._baseline_first.is_twin(run):
                self._baseline_measured(run)  # no summary over it: the real run starts now
            elif not self._quitting and run is self.state.run:
                self.show_summary(run, self.state.gpu_names())

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
        self.supervisor.set_baseline(baseline, first.target.name)
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
        self._last_preset = name

    def can_stop(self) -> bool:
        return bool(self.state.live_run)

    def can_run_again(self) -> bool:
        return self._last_preset is not None and not self.state.live_run

    def action_stop_run(self) -> None:
        if not self.supervisor.stop_run():
            self.notify("Nothing is running.")
            return
        cancelled = self._baseline_first.cancel() if self._baseline_first is not None else None
        if cancelled:
            self.state.note(cancelled)

    def action_run_again(self) -> None:
        if self._last_preset is None:
            self.notify("No run yet: pick a preset and press Enter.")
            return
        self.start_preset(self._last_preset)

    def action_check(self) -> None:
        from gputui.tui.screens.check import CheckScreen

        def busy() -> str | None:
            return "A run is going: stop it (s) before checking the machine." if self.state.live_run else None

        self.push_screen(CheckScreen(self.make_check, busy_reason=busy))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Stop run", "Stop the running benchmark and its process group (s)", self.action_stop_run)
        yield SystemCommand("Run again", "Run the last preset again (r)", self.action_run_again)
        yield SystemCommand("Check this machine", "Is it healthy and as fast as it should be for its GPU? (k)", self.action_check)


def make_app(
    presets: dict[str, Preset],
    *,
    gpu_factory: Callable[[], GpuTelemetry] | None = None,
    host_factory: Callable[[], HostTelemetry] | None = None,
    session_factory: SessionFactory | None = None,
    clock: Callable[[], float] = time.monotonic,
    interval: float = 1.0,
    duration: float | None = None,
    attach_pid: int | None = None,
    diagnosis: dict | None = None,
    diagnosis_overrides: dict | None = None,
    start_preset: str | None = None,
    record_path: Path | None = None,
    theme: str | None = None,
    settings_file: Path | None = None,
    user_themes_dir: Path | None = None,
    refresh_interval: float = REFRESH_S,
    handle_signals: bool = False,
    check_factory: CheckFactory | None = None,
    record_force: bool = False,
    history: RunHistory | None = None,
    confirm_quit: bool = True,
    baseline: dict | None = None,
    baseline_run: bool = False,
) -> GpuTuiApp:
    """The dashboard, ready to ``run()`` or ``run_test()``.

    Telemetry is injected as factories because each Session opens and closes its own
    GpuTelemetry (NVML init/shutdown per session); tests pass one built on a fake
    NVML, a fixed host sampler and clock, or a whole scripted ``session_factory``.
    ``history`` keeps every run (the CLI passes the user's; tests keep none unless
    they ask).  ``confirm_quit=False`` (``--no-confirm-quit``) lets one q stop a run and quit.
    ``baseline`` (``--baseline FILE``, gputui.baseline) is what runs of ``start_preset`` scale against;
    ``baseline_run`` (``--baseline-run``) measures it first, on one GPU (gputui.tui.baseline_first).
    """
    parts = SessionParts(gpu=gpu_factory, host=host_factory, clock=clock)
    if session_factory is None:
        session_factory = parts.build

    if check_factory is None:

        def check_factory(options: CheckOptions, listener: CheckListener) -> CheckRun:
            from gputui.check.runner import CheckRun

            options.interval = interval
            options.config = Config(presets=presets, diagnosis=dict(diagnosis or {}))
            return CheckRun(options, listener=listener, parts=parts)

    themes, problems = app_themes(theme, user_themes_dir)
    return GpuTuiApp(
        presets=presets,
        make_session=session_factory,
        themes=themes,
        theme_problems=problems,
        settings_file=settings_file or default_settings_path(),
        theme=theme,
        start_preset=start_preset,
        record_path=record_path,
        interval=interval,
        duration=duration,
        attach_pid=attach_pid,
        diagnosis=diagnosis,
        diagnosis_overrides=diagnosis_overrides,
        refresh_interval=refresh_interval,
        handle_signals=handle_signals,
        make_check=check_factory,
        record_force=record_force,
        history=history,
        confirm_quit=confirm_quit,
        baseline=baseline,
        baseline_run=baseline_run,
    )


def app_themes(theme: str | None, user_themes_dir: Path | None) -> tuple[dict[str, Theme], list[str]]:
    """Our themes and the user's, and their problems; an unknown --theme is a UserError."""
    themes, problems = load_themes(user_themes_dir)
    if theme is not None and theme not in themes and theme not in _textual_theme_names():
        known = ", ".join(sorted(themes))
        raise UserError(f"--theme: no theme named {theme!r} (known: {known})")
    return themes, problems


def _textual_theme_names() -> set[str]:
    from textual.theme import BUILTIN_THEMES

    return set(BUILTIN_THEMES)

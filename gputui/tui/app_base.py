"""What the live dashboard (gputui.tui.live_app) and a replay (gputui.tui.replay_app) share:
:class:`DashboardApp` holds the state, the dashboard screen and its widgets, the
summary, findings and compare views, the redraw tick, quitting, themes and settings.
Where the news comes from, sessions or a recording, is a subclass's business.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import RenderableType
from textual.app import ScreenStackError, SystemCommand, UnknownModeError
from textual.binding import Binding
from textual.driver import Driver
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.theme import Theme

from gputui.errors import UserError
from gputui.escape import for_terminal
from gputui.presets.preset import Preset
from gputui.tui.compositor import displaying
from gputui.tui.palette import GputuiThemes, SafeCommandPalette
from gputui.tui.quiet_input import quiet_input
from gputui.tui.screens.dashboard_screen import DashboardScreen
from gputui.tui.screens.findings_screen import FindingsScreen
from gputui.tui.screens.summary_screen import SummaryScreen
from gputui.tui.themes import DEFAULT_THEME, AnsiMutedDim, load_themes
from gputui.tui.typing_bursts import TypingBursts
from gputui.tui.user_settings import load_settings, save_setting
from gputui.tui.widget_messages import CompareRuns, OpenRun, RefreshDashboard, StartPreset
from gputui.tui.widgets.gpu_panel import GpuGrid
from gputui.tui.widgets.runs import entry_name
from gputui.tui.widgets.state_view import StateView
from gputui.view import state as st

if TYPE_CHECKING:  # the run history loads with the session side, after the first frame
    from gputui.record.history import KeptRun
    from gputui.record.recording import Recording
    from gputui.tui.screens.help import Section

# The redraw timer: once a second, whatever the sampling rate (the live panels step every
# 2 s, the output pane every second).  A run starting or ending does not wait for it
# (news_arrived).  Twice a second cost an idle dashboard a tenth of its CPU for nothing.
REFRESH_S = 1.0
# The app's single-letter keys that belong to the dashboard: off (and out of the
# footers) while another screen is on top.
DASHBOARD_LETTER_ACTIONS = frozenset({"next_theme", "check", "run_command"})


class DashboardApp(TypingBursts[int]):
    """What a live dashboard and a replay share: the state, the dashboard screen and its
    widgets, the summary, findings and compare views, themes and settings.  Where the
    news comes from (sessions, or a recording) is the subclass's business."""

    CSS_PATH = "app.tcss"
    RUNS_PRESETS = False  # a replay runs and edits no preset: Enter, e and n are not offered
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
        self._pending_summary: st.RunView | None = None  # a run that ended under another view
        self.dashboard = DashboardScreen(presets, lambda: self.state, runs_presets=self.RUNS_PRESETS)  # a replay swaps self.state
        self._muted_dim = AnsiMutedDim()

    def get_driver_class(self) -> type[Driver]:
        return quiet_input(super().get_driver_class())

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
        self.take_news()
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
            # any change beneath it (docs/performance.md#figures-behind-the-codes-choices).  The panels catch up in one
            # repaint when the dashboard is back on top (DashboardScreen.on_screen_resume);
            # a run starting or ending, or its recording being finished, costs one
            # repaint now (the top line shows above the modal).
            if milestone == self._seen_milestone:
                return
            force = True
        elif milestone != self._seen_milestone:
            force = True  # a run started or ended: drawn now, not at the panels' next step
        self._seen_milestone = milestone
        # GPU panels come and go with the machine's GPUs, not with every sample.
        reason = self.state.header.gpu_unavailable_reason if self.state.header else None
        machine = (tuple(sorted(self.state.gpus)), reason, self.state.versions[st.HEADER])
        grid = dashboard.query_one(GpuGrid)
        # a refresh may come before the grid is up, or after the app began closing (Textual's
        # mount needs the grid attached to the DOM, not only mounted once): the next one does it
        if machine != self._seen_machine and grid.is_mounted and grid.is_attached:
            self._seen_machine = machine
            grid.sync_panels(self.state, reason)
            dashboard.show_highlighted_preset()
        for view in dashboard.state_views():
            view.sync(force)
        footer_state = self.footer_state()
        if footer_state != self._footer_state:
            self._footer_state = footer_state
            self.refresh_bindings()  # the footer shows the keys that apply now (the top screen's)
            if top is not dashboard:  # ... and the dashboard's, which shows under a view (asking twice redrew its footer twice)
                dashboard.refresh_bindings()

    def _display(self, screen: Screen, renderable: RenderableType | None) -> None:
        # Textual's one way to the terminal: a screen's cropping compositor knows what the
        # terminal shows only while no other screen writes (gputui.tui.compositor).
        if renderable is not None:
            displaying(screen)
        super()._display(screen, renderable)

    def take_news(self) -> None:
        """Fold in the news a source held for the tick (a live app's sessions:
        gputui.view.bridge); a replay applies its own as it goes."""

    def news_arrived(self) -> None:
        """Call once news is applied to the state: a milestone is drawn now, the rest at the next tick."""
        if self.milestone() != self._seen_milestone:
            self.refresh_dashboard()

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
        if action in DASHBOARD_LETTER_ACTIONS:
            # Over the editor a letter on a dropdown is no text, and would act behind the form.
            return self.on_dashboard()
        if action == "hide_help_panel":
            return bool(self.screen.query("HelpPanel"))
        return self.applicable_actions().get(action, True)

    def on_dashboard(self) -> bool:
        """The dashboard is the top screen (no editor, view or dialog over it)."""
        try:
            return self.screen is self.dashboard
        except (ScreenStackError, UnknownModeError):
            return False

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

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information", timeout: float | None = None, markup: bool = True) -> None:
        """Every notification (the screens' and widgets' come here too) may name a preset,
        a run or a file: shown as text, never as markup, its control characters escaped."""
        super().notify(for_terminal(message), title=for_terminal(title), severity=severity, timeout=timeout, markup=False)

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None, time_format: str | None = None) -> str | None:
        """The palette's Screenshot: saved here or in $GPUTUI_SCREENSHOT_DIR, and the
        notification says where (Textual's own wrote to a ~/Downloads servers lack)."""
        from gputui.tui.screenshot_files import save_screenshot_file, screenshot_dir

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
            self.push_screen(HelpScreen(self.key_overrides, self.help_sections()))

    def help_sections(self) -> tuple[Section, ...]:
        """The help's sections, the keys of where it was asked from first."""
        from gputui.tui.screens.help import help_sections

        return help_sections(first="Preset editor" if self.editing() else None)

    # -- What screens and widgets ask (gputui.tui.widget_messages) -------------------------------
    def on_start_preset(self, message: StartPreset) -> None:
        self.start_preset(message.name)

    def on_refresh_dashboard(self, message: RefreshDashboard) -> None:
        self.refresh_dashboard()
        self.show_pending_summary()  # the dashboard is back on top

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
        ordered = self.state.open_findings() + [f for f in found.values() if f.state != "open"]
        self.push_screen(FindingsScreen(ordered))

    def action_no_findings(self) -> None:
        """f while there are none (the findings key is then off, and out of the footer)."""
        self.notify("No findings yet.", timeout=3)

    def action_show_summary(self) -> None:
        ended = [run for run in self.state.runs if run.ended]
        if not ended:
            self.notify("No run has ended yet.")
            return
        self.show_summary(ended[-1], self.state.gpu_names())

    def show_summary_when_seen(self, run: st.RunView) -> None:
        """A run that just ended: its summary now, over the dashboard.  Over another view
        it waits for that view to close, and a notice says so: pushed under or over it,
        it would not be drawn, yet take the next key (r runs again, q quits)."""
        if self.screen is self.dashboard:
            self.show_summary(run, self.state.gpu_names())
            return
        self._pending_summary = run
        self.notify(f"{run.label} ended: its summary opens when this view closes (u on the dashboard shows it again).", timeout=8)

    def show_pending_summary(self) -> None:
        run = self._pending_summary
        if run is not None and self.screen is self.dashboard:
            self._pending_summary = None
            self.show_summary(run, self.state.gpu_names())

    def can_tune(self, run: st.RunView) -> bool:
        """Whether ``l`` on the summary may tune this run's data loading (a replay runs nothing)."""
        return False

    def start_tune(self, run: st.RunView) -> None:
        self.notify("A replay runs nothing.")

    def show_summary(self, run: st.RunView, gpu_names: list[str]) -> None:
        def after(choice: str | None) -> None:
            if choice == "tune":
                self.start_tune(run)
                return
            if choice != "again":
                return
            if run.number:
                self.action_run_again()
            elif run.preset.name in self.presets:  # a kept run: its own preset, if it still exists
                self.start_preset(run.preset.name)
            else:
                self.notify(f"No preset named {run.preset.name!r} here to run again.")

        self.push_screen(SummaryScreen(run, gpu_names, run_again=self.RUNS_PRESETS, tune=self.can_tune(run)), after)

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
        from gputui.lookback.load import is_check
        from gputui.record.recording import read_recording
        from gputui.view.replay_player import ReplayPlayer

        try:
            recording = read_recording(path)
            if is_check(recording):
                self.call_from_thread(self.show_check_report, recording)
                return
            player = ReplayPlayer(recording)
        except UserError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error", timeout=8)
            return
        player.seek(player.end_t)
        if player.state.run is None:
            self.call_from_thread(self.notify, f"{path.name}: no run in this recording")
            return
        self.call_from_thread(self.show_summary, player.state.run, player.state.gpu_names())

    def show_check_report(self, recording: Recording) -> None:
        """A kept check: its verdict and results (it has no run summary, nor a preset to run again)."""
        from gputui.lookback.load import check_results, check_summary
        from gputui.record.recording import recording_stem
        from gputui.tui.screens.check_report import CheckReportScreen

        ended_at = max([event.t for event in recording.events] + [sample.t for sample in recording.samples], default=0.0)
        recorded = check_summary(recording)
        stopped = bool(recorded is not None and recorded.stopped)
        self.push_screen(CheckReportScreen(recording_stem(recording.path), check_results(recording), ended_at, stopped))

    def compare_runs(self, entries: list[st.RunView | KeptRun]) -> None:
        """Two runs marked with c on the Runs list: their comparison table, its columns
        headed as the list names the runs ("#2 resnet50"), not by their files."""
        self.clear_notifications()  # "Marked for comparison" would stay over the comparison
        paths = []
        for entry in entries:
            path = self.recording_of(entry) if isinstance(entry, st.RunView) else entry.path
            if path is None:
                self.notify(f"{entry.label} has no recording to compare (the run history is off)", severity="warning")
                return
            paths.append(path)
        labels = [entry_name(entry) for entry in entries]
        self.run_worker(lambda: self._load_comparison(paths, labels), name="compare", thread=True, exit_on_error=False)

    def _load_comparison(self, paths: list[Path], labels: list[str]) -> None:
        from gputui.record.recording import read_recording
        from gputui.tui.screens.compare_screen import CompareScreen

        try:
            from gputui.lookback.compare import compare_rows
        except ImportError:
            self.call_from_thread(self.notify, "Comparing runs needs gputui.lookback.compare, which this build does not have.", severity="warning", timeout=8)
            return
        try:
            header, rows = compare_rows([read_recording(p) for p in paths], labels=labels)
        except UserError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error", timeout=8)
            return
        self.call_from_thread(self.push_screen, CompareScreen(header, rows, labels))

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
        """The palette's "Change theme": Textual's theme search, in the safe palette, over gputui's themes only."""
        self.push_screen(SafeCommandPalette(providers=[GputuiThemes], placeholder="Search for themes…"))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Next theme", "Cycle through gputui's themes (t)", self.action_next_theme)
        yield SystemCommand("Findings", "What holds the run back, with evidence and advice (f)", self.action_show_findings)
        yield SystemCommand("Help", "gputui's keys, by screen (? or F1)", self.action_help)


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

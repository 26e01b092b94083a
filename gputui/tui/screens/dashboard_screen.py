"""The main screen: presets and runs at the left; throughput, CPU, GPUs, findings and
the log at the right.  Below 120×34 it switches to the ``-compact`` class: borders
become single title rules and panels render their one-line forms, so an 80×24
terminal shows every panel instead of the first few."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import OptionList

from gputui.presets.preset import Preset
from gputui.tui.compositor import crop_updates, settle_covered
from gputui.tui.screens.terminal_size import TerminalSized
from gputui.tui.widget_messages import RefreshDashboard, StartPreset
from gputui.tui.widgets.cpu import CpuPanel
from gputui.tui.widgets.findings_panel import FindingsStrip
from gputui.tui.widgets.footer import DashboardFooter
from gputui.tui.widgets.gpu_panel import GpuGrid
from gputui.tui.widgets.header import MachineHeader, RunStatus
from gputui.tui.widgets.log import LogPane
from gputui.tui.widgets.presets import PresetDetails, PresetFilter, PresetList
from gputui.tui.widgets.runs import RunsList
from gputui.tui.widgets.state_view import StateSource, StateView
from gputui.tui.widgets.throughput_chart import ThroughputChart

WIDE_MIN = (120, 34)  # columns, rows


class DashboardScreen(TerminalSized, Screen):
    BINDINGS = [
        Binding("s", "app.stop_run", "Stop", id="stop_run"),
        Binding("r", "app.run_again", "Run again", id="run_again"),
        Binding("f", "app.show_findings", "Findings", id="show_findings"),
        # f while there are none (show_findings is then off, out of the footer): say so
        Binding("f", "app.no_findings", "Findings", id="no_findings", show=False),
        Binding("u", "app.show_summary", "Summary", id="show_summary"),
        Binding("p", "show_gpu_processes", "GPU processes", id="show_gpu_processes", show=False),
        Binding("e", "edit_preset", "Edit", id="edit_preset"),
        Binding("n", "new_preset", "New", id="new_preset"),
        Binding("d,delete", "delete_preset", "Delete", id="delete_preset"),
        Binding("slash", "filter_presets", "Filter presets", id="filter_presets", show=False),
    ]

    def __init__(self, presets: dict[str, Preset], state_source: StateSource, *, runs_presets: bool = True) -> None:
        super().__init__(id="dashboard")
        self.presets = presets
        self.runs_presets = runs_presets  # False in a replay: Enter, e and n do nothing there
        self.state_source = state_source  # the app's: the panels draw what it holds
        self.initial_preset: str | None = None  # --preset: the sidebar describes it from the start
        crop_updates(self)  # partial updates send the changed cells, not whole panel rows
        self._views: list[StateView] = []
        self._views_for: int | None = None

    def compose(self) -> ComposeResult:
        yield MachineHeader(id="machine", source=self.state_source)
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield PresetFilter(id="preset-filter")
                yield PresetList(self.presets, id="presets", runnable=self.runs_presets)
                yield PresetDetails(id="preset-details")
                yield RunsList(id="runs", source=self.state_source)
            with Vertical(id="main"):
                with Horizontal(id="top"):
                    yield ThroughputChart(id="throughput", source=self.state_source)
                    yield CpuPanel(id="cpu", source=self.state_source)
                yield GpuGrid(id="gpus", source=self.state_source)
                yield FindingsStrip(id="findings", source=self.state_source)
                yield LogPane(id="log", source=self.state_source)
        yield DashboardFooter()

    def state_views(self) -> list[StateView]:
        """The panels drawn from the state, in the DOM's order.  The app's redraw asks
        every second, and walking the screen's widgets was a twentieth of a running
        dashboard's main thread: the walk is kept until a widget is mounted or removed
        anywhere below (Textual counts those on each ancestor's child list)."""
        changes = getattr(self._nodes, "_updates", None)  # None on a Textual without the count: walk each time
        if changes is None or changes != self._views_for:
            self._views, self._views_for = self.walk_children(StateView), changes
        return self._views

    def on_mount(self) -> None:
        for widget_id, title in (
            ("presets", "Presets"),
            ("runs", "Runs"),
            ("throughput", "Throughput"),  # the legend says the unit: samples, tokens or steps
            ("cpu", "CPU"),
            ("gpus", "GPUs"),
            ("log", "Output"),
        ):
            self.query_one(f"#{widget_id}").border_title = title
        self.fit_to(self.size.width, self.size.height)
        presets = self.query_one(PresetList)
        presets.focus()
        if self.initial_preset:
            presets.select_name(self.initial_preset)
        self.show_highlighted_preset()

    def on_resize(self, event) -> None:
        self.fit_to(event.size.width, event.size.height)

    def on_screen_resume(self) -> None:
        """Back on top: show what changed while a modal or the editor covered it."""
        self.query_one(RunStatus).show_paused(False)
        self.refresh_bindings()  # the footer lists its keys again
        self.post_message(RefreshDashboard())

    def _compositor_refresh(self) -> None:
        # Textual's; under a modal, what changed here is sent once, not the whole
        # screen at every later message (gputui.tui.compositor.settle_covered).
        super()._compositor_refresh()
        settle_covered(self)

    def on_screen_suspend(self) -> None:
        """Covered: the panels stop redrawing (see DashboardApp.refresh_dashboard); the top line, still in view, says so."""
        self.query_one(RunStatus).show_paused(True)
        self.refresh_bindings()  # none of the footer's keys act under it

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("edit_preset", "new_preset", "delete_preset"):
            return self.runs_presets
        return True

    def fit_to(self, width: int, height: int) -> None:
        compact = width < WIDE_MIN[0] or height < WIDE_MIN[1]
        if compact != self.has_class("-compact"):
            self.set_class(compact, "-compact")
            self.refresh_panels()
        self.query_one(GpuGrid).fit_columns()
        self.query_one(DashboardFooter).fit(width)

    def refresh_panels(self) -> None:
        """Panels draw differently when compact: make them all redraw."""
        for widget in self.query(StateView):
            widget.invalidate()
        self.show_highlighted_preset()

    def list_preset(self, name: str) -> None:
        """A preset added to the app's presets (a command run with x): listed and highlighted."""
        self.query_one(PresetList).refill(name)
        self.show_highlighted_preset()

    def show_highlighted_preset(self) -> None:
        presets = self.query_one(PresetList)
        self.query_one(PresetDetails).show(presets.selected_preset, self.state_source().gpu_names(), self.has_class("-compact"))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.show_highlighted_preset()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self.post_message(StartPreset(event.option.id))

    # -- The preset list's filter ---------------------------------------------------------
    def action_show_gpu_processes(self) -> None:
        from gputui.tui.screens.processes_screen import GpuProcessesScreen  # opened rarely

        self.app.push_screen(GpuProcessesScreen(self.state_source()))

    def action_filter_presets(self) -> None:
        """``/``: a field above the list narrows it (lists longer than the screen)."""
        field = self.query_one(PresetFilter)
        field.add_class("-active")
        field.focus()

    def on_input_changed(self, event: PresetFilter.Changed) -> None:
        if isinstance(event.input, PresetFilter):
            self.query_one(PresetList).filter_by(event.value)
            self.show_highlighted_preset()

    def on_preset_filter_done(self, event: PresetFilter.Done) -> None:
        field = self.query_one(PresetFilter)
        if event.cleared or not field.value:
            field.remove_class("-active")
        self.query_one(PresetList).focus()

    def action_edit_preset(self) -> None:
        self._open_editor(self.query_one(PresetList).selected_preset, new=False)

    def action_new_preset(self) -> None:
        """A new preset from a template, saved to the user's presets file."""
        self._open_editor(None, new=True)

    def action_delete_preset(self) -> None:
        """``d``: the highlighted preset out of the user's presets file, after asking."""
        from gputui.tui.screens.delete_preset import DELETE, DeletePresetScreen, why_not_deletable

        preset = self.query_one(PresetList).selected_preset
        if preset is None:
            self.notify("No preset to delete.")
            return
        problem = why_not_deletable(preset)
        if problem is not None:
            self.notify(problem, severity="warning", timeout=8)
            return

        def answered(choice: str | None) -> None:
            if choice == DELETE:
                self._delete(preset.name)

        self.app.push_screen(DeletePresetScreen(preset.name), answered)

    def _delete(self, name: str) -> None:
        from gputui.errors import UserError
        from gputui.presets.preset import user_presets_path
        from gputui.tui.screens.delete_preset import delete_user_preset

        try:
            builtin = delete_user_preset(name)
        except UserError as exc:  # gone from the file meanwhile, or the file cannot be written
            self.notify(str(exc), severity="error", timeout=8)
            return
        names = self.query_one(PresetList).matching()
        following = names[names.index(name) + 1 :] if name in names else []  # the list keeps its place
        if builtin is not None:
            self.presets[name] = builtin
        else:
            self.presets.pop(name, None)
        self.query_one(PresetList).refill(name if builtin is not None else (following[0] if following else None))
        self.show_highlighted_preset()
        again = f"; the built-in preset {name} shows again" if builtin is not None else ""
        self.notify(f"deleted {name} from {user_presets_path()}{again}", timeout=6)

    def _open_editor(self, preset: Preset | None, new: bool) -> None:
        from gputui.errors import UserError
        from gputui.tui.screens.editor import PresetEditorScreen

        if preset is None and not new:
            self.notify("No preset to edit: press n for a new one.")
            return
        try:
            self.app.push_screen(PresetEditorScreen(preset, new=new))
        except UserError as exc:  # the file to save to cannot be read
            self.notify(str(exc), severity="error", timeout=8)

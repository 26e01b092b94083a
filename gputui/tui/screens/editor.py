"""The preset editor: a form for the common keys and the raw TOML of the preset,
validated as you type by the same checkers that load presets files
(:func:`gputui.presets.preset.check_preset`), saved through
:class:`gputui.presets.store.PresetFile` (only changed keys, atomic, backed up,
conflict-checked).  Built-in presets are read-only: "Save as" makes an editable copy
in the user's presets file."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Label, Select, Static, TabbedContent, TabPane, TextArea

from gputui.catalog import FRAMEWORKS, MODELS, PIPELINES
from gputui.errors import UserError
from gputui.presets.command_preset import SOURCE as COMMAND_SOURCE
from gputui.presets.preset import WORKLOAD_CHECKS, Preset, PresetTable, check_preset, parse_text, user_presets_path
from gputui.presets.store import TEMPLATE, ConflictError, PresetFile, check_name, is_builtin, source_table
from gputui.tui.compositor import crop_updates
from gputui.tui.screens.dialog import Dialog
from gputui.tui.screens.once import DismissOnce
from gputui.tui.screens.terminal_size import TerminalSized
from gputui.tui.widget_messages import StartPreset
from gputui.tui.widgets.fields import EditorField

# The form's fields: (key, label, kind); kind is "text", "int", "words", "env" or "select".
FIELDS = (
    ("description", "description", "text"),
    ("command", "command", "words"),
    ("framework", "framework", "select"),
    ("model", "model", "select"),
    ("batch_size", "batch size", "int"),
    ("steps", "steps", "int"),
    ("precision", "precision", "select"),
    ("pipeline", "pipeline", "select"),
    ("workers", "workers", "int"),
    ("env", "env", "env"),
)
TOML_TAB = Path("<TOML tab>")
# Rows of the form that only a built-in workload has: hidden while a command is typed.
WORKLOAD_FIELDS = tuple(key for key, _label, _kind in FIELDS if key in WORKLOAD_CHECKS)
# What a shell leaves alone inside double quotes.
_DOUBLE_QUOTE_SPECIAL = set('"$`\\!')


def readable_join(argv: list[str]) -> str:
    """A command line a shell splits back into ``argv``, quoted as a person would:
    ``python3 -c "print('hi')"`` rather than shlex's ``'print('"'"'hi'"'"')'``."""
    words = []
    for word in argv:
        quoted = shlex.quote(word)
        if quoted != word and "'" in word and not _DOUBLE_QUOTE_SPECIAL & set(word):
            quoted = f'"{word}"'
        words.append(quoted)
    return " ".join(words)


def _select_options(key: str, framework: str | None) -> list[tuple[str, str]]:
    if key == "framework":
        names: tuple[str, ...] = tuple(FRAMEWORKS)
    elif key == "pipeline":
        names = PIPELINES
    elif framework in FRAMEWORKS:
        names = FRAMEWORKS[framework]["models" if key == "model" else "precisions"]
    else:
        names = ()
    return [(name, name) for name in names]


FRAMEWORK_TITLES = {"torch": "PyTorch", "tf": "TensorFlow/Keras"}


def suggested_description(framework: object, model: object) -> str:
    """A new preset's description while the user has not written one: what it runs."""
    if not isinstance(framework, str) or framework not in FRAMEWORK_TITLES:
        return str(TEMPLATE["description"])
    title = FRAMEWORK_TITLES[framework]
    if not isinstance(model, str) or model not in MODELS:
        return f"a new preset: {title}, until you pick a model"
    return f"{title} {MODELS[model].title} training"


def _field_text(kind: str, value: Any) -> str:
    if value is None:
        return ""
    if kind == "words":
        return readable_join(value) if isinstance(value, list) else str(value)
    if kind == "env":
        return " ".join(f"{k}={shlex.quote(str(v))}" for k, v in value.items()) if isinstance(value, dict) else str(value)
    return str(value)


def _field_value(kind: str, text: str) -> Any:
    """What a field's text means as a TOML value; None drops the key.  Text that does
    not convert stays text, so the schema's checker says what was expected."""
    text = text.strip()
    if not text:
        return None
    if kind == "int":
        return int(text) if text.lstrip("-").isdigit() else text
    try:
        words = shlex.split(text)
    except ValueError:
        return text
    if kind == "words":
        return words
    if kind == "env":
        if not all("=" in w and not w.startswith("=") for w in words):
            return text
        return dict(w.split("=", 1) for w in words)
    return text


def unused_copy_name(name: str, taken: set[str]) -> str:
    """``NAME-copy``, or ``NAME-copy-2``, ``-3``... where that is taken."""
    candidate, number = f"{name}-copy", 2
    while candidate in taken:
        candidate, number = f"{name}-copy-{number}", number + 1
    return candidate


def builtin_names() -> set[str]:
    from gputui.presets.preset import builtin_presets_path, load_file

    return set(load_file(builtin_presets_path()))


def preset_toml(name: str, values: PresetTable) -> str:
    import tomlkit

    document = tomlkit.document()
    presets = tomlkit.table(is_super_table=True)
    document["presets"] = presets
    table = tomlkit.table()
    for key, value in values.items():
        table[key] = value
    presets[name] = table
    return tomlkit.dumps(document).lstrip("\n")


class PresetEditorScreen(DismissOnce, TerminalSized, Screen):
    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="editor_save", priority=True),
        Binding("ctrl+o", "save_as", "Save as", id="editor_save_as", priority=True),
        Binding("ctrl+r", "run", "Run", id="editor_run", priority=True),
        Binding("ctrl+t", "switch_tab", "Form/TOML", id="editor_switch_tab", priority=True),
        Binding("escape", "close", "Close", id="editor_close"),
    ]
    DEFAULT_CSS = """
    PresetEditorScreen { layout: vertical; }
    PresetEditorScreen #editor-source { height: auto; padding: 0 1; color: $text-muted; }
    PresetEditorScreen #editor-tabs { height: 1fr; }
    PresetEditorScreen #editor-tabs TabPane { height: 1fr; padding: 0 1; }
    PresetEditorScreen #editor-tabs VerticalScroll { height: 1fr; }
    PresetEditorScreen #editor-status { height: auto; padding: 0 1; }
    PresetEditorScreen #editor-status.-invalid { color: $error; }
    PresetEditorScreen .row { height: 1; margin-bottom: 0; }
    PresetEditorScreen .row Label { width: 13; padding-right: 1; }
    PresetEditorScreen .row Input, PresetEditorScreen .row Select { width: 1fr; }
    /* A field shows as a box (edges at its sides: rows stay one line high, so the form
       fits 80x24) on Textual's field background; the focused one in the theme's focus colour,
       its label bold.  Edges, not only tints: the ANSI theme blends no colours. */
    PresetEditorScreen .row Input, PresetEditorScreen .row Select {
        border: none !important; border-left: tall $border-blurred !important; border-right: tall $border-blurred !important;
    }
    PresetEditorScreen .row Input:focus, PresetEditorScreen .row Select:focus-within {
        border-left: tall $border !important; border-right: tall $border !important;
        background: $primary 15%;
    }
    PresetEditorScreen .row Input:ansi:focus, PresetEditorScreen .row Select:ansi:focus-within { background: ansi_default; }
    PresetEditorScreen .row:focus-within Label { text-style: bold; }
    PresetEditorScreen TextArea { height: 1fr; }
    /* Textual draws these at half the foreground, under 4.5:1: the theme's muted text instead */
    PresetEditorScreen Tab { color: $text-muted; }
    PresetEditorScreen SelectCurrent Static#label { color: $text-muted; }
    """

    def __init__(self, preset: Preset | None, new: bool = False) -> None:
        super().__init__(id="preset-editor")
        crop_updates(self)  # a blinking cursor sends its cell, not the field's line
        self.original_name = preset.name if preset is not None and not new else None
        if preset is None:
            values, name = dict(TEMPLATE), "new-preset"
        else:
            # "Save as" of a preset that exists offers a copy's name; a command typed on
            # the dashboard (x) keeps the name it was given
            copy = new and preset.source != COMMAND_SOURCE
            values, name = source_table(preset), preset.name + "-copy" if copy else preset.name
        self.read_only = preset is not None and not new and is_builtin(preset.source)
        writable = preset is not None and not new and not self.read_only
        self.path = preset.source if writable and preset is not None else user_presets_path()
        self.source_path = preset.source if preset is not None else None
        self.store = PresetFile.load(self.path)
        self.base = values  # keys the form does not show are kept as they are
        self.saved = (self.original_name, dict(values))
        self._initial = (name, values)
        self._filling = False
        self._typed_command: str | None = None  # the command as typed, shown back as typed
        # The framework the model and precision lists were made for: listing them again
        # for the same framework dropped a reopened preset's model.
        self._listed_for = values.get("framework")
        # A new preset's description follows its framework and model until the user writes one.
        self._auto_description = values.get("description") if preset is None else None

    # -- Layout ------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        name, values = self._initial
        framework = values.get("framework")
        yield Static(self._source_line(), id="editor-source")
        with TabbedContent(id="editor-tabs"):
            with TabPane("Form", id="tab-form"):
                with VerticalScroll():
                    with Horizontal(classes="row"):
                        yield Label("name")
                        yield EditorField(name, id="field-name", compact=True, select_on_focus=False)
                    for key, label, kind in FIELDS:
                        with Horizontal(classes="row", id=f"row-{key}"):
                            yield Label(label)
                            if kind == "select":
                                options = _select_options(key, framework)
                                value = values.get(key)
                                yield Select(
                                    options, id=f"field-{key}", compact=True, allow_blank=True, value=value if (value, value) in options else Select.NULL
                                )
                            else:
                                yield EditorField(
                                    _field_text(kind, values.get(key)), id=f"field-{key}", compact=True, select_on_focus=False
                                )  # typing adds to the text, never replaces it
            with TabPane("TOML", id="tab-toml"):
                yield TextArea(preset_toml(name, values), language="toml", id="editor-toml")
        yield Static("", id="editor-status", markup=False)  # errors quote what was typed: "[g]" is text
        yield Footer()

    def _source_line(self) -> str:
        if self.source_path is None:
            return f"New preset, not saved yet: ctrl+s saves it to {self.path}"
        if self.read_only:
            return f"From {self.source_path} (built-in, read-only): ctrl+o saves an editable copy to {user_presets_path()}"
        if self.original_name is None:
            return f"A copy, not saved yet: ctrl+s saves it to {self.path}"
        return f"From {self.source_path}"

    def on_mount(self) -> None:
        if self.app_exiting():
            return
        self.query_one("#field-name", Input).focus()
        self.show_rows()
        self.validate()
        self._clean = self.edited()  # what "no unsaved changes" looks like

    def edited(self) -> tuple[str, PresetTable] | str:
        """The preset as shown, unchecked: the TOML tab's text itself when it does not parse."""
        if self.query_one("#editor-tabs", TabbedContent).active != "tab-toml":
            return self.form_values()
        try:
            return self.toml_values()
        except (UserError, ValueError):  # tomllib's error is a ValueError
            return self.query_one("#editor-toml", TextArea).text

    def has_unsaved_changes(self) -> bool:
        return self.edited() != self._clean

    def has_command(self) -> bool:
        return bool(self.query_one("#field-command", Input).value.strip())

    def show_rows(self) -> None:
        """A command preset runs its own program: the workload's rows do not apply."""
        command = self.has_command()
        for key in WORKLOAD_FIELDS:
            self.query_one(f"#row-{key}").display = not command

    # -- Reading the form --------------------------------------------------------------
    def form_values(self) -> tuple[str, PresetTable]:
        values = dict(self.base)
        command = self.has_command()
        if command:  # workload keys (the template's warmup_steps too) do not apply
            values = {k: v for k, v in values.items() if k not in WORKLOAD_CHECKS}
        for key, _label, kind in FIELDS:
            if command and key in WORKLOAD_CHECKS:
                continue
            if kind == "select":
                chosen = self.query_one(f"#field-{key}", Select).value
                value = chosen if chosen != Select.NULL else None
            else:
                value = _field_value(kind, self.query_one(f"#field-{key}", Input).value)
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value
        # keep the file's key order: keys the form adds go last
        ordered = {k: values[k] for k in self.base if k in values}
        ordered.update({k: v for k, v in values.items() if k not in ordered})
        return self.query_one("#field-name", Input).value.strip(), ordered

    def toml_values(self) -> tuple[str, PresetTable]:
        """The TOML tab's one preset (its syntax checked here; its keys by :meth:`current`)."""
        from gputui.config import tomllib

        text = self.query_one("#editor-toml", TextArea).text
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            parse_text(text, TOML_TAB)  # raises the one-line error, with the tab's line and column
            raise
        presets = data.get("presets")
        if set(data) != {"presets"} or not isinstance(presets, dict) or len(presets) != 1:
            raise UserError(f"{TOML_TAB}: expected exactly one [presets.NAME] table and nothing else")
        name, values = next(iter(presets.items()))
        if not isinstance(values, dict):
            raise UserError(f"{TOML_TAB}: [presets.{name}]: expected a table of settings")
        return name, dict(values)

    def current(self) -> tuple[str, PresetTable]:
        """The preset as edited (form or TOML tab, whichever shows), checked: UserError if not valid."""
        tabs = self.query_one("#editor-tabs", TabbedContent)
        name, values = self.toml_values() if tabs.active == "tab-toml" else self.form_values()
        check_name(name)
        check_preset(name, values, self.path)
        return name, values

    def validate(self) -> bool:
        status = self.query_one("#editor-status", Static)
        try:
            self.current()
        except UserError as exc:
            status.update(str(exc))
            status.add_class("-invalid")
            return False
        status.update("✓ valid" + ("" if not self.read_only else " (read-only: ctrl+o to save a copy)"))
        status.remove_class("-invalid")
        return True

    def fill_form(self, name: str, values: PresetTable) -> None:
        self._filling = True
        self.base = dict(values)
        self.query_one("#field-name", Input).value = name
        for key, _label, kind in FIELDS:
            if kind == "select":
                select = self.query_one(f"#field-{key}", Select)
                options = _select_options(key, values.get("framework"))
                select.set_options(options)
                self._listed_for = values.get("framework")
                value = values.get(key)
                select.value = value if (value, value) in options else Select.NULL
            elif key == "command" and self._typed_command is not None and _field_value(kind, self._typed_command) == values.get(key):
                # the same command: keep it as it was typed
                self.query_one("#field-command", Input).value = self._typed_command
            else:
                self.query_one(f"#field-{key}", Input).value = _field_text(kind, values.get(key))
        self._filling = False
        self.show_rows()

    # -- Events ------------------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "field-command":
            if not self._filling:
                self._typed_command = event.value
            self.show_rows()
        self.validate()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        # The cursor goes to the end of a field tabbed into, so typing adds to it.
        if isinstance(event.widget, Input):
            event.widget.cursor_position = len(event.widget.value)

    def on_select_changed(self, event: Select.Changed) -> None:
        # The framework chosen now, not the event's: a Select reports its values as it mounts,
        # and those reports come in after it already holds the preset's.
        chosen = self.query_one("#field-framework", Select).value
        framework = chosen if isinstance(chosen, str) else None  # Select.NULL: none chosen
        if event.select.id == "field-framework" and not self._filling and framework != self._listed_for:
            self._listed_for = framework
            for key in ("model", "precision"):
                select = self.query_one(f"#field-{key}", Select)
                keep = select.value
                options = _select_options(key, framework)
                select.set_options(options)
                if (keep, keep) in options:
                    select.value = keep
        if event.select.id in ("field-framework", "field-model") and not self._filling:
            self.suggest_description()
        self.validate()

    def suggest_description(self) -> None:
        """A new preset's description says what it runs, until the user writes their own."""
        field = self.query_one("#field-description", Input)
        if self._auto_description is None or field.value != self._auto_description:
            self._auto_description = None  # written by the user: theirs from now on
            return
        framework = self.query_one("#field-framework", Select).value
        model = self.query_one("#field-model", Select).value
        self._auto_description = suggested_description(framework, model)
        field.value = self._auto_description

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        self.validate()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "tab-toml":
            name, values = self.form_values()
            self.query_one("#editor-toml", TextArea).text = preset_toml(name, values)
        else:
            try:
                name, values = self.toml_values()
            except UserError as exc:
                self.notify(f"the TOML tab is not valid, the form keeps its values: {exc}", severity="warning")
            else:
                self.fill_form(name, values)
        self.validate()

    # -- Actions -----------------------------------------------------------------------
    def action_switch_tab(self) -> None:
        """Ctrl+T: the other tab, its first field focused (Tab from the form never gets there)."""
        tabs = self.query_one("#editor-tabs", TabbedContent)
        tabs.active = "tab-form" if tabs.active == "tab-toml" else "tab-toml"
        first = "#editor-toml" if tabs.active == "tab-toml" else "#field-name"
        self.call_after_refresh(self.query_one(first).focus)

    def action_save(self) -> None:
        if self.read_only:
            self.notify("Built-in presets are read-only: ctrl+o saves an editable copy.", severity="warning")
            return
        self.save(self.original_name)

    def _checked(self) -> tuple[str, PresetTable] | None:
        """The edited preset, or None (and the error shown) when it is not valid."""
        try:
            return self.current()
        except UserError as exc:
            self.notify(str(exc), severity="error", timeout=8)
            return None

    def action_save_as(self) -> None:
        checked = self._checked()
        if checked is None:
            return
        name = checked[0]
        # a copy's name must not replace (or hide) a preset already there
        taken = set(getattr(self.app, "presets", {})) | set(self.store.names()) | builtin_names()  # the app's: GpuTuiApp's
        default = name if name != self.original_name and name not in taken else unused_copy_name(name, taken)
        self.app.push_screen(NameScreen(default), self._save_as_named)

    def _save_as_named(self, name: str | None) -> None:
        if not name:
            return
        self.query_one("#field-name", Input).value = name
        if self.query_one("#editor-tabs", TabbedContent).active == "tab-toml":
            _old, values = self.form_values()
            self.query_one("#editor-toml", TextArea).text = preset_toml(name, values)
        self.path = user_presets_path()
        self.store = PresetFile.load(self.path)
        self.read_only = False
        self.original_name = None
        self.source_path = self.path
        self.query_one("#editor-source", Static).update(self._source_line())
        self.save(None)

    def save(self, old_name: str | None, force: bool = False) -> bool:
        """Write the edited preset (renaming ``old_name``); True when saved."""
        try:
            name, values = self.current()
            if name != old_name and name in self.store.names():
                raise UserError(f"{self.path}: a preset named {name!r} exists already")
            work = PresetFile(self.store.path, self.store.original_text, self.store.digest)
            work.rename_preset(old_name or name, name, values)
            saved = work.save(force=force)
        except ConflictError as exc:
            self.app.push_screen(ConflictScreen(str(exc)), lambda choice: self._after_conflict(choice, old_name))
            return False
        except UserError as exc:
            self.notify(str(exc), severity="error", timeout=8)
            return False
        self.store = work
        self.original_name = name
        self.saved = (name, dict(values))
        self._clean = (name, dict(values))
        self.base = dict(values)
        self.source_path = self.path
        self.query_one("#editor-source", Static).update(self._source_line())
        apply_saved(self.app, saved, removed=old_name if old_name not in (None, name) else None, select=name)
        note = self._overrides_note(name)
        self.notify(f"saved {name} to {self.path}{note}", timeout=8 if note else 4)
        return True

    @staticmethod
    def _overrides_note(name: str) -> str:
        """A user preset named like a built-in one hides it: say so where it is saved."""
        return f"; it overrides the built-in preset {name}" if name in builtin_names() else ""

    def _after_conflict(self, choice: str | None, old_name: str | None) -> None:
        if choice == "overwrite":
            self.save(old_name, force=True)
        elif choice == "reload":
            self.store = PresetFile.load(self.path)
            table = self.store.table(old_name) if old_name else None
            if table is None or old_name is None:
                self.notify(f"{old_name} is no longer in {self.path}; the form keeps your values", severity="warning")
                return
            self.fill_form(old_name, table)
            if self.query_one("#editor-tabs", TabbedContent).active == "tab-toml":
                self.query_one("#editor-toml", TextArea).text = preset_toml(old_name, table)
            self.validate()
            self.notify(f"reloaded {old_name} from {self.path}")

    def action_run(self) -> None:
        checked = self._checked()
        if checked is None:
            return
        name, values = checked
        if (name, values) != self.saved:
            if self.read_only:
                self.notify("Built-in presets are read-only: ctrl+o saves a copy you can run.", severity="warning")
                return
            if not self.save(self.original_name):
                return
        self.dismiss()
        # Straight to the app: this screen is closing, so a message left in its queue might never bubble.
        self.app.post_message(StartPreset(name))

    def action_close(self) -> None:
        """Esc: close, asking first (save, discard, cancel) when there are unsaved changes."""
        if not self.has_unsaved_changes():
            self.dismiss()
            return
        name = self.query_one("#field-name", Input).value.strip() or "this preset"
        self.app.push_screen(LeaveEditorScreen(name, read_only=self.read_only), self._after_leave_question)

    def _after_leave_question(self, choice: str | None) -> None:
        if choice == "discard":
            self.dismiss()
        elif choice == "save":
            if self.read_only:
                self.action_save_as()  # a copy is the only way to keep it; the editor stays open
            elif self.save(self.original_name):
                self.dismiss()


def apply_saved(app, saved: dict[str, Preset], removed: str | None, select: str) -> None:
    """Make the app's presets (and the dashboard's list) show a file's saved presets."""
    presets: dict[str, Preset] = app.presets
    if removed is not None:
        presets.pop(removed, None)
    presets.update(saved)
    from gputui.tui.widgets.presets import PresetList

    for plist in app.dashboard.query(PresetList):
        plist.refill(select)
    app.dashboard.show_highlighted_preset()


class NameScreen(Dialog):
    """Asks for the name of the copy "Save as" makes (``text``: the name offered)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="name_cancel")]

    def parts(self) -> ComposeResult:
        yield Label(f"Save as (in {user_presets_path()}):")
        yield Input(self.text, id="save-as-name")
        yield Label("Enter save · Esc cancel")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)


class ConflictScreen(Dialog):
    """The file changed on disk since the editor loaded it: overwrite it, or reload it."""

    BINDINGS = [
        Binding("o", "dismiss('overwrite')", "Overwrite", id="conflict_overwrite"),
        Binding("r", "dismiss('reload')", "Reload", id="conflict_reload"),
        Binding("escape", "dismiss(None)", "Cancel", id="conflict_cancel"),
    ]

    def parts(self) -> ComposeResult:
        yield Static(self.text)
        yield Static("o overwrite it with your version · r reload it (your changes are lost) · Esc cancel")


class LeaveEditorScreen(Dialog):
    """Esc in the editor with unsaved changes: save, discard or cancel (stay)."""

    BINDINGS = [
        Binding("s", "dismiss('save')", "Save", id="leave_save"),
        Binding("d", "dismiss('discard')", "Discard", id="leave_discard"),
        Binding("escape,c", "dismiss(None)", "Cancel", id="leave_cancel"),
    ]

    def __init__(self, name: str, read_only: bool) -> None:
        super().__init__(f"{name} has unsaved changes.")
        self.read_only = read_only

    def parts(self) -> ComposeResult:
        yield Static(self.text)
        save = "s save a copy (built-in presets are read-only)" if self.read_only else "s save"
        yield Static(f"{save} · d discard them and close · Esc keep editing", id="leave-keys")

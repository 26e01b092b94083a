"""``d`` on the dashboard: delete the highlighted preset from the user's presets file,
after asking.  Only presets of that file go (as with ``gputui presets rm``): built-in
presets are read-only, and a preset from another file is deleted in that file.  The file
is rewritten through :class:`gputui.presets.store.PresetFile`, as the editor saves it:
under its lock, validated, atomically, the previous version kept as a backup."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from gputui.escape import for_widget
from gputui.presets.command_preset import SOURCE as COMMAND_SOURCE
from gputui.presets.preset import Preset, builtin_presets_path, load_file, user_presets_path
from gputui.presets.store import PresetFile, backup_path, is_builtin
from gputui.tui.screens.dialog import Dialog

DELETE = "delete"


def _same_file(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def why_not_deletable(preset: Preset) -> str | None:
    """Why ``preset`` cannot be deleted here, or None when it can."""
    if is_builtin(preset.source):
        return f"{preset.name} is a built-in preset: built-ins are read-only and cannot be deleted (e, then ctrl+o, makes an editable copy)."
    if preset.source == COMMAND_SOURCE:
        return f"{preset.name} is a command run from here, saved in no presets file: there is nothing to delete."
    user = user_presets_path()
    if not _same_file(preset.source, user):
        return f"{preset.name} comes from {preset.source}, not your presets file {user}: delete it there."
    return None


def builtin_named(name: str) -> Preset | None:
    """The built-in preset ``name``, which a user preset of that name hid."""
    return load_file(builtin_presets_path()).get(name)


def delete_user_preset(name: str) -> Preset | None:
    """Remove preset ``name`` from the user's presets file; the built-in preset of that
    name, which shows again, if there is one.  UserError when it cannot be done (the
    preset is gone from the file, the file cannot be written): nothing is written then."""
    with PresetFile.editing(user_presets_path()) as store:  # locked: no other gputui writes in between
        store.remove_preset(name)
        store.save()
    return builtin_named(name)


class DeletePresetScreen(Dialog):
    """Dismisses with "delete", or None to keep the preset."""

    BINDINGS = [
        Binding("y", "dismiss('delete')", "Delete it", id="delete_confirm"),
        Binding("n,escape", "dismiss(None)", "Keep it", id="delete_cancel"),
    ]

    def __init__(self, name: str) -> None:
        super().__init__(f"Delete preset {name}?")
        self.preset_name = name

    def parts(self) -> ComposeResult:
        path = user_presets_path()
        yield Static(for_widget(self.text))
        yield Static(for_widget(f"It is removed from {path}; the file's previous version is kept as {backup_path(path)}."))
        if builtin_named(self.preset_name) is not None:
            yield Static(for_widget(f"The built-in preset {self.preset_name}, which it replaced, shows again."))
        yield Static("y delete it · n or Esc keep it", id="delete-keys")

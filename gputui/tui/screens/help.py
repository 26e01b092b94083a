"""The help screen (``?`` or F1): gputui's own keys by where they work, with what they
do, the keys of where it was asked from first (a replay leaves out what it cannot do).
Keys remapped in settings.toml's ``[keys]`` show as remapped, by binding id."""

from __future__ import annotations

import textwrap
from collections.abc import Collection, Mapping

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputui.tui.screens.once import DismissOnce
from gputui.tui.screens.terminal_size import TerminalSized

# (binding id or None for a key Textual owns, the default key(s), what it does)
Row = tuple[str | None, str, str]
Section = tuple[str, tuple[Row, ...]]

HELP: tuple[Section, ...] = (
    (
        "Dashboard",
        (
            (None, "↑ ↓", "choose a preset"),
            ("run_preset", "enter", "run the highlighted preset"),
            ("stop_run", "s", "stop the run (its whole process group), after asking"),
            ("run_again", "r", "run the last preset again"),
            ("show_findings", "f", "what holds the run back, with evidence and advice"),
            ("show_summary", "u", "the last finished run's summary"),
            ("show_gpu_processes", "p", "every GPU's processes: the run's and others' (user, command, memory, SM share)"),
            ("edit_preset", "e", "edit the highlighted preset (a built-in one: save a copy)"),
            ("new_preset", "n", "a new preset, saved to your presets file"),
            ("delete_preset", "d,delete", "delete the highlighted preset from your presets file, after asking"),
            ("check", "k", "check this machine (gputui check)"),
            ("run_command", "x", "run any command, e.g. your training script (ctrl+s there: save it as a preset)"),
            ("next_theme", "t", "next colour theme (remembered)"),
            ("filter_presets", "/", "filter the presets by name or description"),
            (None, "tab", "move between the presets and the runs list"),
            ("command_palette", "ctrl+p", "command palette: every action by name (themes, screenshot, …)"),
            ("close_keys_panel", "escape", "close Textual's Keys panel (palette: Keys)"),
            ("help", "?,f1", "this help"),
            ("quit", "q", "quit; a run goes on (gputui attach shows it again)"),
            ("quit_ctrl_q", "ctrl+q", "quit, the same way"),
        ),
    ),
    (
        "Runs list (tab)",
        (
            ("runs_up", "up", "previous run"),
            ("runs_down", "down", "next run"),
            ("open_run", "enter", "the run's summary; a live one: attach to it"),
            ("compare_run", "c", "mark for comparison; a second mark compares the two"),
        ),
    ),
    (
        "Preset editor",
        (
            ("editor_save", "ctrl+s", "save"),
            ("editor_save_as", "ctrl+o", "save under a new name in your presets file"),
            ("editor_run", "ctrl+r", "save and run"),
            ("editor_close", "escape", "close; with unsaved changes it asks: save, discard or cancel"),
            ("editor_switch_tab", "ctrl+t", "switch between the Form and TOML tabs"),
            (None, "tab", "next field"),
            (None, "ctrl+c", "copy (in a text field; it never quits here)"),
        ),
    ),
    (
        "Findings",
        (
            (None, "↑ ↓", "choose a finding"),
            ("close_findings", "escape,f", "close"),
        ),
    ),
    (
        "Run summary",
        (
            ("close_summary", "escape,enter,u", "close"),
            ("summary_run_again", "r", "run the preset again"),
            ("summary_tune", "l", "tune its data loading"),
        ),
    ),
    (
        "Check",
        (
            ("check_full", "enter", "full check (about 5 minutes)"),
            ("check_quick", "u", "quick check (under a minute)"),
            ("check_close", "escape", "stop the check and close"),
        ),
    ),
    ("Comparison", (("close_compare", "escape,enter,c", "close"),)),
    (
        "Replay",
        (
            ("replay_play", "space", "play or pause"),
            ("replay_measure", "m", "jump to where measuring began"),
            ("replay_next_finding", "]", "next finding"),
            ("replay_previous_finding", "[", "previous finding"),
            ("replay_start", "home", "the start"),
            ("replay_end", "end", "the end"),
            ("replay_speed_1", "1 2 3 4", "speed 1×, 10×, 60×, as fast as it goes"),
        ),
    ),
    (
        "Preset filter (/)",
        (
            ("preset_filter_to_list", "enter,down", "to the list, the filter kept"),
            ("preset_filter_clear", "escape", "clear the filter and close it"),
        ),
    ),
    (
        "Output pane (tab or click)",
        (
            ("log_page_up", "pageup", "a page back; new output no longer moves the view"),
            ("log_page_down", "pagedown", "a page forward"),
            ("log_line_up", "up", "a line back"),
            ("log_line_down", "down", "a line forward"),
            ("log_oldest", "home", "the oldest line kept (the last 10,000)"),
            ("log_follow", "end", "follow the newest line again"),
        ),
    ),
)

KEY_NAMES = {
    "delete": "Del",
    "escape": "Esc",
    "enter": "Enter",
    "space": "Space",
    "question_mark": "?",
    "up": "↑",
    "down": "↓",
    "home": "Home",
    "end": "End",
    "tab": "Tab",
}


def key_label(keys: str) -> str:
    """ "escape,f" -> "Esc / f"; "ctrl+s" -> "Ctrl+S"."""

    def one(key: str) -> str:
        key = key.strip()
        if key in KEY_NAMES:
            return KEY_NAMES[key]
        if key.startswith("ctrl+"):
            return "Ctrl+" + key[5:].upper()
        return key.upper() if len(key) == 2 and key[0] == "f" and key[1].isdigit() else key

    return " / ".join(one(k) for k in keys.split(","))


def help_sections(first: str | None = None, leave_out: Collection[str] = ()) -> tuple[Section, ...]:
    """HELP with section ``first`` (where help was asked from) at the top, and without
    the sections and binding ids in ``leave_out`` (what does not apply there)."""
    sections = [(context, tuple(row for row in rows if row[0] not in leave_out)) for context, rows in HELP if context not in leave_out]
    sections.sort(key=lambda section: section[0] != first)  # stable: the rest keep their order
    return tuple(section for section in sections if section[1])


KEY_COLUMN = 16
WHAT_INDENT = 2 + KEY_COLUMN + 1  # where a key's description starts


def help_text(keymap: Mapping[str, str], sections: tuple[Section, ...] = HELP, width: int | None = None) -> Text:
    """The help's ``sections``, with ``keymap``'s remapped keys (binding id -> keys).
    Given the ``width`` it is shown in, a description too long for its line goes on
    under itself, not back at the left edge under the keys."""
    text = Text()
    room = width - WHAT_INDENT if width is not None and width > WHAT_INDENT + 10 else None
    for number, (context, rows) in enumerate(sections):
        if number:
            text.append("\n")
        text.append(f"{context}\n", "bold")
        for binding_id, default, what in rows:
            keys = key_label(keymap.get(binding_id, default) if binding_id else default)
            text.append(f"  {keys:<{KEY_COLUMN}}", "bold")
            lines = textwrap.wrap(what, room) if room else [what]
            text.append(" " + ("\n" + " " * WHAT_INDENT).join(lines) + "\n")
    text.rstrip()
    return text


class HelpText(Static):
    """The help, its descriptions wrapped to the width it is given (again when it changes)."""

    def __init__(self, keymap: Mapping[str, str], sections: tuple[Section, ...], **kwargs) -> None:
        super().__init__(help_text(keymap, sections), **kwargs)
        self.keymap, self.sections = keymap, sections
        self._wrapped_to: int | None = None

    def on_resize(self, event: events.Resize) -> None:
        width = self.content_size.width
        if width and width != self._wrapped_to:
            self._wrapped_to = width
            self.update(help_text(self.keymap, self.sections, width))


class HelpScreen(DismissOnce, TerminalSized, ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,f1", "dismiss(None)", "Close", id="close_help")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 92; max-width: 100%; height: auto; max-height: 100%;
                            border: round $primary; background: $surface; padding: 0 1; }
    HelpScreen VerticalScroll { height: auto; max-height: 1fr; }
    HelpScreen #help-keys { color: $text-muted; height: 1; }
    """

    def __init__(self, keymap: Mapping[str, str], sections: tuple[Section, ...] = HELP) -> None:
        super().__init__()
        self.keymap = dict(keymap)
        self.sections = sections

    def compose(self) -> ComposeResult:
        with Vertical() as panel:
            panel.border_title = "gputui keys"
            with VerticalScroll():
                yield HelpText(self.keymap, self.sections, id="help-text")
            yield Static("Esc or ? close · ↑ ↓ PgUp PgDn scroll · keys remap in settings.toml [keys]", id="help-keys")

    def on_mount(self) -> None:
        if self.app_exiting():
            return
        self.query_one(VerticalScroll).focus()

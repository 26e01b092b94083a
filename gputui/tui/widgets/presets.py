"""The preset list (Enter runs the highlighted preset) and the highlighted one's details."""

from __future__ import annotations

import re
import shlex

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input, Static
from textual.widgets.option_list import Option

from gputui import fmt
from gputui.escape import for_widget, widget_text
from gputui.presets.command_preset import SOURCE as COMMAND_SOURCE
from gputui.presets.preset import Preset
from gputui.record.redact import redact_argv
from gputui.tui.compositor import SteadyScrollbars
from gputui.tui.widgets.option_list import NarrowSafeOptionList
from gputui.view.state import pick_reference


class PresetList(SteadyScrollbars, NarrowSafeOptionList):
    # Shown in the footer as "Run": OptionList's own Enter binding is hidden.
    BINDINGS = [Binding("enter", "select", "Run", id="run_preset")]
    # A name longer than the list is one row, cut with "…" (the details below show it
    # whole): wrapped, it broke mid-word over several rows that read as other presets.
    DEFAULT_CSS = """
    PresetList { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, presets: dict[str, Preset], *, runnable: bool = True, **kwargs) -> None:
        super().__init__(*(Option(for_widget(name), id=name) for name in sorted(presets)), **kwargs)
        self.presets = presets
        self.runnable = runnable  # False in a replay: Enter runs nothing, so it is not offered
        self.filter_text = ""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.runnable if action == "select" else True

    def matching(self) -> list[str]:
        """The names shown: those whose name or description holds the filter's text."""
        needle = self.filter_text.casefold()
        return [name for name in sorted(self.presets) if needle in name.casefold() or needle in self.presets[name].description.casefold()]

    def refill(self, select: str | None = None) -> None:
        """Show the presets that match the filter (the app's presets may have changed)."""
        keep = select or (self.highlighted_option.id if self.highlighted_option is not None else None)
        self.clear_options()
        self.add_options([Option(for_widget(name), id=name) for name in self.matching()])
        if keep is not None:
            self.select_name(keep)
        if self.highlighted is None and self.option_count:
            self.highlighted = 0

    def filter_by(self, text: str) -> None:
        self.filter_text = text
        self.refill()

    @property
    def selected_preset(self) -> Preset | None:
        option = self.highlighted_option
        return self.presets.get(option.id) if option is not None and option.id else None

    def select_name(self, name: str) -> None:
        for index, option in enumerate(self.options):
            if option.id == name:
                self.highlighted = index
                return


def name_lines(name: str, width: int) -> list[str]:
    """A preset name on lines of ``width``, broken after a hyphen, underscore or dot
    ("torch-resnet50-" / "channels-last"), a part longer than a line cut where it must."""
    lines = [""]
    for part in re.split(r"(?<=[-_.])", name):
        while part:
            if lines[-1] and len(lines[-1]) + len(part) > width:
                lines.append("")
            room = width - len(lines[-1])
            lines[-1] += part[:room]
            part = part[room:]
    return lines


def describe_preset(preset: Preset | None, gpu_names: list[str], compact: bool, width: int | None = None) -> Text:
    """The preset's name, what it runs and its reference results; a name longer than
    ``width`` broken after its hyphens, not mid-word."""
    if preset is None:
        return Text("No presets. Add one to presets.toml (see docs/presets.md).")
    text = Text()
    # User text reaches the terminal through Textual as it is: escape control characters.
    name = fmt.printable(preset.name)
    if width is not None and width > 0 and len(name) > width:
        name = "\n".join(name_lines(name, width))
    text.append(name + "\n", "bold")
    # A command typed on the dashboard (x) is its own description: the command line
    # below says it once, quoted ready to paste.
    repeats_command = preset.source == COMMAND_SOURCE and not compact
    if preset.description and not repeats_command:
        text.append(fmt.printable(preset.description) + "\n")
    if not compact:
        # a command may carry a token (env HF_TOKEN=..., --token X): shown as it is stored
        what = f"{preset.framework} {preset.model or ''}".strip() if preset.is_workload else shlex.join(redact_argv(preset.command or ()))
        text.append(fmt.printable(what) + "\n", "dim")
    if preset.reference:
        text.append("reference:\n", "dim")
        picked = pick_reference(preset, gpu_names)
        for ref in preset.reference:
            mark = "▸ " if picked and picked[1] and picked[0] is ref else "  "  # this machine's GPU
            text.append(f"{mark}{ref.gpu} {fmt.rate(ref.samples_per_sec)}/s", "")
            text.append(f" ({ref.source})\n" if not compact else "\n", "dim")
    else:
        text.append("no reference result\n", "dim")
    text.rstrip()
    return widget_text(text)


class PresetDetails(Static):
    """Description, command and reference results of the highlighted preset."""

    _shown: tuple | None = None
    _asked: tuple | None = None  # what show() was last given, to show again at a new width

    def show(self, preset: Preset | None, gpu_names: list[str], compact: bool) -> None:
        # Asked again at each new session's header: the same text is not set again (an
        # update costs a layout pass of the screen and a repaint of these lines).
        self._asked = (preset, gpu_names, compact)
        text = describe_preset(preset, gpu_names, compact, self.content_size.width or None)
        shown = (text.plain, tuple(text.spans), text.style)
        if shown != self._shown:
            self._shown = shown
            self.update(text)

    def on_resize(self, event: events.Resize) -> None:
        if self._asked is not None:
            self.show(*self._asked)


class PresetFilter(Input):
    """The preset list's filter (``/``): a one-line field above the list, shown while
    filtering.  Typing narrows the list; Enter or ↓ goes to the list; Esc clears it."""

    BINDINGS = [
        Binding("escape", "clear", "Clear filter", id="preset_filter_clear"),
        Binding("down", "to_list", "To the list", id="preset_filter_to_list", show=False),
    ]

    class Done(Message):
        """The filter was left: ``cleared`` when Esc emptied it."""

        def __init__(self, cleared: bool) -> None:
            super().__init__()
            self.cleared = cleared

    def __init__(self, **kwargs) -> None:
        super().__init__(placeholder="filter presets", compact=True, select_on_focus=False, **kwargs)

    def action_clear(self) -> None:
        self.value = ""
        self.post_message(self.Done(cleared=True))

    def action_to_list(self) -> None:
        self.post_message(self.Done(cleared=False))

    async def action_submit(self) -> None:
        self.post_message(self.Done(cleared=False))

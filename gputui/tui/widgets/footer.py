"""The dashboard's footer.  Where the keys that apply now do not fit the width, the
least used give way, so the last key shown is never cut mid-word (the hidden ones
still work; ? lists every key).  Under a view or dialog, where none of them act, it
lists none."""

from __future__ import annotations

from textual.app import ComposeResult, ScreenStackError, UnknownModeError
from textual.dom import NoScreen
from textual.reactive import reactive
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

# Actions, the first to go first (a replay's seeks after the theme: play/pause stays).
GIVES_WAY = ("delete_preset", "run_command", "check", "next_theme", "seek_finding(1)", "seek_measure", "new_preset", "edit_preset")
PALETTE_CELLS = 13  # "▏^p Commands ", docked at the right


def key_cells(key_display: str, description: str) -> int:
    """A footer key's width: the key and its description, padded (Textual's FooterKey)."""
    return len(key_display) + len(description) + 3


class DashboardFooter(Footer):
    fitted_width = reactive(0, recompose=True)

    def fit(self, width: int) -> None:
        self.fitted_width = width

    def compose(self) -> ComposeResult:
        left_out = self.left_out()
        covered = self.covered()
        for widget in super().compose():
            if isinstance(widget, FooterKey) and (widget.action in left_out or covered and not widget.has_class("-command-palette")):
                continue
            yield widget

    def covered(self) -> bool:
        """Another screen is on top: none of the dashboard's keys act (Ctrl+P still does)."""
        try:
            return self.app.screen is not self.screen
        except (ScreenStackError, UnknownModeError, NoScreen):  # no screen stack yet, or any more: nothing covers it
            return False

    def left_out(self) -> set[str]:
        """The actions that give way so that the rest fit."""
        if not self._bindings_ready:
            return set()
        shown = {
            binding.action: key_cells(self.app.get_key_display(binding), binding.description)
            for _node, binding, _enabled, _tooltip in self.screen.active_bindings.values()
            if binding.show
        }
        room = (self.fitted_width or self.app.size.width) - PALETTE_CELLS
        left_out: set[str] = set()
        for action in GIVES_WAY:
            if sum(shown.values()) <= room:
                break
            if shown.pop(action, None) is not None:
                left_out.add(action)
        return left_out

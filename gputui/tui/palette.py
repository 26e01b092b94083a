"""Textual's command palette, made safe against keys that arrive before it is drawn.

A terminal delivers keys faster than the app handles them: Ctrl-P then PageUp in one
burst reaches the palette before it has composed its list (``NoMatches:
CommandList``) or before the list has a size (Textual's page move then looks up a
line that was never laid out: ``KeyError: 0``).  Either ended the whole dashboard.
Here such keys are ignored, or a page move becomes a jump to the first or last
command, which is where a page move from nothing would land anyway.  Likewise a
search still running when keys close the palette finds its list gone: it just ends.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Protocol, cast

from textual import work
from textual.command import CommandList, CommandPalette
from textual.css.query import NoMatches
from textual.theme import ThemeProvider

from gputui.tui.screens.once import DismissOnce
from gputui.tui.screens.terminal_size import TerminalSized

PAGE_JUMPS = {"page_up": "first", "page_down": "last"}
_TEXTUAL_GATHER = inspect.unwrap(CommandPalette._gather_commands)  # the coroutine under Textual's @work


class SafeCommandPalette(DismissOnce, TerminalSized, CommandPalette):
    def _command_list(self) -> CommandList | None:
        try:
            return self.query_one(CommandList)
        except NoMatches:  # not composed yet, or already closing
            return None

    def _action_command_list(self, action: str) -> None:
        command_list = self._command_list()
        if command_list is None:
            return
        if action in PAGE_JUMPS and not command_list.scrollable_content_region:
            action = PAGE_JUMPS[action]  # no page height to move by until the list is laid out
        super()._action_command_list(action)

    @work(exclusive=True, group=CommandPalette._GATHER_COMMANDS_GROUP)
    async def _gather_commands(self, search_value: str) -> None:
        try:
            # Textual's search, unwrapped: @work keeps the plain method as __wrapped__
            await _TEXTUAL_GATHER(self, search_value)
        except NoMatches:  # the palette closed while it searched
            pass

    def _action_cursor_down(self) -> None:
        if self._command_list() is not None:
            super()._action_cursor_down()


class _KeepsThemes(Protocol):
    """DashboardApp, as the palette sees it (importing it would be a circle)."""

    def gputui_themes(self) -> Iterable[str]: ...


class GputuiThemes(ThemeProvider):
    """The palette's theme search over gputui's themes and the user's: the ones kept at
    WCAG AA contrast, not Textual's two dozen built-ins."""

    @property
    def commands(self):
        ours = set(cast(_KeepsThemes, self.app).gputui_themes())
        return [(name, choose) for name, choose in super().commands if name in ours]

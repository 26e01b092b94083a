"""The run's output: a scrollable history of its last lines (``state.LOG_LINES``).
A progress bar's '\r' redraws are one line, each replacing the one before
(``DashboardState.log_line``): the pane shows the bar's current state, as a terminal
does, and the history stays readable.

It follows the tail until the user scrolls up (wheel, PgUp/PgDn, Home/End or the
arrows when focused); End, or scrolling back down to the bottom, follows again.
While scrolled up the view is pinned to the lines it shows, so new output does not
move it.  It stays a StateView, not a Textual ``Log``: a redraw sends only the cells
that changed (benchmark lines look alike, so a shift by one line changes few cells),
and it redraws at most once a second, whatever comes, so a benchmark printing a line
every 0.15 s costs one redraw a second, not seven.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.binding import Binding

from gputui.tui.widgets.state_view import StateView
from gputui.view import state as st


class LogPane(StateView):
    SECTIONS = (st.LOG,)
    MIN_REDRAW_S = 1.0
    can_focus = True
    COMPONENT_CLASSES = {"log--stderr", "log--note"}
    DEFAULT_CSS = """
    LogPane .log--stderr { color: $warning; }
    LogPane .log--note { color: $text-muted; }
    """
    BINDINGS = [
        Binding("pageup", "page(-1)", "Page up", show=False, id="log_page_up"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="log_page_down"),
        Binding("up", "lines(-1)", "Line up", show=False, id="log_line_up"),
        Binding("down", "lines(1)", "Line down", show=False, id="log_line_down"),
        Binding("home", "oldest", "Oldest", show=False, id="log_oldest"),
        Binding("end", "follow", "Follow", show=False, id="log_follow"),
    ]
    WHEEL_LINES = 3

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The first line shown, counted from the first line ever logged (state.log_count
        # counts them all; the deque keeps the last ones).  None: follow the tail.
        self._top: int | None = None
        self._shown_subtitle: str | None = None

    # -- What is shown ------------------------------------------------------------------
    @property
    def following(self) -> bool:
        return self._top is None

    def _height(self) -> int:
        return max(1, self.content_size.height or 5)

    def _bounds(self) -> tuple[int, int]:
        """The first line still kept and one past the last, as absolute indices."""
        total = self.state.log_count
        return total - len(self.state.log), total

    def _window_top(self) -> int:
        first, end = self._bounds()
        bottom_top = max(first, end - self._height())
        if self._top is None:
            return bottom_top
        return min(max(self._top, first), bottom_top)

    def build(self) -> Text:
        log = self.state.log
        first, end = self._bounds()
        top = self._window_top()
        start = top - first
        lines = [log[i] for i in range(start, min(len(log), start + self._height()))]
        self._show_position(top, first, end)
        if not lines:
            return Text(self._empty_note(), self.style_of("log--note"))
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, (stream, line) in enumerate(lines):
            if i:
                text.append("\n")
            style = "log--stderr" if stream == "stderr" else "log--note" if stream == "note" else None
            # one entry, one row: a note quoting a multi-line command keeps to its row
            text.append(line.expandtabs(4).replace("\n", "⏎"), self.style_of(style) if style else None)
        return text

    def _empty_note(self) -> str:
        if self.state.watched_pid is not None:
            return f"Watching pid {self.state.watched_pid}: its output goes to its own terminal, not here."
        return "The run's output appears here."

    def _show_position(self, top: int, first: int, end: int) -> None:
        """The border says where the view is while it does not follow the tail."""
        below = end - (top + self._height())
        if self.following or below <= 0:
            subtitle = ""
        else:
            subtitle = f"{top - first} above · {below} below · End follows"
        if subtitle != self._shown_subtitle:
            self._shown_subtitle = subtitle
            self.border_subtitle = subtitle

    # -- Scrolling ----------------------------------------------------------------------
    def scroll_lines(self, delta: int) -> None:
        """Move the view by ``delta`` lines (negative: older); at the bottom it follows."""
        first, end = self._bounds()
        bottom_top = max(first, end - self._height())
        top = min(max(self._window_top() + delta, first), bottom_top)
        self._top = None if top >= bottom_top else top
        self.invalidate()

    def action_lines(self, delta: int) -> None:
        self.scroll_lines(delta)

    def action_page(self, direction: int) -> None:
        self.scroll_lines(direction * max(1, self._height() - 1))

    def action_oldest(self) -> None:
        first, _ = self._bounds()
        self._top = first
        self.scroll_lines(0)

    def action_follow(self) -> None:
        self._top = None
        self.invalidate()

    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        self.scroll_lines(-self.WHEEL_LINES)

    def _on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self.scroll_lines(self.WHEEL_LINES)

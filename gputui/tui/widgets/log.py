"""The tail of the run's output.  Progress-bar redraws never reach us (the Session
turns them into throughput readings), so the tail stays readable.

It jump-scrolls: new lines fill the pane downwards, and only when it is full does the
view jump, keeping the newer half.  Scrolling by one line per new line would repaint
every line of the pane each time, which is most of the bytes a slow link carries.
And it redraws at most once a second, whatever comes: a benchmark printing a line
every 0.15 s (tf-metal's "step N: X samples/sec") gets seven lines a second written
in one go, so a jump rewrites the pane once, not once per line.
"""

from __future__ import annotations

from rich.text import Text

from gputui.tui import state as st
from gputui.tui.widgets.base import StateView


class LogPane(StateView):
    SECTIONS = (st.LOG,)
    MIN_REDRAW_S = 1.0
    COMPONENT_CLASSES = {"log--stderr", "log--note"}
    DEFAULT_CSS = """
    LogPane .log--stderr { color: $warning; }
    LogPane .log--note { color: $text-muted; }
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._top = 0  # index into the state's log counted from its start (see _first)

    def build(self) -> Text:
        height = max(1, self.content_size.height or 5)
        log = self.state.log
        total = self.state.log_count  # lines ever logged; the deque keeps the last ones
        if total - self._top > height or self._top > total:
            self._top = max(0, total - max(1, height // 2))
        first = max(self._top, total - len(log))
        lines = list(log)[first - (total - len(log)):][:height]
        if not lines:
            return Text("The run's output appears here.", self.style_of("log--note"))
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, (stream, line) in enumerate(lines):
            if i:
                text.append("\n")
            style = "log--stderr" if stream == "stderr" else "log--note" if stream == "note" else None
            text.append(line.expandtabs(4), self.style_of(style) if style else None)
        return text

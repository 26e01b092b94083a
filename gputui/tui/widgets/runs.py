"""Earlier runs of this dashboard session with their outcome and median throughput."""

from __future__ import annotations

from rich.text import Text

from gputui import fmt
from gputui.tui import state as st
from gputui.tui.widgets.base import StateView

_MARKS = {"ok": "✓", "running": "●", "stopping": "■", "stopped": "■"}


class RunsList(StateView):
    SECTIONS = (st.RUNS, st.STATUS)
    COMPONENT_CLASSES = {"runs--ok", "runs--bad", "runs--live", "runs--dim"}
    DEFAULT_CSS = """
    RunsList .runs--ok { color: $success; }
    RunsList .runs--bad { color: $error; }
    RunsList .runs--live { color: $accent; text-style: bold; }
    RunsList .runs--dim { color: $text-muted; }
    """

    def build(self) -> Text:
        runs = self.state.runs
        if not runs:
            return Text("No runs yet.", self.style_of("runs--dim"))
        text = Text(no_wrap=True, overflow="ellipsis")
        width = self.content_size.width or 30
        for i, run in enumerate(reversed(runs)):  # newest first: it matters most
            word = run.outcome_word
            style = "runs--ok" if word == "ok" else "runs--live" if word in ("running", "stopping") else "runs--bad"
            if i:
                text.append("\n")
            text.append(f"{_MARKS.get(word, '✗')} ", self.style_of(style))
            left = f"#{run.number} {run.preset.name}"
            right = f"{fmt.rate(run.result)}/s" if run.result else ""
            middle = "" if word == "ok" else f" {word}"
            pad = max(1, width - 2 - len(left) - len(middle) - len(right))
            text.append(left)
            text.append(middle, self.style_of(style))
            text.append(" " * pad + right)
        return text

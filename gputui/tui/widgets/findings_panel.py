"""One line of open findings (what holds the run back), most severe first; `f` opens them."""

from __future__ import annotations

from rich.text import Text

from gputui.tui.widgets.state_view import StateView
from gputui.view import state as st

SEVERITY_MARK: dict[str | None, str] = {"critical": "✖", "warning": "▲", "info": "●"}


class FindingsStrip(StateView):
    SECTIONS = (st.FINDINGS,)
    COMPONENT_CLASSES = {"findings--critical", "findings--warning", "findings--info", "findings--dim"}
    DEFAULT_CSS = """
    FindingsStrip { height: 1; }
    FindingsStrip .findings--critical { color: $error; text-style: bold; }
    FindingsStrip .findings--warning { color: $warning; text-style: bold; }
    FindingsStrip .findings--info { color: $primary; }
    FindingsStrip .findings--dim { color: $text-muted; }
    """

    def build(self) -> Text:
        state = self.state
        found = state.open_findings()
        text = Text(no_wrap=True, overflow="ellipsis")
        if not found:
            closed = len(state.findings())
            note = f"no open findings ({closed} closed: f)" if closed else "no findings"
            text.append(note, self.style_of("findings--dim"))
            return text
        text.append(f"{len(found)} finding{'s' if len(found) > 1 else ''} (f): ", self.style_of("findings--dim"))
        for i, finding in enumerate(found):
            severity = finding.severity
            if i:
                text.append("  ")
            text.append(
                f"{SEVERITY_MARK.get(severity, '●')} {finding.title or finding.kind}",
                self.style_of(f"findings--{severity}" if severity in SEVERITY_MARK else "findings--info"),
            )
        return text

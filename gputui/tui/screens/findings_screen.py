"""Findings in full: each with its evidence (the numbers behind it) and advice."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from gputui import fmt
from gputui.escape import for_widget, widget_text
from gputui.record import events as ev
from gputui.tui.screens.once import DismissOnce
from gputui.tui.screens.terminal_size import TerminalSized
from gputui.tui.widgets.findings_panel import SEVERITY_MARK
from gputui.tui.widgets.option_list import NarrowSafeOptionList


def finding_text(finding: ev.Finding) -> Text:
    text = Text()
    text.append(f"{finding.title or finding.kind}\n", "bold")
    state = finding.state
    since, until = finding.since, finding.until
    when = f"since {fmt.duration(since)}" if since is not None else ""
    if state != "open" and until is not None:
        when += f" until {fmt.duration(until)}"
    text.append(f"{finding.severity} · {finding.kind} · {state} {when}\n", "dim")
    evidence = finding.evidence or {}
    if evidence:
        text.append("\nEvidence\n", "bold")
        width = max(len(str(k)) for k in evidence)
        for key, value in evidence.items():
            shown = f"{value:.4g}" if isinstance(value, float) else str(value)
            text.append(f"  {key:<{width}}  {shown}\n")
    advice = finding.advice or []
    if advice:
        text.append("\nAdvice\n", "bold")
        for line in advice:
            text.append(f"  • {line}\n")
    text.rstrip()
    return widget_text(text)


class FindingsScreen(DismissOnce, TerminalSized, ModalScreen[None]):
    BINDINGS = [
        Binding("escape,f", "dismiss(None)", "Close", id="close_findings"),
        Binding("q", "app.quit", "Quit", id="findings_quit"),  # a modal screen hides the app's keys
    ]
    DEFAULT_CSS = """
    FindingsScreen { align: center middle; }
    FindingsScreen > Vertical { width: 90%; height: 80%; border: round $primary; background: $surface; }
    FindingsScreen OptionList { width: 34%; height: 1fr; }
    FindingsScreen VerticalScroll { width: 1fr; padding: 0 1; }
    FindingsScreen #findings-keys { color: $text-muted; height: 1; }
    """

    def __init__(self, findings: list[ev.Finding]) -> None:
        super().__init__()
        self.findings = findings

    def compose(self) -> ComposeResult:
        with Vertical() as panel:
            panel.border_title = "Findings"
            with Horizontal():
                options = [
                    Option(
                        for_widget(f"{SEVERITY_MARK.get(f.severity, '●')} {f.title or f.kind}" + ("" if f.state == "open" else " (closed)")),
                        id=str(i),
                    )
                    for i, f in enumerate(self.findings)
                ]
                yield NarrowSafeOptionList(*options, id="findings-list")
                with VerticalScroll():
                    yield Static(id="finding-detail")
            yield Static("↑↓ choose · Esc close · q quit", id="findings-keys")

    def on_mount(self) -> None:
        if self.app_exiting():
            return
        self.show(0)

    def show(self, index: int) -> None:
        detail = self.query_one("#finding-detail", Static)
        if not self.findings:
            detail.update("No findings for this run: nothing diagnosed so far.")
            return
        detail.update(finding_text(self.findings[index]))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id is not None:
            self.show(int(event.option.id))

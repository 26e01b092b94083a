"""Every GPU's processes (p on the dashboard): whose each is, its memory, SM share,
user and command, as the sampler last read them (about once a second)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputui.escape import widget_text
from gputui.tui.screens.once import DismissOnce
from gputui.tui.screens.terminal_size import TerminalSized
from gputui.tui.widgets.gpu_owners import ownership, process_line
from gputui.view import state as st

HEADING = f"{'pid':>8}  {'owner':<17} {'memory':>7} {'SM':>5}  user, command"


def processes_text(state: st.DashboardState) -> Text:
    text = Text()
    for index in sorted(state.gpus):
        history = state.gpus[index]
        processes = history.processes
        text.append(f"GPU{index}", "bold")
        summary = ownership(processes)
        text.append(f"  {summary}\n" if summary else "\n", "dim")
        if processes is None:
            text.append("  NVML lists no processes for this GPU\n", "dim")
            continue
        if not processes:
            text.append("  no process\n", "dim")
            continue
        text.append(HEADING + "\n", "dim")
        for p in sorted(processes, key=lambda p: -(p.used_memory or 0)):
            text.append(process_line(p) + "\n")
    text.rstrip()
    return widget_text(text)  # users' commands: shown as text, never as markup


class GpuProcessesScreen(DismissOnce, TerminalSized, ModalScreen[None]):
    BINDINGS = [
        Binding("escape,p", "dismiss(None)", "Close", id="close_gpu_processes"),
        Binding("q", "app.quit", "Quit", id="gpu_processes_quit"),  # a modal screen hides the app's keys
    ]
    DEFAULT_CSS = """
    GpuProcessesScreen { align: center middle; }
    GpuProcessesScreen > Vertical { width: 90%; height: 80%; border: round $primary; background: $surface; }
    GpuProcessesScreen VerticalScroll { height: 1fr; padding: 0 1; }
    GpuProcessesScreen #gpu-processes-keys { color: $text-muted; height: 1; padding: 0 1; }
    """

    def __init__(self, state: st.DashboardState) -> None:
        super().__init__()
        self.state = state

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "GPU processes"
            with VerticalScroll():
                yield Static(processes_text(self.state), id="gpu-processes")
            yield Static("esc or p: close", id="gpu-processes-keys")

"""The top line: which machine this is, and what the dashboard is doing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal

from gputui import fmt
from gputui.tui.widgets.gpu_panel import short_name
from gputui.tui.widgets.runs import outcome_look
from gputui.tui.widgets.state_view import LIVE_REDRAW_S, StateSource, StateView
from gputui.view import state as st

gpu_summary = fmt.gpu_summary


class MachineInfo(StateView):
    """Host, GPUs, driver and CUDA: as much as fits beside the run's status."""

    SECTIONS = (st.HEADER,)
    COMPONENT_CLASSES = {"header--brand", "header--dim"}
    DEFAULT_CSS = """
    MachineInfo { width: 1fr; height: 1; }
    MachineInfo .header--brand { text-style: bold; color: $primary; }
    MachineInfo .header--dim { color: $text-muted; }
    """

    def build(self) -> Text:
        width = self.content_size.width or 60
        text = Text()
        for parts in self._machine_variants():  # most to least detailed: the first that fits
            text = Text(no_wrap=True, overflow="ellipsis")
            text.append(" gputui ", self.style_of("header--brand"))
            for label, value in parts:
                text.append("│ ", self.style_of("header--dim"))
                if label:
                    text.append(label + " ", self.style_of("header--dim"))
                text.append(value + " ")
            if text.cell_len <= width:
                break
        return text

    def _machine_variants(self) -> list[list[tuple[str, str]]]:
        """What to say about the machine, in ever shorter forms: the run's status
        (at the end) matters more than the driver version."""
        header = self.state.header
        if header is None:
            return [[("", "starting…")]]
        host = (header.host.hostname if header.host else None) or "?"
        names = self.state.gpu_names()
        if not names:
            return [[("host", host), ("", "no GPU")], [("", host), ("", "no GPU")], []]
        driver, cuda = header.driver_version or "?", header.cuda_version or "?"
        full = [("host", host), ("", gpu_summary(names)), ("driver", driver), ("CUDA", cuda)]
        short = [("", host), ("", gpu_summary([short_name(n) for n in names])), ("drv", driver), ("CUDA", cuda)]
        return [full, short, short[:2] + short[3:], short[:2], short[1:2], []]


class RunStatus(StateView):
    """What the dashboard is doing: watching, or a run with its phase and time.  Its
    own widget so that the clock ticking each second repaints a few cells, not the
    whole top line."""

    SECTIONS = (st.STATUS,)
    MIN_REDRAW_S = LIVE_REDRAW_S  # the clock steps with the panels
    COMPONENT_CLASSES = {"header--dim", "header--live", "header--stopping", "header--rec"}
    DEFAULT_CSS = """
    RunStatus { width: auto; max-width: 75%; height: 1; }
    RunStatus .header--dim { color: $text-muted; }
    RunStatus .header--live { text-style: bold; color: $success; }
    RunStatus .header--stopping { text-style: bold; color: $warning; }
    RunStatus .header--rec { color: $error; }
    """

    paused = False  # a view covers the dashboard: its panels do not redraw

    def show_paused(self, paused: bool) -> None:
        if paused != self.paused:
            self.paused = paused
            self.invalidate()

    def build(self) -> Text:
        text = Text("│ ", self.style_of("header--dim"), no_wrap=True)
        text.append_text(self._status())
        if self.paused:
            text.append(" │ ❚❚ panels paused", self.style_of("header--dim"))
        text.append(" ")
        return text

    def _status(self) -> Text:
        state = self.state
        text = Text()
        run = state.live_run
        if state.replay is not None:
            text.append(state.replay.text(), self.style_of("header--rec"))
            if run is None and state.run is not None:
                text.append(f" │ {state.run.label} {state.run.outcome_word}", self.style_of("header--dim"))
                return text
            text.append(" │ ", self.style_of("header--dim"))
        if run is not None:
            style = "header--stopping" if run.stopping else "header--live"
            word = "stopping" if run.stopping else "●"
            text.append(f"{word} {run.label}", self.style_of(style))
            if run.phase:
                text.append(f" {run.phase}", self.style_of("header--dim"))
            text.append(f" {fmt.duration(run.last_t)}")
        elif state.session is not None:
            pid = state.session.attach_pid
            text.append(f"○ watching{f' pid {pid}' if pid else ''}", self.style_of("header--dim"))
        elif state.run is not None:
            # Between a run's end and the watching after it: its outcome.  Under the summary
            # the top line is not drawn again until it closes, and a bare "…" stayed there.
            mark, _style, _word = outcome_look(state.run.outcome_word)
            text.append(f"{mark} {state.run.label} {state.run.outcome_word}", self.style_of("header--dim"))
        else:
            text.append("…", self.style_of("header--dim"))
        if state.recording:
            # plain marks: emoji-capable ones (a record button) are two cells wide in some terminals
            mark = {"on": "REC", "done": "✓ saved", "cut": "✗ cut"}.get(state.recording_state, "REC")
            text.append(f" │ {mark} {Path(state.recording).name}", self.style_of("header--rec"))
        return text


class MachineHeader(Horizontal):
    DEFAULT_CSS = """
    MachineHeader { height: 1; background: $panel; color: $foreground; }
    """

    def __init__(self, *, source: StateSource, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source = source

    def compose(self) -> ComposeResult:
        yield MachineInfo(id="machine-info", source=self.source)
        yield RunStatus(id="run-status", source=self.source)

"""The Runs list: this dashboard session's runs with their outcome and median
throughput, newest first, then the runs kept from earlier sessions (the run history),
the runs live elsewhere among them (another terminal's, a detached one: "● live").

It takes the focus (Tab): ↑ ↓ choose, Enter opens a run's summary (attaches to a live
one), c marks a run for comparison and, with two marked, opens the comparison.  The cursor shows only while
the list has the focus.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding

from gputui import fmt
from gputui.record.history import KeptRun
from gputui.tui.widget_messages import CompareRuns, OpenRun, RunEntry
from gputui.tui.widgets.state_view import LIVE_REDRAW_S, StateView
from gputui.view import state as st

_MARKS = {"ok": "✓", "running": "●", "live": "●", "stopping": "■", "stopped": "■", "watched": "○"}
LIVE = "live"  # a kept run that is going elsewhere: Enter attaches
Entry = RunEntry


def outcome_look(word: str) -> tuple[str, str, str]:
    """An outcome word's mark, style and the word shown after the name."""
    if word.startswith("check "):  # a kept check ("check warn"): its verdict; warn passes, as gputui check's exit code says
        verdict = word.removeprefix("check ")
        passed = verdict in ("ok", "warn")
        return ("✓" if passed else "✗", "runs--ok" if passed else "runs--bad", f" {verdict}")
    style = "runs--ok" if word in ("ok", "watched") else "runs--live" if word in ("running", "stopping", LIVE) else "runs--bad"
    return (_MARKS.get(word, "✗"), style, "" if word in ("ok", "watched") else f" {word}")


def day_time(kept: KeptRun) -> str:
    """MM-DD HH:MM a kept run started; "" when its file has no start time."""
    return kept.local_time()[5:]


def entry_name(entry: Entry) -> str:
    """What the list calls a run given room: "#2 resnet50" for this session's,
    "11-21 08:00 resnet50" for a kept one (the comparison heads its columns so)."""
    if isinstance(entry, st.RunView):
        return entry.label
    started = day_time(entry)
    return f"{started} {entry.label}" if started else entry.label


def row_variants(entry: Entry, figure: str) -> list[tuple[str, str]]:
    """A one-line row's (name, figure) pairs, the longest first, for a box with no room
    for two lines: the preset name stays; a kept run's time of day goes first, then
    its figure; this session's runs (no date) lose their figure."""
    if isinstance(entry, st.RunView):
        return [(entry.label, figure), (entry.label, "")]
    started = day_time(entry)
    day = f"{started[:5]} {entry.label}" if started else entry.label
    return [(entry_name(entry), figure), (day, figure), (entry.label, figure), (day, ""), (entry.label, "")]


def row_fits(entry: Entry, middle: str, figure: str, width: int) -> bool:
    """Whether the run's row says it all on one line: mark, name (with its day and time),
    outcome and figure."""
    return 2 + len(entry_name(entry)) + len(middle) + 1 + len(figure) <= width


def second_line_variants(entry: Entry) -> list[str]:
    """What the second line of a two-line row starts with, the longest first: a kept
    run's day and time, else its day (never left out); nothing for this session's."""
    if isinstance(entry, st.RunView):
        return [""]
    started = day_time(entry)
    return [started, started[:5]] if started else [""]


def entry_key(entry: Entry) -> tuple[str, str]:
    return ("run", str(entry.ticket.serial)) if isinstance(entry, st.RunView) else ("kept", str(entry.path))


class RunsList(StateView):
    can_focus = True
    # Rows change with a run's outcome (RUNS) and its live median (THROUGHPUT), which
    # steps with the chart's figures; not with every sample's clock (STATUS).
    SECTIONS = (st.RUNS, st.THROUGHPUT)
    MIN_REDRAW_S = LIVE_REDRAW_S
    BINDINGS = [
        Binding("up", "move(-1)", "Up", id="runs_up", show=False),
        Binding("down", "move(1)", "Down", id="runs_down", show=False),
        Binding("enter", "open", "Open", id="open_run"),
        # Not in the footer: at 80 columns it would push out q Quit (docs/dashboard.md lists it).
        Binding("c", "mark", "Compare", id="compare_run", show=False),
    ]
    COMPONENT_CLASSES = {"runs--ok", "runs--bad", "runs--live", "runs--dim", "runs--cursor", "runs--marked"}
    DEFAULT_CSS = """
    RunsList .runs--ok { color: $success; }
    RunsList .runs--bad { color: $error; }
    RunsList .runs--live { color: $accent; text-style: bold; }
    RunsList .runs--dim { color: $text-muted; }
    RunsList .runs--cursor { background: $primary 40%; }
    RunsList .runs--marked { color: $accent; text-style: bold; }
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cursor = 0
        self.marked: list[tuple[str, str]] = []  # entry keys, in the order they were marked
        self._fitted_for: tuple | None = None  # (runs' version, figures' version, width) the box's height was fitted to
        self._per = 1  # lines per entry, as last fitted (lines_per_entry)

    # -- What is listed ----------------------------------------------------------------
    def entries(self) -> list[Entry]:
        runs: list[Entry] = list(reversed(self.state.runs))  # newest first: it matters most
        own = {r.kept_path for r in self.state.runs if r.kept_path is not None}
        return runs + [k for k in self.state.history if k.path not in own]

    @property
    def selected(self) -> Entry | None:
        entries = self.entries()
        return entries[min(self.cursor, len(entries) - 1)] if entries else None

    # -- Keys ----------------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        count = len(self.entries())
        self.cursor = max(0, min(count - 1, self.cursor + step))
        self.invalidate()

    def action_open(self) -> None:
        entry = self.selected
        if entry is None:
            self.notify("No runs yet.")
            return
        self.post_message(OpenRun(entry))

    def action_mark(self) -> None:
        entry = self.selected
        if entry is None:
            return
        key = entry_key(entry)
        if key in self.marked:
            self.marked.remove(key)
        else:
            self.marked.append(key)
        if len(self.marked) == 2:
            by_key = {entry_key(e): e for e in self.entries()}
            chosen = [by_key[k] for k in self.marked if k in by_key]
            self.marked = []
            if len(chosen) == 2:
                self.post_message(CompareRuns(chosen))
        elif self.marked:
            self.notify("Marked for comparison: press c on another run.", timeout=3)
        self.invalidate()

    def on_focus(self) -> None:
        self.invalidate()

    def on_blur(self) -> None:
        self.invalidate()

    # -- Drawing -------------------------------------------------------------------------
    def fit_height(self, entries: int) -> None:
        """As tall as its entries (the sidebar's space goes unused rather than to an
        empty box), up to what the sidebar has."""
        frame = 1 if self.compact else 2  # a title rule, or a box
        self._per = self.lines_per_entry()
        rows = max(1, entries * self._per) + frame
        if self.styles.max_height is None or self.styles.max_height.value != rows:
            self.styles.max_height = rows
            self.invalidate()

    def on_mount(self) -> None:
        self.fit_height(0)

    def sync(self, force: bool = False) -> None:
        # a run's first figure may need a second line: the figures' version counts too
        listed = (self.state.versions[st.RUNS], self.state.versions[st.THROUGHPUT], self.content_size.width)
        if listed != self._fitted_for:  # before drawing: the box grows, then its lines are drawn
            self._fitted_for = listed
            self.fit_height(len(self.entries()))
        super().sync(force)

    def invalidate(self) -> None:
        self._fitted_for = None  # the frame may have changed (compact): fit again at the next sync
        super().invalidate()

    def lines_per_entry(self) -> int:
        """1 while every row says it all on one line at this width; else 2 for every
        row (the name on the first, day, outcome and figure on the second), so no row
        loses its day or its figure to a narrow sidebar."""
        width = self.content_size.width or 30
        return 1 if all(row_fits(entry, *self._words(entry)[2:], width) for entry in self.entries()) else 2

    def build(self) -> Text:
        entries = self.entries()
        if not entries:
            return Text("No runs yet.", self.style_of("runs--dim"))
        self.cursor = min(self.cursor, len(entries) - 1)
        width = self.content_size.width or 30
        # two lines a run where the sidebar gave the box room for them, else one (cut)
        per = self._per if (self.content_size.height or self._per) >= self._per else 1
        height = max(1, (self.content_size.height or len(entries) * per) // per)
        top = max(0, min(self.cursor - height + 1, len(entries) - height)) if self.cursor >= height else 0
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, entry in enumerate(entries[top : top + height], start=top):
            for n, line in enumerate(self._row_lines(entry, width, per)):
                if i > top or n:
                    text.append("\n")
                if self.has_focus and i == self.cursor:
                    line.stylize(self.style_of("runs--cursor"))
                text.append_text(line)
        return text

    def _words(self, entry: Entry) -> tuple[str, str, str, str]:
        """The row's mark, its style, the outcome word shown and the figure."""
        if isinstance(entry, st.RunView):
            word, median, unit = entry.outcome_word, entry.result, entry.unit
        else:
            word, median, unit = entry.outcome, entry.figure, entry.unit
            if entry.path in self.state.live_runs:
                word = LIVE
        mark, style, middle = outcome_look(word)
        return mark, style, middle, f"{fmt.rate(median)}{fmt.per_second_short(unit)}" if median else ""

    def _row_lines(self, entry: Entry, width: int, per: int) -> list[Text]:
        mark, style, middle, figure = self._words(entry)
        marked = entry_key(entry) in self.marked
        name_style = self.style_of("runs--dim") if isinstance(entry, KeptRun) else None
        first = Text(no_wrap=True, overflow="ellipsis")
        first.append("◆ " if marked else f"{mark} ", self.style_of("runs--marked" if marked else style))
        if per == 1:
            variants = row_variants(entry, figure)
            left, right = next(((name, fig) for name, fig in variants if len(name) <= width - 3 - len(middle) - len(fig)), variants[-1])
            room = width - 3 - len(middle) - len(right)  # for the name, beside the mark, the outcome and the figure
            if len(left) > room:  # the outcome stays in view: the name gives way, marked
                left = left[: max(1, room - 1)] + "…"
            first.append(left, name_style)
            first.append(middle, self.style_of(style))
            first.append(" " * max(1, width - 2 - len(left) - len(middle) - len(right)) + right)
            return [first]
        name = entry.label
        if len(name) > width - 2:  # a name longer than the line: its start, marked as cut
            name = name[: max(1, width - 3)] + "…"
        first.append(name, name_style)
        # the second line: the day (its time of day where there is room), the outcome, the figure
        room = width - 3 - len(middle) - len(figure)
        when = next((w for w in second_line_variants(entry) if len(w) <= room), second_line_variants(entry)[-1])
        word = middle.lstrip() if not when else middle
        second = Text("  ", no_wrap=True, overflow="ellipsis")
        second.append(when, name_style)
        second.append(word, self.style_of(style))
        second.append(" " * max(1, width - 2 - len(when) - len(word) - len(figure)) + figure)
        return [first, second]

"""The dashboard's parts that need no screen: charts, state, themes, settings, the
session supervisor and the bridge."""

from __future__ import annotations

import threading
import time
from collections import deque
from pathlib import Path

import pytest

from gputui.errors import UserError
from gputui.model import GpuSample, Sample
from gputui.presets.preset import Preset, Reference
from gputui.record import events as ev
from gputui.record.events import make_event
from gputui.session.options import RunOptions
from gputui.session.session import SessionConfig
from gputui.session.summary import SummaryBuilder
from gputui.tui.themes import DEFAULT_THEME, builtin_themes_path, load_themes, parse_theme
from gputui.tui.user_settings import DashboardSettings, load_settings, save_setting
from gputui.view import charts
from gputui.view.bridge import SessionBridge
from gputui.view.session_news import EventArrived, HeaderArrived, RunStarted, SampleArrived, SessionEnded, SummaryArrived
from gputui.view.state import DashboardState, ThroughputSeries, pick_reference
from gputui.view.supervisor import SessionSupervisor, SessionTicket
from tests.support.records import make_header, make_summary

# --- charts ------------------------------------------------------------------------


def test_sparkline_keeps_the_newest_values_at_the_right_and_blanks_gaps():
    assert charts.sparkline([0, 50, 100], 5, 0, 100) == "  ▁▄█"
    assert charts.sparkline([100, None, 100], 3, 0, 100) == "█ █"
    assert charts.sparkline(range(100), 4, 0, 99) == charts.sparkline([96, 97, 98, 99], 4, 0, 99)


def test_a_paged_line_fills_from_the_left_and_moves_back_half_its_width_when_full():
    kept = deque(maxlen=30)
    shown = []
    for count in range(1, 31):
        kept.append(count)
        shown.append(charts.page_of(kept, count, 10))
    assert shown[0] == [1] and shown[9] == list(range(1, 11))  # fills from the left, up to 10
    assert shown[10] == list(range(6, 12))  # the 11th moves it back by 5: 6..10 stay in place, 11 after them
    assert shown[19] == list(range(11, 21)) and shown[20] == list(range(16, 22))
    assert all(len(line) <= 10 for line in shown)
    assert charts.page_of(kept, 30, 0) == [] and charts.page_of(kept, 30, 1) == [30]
    assert charts.page_of(deque([28, 29, 30]), 30, 10) == [28, 29, 30]  # fewer kept than the page holds


def test_gauge_fills_in_eighths_and_keeps_its_width():
    assert charts.gauge(0.5, 4) == "██  "
    assert charts.gauge(0.5, 1) == "▌" and charts.gauge(0.01, 2) == "  "
    assert charts.gauge(None, 3) == "   "
    assert all(len(charts.gauge(f / 10, 7)) == 7 for f in range(11))


def test_nice_numbers_for_axes():
    assert charts.nice_ceiling(3150) == 3500
    assert charts.nice_ceiling(2000) == 2000
    assert charts.nice_span(2.8) == 5 and charts.nice_span(31) == 60 and charts.nice_span(90000) == 172800
    assert charts.compact_number(12345) == "12k" and charts.compact_number(1500) == "1.5k"


def test_plot_marks_warmup_median_and_reference():
    bins = [charts.Bin(t, t + 1, 1000.0 if t < 3 else 2000.0, t < 3, None if t < 3 else 1900.0) for t in range(10)]
    plot = charts.plot_throughput(bins, 10, 8, reference=2500.0)
    roles = {role for row in plot.rows for _, role in row}
    assert {charts.BAR, charts.WARMUP, charts.REFERENCE}.issubset(roles)
    assert any(role.startswith(charts.MEDIAN) for role in roles)
    assert plot.warmup_columns == (0, 2)
    assert all(len(row) == 10 for row in plot.rows) and len(plot.rows) == 8
    # the reference line sits above the bars, the median line just under their tops
    ref_row = next(r for r, row in enumerate(plot.rows) if row[9][1] == charts.REFERENCE)
    median_row = next(r for r, row in enumerate(plot.rows) if row[9][1].startswith(charts.MEDIAN))
    assert ref_row < median_row


def test_readings_slower_than_the_columns_draw_a_steady_bar():
    # A reading a second, binned at 0.25 s, drawn in 0.5 s columns: every other column
    # has no reading of its own; it holds the last one instead of reading as a drop to 0.
    bins = [charts.Bin(t, t + 0.25, 1000.0, False, None) for t in range(1, 10)]
    plot = charts.plot_throughput(bins, 20, 4)
    assert plot.x_span / 20 == 0.5
    bottom = "".join(char for char, _ in plot.rows[-1])
    assert bottom == "  " + "█" * 17 + " "  # from the first reading to the last one's bin, nothing after
    assert len({"".join(row[c][0] for row in plot.rows) for c in range(2, 19)}) == 1  # one height throughout


def test_time_axis_brackets_warmup():
    axis = charts.time_axis(30, 60, (2, 12))
    assert "└warm-up" in axis and axis.endswith("1m") and len(axis) == 30


# --- state ---------------------------------------------------------------------------


def test_throughput_series_merges_bins_so_memory_stays_flat():
    series = ThroughputSeries(bin_s=0.25, max_bins=64)
    for i in range(100_000):  # a day of readings at ~1 Hz
        series.add(i * 0.9, 100.0 + i % 7, i < 50, 103.0)
    bins = series.bins()
    assert len(bins) <= 64 and series.readings == 100_000
    assert bins[0].warmup and not bins[-1].warmup
    assert bins[-1].t1 >= 99_999 * 0.9


def _preset(*refs: tuple[str, float]) -> Preset:
    return Preset(name="p", source=Path("x"), reference=tuple(Reference(gpu=g, samples_per_sec=v, source="s") for g, v in refs))


def test_reference_matches_this_gpu_and_a10_is_not_a100():
    preset = _preset(("A10", 100.0), ("A100", 300.0), ("H200", 900.0))
    assert pick_reference(preset, ["NVIDIA A100-SXM4-80GB"])[0].gpu == "A100"
    assert pick_reference(preset, ["NVIDIA A10"])[0].gpu == "A10"
    ref, matched = pick_reference(preset, ["Tesla T4"])
    assert ref.gpu == "A10" and not matched
    assert pick_reference(_preset(), ["NVIDIA H200"]) is None


def test_state_folds_a_run_and_reports_its_end():
    state = DashboardState()
    ticket = SessionTicket(serial=1, run=1, preset=_preset())
    state.apply(ticket, [RunStarted(), HeaderArrived(make_header({"gpus": [{"index": 0, "name": "NVIDIA H200", "gpm_supported": True}]}))])
    state.apply(
        ticket,
        [
            SampleArrived(Sample(t=1.0, gpus=[GpuSample(index=0, util_gpu=100.0, sm_active=40.0)])),
            EventArrived(make_event(1.0, ev.PHASE, {"phase": "warmup"})),
            EventArrived(make_event(1.5, ev.THROUGHPUT, {"samples_per_sec": 10.0, "source": "gputui", "phase": "warmup"})),
            EventArrived(make_event(2.0, ev.THROUGHPUT, {"samples_per_sec": 20.0, "source": "gputui", "phase": "measure"}), 20.0),
            EventArrived(make_event(2.1, ev.OUTPUT, {"stream": "stderr", "text": "hello"})),
            EventArrived(make_event(2.2, ev.FINDING, {"id": "a", "kind": "thermal", "state": "open", "severity": "warning", "title": "T"})),
        ],
    )
    run = state.run
    assert run.current == 20.0 and run.median == 20.0 and run.series.readings == 2
    assert list(state.gpus[0].util) == [40.0]  # SM activity where GPM exists
    assert ("stderr", "hello") in state.log
    assert [f.title for f in state.open_findings()] == ["T"]
    ended = state.apply(
        ticket,
        [
            EventArrived(make_event(3.0, ev.OUTCOME, {"kind": "exited", "ok": True, "exit_code": 0})),
            SummaryArrived(make_summary({"throughput": {"median": 19.0}})),
            SessionEnded(),
        ],
    )
    assert ended == [run] and run.outcome_word == "ok" and run.result == 19.0
    assert state.live_run is None


# --- themes and settings -------------------------------------------------------------


def test_builtin_themes_dark_light_and_high_contrast():
    themes, problems = load_themes(Path("/nonexistent"))
    assert problems == []
    assert {DEFAULT_THEME, "gputui-light", "gputui-high-contrast"} <= set(themes)
    assert themes["gputui-high-contrast"].ansi and not themes["gputui-light"].dark
    assert builtin_themes_path().is_dir()


def test_user_theme_overrides_and_broken_one_is_skipped_with_a_reason(tmp_path):
    (tmp_path / "mine.toml").write_text('primary = "#ff0000"\n[variables]\nfooter-key-foreground = "#00ff00"\n')
    (tmp_path / "broken.toml").write_text("primary = 3\n")
    themes, problems = load_themes(tmp_path)
    assert themes["mine"].primary == "#ff0000" and themes["mine"].variables["footer-key-foreground"] == "#00ff00"
    assert len(problems) == 1 and "broken.toml: primary: expected a colour" in problems[0]


@pytest.mark.parametrize(
    "body, message",
    [
        ("dark = true\n", "primary: missing"),
        ('primary = "#fff"\ncolour = "red"\n', "colour: unknown key"),
        ('primary = "#fff"\ndark = "yes"\n', "dark: expected true or false"),
        ("primary = \n", "TOML syntax error"),
    ],
)
def test_theme_errors_name_file_and_key(tmp_path, body, message):
    path = tmp_path / "t.toml"
    path.write_text(body)
    with pytest.raises(UserError, match=message):
        parse_theme(path)


def test_settings_are_written_atomically_and_keep_comments_and_other_keys(tmp_path):
    path = tmp_path / "gputui" / "settings.toml"
    save_setting(path, "theme", "gputui-light")
    assert load_settings(path)[0].theme == "gputui-light"
    path.write_text('# mine\ntheme = "gputui-light"  # chosen\nother = 1\n')
    save_setting(path, "theme", "gputui-dark")
    text = path.read_text()
    assert "# mine" in text and "other = 1" in text and 'theme = "gputui-dark"' in text
    assert [p.name for p in path.parent.iterdir()] == ["settings.toml"]  # no temp file left


def test_a_malformed_settings_file_is_ignored_and_never_overwritten(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text("theme = = \n")
    settings, problem = load_settings(path)
    assert settings.theme is None and "ignored" in problem
    with pytest.raises(ValueError):
        save_setting(path, "theme", "gputui-dark")
    assert path.read_text() == "theme = = \n"


def test_the_dashboard_s_settings_are_named_apart_from_the_diagnosis_settings(tmp_path):
    from gputui.diagnosis_settings import Settings as DiagnosisSettings

    path = tmp_path / "settings.toml"
    path.write_text('theme = "gputui-light"\n[keys]\nstop_run = "x"\n')
    assert load_settings(path) == (DashboardSettings(theme="gputui-light", keys={"stop_run": "x"}), None)
    assert DashboardSettings is not DiagnosisSettings


# --- supervisor and bridge -------------------------------------------------------------


class FakeSession:
    live = 0  # sessions running at once, across all instances
    most = 0
    lock = threading.Lock()

    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self._stop = threading.Event()
        self.reason = None
        self.summary_builder = None
        self.observers = []

    def add_observer(self, observer) -> None:
        self.observers.append(observer)

    def stop(self, reason: str = "stopped") -> None:
        self.reason = self.reason or reason
        self._stop.set()

    def run(self) -> dict:
        with FakeSession.lock:
            FakeSession.live += 1
            FakeSession.most = max(FakeSession.most, FakeSession.live)
        try:
            self._stop.wait(2.0 if self.config.preset is not None else 30.0)  # a run ends by itself
        finally:
            with FakeSession.lock:
                FakeSession.live -= 1
        return {}


def _wait(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError("timed out")


def test_supervisor_runs_one_session_at_a_time_and_watches_between_runs():
    sessions: list[FakeSession] = []
    tickets: list[SessionTicket] = []
    ended: list[SessionTicket] = []

    def make(config):
        sessions.append(FakeSession(config))
        return sessions[-1]

    def observers_for(session, ticket):
        tickets.append(ticket)
        return []

    sup = SessionSupervisor(make, observers_for, lambda t, e: ended.append(t), options=RunOptions(interval=0.5, duration=99.0))
    thread = threading.Thread(target=sup.loop)
    thread.start()
    try:
        _wait(lambda: sup.current is not None and not sup.current.is_run)
        assert sessions[0].config.duration is None  # watching is not capped
        preset = Preset(name="p", source=Path("x"))
        first = sup.start_run(preset)
        assert first is not None and first.run == 1
        assert sup.start_run(preset) is None  # one run at a time
        _wait(lambda: sup.current == first)
        assert sessions[0].reason == "starting run #1" and sessions[1].config.duration == 99.0
        assert sup.stop_run() and sessions[1].reason == "stopped from the dashboard"
        _wait(lambda: sup.current is not None and not sup.current.is_run)
        assert not sup.stop_run()  # nothing to stop while watching
    finally:
        sup.shutdown("quit")
        assert sup.wait_closed(10)
        thread.join(5)
    assert FakeSession.most == 1
    assert [t.is_run for t in tickets] == [False, True, False]
    assert len(ended) == 3 and sessions[-1].reason == "quit"


def test_bridge_holds_routine_news_for_the_tick_and_posts_the_rest_once_until_taken():
    posted = []
    bridge = SessionBridge(SessionTicket(serial=1), posted.append)
    builder = SummaryBuilder()
    builder.on_event(make_event(0.0, ev.THROUGHPUT, {"samples_per_sec": 40.0, "source": "gputui"}))
    bridge.on_event(builder.counted(make_event(1.0, ev.THROUGHPUT, {"samples_per_sec": 44.0, "source": "gputui"})))
    bridge.on_sample(Sample(t=0.0))
    bridge.on_event(make_event(1.5, ev.OUTPUT, {"stream": "stdout", "text": "epoch 1"}))
    assert posted == []  # readings, samples and output lines wait for the app's tick
    items = bridge.take()
    assert [type(i) for i in items] == [EventArrived, SampleArrived, EventArrived] and items[0].running_median == 42.0
    bridge.on_sample(Sample(t=1.0))
    bridge.on_event(make_event(2.0, ev.PHASE, {"phase": "measure"}))  # not routine: the app hears now
    bridge.on_event(make_event(2.5, ev.STOPPING, {"reason": "stopped by the user"}))
    assert posted == [bridge]  # one wake-up in flight at a time
    assert [type(i) for i in bridge.take()] == [SampleArrived, EventArrived, EventArrived]
    bridge.ended(None)
    assert len(posted) == 2 and bridge.take() == [SessionEnded()]


def test_bridge_survives_an_app_that_has_closed():
    def closed(message):
        raise RuntimeError("Event loop is closed")

    bridge = SessionBridge(SessionTicket(serial=1), closed)
    bridge.on_summary(make_summary({}))  # no exception: the session must still finish cleanly


def test_shutdown_before_the_loop_ever_ran_does_not_wait():
    sup = SessionSupervisor(FakeSession, lambda s, t: [])
    sup.shutdown("quit before the first frame")
    assert sup.wait_closed(0.1)


def test_the_dashboard_logic_needs_no_textual():
    import subprocess
    import sys

    from tests.support.process import REPO

    code = (
        "import sys\nimport gputui.view.supervisor, gputui.view.state, gputui.view.charts, gputui.tui.user_settings\n"
        "print(any(m == 'textual' or m.startswith('textual.') for m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"

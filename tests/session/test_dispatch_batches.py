"""The session handles news in batches: once caught up it gathers for DISPATCH_BATCH_S
before handling more, and a stop or the run's end cuts the wait short.  Work done now
and then runs on cold caches (a recording line written 10 ms after the last cost 160 µs
of CPU on this repo's VM, one of a burst 6 µs)."""

from __future__ import annotations

import json
import sys
import threading
import time

from gputui.presets.preset import load_file
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.observer import Observer
from gputui.session.session import DISPATCH_BATCH_S, Session, SessionConfig
from gputui.telemetry.gpu import GpuTelemetry
from tests.support.fake_nvml import FakeNvml


class Batches(Observer):
    """When the session caught up, and what it had handled by then."""

    def __init__(self) -> None:
        self.idle_at: list[float] = []
        self.lines: list[str] = []
        self.ended_at: float | None = None

    def on_event(self, event: Event) -> None:
        if event.kind == ev.OUTPUT:
            self.lines.append(event.data["text"])
        elif event.kind == ev.OUTCOME:
            self.ended_at = time.monotonic()

    def on_idle(self) -> None:
        self.idle_at.append(time.monotonic())


def session_printing(tmp_path, lines: int, every_s: float) -> Session:
    code = f"import time\nfor i in range({lines}):\n    print('line', i, flush=True)\n    time.sleep({every_s})\n"
    (tmp_path / "p.toml").write_text(f"[presets.chatty]\ncommand = [{json.dumps(sys.executable)}, '-c', {json.dumps(code)}]\n")
    return Session(SessionConfig(preset=load_file(tmp_path / "p.toml")["chatty"], interval=1.0), gpu=GpuTelemetry(FakeNvml()))


def run_watched(session: Session) -> tuple[Batches, float]:
    """Run ``session`` to its end; what it handled when, and when it started."""
    batches = Batches()
    session.add_observer(batches)
    started = time.monotonic()
    session.run()
    return batches, started


def test_a_line_every_tenth_of_a_second_is_handled_in_a_few_batches_and_none_is_lost(tmp_path):
    batches, started = run_watched(session_printing(tmp_path, lines=25, every_s=0.1))
    took = time.monotonic() - started
    assert batches.lines == [f"line {i}" for i in range(25)]
    # ~2.5 s of a line every 0.1 s (and a sample a second): a batch a DISPATCH_BATCH_S, not one a line
    assert len(batches.idle_at) <= took / DISPATCH_BATCH_S + 2, (len(batches.idle_at), took)
    gaps = [b - a for a, b in zip(batches.idle_at, batches.idle_at[1:])]
    assert all(gap >= DISPATCH_BATCH_S * 0.8 for gap in gaps), gaps


def test_the_run_s_end_and_a_stop_do_not_wait_for_the_batch(tmp_path):
    session = session_printing(tmp_path, lines=3, every_s=0.05)
    batches, started = run_watched(session)
    assert batches.lines == ["line 0", "line 1", "line 2"]
    assert session.outcome is not None and session.outcome.exit_code == 0 and session.outcome.duration_s is not None
    assert batches.ended_at is not None
    late = (batches.ended_at - started) - session.outcome.duration_s  # from the child's exit to its outcome
    assert late < DISPATCH_BATCH_S * 0.6, late

    waiting = session_printing(tmp_path, lines=1000, every_s=0.5)
    stopped = Batches()
    waiting.add_observer(stopped)
    thread = threading.Thread(target=waiting.run)
    thread.start()
    time.sleep(1.5)
    asked = time.monotonic()
    waiting.stop("test")
    thread.join(10)
    assert not thread.is_alive()
    assert stopped.ended_at is not None and stopped.ended_at - asked < DISPATCH_BATCH_S / 2 + 0.5


def test_news_handled_in_one_batch_keeps_the_times_it_came_at(tmp_path):
    """Keras's bar is timed on gputui's clock (the steps between two of its lines over the
    time between them): lines handled in one batch must be timed by when they came."""
    code = (
        "import time\n"
        "for i in range(1, 9):\n"
        "    print(f'{30 * i}/1000 \\u2501\\u2501\\u2501\\u2501 1s 16ms/step - loss: 0.5', flush=True)\n"
        "    time.sleep(0.6)\n"
    )
    (tmp_path / "p.toml").write_text(f"[presets.keras]\ncommand = [{json.dumps(sys.executable)}, '-c', {json.dumps(code)}]\n")
    session = Session(SessionConfig(preset=load_file(tmp_path / "p.toml")["keras"], interval=1.0), gpu=GpuTelemetry(FakeNvml()))
    seen: list[Event] = []

    class Keep(Observer):
        def on_event(self, event: Event) -> None:
            seen.append(event)

    session.add_observer(Keep())
    session.run()
    lines = [e for e in seen if e.kind == ev.OUTPUT]
    assert len(lines) == 8
    gaps = [b.t - a.t for a, b in zip(lines, lines[1:])]
    assert all(0.45 < gap < 0.9 for gap in gaps), gaps  # when each line came, not when its batch was handled
    clocked = [e.payload for e in seen if e.kind == ev.THROUGHPUT and e.payload.seconds is not None]
    assert clocked and all(35.0 < r.samples_per_sec < 65.0 for r in clocked), [(r.samples_per_sec, r.seconds) for r in clocked]

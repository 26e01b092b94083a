"""A viewer follows a run through its recording: it hears what the run's own observers
heard, in order, running medians included, however late it comes; it lets go when
closed, sees a run that died without its summary, and a stop asked before the run has
started reaches it once it has."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

from gputui.live import followed as followed_module
from gputui.live.followed import FollowedRun
from gputui.live.registry import LiveRun
from gputui.model import Sample
from gputui.presets.preset import load_file
from gputui.record.events import Event
from gputui.record.observer import Observer
from gputui.record.recorder import Recorder
from gputui.record.schema import Header, Summary
from gputui.session.session import Session, SessionConfig
from gputui.telemetry.gpu import GpuTelemetry
from tests.support.fake_nvml import FakeGpu, FakeNvml


class Heard(Observer):
    def __init__(self) -> None:
        self.items: list[tuple[str, object]] = []

    def on_header(self, header: Header) -> None:
        self.items.append(("header", header.started_at))

    def on_sample(self, sample: Sample) -> None:
        self.items.append(("sample", sample.t))

    def on_event(self, event: Event) -> None:
        self.items.append((event.kind, (round(event.t, 4), event.running_median)))  # a recording keeps 4 decimals

    def on_summary(self, summary: Summary) -> None:
        self.items.append(("summary", summary.throughput))


def printing_session(tmp_path, lines: int = 12, every_s: float = 0.1) -> Session:
    code = f"import time\nfor i in range({lines}):\n    print(f'step {{i}} | {{100 + i}}.0 samples/s', flush=True)\n    time.sleep({every_s})\n"
    (tmp_path / "p.toml").write_text(f"[presets.loop]\ncommand = [{json.dumps(sys.executable)}, '-c', {json.dumps(code)}]\n")
    preset = load_file(tmp_path / "p.toml")["loop"]
    return Session(SessionConfig(preset=preset, interval=0.2), gpu=GpuTelemetry(FakeNvml([FakeGpu()])))


def entry_for(path, pid=None) -> LiveRun:
    pid = os.getpid() if pid is None else pid
    return LiveRun(name="r", pid=pid, pid_started=psutil.Process(pid).create_time(), started_at="", label="loop", recording=path)


def recorded_run(tmp_path, lines: int) -> tuple[Session, Heard, threading.Thread]:
    """The printing session recording to tmp_path/r.jsonl, started in a thread; what its own observer heard."""
    session = printing_session(tmp_path, lines=lines)
    direct = Heard()
    session.add_observer(Recorder(tmp_path / "r.jsonl"))
    session.add_observer(direct)
    runner = threading.Thread(target=session.run, daemon=True)
    runner.start()
    return session, direct, runner


def follow(followed: FollowedRun) -> tuple[Heard, threading.Thread]:
    heard = Heard()
    followed.add_observer(heard)
    thread = threading.Thread(target=followed.run, daemon=True)
    thread.start()
    return heard, thread


@pytest.mark.parametrize("late", [False, True], ids=["from-the-start", "attached-late"])
def test_a_viewer_hears_what_the_run_told_its_observers_in_order_with_running_medians(tmp_path, late):
    path = tmp_path / "r.jsonl"
    _, direct, runner = recorded_run(tmp_path, lines=30)
    if late:  # the run is well on before anyone looks
        deadline = time.monotonic() + 30
        while sum(kind == "throughput" for kind, _ in direct.items) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    heard, viewer = follow(FollowedRun(entry_for(path), poll_s=0.05))
    runner.join(timeout=60)
    viewer.join(timeout=10)
    assert not viewer.is_alive()
    assert heard.items == direct.items
    medians = [data[1] for kind, data in heard.items if kind == "throughput"]
    assert medians and all(m is not None for m in medians)  # the viewer's own builder carried them, as the session's did
    assert heard.items[-1][0] == "summary"


def test_release_stops_following_at_once_and_leaves_the_run_going(tmp_path):
    path = tmp_path / "r.jsonl"
    session, _, runner = recorded_run(tmp_path, lines=200)
    followed = FollowedRun(entry_for(path), poll_s=0.05)
    heard, viewer = follow(followed)
    while not any(kind == "throughput" for kind, _ in heard.items):
        time.sleep(0.05)
    released_at = time.monotonic()
    followed.release()
    viewer.join(timeout=5)
    assert not viewer.is_alive() and time.monotonic() - released_at < 1.0
    assert runner.is_alive()  # the viewer went; the run did not
    session.stop("test over")
    runner.join(timeout=30)


def test_a_run_gone_without_its_summary_is_lost_not_followed_forever(tmp_path, monkeypatch):
    monkeypatch.setattr(followed_module, "QUIET_CHECK_S", 0.2)
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header(Header(schema=1, gputui="test", started_at="2026-11-29T10:00:00+00:00", interval=1.0))
    recorder.on_sample(Sample(t=1.0))
    recorder.close()  # as the kernel closes it for a SIGKILLed run
    gone = subprocess.Popen(["sleep", "600"])
    live = entry_for(path, gone.pid)
    gone.kill()
    gone.wait()
    followed = FollowedRun(live, poll_s=0.05)
    heard = Heard()
    followed.add_observer(heard)
    assert followed.run() is None
    assert followed.lost is not None and "ended without finishing the recording" in followed.lost
    assert [kind for kind, _ in heard.items] == ["header", "sample"]


def test_a_stop_asked_while_the_run_starts_reaches_it_once_it_has(tmp_path, monkeypatch):
    asked: list[tuple[str, str]] = []
    monkeypatch.setattr(followed_module, "request_stop", lambda live, reason: asked.append((live.name, reason)))
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.on_header(Header(schema=1, gputui="test", started_at="2026-11-29T10:00:00+00:00", interval=1.0))
    recorder.on_summary(Summary())
    starting = threading.Event()
    go = threading.Event()

    def start() -> LiveRun:
        starting.set()
        go.wait(10)
        return entry_for(path)

    followed = FollowedRun(start, poll_s=0.05)
    listed: list[LiveRun] = []
    followed.when_started(listed.append)
    viewer = threading.Thread(target=followed.run, daemon=True)
    viewer.start()
    starting.wait(10)
    followed.stop("by a test")
    assert asked == []  # nothing to ask yet
    go.set()
    viewer.join(timeout=10)
    assert asked == [("r", "by a test")]
    assert [dataclasses.replace(live) for live in listed] == [entry_for(path)]


def test_several_viewers_follow_one_run_each_hearing_all_of_it(tmp_path):
    path = tmp_path / "r.jsonl"
    _, direct, runner = recorded_run(tmp_path, lines=20)
    viewers = [follow(FollowedRun(entry_for(path), poll_s=0.05)) for _ in range(3)]
    runner.join(timeout=60)
    for heard, thread in viewers:
        thread.join(timeout=10)
        assert heard.items == direct.items

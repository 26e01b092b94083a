"""Every XID watcher in a process shares one NVML event set and one waiting thread.

On an H200 (driver 580) two event sets in one process made both waits spin, a core
between them (benchmarks/xid_watch_cost.py); a Check run from the dashboard had three:
the dashboard's session, the check's session and the check itself.
"""

from __future__ import annotations

import threading

import pytest

from gputui.telemetry.gpu import GpuTelemetry
from gputui.telemetry.xid_watcher import XidEvent, XidWatcher
from tests.support.fake_nvml import FakeGpu, FakeNvml

AT = 1_750_000_000.0


def watcher(fake: FakeNvml, indices) -> XidWatcher:
    return XidWatcher(indices, fake, clock=lambda: AT, poll_ms=20)


def xid_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "gputui-xid"]


def test_two_watchers_share_one_event_set_and_each_hears_only_its_gpus():
    fake = FakeNvml([FakeGpu(), FakeGpu()])
    both, second_only = watcher(fake, [0, 1]), watcher(fake, [1])
    both.start()
    second_only.start()
    assert fake.calls["nvmlEventSetCreate"] == 1 and fake.event_sets_in_use == 1 and fake.initialized == 1
    assert len(xid_threads()) == 1
    assert fake.emit_xid(0, 79) == 1 and fake.emit_xid(1, 48) == 1  # one set received each
    report = second_only.stop()
    assert report.events == [XidEvent(gpu=1, xid=48, at=AT)] and report.unavailable is None and report.ended is None
    # the other watcher goes on hearing, on the same set
    fake.emit_xid(1, 94)
    assert fake.event_sets_in_use == 1 and fake.initialized == 1
    report = both.stop()
    assert [(e.gpu, e.xid) for e in report.events] == [(0, 79), (1, 48), (1, 94)]
    assert fake.event_sets_in_use == 0 and fake.initialized == 0 and fake.calls["nvmlShutdown"] == 1
    assert not xid_threads()


def test_a_watcher_started_after_the_last_one_left_watches_afresh():
    fake = FakeNvml([FakeGpu()])
    first = watcher(fake, [0])
    first.start()
    first.stop()
    again = watcher(fake, [0])
    again.start()
    fake.emit_xid(0, 31)
    assert [e.xid for e in again.stop().events] == [31]
    assert fake.calls["nvmlEventSetCreate"] == 2 and fake.event_sets_in_use == 0 and fake.initialized == 0


def test_watchers_coming_and_going_at_once_each_hear_what_came_while_they_watched():
    fake = FakeNvml([FakeGpu()])
    failures: list[str] = []

    def watch_one_event(xid: int) -> None:
        own = watcher(fake, [0])
        own.start()
        fake.emit_xid(0, xid)
        heard = [e.xid for e in own.stop().events]
        if xid not in heard:
            failures.append(f"{xid} not in {heard}")

    threads = [threading.Thread(target=watch_one_event, args=(100 + i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not failures
    assert fake.event_sets_in_use == 0 and fake.initialized == 0 and not xid_threads()


def test_a_gpu_another_watcher_cannot_watch_says_why_to_the_watcher_asking_for_it():
    fake = FakeNvml([FakeGpu(), FakeGpu(unsupported={"nvmlDeviceRegisterEvents"})])
    first, second = watcher(fake, [0]), watcher(fake, [1])
    first.start()
    second.start()
    refused = second.stop()
    assert refused.unavailable == "no GPU could be registered for XID events"
    assert refused.unwatched == {1: "NVML refused to register this GPU for XID events"}
    fine = first.stop()
    assert fine.unavailable is None and fine.unwatched == {}


def test_a_check_beside_the_dashboard_adds_no_event_set():
    """The sampler's watcher (a session's GpuTelemetry) and the check's share one set."""
    fake = FakeNvml([FakeGpu(), FakeGpu()])
    telemetry = GpuTelemetry(fake, watch_xids=True)
    telemetry.open()
    try:
        check = XidWatcher([0, 1], fake, poll_ms=20)
        check.start()
        assert fake.calls["nvmlEventSetCreate"] == 1 and len(xid_threads()) == 1
        fake.emit_xid(1, 79)
        assert [e.xid for e in check.stop().events] == [79]
    finally:
        telemetry.close()
    assert fake.event_sets_in_use == 0


@pytest.mark.gpu
def test_on_a_real_gpu_two_watchers_wait_in_one_thread():
    first, second = XidWatcher([0]), XidWatcher([0])
    first.start()
    second.start()
    try:
        assert len(xid_threads()) == 1
    finally:
        reports = [second.stop(), first.stop()]
    assert all(r.unavailable is None and r.ended is None and r.events == [] for r in reports)
    assert not xid_threads()

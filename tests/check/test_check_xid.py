"""XID watching against the fake NVML's event sets, and the results it turns into."""

from __future__ import annotations

import time

import pynvml

from gputui.check.result import FAIL, OK, SKIPPED, UNDER_LOAD
from gputui.check.stage_context import GpuUnderTest
from gputui.check.xid_results import xid_results
from gputui.gpus.xid import ADVICE, REPLACE, UNKNOWN_ADVICE, XID_MEANINGS
from gputui.model import GpuInfo
from gputui.telemetry.xid_watcher import XidEvent, XidReport, XidWatcher
from tests.support.fake_nvml import FakeGpu, FakeNvml

AT = 1_750_000_000.0


def gpus(count: int) -> list[GpuUnderTest]:
    return [GpuUnderTest(info=GpuInfo(index=i, name="NVIDIA H200"), model=None) for i in range(count)]


def watcher(fake: FakeNvml, indices=(0, 1)) -> XidWatcher:
    return XidWatcher(indices, fake, clock=lambda: AT, poll_ms=20)


def test_an_xid_event_becomes_a_failing_result_naming_the_xid_and_its_meaning():
    fake = FakeNvml([FakeGpu(), FakeGpu()])
    watch = watcher(fake)
    watch.start()
    assert fake.emit_xid(1, 79) == 1  # start() returned with both GPUs registered
    report = watch.stop()
    assert report.events == [XidEvent(gpu=1, xid=79, at=AT)]
    quiet, faulty = xid_results(report, gpus(2))
    assert (quiet.id, quiet.status, quiet.group, quiet.value) == ("gpu0.xid", OK, UNDER_LOAD, 0)
    assert (faulty.id, faulty.status, faulty.gpu, faulty.value) == ("gpu1.xid", FAIL, 1, "79")
    assert faulty.cause == "XID 79: " + XID_MEANINGS[79][0] and "fallen off the bus" in faulty.cause
    assert faulty.advice == ADVICE[REPLACE]
    when = time.strftime("%H:%M:%S", time.localtime(AT))
    assert faulty.detail == f"XID 79 at {when}: {XID_MEANINGS[79][0]}"
    assert faulty.data == {"events": [{"xid": 79, "at": AT}]}


def test_the_watcher_uses_its_own_nvml_and_frees_what_it_took():
    fake = FakeNvml([FakeGpu()])
    watch = watcher(fake, [0])
    watch.start()
    assert fake.initialized == 1 and fake.event_sets_in_use == 1
    watch.stop()
    assert fake.initialized == 0 and fake.event_sets_in_use == 0
    assert fake.calls["nvmlInit"] == fake.calls["nvmlShutdown"] == 1


def test_the_most_serious_xid_gives_the_cause_and_every_xid_is_listed():
    report = XidReport(events=[XidEvent(0, 13, AT), XidEvent(0, 48, AT + 1), XidEvent(0, 13, AT + 2)])
    (result,) = xid_results(report, gpus(1))
    assert result.status == FAIL and result.value == "13, 48"
    assert result.cause.startswith("XID 48: double-bit ECC error")
    assert result.detail.count("XID 13") == 2 and len(result.data["events"]) == 3


def test_an_xid_not_in_the_table_still_fails_with_where_to_look_it_up():
    (result,) = xid_results(XidReport(events=[XidEvent(0, 999, AT)]), gpus(1))
    assert result.status == FAIL and "999" in result.cause and result.advice == UNKNOWN_ADVICE


def test_every_common_xid_has_a_meaning_and_advice():
    assert set(XID_MEANINGS) == {13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 74, 79, 92, 94, 95, 119, 120, 154}
    assert all(meaning and culprit in ADVICE for meaning, culprit in XID_MEANINGS.values())


def test_events_arriving_just_before_stop_are_kept():
    fake = FakeNvml([FakeGpu()])
    watch = watcher(fake, [0])
    watch.start()
    for xid in (94, 95):
        fake.emit_xid(0, xid)
    assert [event.xid for event in watch.stop().events] == [94, 95]


def test_older_nvidia_ml_py_without_wait_v2_still_watches():
    fake = FakeNvml([FakeGpu()], missing={"nvmlEventSetWait_v2"})
    watch = watcher(fake, [0])
    watch.start()
    fake.emit_xid(0, 31)
    assert [event.xid for event in watch.stop().events] == [31]
    assert fake.calls["nvmlEventSetWait"] >= 1 and fake.calls["nvmlEventSetWait_v2"] == 0


def test_gpus_that_cannot_report_xids_are_skipped_with_the_reason():
    fake = FakeNvml([FakeGpu(), FakeGpu(event_types=pynvml.nvmlEventTypePState), FakeGpu(unsupported={"nvmlDeviceRegisterEvents"})])
    watch = watcher(fake, [0, 1, 2])
    watch.start()
    report = watch.stop()
    assert report.unwatched == {1: "this GPU does not report XID events", 2: "NVML refused to register this GPU for XID events"}
    ok, no_events, refused = xid_results(report, gpus(3))
    assert ok.status == OK
    assert no_events.status == SKIPPED and "does not report XID events" in no_events.cause
    assert refused.status == SKIPPED and "refused" in refused.cause


def test_without_nvml_every_gpu_says_why_it_was_not_watched():
    fake = FakeNvml([FakeGpu()], init_error=pynvml.NVMLError_LibraryNotFound)
    watch = watcher(fake, [0])
    watch.start()
    report = watch.stop()
    assert report.unavailable.startswith("NVML library not found")
    (result,) = xid_results(report, gpus(1))
    assert result.status == SKIPPED and "NVML library not found" in result.cause


def test_no_gpu_registered_means_unavailable():
    fake = FakeNvml([FakeGpu(unsupported={"nvmlDeviceRegisterEvents"})])
    watch = watcher(fake, [0])
    watch.start()
    report = watch.stop()
    assert report.unavailable == "no GPU could be registered for XID events"
    assert fake.event_sets_in_use == 0


def test_stop_without_start_reports_nothing_watched():
    report = XidWatcher([0], FakeNvml()).stop()
    assert report.events == [] and "never started" in report.unavailable

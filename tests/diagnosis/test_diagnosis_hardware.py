"""Failing hardware: XIDs, new uncorrected ECC errors, row remapping pending or failed,
PCIe replays growing, as critical findings at once; and the sampler's reads of them."""

from __future__ import annotations

import time

import pytest

from gputui.telemetry.gpu import GpuTelemetry
from tests.support.diagnosis_traces import each_gpu, findings, kinds, load, of_kind
from tests.support.fake_nvml import FakeGpu, FakeNvml


def healthy(**counters):
    """healthy_synthetic with ECC, row-remap and replay counters that stay put."""

    def put(t, g):
        g.ecc_uncorrected, g.remap_pending, g.remap_failure, g.pcie_replays = 3, False, False, 40
        for key, value in counters.items():
            setattr(g, key, value(t) if callable(value) else value)

    return each_gpu(load("healthy_synthetic"), put)


def opened_at(events, kind):
    return next(e for e in events if e.data["kind"] == kind and e.data["state"] == "open")


def test_steady_counters_are_healthy():
    assert findings(healthy()) == []


def test_an_xid_is_critical_at_once_with_its_number_and_meaning():
    rec = healthy(xids=lambda t: [79] if 70 <= t < 71 else None)
    events = findings(rec)
    assert kinds(events) == ["failing_hardware"]
    first = opened_at(events, "failing_hardware")
    assert first.t == pytest.approx(70, abs=1) and first.data["severity"] == "critical"
    assert "XID 79 (GPU has fallen off the bus" in first.data["title"]
    finding = of_kind(events, "failing_hardware")
    assert finding["state"] == "open"  # it stays: a GPU that faulted is not trusted again this run
    assert finding["evidence"]["xid"] == 79 and finding["evidence"]["xid_79_count"] == 1
    assert any(a.startswith("XID 79: A hardware fault") for a in finding["advice"])


def test_an_xid_on_a_gpu_that_then_stopped_answering_is_still_reported():
    def lost(t, g):
        if t >= 70:
            g.lost = True
            g.xids = [79] if t < 71 else None

    events = findings(each_gpu(healthy(), lost))
    assert of_kind(events, "failing_hardware")["evidence"]["xid"] == 79


def test_new_uncorrected_ecc_errors_are_critical_at_once():
    events = findings(healthy(ecc_uncorrected=lambda t: 3 if t < 60 else 5))
    first = opened_at(events, "failing_hardware")
    assert first.t == pytest.approx(60, abs=1) and first.data["severity"] == "critical"
    finding = of_kind(events, "failing_hardware")
    assert finding["evidence"]["ecc_uncorrected_new"] == 2 and "2 new uncorrected ECC error(s)" in finding["title"]


def test_errors_counted_before_the_run_are_not_new():
    assert findings(healthy(ecc_uncorrected=7)) == []


def test_row_remapping_pending_and_failed():
    pending = of_kind(findings(healthy(remap_pending=lambda t: t >= 50)), "failing_hardware")
    assert pending["evidence"]["row_remap_pending"] == 1 and "row remapping pending" in pending["title"]
    failed = of_kind(findings(healthy(remap_failure=lambda t: t >= 50)), "failing_hardware")
    assert failed["evidence"]["row_remap_failure"] == 1 and "row remapping failed" in failed["title"]


def test_pcie_replays_growing_fast_are_critical_and_slowly_are_not():
    fast = healthy(pcie_replays=lambda t: 40 + int(max(0.0, t - 50) * 1.0))  # 60 a minute from 50 s
    finding = of_kind(findings(fast), "failing_hardware")
    assert finding["evidence"]["pcie_replays_per_min_max"] >= 30 and "PCIe replays at" in finding["title"]
    slow = healthy(pcie_replays=lambda t: 40 + int(t / 30))  # 2 a minute
    assert findings(slow) == []


def test_gpus_without_the_counters_say_nothing():
    assert "failing_hardware" not in kinds(findings(load("healthy_synthetic")))


# --- the sampler ----------------------------------------------------------------------------


def test_the_sampler_reads_the_fault_counters():
    gpu = FakeGpu(remapped_rows=(0, 1, 1, 0), pcie_replays=12, ecc_errors={(1, 0): 2})
    telemetry = GpuTelemetry(FakeNvml([gpu, FakeGpu(ecc_mode=(0, 0))]), use_gpm=False)
    telemetry.open()
    try:
        ecc, no_ecc = telemetry.sample()
    finally:
        telemetry.close()
    assert (ecc.ecc_uncorrected, ecc.remap_pending, ecc.remap_failure, ecc.pcie_replays) == (2, True, False, 12)
    assert no_ecc.ecc_uncorrected is None  # GeForce-like: no ECC, reported as absent


def test_the_sampler_reports_xid_events_with_the_next_sample():
    fake = FakeNvml([FakeGpu(), FakeGpu()])
    telemetry = GpuTelemetry(fake, use_gpm=False, watch_xids=True)
    telemetry.open()
    try:
        assert [s.xids for s in telemetry.sample()] == [None, None]
        assert fake.emit_xid(1, 48) == 1
        deadline = time.monotonic() + 10
        got = [None, None]
        while got == [None, None] and time.monotonic() < deadline:  # the watcher's thread delivers it
            got = [s.xids for s in telemetry.sample()]
            time.sleep(0.02)
        assert got == [None, [48]]
        assert [s.xids for s in telemetry.sample()] == [None, None]  # reported once
    finally:
        telemetry.close()
    assert fake.event_sets_in_use == 0

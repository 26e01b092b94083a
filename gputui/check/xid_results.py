"""The check's XID result per GPU, from what :class:`~gputui.telemetry.xid_watcher.XidWatcher` saw
while the check loaded the GPUs (the meanings are in :mod:`gputui.gpus.xid`)."""

from __future__ import annotations

import time

from gputui.check.result import FAIL, OK, UNDER_LOAD, CheckResult, skipped
from gputui.check.stage_context import GpuUnderTest
from gputui.gpus.xid import ADVICE, SEVERITY, UNKNOWN_ADVICE, XID_MEANINGS, xid_meaning
from gputui.telemetry.xid_watcher import XidReport

# --- results -----------------------------------------------------------------------------


def xid_results(report: XidReport, gpus: list[GpuUnderTest]) -> list[CheckResult]:
    """One ``under-load`` result per GPU, id ``gpu{i}.xid``."""
    return [_gpu_result(report, gpu.index) for gpu in gpus]


def _gpu_result(report: XidReport, index: int) -> CheckResult:
    id, name = f"gpu{index}.xid", "XID errors"
    events = [event for event in report.events if event.gpu == index]
    if not events:
        if report.unavailable is not None:
            return skipped(id, UNDER_LOAD, name, f"XID events not watched: {report.unavailable}", gpu=index)
        if index in report.unwatched:
            return skipped(id, UNDER_LOAD, name, f"XID events not watched: {report.unwatched[index]}", gpu=index)
        detail = "none while the GPU was loaded"
        if report.ended:
            detail += f"; watching ended early ({report.ended})"
        return CheckResult(
            id=id, group=UNDER_LOAD, name=name, status=OK, value=0, unit="events", expected=0, expected_source="none on a healthy GPU", gpu=index, detail=detail
        )
    worst = max(events, key=lambda e: SEVERITY.get(XID_MEANINGS.get(e.xid, ("", ""))[1], 0))
    culprit = XID_MEANINGS.get(worst.xid, ("", ""))[1]
    xids = sorted({event.xid for event in events})
    return CheckResult(
        id=id,
        group=UNDER_LOAD,
        name=name,
        status=FAIL,
        value=", ".join(map(str, xids)),
        unit="XID",
        expected=0,
        expected_source="none on a healthy GPU",
        gpu=index,
        detail="; ".join(f"XID {e.xid} at {time.strftime('%H:%M:%S', time.localtime(e.at))}: {xid_meaning(e.xid)}" for e in events),
        cause=f"XID {worst.xid}: {xid_meaning(worst.xid)}",
        advice=ADVICE.get(culprit, UNKNOWN_ADVICE),
        data={"events": [{"xid": e.xid, "at": e.at} for e in events]},
    )

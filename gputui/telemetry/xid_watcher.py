"""XID errors (the driver's reports of GPU faults): a watcher of NVML's events (their meanings are
in :mod:`gputui.gpus.xid`).

:class:`XidWatcher` waits on NVML critical-error events in its own thread with its
own :class:`~gputui.telemetry.nvml.Nvml` instance: the wrapper is not thread-safe,
and NVML's init is reference-counted, so a second instance beside the sampler's is
allowed.  The check (``gputui.check.xid_results``) grades what it saw;
the sampler attaches new events to its samples for the diagnosis.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gputui.telemetry.nvml import GpuLost, Nvml

POLL_MS = 500  # each wait's timeout: how quickly stop() is answered (5 waits a second were a twentieth of an idle dashboard's CPU)
START_TIMEOUT_S = 10.0  # a driver that hangs while registering must not hang the check
STOP_TIMEOUT_S = 10.0
XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError, when the module lacks the constant


@dataclass
class XidEvent:
    gpu: int | None  # NVML index; None if the event's device could not be named
    xid: int
    at: float  # wall-clock seconds (time.time) when the event was received


@dataclass
class XidReport:
    events: list[XidEvent] = field(default_factory=list)
    unavailable: str | None = None  # why no GPU was watched at all
    unwatched: dict[int, str] = field(default_factory=dict)  # GPU index -> why it was not watched
    ended: str | None = None  # why watching stopped before stop() was called


def _handle_key(handle: Any) -> int:
    """A key that is equal for two references to one NVML device: the pointer's address."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value or 0
    except (TypeError, ctypes.ArgumentError):
        return id(handle)  # a test double's handle object


class XidWatcher:
    """``start()`` registers the GPUs ``indices`` for XID events and returns once they
    are watched; ``stop()`` ends the watching and returns what was seen."""

    def __init__(self, indices: Iterable[int], nvml_module: Any = None, *, clock: Callable[[], float] = time.time, poll_ms: int = POLL_MS) -> None:
        self._indices = list(indices)
        self._module = nvml_module
        self._clock = clock
        self._poll_ms = poll_ms
        self._report = XidReport()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._taken = 0

    def take(self) -> list[XidEvent]:
        """The events received since the previous ``take`` (for a sampler that reports
        them as they come; the watching thread only appends)."""
        events = self._report.events[self._taken :]
        self._taken += len(events)
        return events

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("XidWatcher.start() called twice")
        self._thread = threading.Thread(target=self._run, name="gputui-xid", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            self._report.ended = f"NVML did not finish registering for XID events within {START_TIMEOUT_S:g} s"

    def stop(self) -> XidReport:
        if self._thread is None:
            return XidReport(unavailable="XID watching was never started")
        self._stop.set()
        self._thread.join(STOP_TIMEOUT_S)
        report = self._report
        if self._thread.is_alive() and report.ended is None:
            report.ended = "the XID watcher did not stop in time"
        return XidReport(list(report.events), report.unavailable, dict(report.unwatched), report.ended)

    # --- the watching thread ---------------------------------------------------------

    def _run(self) -> None:
        nvml = Nvml(self._module)
        try:
            reason = nvml.init()
            if reason is not None:
                self._report.unavailable = reason
                return
            self._watch(nvml)
        except GpuLost as exc:
            self._report.ended = f"a GPU stopped answering: {exc}"
        finally:
            self._ready.set()
            nvml.shutdown()

    def _watch(self, nvml: Nvml) -> None:
        event_set = nvml.call("nvmlEventSetCreate")
        if event_set is None:
            self._report.unavailable = "this driver or nvidia-ml-py cannot deliver NVML events"
            return
        try:
            kind = nvml.const("nvmlEventTypeXidCriticalError", XID_EVENT)
            devices = self._register(nvml, event_set, kind)
            if not devices:
                self._report.unavailable = "no GPU could be registered for XID events"
                return
            self._ready.set()
            wait = "nvmlEventSetWait_v2" if getattr(nvml.module, "nvmlEventSetWait_v2", None) else "nvmlEventSetWait"
            while not self._stop.is_set():
                self._wait_once(nvml, wait, event_set, kind, devices, self._poll_ms)
            while self._wait_once(nvml, wait, event_set, kind, devices, 0):
                pass  # events that arrived before stop()
        finally:
            nvml.call("nvmlEventSetFree", event_set)

    def _register(self, nvml: Nvml, event_set: Any, kind: int) -> dict[int, int]:
        """Register each GPU; returns handle key -> index of those that are watched."""
        devices = {}
        for index in self._indices:
            handle = nvml.call("nvmlDeviceGetHandleByIndex", index)
            if handle is None:
                self._report.unwatched[index] = "NVML gives no handle for this GPU"
                continue
            supported = nvml.call("nvmlDeviceGetSupportedEventTypes", handle)
            if supported is not None and not supported & kind:
                self._report.unwatched[index] = "this GPU does not report XID events"
            elif not nvml.call_ok("nvmlDeviceRegisterEvents", handle, kind, event_set):
                self._report.unwatched[index] = "NVML refused to register this GPU for XID events"
            else:
                devices[_handle_key(handle)] = index
        return devices

    def _wait_once(self, nvml: Nvml, wait: str, event_set: Any, kind: int, devices: dict[int, int], timeout_ms: int) -> bool:
        """Wait for one event; True if one came."""
        started = time.monotonic()
        data = nvml.call(wait, event_set, timeout_ms)
        if data is None:
            # A timeout, or an error the wrapper reports as absent: wait out the rest of
            # the timeout so that an error returning at once cannot make this loop spin.
            rest = timeout_ms / 1000.0 - (time.monotonic() - started)
            if rest > 0:
                self._stop.wait(rest)
            return False
        if data.eventType & kind:
            index = devices.get(_handle_key(data.device))
            if index is None:
                index = nvml.call("nvmlDeviceGetIndex", data.device)
            self._report.events.append(XidEvent(gpu=index, xid=int(data.eventData), at=self._clock()))
        return True

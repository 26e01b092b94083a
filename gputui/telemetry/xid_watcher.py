"""XID errors (the driver's reports of GPU faults): a watcher of NVML's events (their meanings are
in :mod:`gputui.gpus.xid`).

:class:`XidWatcher` hears NVML's critical-error events from one waiting thread per
process (:class:`_Hub`), with its own :class:`~gputui.telemetry.nvml.Nvml` instance: the
wrapper is not thread-safe, and NVML's init is reference-counted, so a second instance
beside the sampler's is allowed.  Every watcher in the process shares that thread and
its one event set: two event sets in one process can make both waits spin, a whole
core between them (docs/performance.md#figures-behind-the-codes-choices), and a Check run
from the dashboard had three (the dashboard's session, the check's session, the check).  The check (``gputui.check.xid_results``) grades what it saw;
the sampler attaches new events to its samples for the diagnosis.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

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


def _module_key(module: Any) -> int:
    """One hub per NVML module: None means pynvml, as in Nvml (0 where it is missing)."""
    if module is not None:
        return id(module)
    try:
        import pynvml
    except ImportError:
        return 0
    return id(pynvml)


class XidWatcher:
    """``start()`` watches the GPUs ``indices`` for XID events and returns once they
    are registered; ``stop()`` ends the watching and returns what was seen since
    ``start()``, events that arrived just before ``stop()`` included."""

    def __init__(self, indices: Iterable[int], nvml_module: Any = None, *, clock: Callable[[], float] = time.time, poll_ms: int = POLL_MS) -> None:
        self._indices = list(indices)
        self._module = nvml_module
        self._clock = clock
        self._poll_ms = poll_ms
        self._events: list[XidEvent] = []
        self._hub: _Hub | None = None
        self._timed_out: str | None = None
        self._taken = 0

    def take(self) -> list[XidEvent]:
        """The events received since the previous ``take`` (for a sampler that reports
        them as they come; the watching thread only appends)."""
        events = self._events[self._taken :]
        self._taken += len(events)
        return events

    def start(self) -> None:
        if self._hub is not None:
            raise RuntimeError("XidWatcher.start() called twice")
        self._hub = _Hub.join(self)
        if not self._hub.ready.wait(START_TIMEOUT_S):
            self._timed_out = f"NVML did not finish registering for XID events within {START_TIMEOUT_S:g} s"

    def stop(self) -> XidReport:
        if self._hub is None:
            return XidReport(unavailable="XID watching was never started")
        hub = self._hub
        left = hub.leave(self)
        unavailable = hub.unavailable
        unwatched = {i: hub.unwatched.get(i, "NVML gives no handle for this GPU") for i in self._indices if i not in hub.watched}
        if unavailable is None and hub.ready.is_set() and self._indices and len(unwatched) == len(self._indices):
            unavailable = "no GPU could be registered for XID events"
        ended = self._timed_out or hub.ended or (None if left else "the XID watcher did not stop in time")
        return XidReport(list(self._events), unavailable, {} if hub.unavailable else unwatched, ended)

    def _hear(self, gpu: int | None, xid: int) -> None:
        """The hub's thread: an event, kept when it is on one of our GPUs (or unnamed)."""
        if gpu is None or gpu in self._indices:
            self._events.append(XidEvent(gpu=gpu, xid=xid, at=self._clock()))


class _Hub:
    """The process's one NVML event set for XIDs, registered for every GPU, and the one
    thread waiting on it, shared by the watchers of one NVML module (tests bring their
    own).  It starts with the first watcher and ends, freeing the set and shutting its
    NVML down, when the last one leaves."""

    _lock: ClassVar[threading.Lock] = threading.Lock()  # guards the table and every hub's watchers
    _running: ClassVar[dict[int, _Hub]] = {}  # _module_key -> its hub

    def __init__(self, key: int, module: Any, poll_ms: int) -> None:
        self._key, self._module, self._poll_ms = key, module, poll_ms
        self._watchers: list[XidWatcher] = []
        self._leaving: list[tuple[XidWatcher, threading.Event]] = []
        self._finished = False  # the thread has ended (under _lock)
        self.ready = threading.Event()  # registered, or failed: set either way
        self.watched: set[int] = set()
        self.unwatched: dict[int, str] = {}
        self.unavailable: str | None = None  # why nothing could be watched
        self.ended: str | None = None  # why watching ended while watchers were on it

    @classmethod
    def join(cls, watcher: XidWatcher) -> _Hub:
        key = _module_key(watcher._module)
        with cls._lock:
            hub = cls._running.get(key)
            if hub is None:
                hub = cls._running[key] = _Hub(key, watcher._module, watcher._poll_ms)
                threading.Thread(target=hub._run, name="gputui-xid", daemon=True).start()
            hub._watchers.append(watcher)
        return hub

    def leave(self, watcher: XidWatcher) -> bool:
        """Take ``watcher`` off once the thread has read what is already waiting; False
        if the thread did not answer within STOP_TIMEOUT_S."""
        done = threading.Event()
        with self._lock:
            if self._finished:
                if watcher in self._watchers:
                    self._watchers.remove(watcher)
                return True
            self._leaving.append((watcher, done))
        return done.wait(STOP_TIMEOUT_S)

    # --- the waiting thread ---------------------------------------------------------

    def _forget(self) -> None:
        """Off the table (under _lock): the next watcher starts a hub of its own."""
        if self._running.get(self._key) is self:
            del self._running[self._key]

    def _run(self) -> None:
        nvml = Nvml(self._module)
        try:
            reason = nvml.init()
            if reason is not None:
                self.unavailable = reason
                return
            self._watch(nvml)
        except GpuLost as exc:
            self.ended = f"a GPU stopped answering: {exc}"
        finally:
            self.ready.set()
            nvml.shutdown()
            with self._lock:
                self._finished = True
                self._forget()
                leaving, self._leaving = self._leaving, []
            for _, done in leaving:
                done.set()

    def _watch(self, nvml: Nvml) -> None:
        event_set = nvml.call("nvmlEventSetCreate")
        if event_set is None:
            self.unavailable = "this driver or nvidia-ml-py cannot deliver NVML events"
            return
        try:
            kind = nvml.const("nvmlEventTypeXidCriticalError", XID_EVENT)
            devices = self._register(nvml, event_set, kind)
            self.ready.set()
            if not devices:
                return
            wait = "nvmlEventSetWait_v2" if getattr(nvml.module, "nvmlEventSetWait_v2", None) else "nvmlEventSetWait"
            while True:
                self._wait_once(nvml, wait, event_set, kind, devices, self._poll_ms)
                with self._lock:
                    leaving, self._leaving = self._leaving, []
                if not leaving:
                    continue
                while self._wait_once(nvml, wait, event_set, kind, devices, 0):
                    pass  # events that arrived before stop() reach those leaving too
                with self._lock:
                    for watcher, _ in leaving:
                        self._watchers.remove(watcher)
                    if not self._watchers:  # the last left: a watcher coming now starts a new hub
                        self._forget()
                        self._leaving = leaving + self._leaving  # answered by _run once NVML is shut down
                        return
                for _, done in leaving:
                    done.set()
        finally:
            nvml.call("nvmlEventSetFree", event_set)

    def _register(self, nvml: Nvml, event_set: Any, kind: int) -> dict[int, int]:
        """Register every GPU; returns handle key -> index of those that are watched."""
        devices = {}
        for index in range(nvml.call("nvmlDeviceGetCount") or 0):
            handle = nvml.call("nvmlDeviceGetHandleByIndex", index)
            if handle is None:
                self.unwatched[index] = "NVML gives no handle for this GPU"
                continue
            supported = nvml.call("nvmlDeviceGetSupportedEventTypes", handle)
            if supported is not None and not supported & kind:
                self.unwatched[index] = "this GPU does not report XID events"
            elif not nvml.call_ok("nvmlDeviceRegisterEvents", handle, kind, event_set):
                self.unwatched[index] = "NVML refused to register this GPU for XID events"
            else:
                devices[_handle_key(handle)] = index
        self.watched = set(devices.values())
        return devices

    def _wait_once(self, nvml: Nvml, wait: str, event_set: Any, kind: int, devices: dict[int, int], timeout_ms: int) -> bool:
        """Wait for one event and hand it to every watcher; True if one came."""
        started = time.monotonic()
        data = nvml.call(wait, event_set, timeout_ms)
        if data is None:
            # A timeout, or an error the wrapper reports as absent: wait out the rest of
            # the timeout so that an error returning at once cannot make this loop spin.
            rest = timeout_ms / 1000.0 - (time.monotonic() - started)
            if rest > 0:
                time.sleep(rest)
            return False
        if data.eventType & kind:
            index = devices.get(_handle_key(data.device))
            if index is None:
                index = nvml.call("nvmlDeviceGetIndex", data.device)
            with self._lock:
                watchers = list(self._watchers)
            for watcher in watchers:
                watcher._hear(index, int(data.eventData))
        return True

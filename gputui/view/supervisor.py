"""One session at a time for the dashboard: a watch session while idle, a run on
request (a preset's, or a live run attached to), then watching again.

Watching is a :class:`~gputui.session.session.Session` in this process.  A run is, from
the command line, a process of its own (gputui.live: the ``make_run`` factory starts it
detached) that the dashboard follows through its recording
(:class:`~gputui.live.followed.FollowedRun`), so closing the dashboard leaves it going;
tests run it here, as a Session on fake telemetry.  :meth:`SessionSupervisor.loop` runs
in one background thread (a Textual thread worker) and calls ``run()`` there, so there
is never more than one sampler in this process.  Everything else is thread-safe and
never blocks: the UI asks, the loop acts.  No Textual here, so it is testable on its own.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard

from gputui.presets.preset import Preset
from gputui.record.observer import Observer
from gputui.session.options import RunOptions

if TYPE_CHECKING:  # imported when the first session starts, after the first frame
    from gputui.live.followed import FollowedRun
    from gputui.live.registry import LiveRun
    from gputui.record.schema import Baseline
    from gputui.session.session import Session, SessionConfig

log = logging.getLogger(__name__)

RETRY_AFTER_FAILURE_S = 2.0  # a session that crashed is not restarted in a tight loop


def followed(driven: Session | FollowedRun) -> TypeGuard[FollowedRun]:
    """A run of its own process, followed here (it goes on when the dashboard closes)."""
    from gputui.live.followed import FollowedRun  # loaded with the first run, not before the first frame

    return isinstance(driven, FollowedRun)


class RunLost(Exception):
    """A followed run's process ended without finishing its recording (it was killed)."""


@dataclass(frozen=True)
class SessionTicket:
    """Which session this is: ``run`` numbers the preset runs (1, 2, ...); watching has none."""

    serial: int
    run: int | None = None
    preset: Preset | None = None  # a live run's: the one its recording names
    attach_pid: int | None = None
    live: LiveRun | None = None  # a run started elsewhere, attached to

    @property
    def is_run(self) -> bool:
        return self.preset is not None


SessionFactory = Callable[["SessionConfig"], "Session"]
# A preset's run in a process of its own, as the run's options ask (RunOptions.session_config).
RunFactory = Callable[[SessionTicket, RunOptions], "FollowedRun"]
ObserversFor = Callable[["Session | FollowedRun", SessionTicket], "list[Observer]"]
EndedCallback = Callable[[SessionTicket, "BaseException | None"], None]


class SessionSupervisor:
    def __init__(
        self,
        make_session: SessionFactory,
        observers_for: ObserversFor,
        on_ended: EndedCallback | None = None,
        *,
        options: RunOptions | None = None,
        make_run: RunFactory | None = None,
    ) -> None:
        self._make_session = make_session
        self._make_run = make_run  # None: runs are Sessions in this process (tests' fake telemetry)
        # the runs' options: interval, --duration (a cap on each run and on watching an
        # attached job), --price, --baseline for the chosen preset's runs
        self._options = options or RunOptions()
        self._observers_for = observers_for
        self._on_ended = on_ended or (lambda ticket, error: None)
        self._attach_pid = self._options.attach_pid  # watched once, until that job ends
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._closing = False
        self._started = False
        self._serial = 0
        self._runs = 0
        self._pending: SessionTicket | None = None
        self._current: tuple[SessionTicket, Session | FollowedRun] | None = None
        self._every_session: list[Observer] = []  # e.g. the --serve-metrics feed
        self.left_running: list[FollowedRun] = []  # live runs this dashboard stopped following as it closed

    def add_observer(self, observer: Observer) -> None:
        """Add ``observer`` to every session from the next one on (call before loop())."""
        self._every_session.append(observer)

    @property
    def every_session(self) -> tuple[Observer, ...]:
        """The observers every session gets (a check's session gets them too)."""
        return tuple(self._every_session)

    # -- Asked from any thread ------------------------------------------------------
    @property
    def current(self) -> SessionTicket | None:
        with self._lock:
            return self._current[0] if self._current else None

    @property
    def current_outlives_viewer(self) -> bool:
        """The run shown now goes on when the dashboard closes (a process of its own)."""
        with self._lock:
            return self._current is not None and followed(self._current[1])

    def start_run(self, preset: Preset) -> SessionTicket | None:
        """Queue a run of ``preset``, ending the watch session; None when a run is
        already going (stop it first) or the dashboard is closing."""
        return self._queue_run(lambda serial, number: SessionTicket(serial=serial, run=number, preset=preset))

    def attach(self, live: LiveRun, preset: Preset) -> SessionTicket | None:
        """Follow ``live`` (a run started elsewhere; ``preset`` as its recording names it)
        in place of watching; None when a run is already shown or the dashboard is closing."""
        return self._queue_run(lambda serial, number: SessionTicket(serial=serial, run=number, preset=preset, live=live))

    def _queue_run(self, make: Callable[[int, int], SessionTicket]) -> SessionTicket | None:
        with self._lock:
            if self._closing or self._pending is not None or (self._current and self._current[0].is_run):
                return None
            self._runs += 1
            self._serial += 1
            self._pending = make(self._serial, self._runs)
            if self._current is not None:
                self._current[1].stop(f"starting run #{self._runs}")
            self._wake.set()
            return self._pending

    def set_baseline(self, baseline: Baseline) -> None:
        """From the next session on, runs of the chosen preset scale against ``baseline``
        (--baseline-run: measured by the preset's one-GPU twin a moment ago)."""
        with self._lock:
            self._options = dataclasses.replace(self._options, baseline=baseline)

    def stop_run(self, reason: str = "stopped from the dashboard") -> bool:
        """Stop the run (its whole process group); False when there is none.  A run of
        its own process is asked to (a UserError when it has ended meanwhile)."""
        with self._lock:
            if self._pending is not None:
                self._pending = None
                return True
            if self._current and self._current[0].is_run:
                self._current[1].stop(reason)
                return True
            return False

    def shutdown(self, reason: str = "quit") -> None:
        """End the loop: the watch session and a run in this process stop; a run of its
        own process goes on, no longer followed.  Returns at once (see wait_closed)."""
        with self._lock:
            self._closing = True
            self._pending = None
            if self._current is not None:
                driven = self._current[1]
                if followed(driven):
                    driven.release()
                    self.left_running.append(driven)
                else:
                    driven.stop(reason)
            if not self._started:  # the loop never ran (quit before the first frame)
                self._closed.set()
            self._wake.set()

    def wait_closed(self, timeout: float | None = None) -> bool:
        return self._closed.wait(timeout)

    # -- The loop (one thread) ------------------------------------------------------
    def loop(self) -> None:
        with self._lock:
            self._started = True
        try:
            while True:
                with self._lock:
                    if self._closing:
                        return
                    ticket = self._next_ticket()
                    session = self._drive(ticket)
                    self._current = (ticket, session)
                    self._wake.clear()
                self._run_one(ticket, session)
        finally:
            self._closed.set()

    def _drive(self, ticket: SessionTicket) -> Session | FollowedRun:
        """What runs ``ticket``: a live run followed, a preset's run in a process of its
        own (started when the loop runs it), or a Session here.  Quick: nothing starts yet."""
        if ticket.live is not None:
            from gputui.live.followed import FollowedRun

            return FollowedRun(ticket.live)
        if ticket.is_run and ticket.attach_pid is None and self._make_run is not None:
            return self._make_run(ticket, self._options)
        return self._make_session(self._config(ticket))

    def _run_one(self, ticket: SessionTicket, session: Session | FollowedRun) -> None:
        error: BaseException | None = None
        try:
            for observer in [*self._observers_for(session, ticket), *self._every_session]:
                session.add_observer(observer)
            session.run()
            if followed(session) and session.lost:
                error = RunLost(session.lost)
        except Exception as exc:  # keep the dashboard alive; it shows the error
            log.exception("session %s failed", ticket)
            error = exc
        finally:
            with self._lock:
                self._current = None
            self._on_ended(ticket, error)
        if error is not None:
            self._wake.wait(RETRY_AFTER_FAILURE_S)

    def _next_ticket(self) -> SessionTicket:
        if self._pending is not None:
            ticket, self._pending = self._pending, None
            return ticket
        self._serial += 1
        pid, self._attach_pid = self._attach_pid, None
        return SessionTicket(serial=self._serial, attach_pid=pid)

    def _config(self, ticket: SessionTicket) -> SessionConfig:
        return self._options.session_config(ticket.preset, attach_pid=ticket.attach_pid)

"""Where a run's readings go and what stops it, wired one way for every face that starts
one: a recorded run (:mod:`gputui.live.host`, in the foreground or detached), ``gputui
check`` without the dashboard, and the dashboard's own exporter.

- the --record file, whose write error the face decides about (a run stops: its recording
  is the point of it; a check goes on: its verdict is);
- the run history's copy, whose write error only warns (the user's own file still counts);
- the --serve-metrics endpoint;
- the stopping signals, handled on a thread of their own (:mod:`gputui.run.signal_relay`).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.record.history import RunHistory
from gputui.record.recorder import Recorder
from gputui.run.signal_relay import SignalRelay

if TYPE_CHECKING:
    from gputui.metrics.server import MetricsServer

Say = Callable[[str], None]


@dataclass(frozen=True)
class RunWiring:
    history: RunHistory | None = None  # None with --no-history
    record_path: Path | None = None  # --record FILE
    record_force: bool = False  # --force: replace it
    metrics_address: str | None = None  # --serve-metrics [HOST:]PORT
    price_per_hour: float | None = None  # --price: the exporter prices idle time with it

    def recorders(self, label: str, *, warn: Say, on_record_error: Say) -> tuple[Recorder | None, Recorder | None]:
        """(the --record file's Recorder, the history copy's), either None where not asked
        for or, for the copy, where the history folder cannot be written (``warn`` said
        so).  A --record file that cannot be opened is a UserError."""
        path = self.record_path
        recording = Recorder(path, overwrite=self.record_force, on_error=on_record_error) if path is not None else None
        kept = self.history.start_recording(label, warn=warn) if self.history is not None else None
        if kept is not None:
            kept.on_error = lambda text: warn(f"run history copy: {text}")
        return recording, kept

    def metrics(self, announce: Say | None = None) -> MetricsServer | None:
        """The --serve-metrics endpoint, listening (``announce`` hears its address), or
        None when not asked for.  A port in use is a UserError in one line."""
        if self.metrics_address is None:
            return None
        from gputui.metrics.server import start_metrics_server  # prometheus_client is not light

        server = start_metrics_server(self.metrics_address, self.price_per_hour)
        if announce is not None:
            announce(f"gputui: serving metrics at {server.url}")
        return server

    @staticmethod
    def stop_signals(signals: Iterable[signal.Signals], on_signal: Callable[[int], None]) -> SignalRelay:
        """``signals`` handed to ``on_signal`` on a thread of their own; close it after the run."""
        return SignalRelay(signals, on_signal)

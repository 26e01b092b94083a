"""The one place that knows which parts a Session is built from.

The headless CLI, the dashboard and ``gputui check`` build their sessions through
:class:`SessionParts`; tests pass fake telemetry and a fake clock here instead of
knowing the sampler classes.  Cheap to import: the samplers load when a session is
built (the dashboard builds its first one after the first frame).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputui.session.session import Session, SessionConfig
    from gputui.telemetry.gpu import GpuTelemetry
    from gputui.telemetry.host import HostTelemetry


@dataclass(frozen=True)
class SessionParts:
    """How to build each session's telemetry and clock.  Factories, not instances:
    every session opens and closes its own GpuTelemetry (NVML init and shutdown)."""

    gpu: Callable[[], GpuTelemetry] | None = None  # None: NVML on this machine
    host: Callable[[], HostTelemetry] | None = None  # None: psutil on this machine
    clock: Callable[[], float] = time.monotonic

    def host_telemetry(self) -> HostTelemetry:
        from gputui.telemetry.host import HostTelemetry

        return (self.host or HostTelemetry)()

    def build(self, config: SessionConfig) -> Session:
        """A Session for ``config`` (its diagnosis table included) with fresh telemetry."""
        from gputui.session.session import Session

        # No GPU source given: the Session opens NVML itself, as the config's [diagnosis]
        # asks (use_gpm = false samples without GPM; XID events are watched).
        gpu = self.gpu() if self.gpu is not None else None
        host = self.host_telemetry()
        session = Session(config, gpu=gpu, host=host, clock=self.clock)
        # The GPU sampler tells the run's GPU processes from others' by the tree the host sampler walks.
        session.gpu.follow_run(host.run_pids)
        return session

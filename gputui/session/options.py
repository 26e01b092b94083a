"""What a run is asked to be, in plain values: :class:`RunOptions`, which the faces build
(the command line in :mod:`gputui.cli.run_options`, or a test) and from which each run's
:class:`~gputui.session.session.SessionConfig` is made, with its diagnosis settings merged
once, here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gputui.diagnosis_settings import Settings as DiagnosisSettings

if TYPE_CHECKING:
    from gputui.presets.preset import Config, Preset
    from gputui.record.schema import Baseline
    from gputui.session.session import SessionConfig


def _no_presets() -> Config:
    from gputui.presets.preset import Config

    return Config(presets={}, diagnosis={})


@dataclass(frozen=True)
class RunOptions:
    """What the user asked of the runs of this invocation, checked: the headless recorder
    and the dashboard start every session from it (:meth:`session_config`)."""

    config: Config = field(default_factory=_no_presets)  # the presets and the files' [diagnosis] table
    preset: Preset | None = None  # what to run first (--preset, or the command after --); None: watch
    interval: float = 1.0
    duration: float | None = None  # a cap on each run, and on watching an attached job
    attach_pid: int | None = None  # --pid: a job started elsewhere, watched until it ends
    price_per_hour: float | None = None  # --price: it wins over the files' and the preset's
    baseline: Baseline | None = None  # --baseline FILE: what the runs of ``preset`` scale against
    baseline_run: bool = False  # --baseline-run: measure that baseline first, on one GPU

    @property
    def presets(self) -> dict[str, Preset]:
        return self.config.presets

    def diagnosis_settings(self, preset: Preset | None) -> DiagnosisSettings:
        """The thresholds for a run of ``preset``: the files' [diagnosis] table, the
        preset's own, then the command line's --price."""
        price = {"price_per_hour": self.price_per_hour} if self.price_per_hour is not None else None
        return DiagnosisSettings.from_tables(self.config.diagnosis, preset.diagnosis if preset else None, price)

    def session_config(
        self, preset: Preset | None, *, attach_pid: int | None = None, baseline: Baseline | None = None, cap_watching: bool = False
    ) -> SessionConfig:
        """One session's config: a run of ``preset``, watching ``attach_pid``, or (neither)
        watching the machine.  Runs and attached jobs get the --duration cap, and watching
        the machine too with ``cap_watching`` (headless: --duration is how long to watch;
        the dashboard watches until a run starts).  The runs of the chosen preset scale
        against its --baseline unless ``baseline`` is given."""
        from gputui.session.session import SessionConfig

        capped = cap_watching or preset is not None or attach_pid is not None
        if baseline is None and preset is not None and self.preset is not None and preset.name == self.preset.name:
            baseline = self.baseline
        return SessionConfig(
            preset=preset,
            interval=self.interval,
            duration=self.duration if capped else None,
            attach_pid=attach_pid,
            diagnosis=self.diagnosis_settings(preset),
            baseline=baseline,
        )

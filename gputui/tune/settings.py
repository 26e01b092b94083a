"""A trial's data-loading settings: what ``gputui tune`` asks the probe to put into the
script's training DataLoaders (``GPUTUI_TUNE_LOADER``, read by the probe's
``_gputui_tune``), how they read in the table, and which of two is cheaper."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace

ENV = "GPUTUI_TUNE_LOADER"  # the probe's _gputui_tune.ENV: the same name on both sides
DEFAULT_PREFETCH = 2  # torch's prefetch_factor when workers are used and none is given


@dataclass(frozen=True)
class LoaderSettings:
    """Settings of a training DataLoader; None: as the script builds it."""

    num_workers: int | None = None
    pin_memory: bool | None = None
    persistent_workers: bool | None = None
    prefetch_factor: int | None = None

    def env(self) -> str:
        """The JSON the probe reads: only what is set (``{}``: the script as written)."""
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}, sort_keys=True)

    def over(self, base: LoaderSettings) -> LoaderSettings:
        """These settings, the unset ones taken from ``base``."""
        return replace(base, **{f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None})

    @classmethod
    def from_fields(cls, values: object) -> LoaderSettings | None:
        """From the probe's ``had``/``got`` object; None when it is not one."""
        if not isinstance(values, dict):
            return None
        workers, prefetch = values.get("num_workers"), values.get("prefetch_factor")
        return cls(
            num_workers=workers if isinstance(workers, int) and not isinstance(workers, bool) else None,
            pin_memory=values.get("pin_memory") if isinstance(values.get("pin_memory"), bool) else None,
            persistent_workers=values.get("persistent_workers") if isinstance(values.get("persistent_workers"), bool) else None,
            prefetch_factor=prefetch if isinstance(prefetch, int) and not isinstance(prefetch, bool) else None,
        )

    def effective_prefetch(self) -> int | None:
        """Batches each worker keeps ready: torch's default of 2 when unset; none without workers."""
        if not self.num_workers:
            return None
        return self.prefetch_factor or DEFAULT_PREFETCH

    def cost(self) -> tuple[int, int, int, int]:
        """What the setting costs the box, to pick the cheapest of equals: worker
        processes first (each a core and its memory), then batches held ready, pinned
        host memory and workers kept between epochs."""
        return (self.num_workers or 0, self.effective_prefetch() or 0, int(bool(self.pin_memory)), int(bool(self.persistent_workers)))

    def label(self) -> str:
        """``8 workers, pinned, persistent, prefetch 4``; ``as written`` when nothing is set
        (what is off is left out)."""
        parts = []
        if self.num_workers is not None:
            parts.append(f"{self.num_workers} worker{'s' if self.num_workers != 1 else ''}")
        if self.pin_memory:  # what is off is left unsaid, as the script leaves it unwritten
            parts.append("pinned")
        if self.persistent_workers and self.num_workers != 0:
            parts.append("persistent")
        if self.prefetch_factor is not None and self.num_workers != 0:
            parts.append(f"prefetch {self.prefetch_factor}")
        return ", ".join(parts) or "as written"

    def as_dict(self) -> dict[str, int | bool | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

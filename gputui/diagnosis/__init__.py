"""Bottleneck diagnosis: rules that turn samples and events into findings.

- :mod:`gputui.diagnosis_settings` (a leaf, outside the package): thresholds and hold
  times (the ``[diagnosis]`` table of presets.toml), which presets and recordings check too;
- :mod:`.hold`: time hysteresis, so verdicts neither flap nor fire on a blip;
- :mod:`.rules`: what each finding looks for and how it explains itself (one module per family);
- :mod:`.engine`: the :class:`Diagnoser` a Session feeds, and :func:`replay` for recordings.

``python -m gputui.diagnosis RECORDING.jsonl`` re-diagnoses a recording.
See docs/diagnosis.md.

The package loads nothing until a name is asked for: asking it for ``Settings`` must not
pull in the engine and every rule with it.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it, imported on first use (PEP 562)
_LAZY = {
    "Diagnoser": "gputui.diagnosis.engine",
    "replay": "gputui.diagnosis.engine",
    "replay_recording": "gputui.diagnosis.engine",
    "Settings": "gputui.diagnosis_settings",
    "DEFAULTS": "gputui.diagnosis_settings",
    "KEYS": "gputui.diagnosis_settings",
    "check_value": "gputui.diagnosis_settings",
}
__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)

"""Bottleneck diagnosis: rules that turn samples and events into findings.

- :mod:`.settings`: thresholds and hold times (the ``[diagnosis]`` table of presets.toml);
- :mod:`.hold`: time hysteresis, so verdicts neither flap nor fire on a blip;
- :mod:`.rules`: what each finding looks for and how it explains itself (one module per family);
- :mod:`.engine`: the :class:`Diagnoser` a Session feeds, and :func:`replay` for recordings.

``python -m gputui.diagnosis RECORDING.jsonl`` re-diagnoses a recording.
See docs/diagnosis.md.
"""

from gputui.diagnosis.engine import Diagnoser, replay, replay_recording
from gputui.diagnosis.settings import DEFAULTS, KEYS, Settings, check_value

__all__ = ["Diagnoser", "replay", "replay_recording", "Settings", "DEFAULTS", "KEYS", "check_value"]

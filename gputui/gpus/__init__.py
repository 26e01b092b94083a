"""What gputui knows about GPUs themselves, apart from any run: each model's datasheet and
measured baselines (:mod:`~gputui.gpus.models`, data in ``gputui/gpus/data``) and what an
XID means (:mod:`~gputui.gpus.xid`).

A leaf: it imports nothing of gputui but ``gputui.config`` (for ``tomllib``), so the
telemetry, the diagnosis and the check can all lean on it."""

# What other packages may import (datasheets and baselines, and what an XID means); tests/whole/test_package_faces.py holds them to it.
__all__ = ["models", "xid"]

"""The benchmark worker: child-only code, run as ``python -m gputui.workloads`` (and
``python -m gputui.workloads.pipeline_rate`` for ``gputui check``).  It imports nothing of
the core but ``gputui.protocol``, ``gputui.catalog`` and ``gputui.stats``, and nothing
outside it imports it (import-linter: ``workloads-protocol-only``, ``core-no-workloads``).
"""

# What other packages may import (child-only: run as python -m, imported by nobody); tests/whole/test_package_faces.py holds them to it.
__all__ = []

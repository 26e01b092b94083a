"""``--serve-metrics``: the session's latest state as Prometheus metrics.

``live`` keeps the latest state (a session observer), ``families`` turns it into
metric families (dcgm-exporter's names for GPU fields, ``gputui_*`` for ours) and
``server`` serves them over HTTP beside the app or the headless recorder.
prometheus-client is imported only here, when metrics are asked for.
"""

DEFAULT_HOST = "127.0.0.1"  # loopback unless told otherwise: the metrics say what runs where
DEFAULT_PORT = 9400  # dcgm-exporter's port: one of the two runs on a machine
DEFAULT_ADDRESS = f"{DEFAULT_HOST}:{DEFAULT_PORT}"  # what a bare --serve-metrics listens on

# What other packages may import (the exporter's state, its families and its server); tests/whole/test_package_faces.py holds them to it.
__all__ = ["DEFAULT_ADDRESS", "DEFAULT_HOST", "DEFAULT_PORT", "families", "live", "server"]

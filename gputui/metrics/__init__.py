"""``--serve-metrics``: the session's latest state as Prometheus metrics.

``live`` keeps the latest state (a session observer), ``families`` turns it into
metric families (dcgm-exporter's names for GPU fields, ``gputui_*`` for ours) and
``server`` serves them over HTTP beside the app or the headless recorder.
prometheus-client is imported only here, when metrics are asked for.
"""

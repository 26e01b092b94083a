"""Launching a job and reading what it says: the runner and its guard, the output
stream, throughput parsers, the outcome, and signals passed on to the child."""

# What other packages may import (launching a job and reading what it says); tests/whole/test_package_faces.py holds them to it.
__all__ = ["outcome", "output_stream", "pseudo_terminal", "runner", "signal_relay", "throughput"]

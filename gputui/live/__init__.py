"""Runs that outlive their terminal: each recorded run is listed as live while it goes
(``registry``), can be asked to stop by whoever owns it (``stop_request``), runs in the
foreground or in a process of its own (``host``, started by ``spawn``), and is watched by
following its recording (``followed``).  docs/architecture.md says why a file and a
signal, not a socket."""

# What other packages may import (hosting, listing, stopping and following a run); tests/whole/test_package_faces.py holds them to it.
__all__ = ["followed", "host", "registry", "spawn", "stop_request", "wiring"]

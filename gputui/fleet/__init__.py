"""``gputui fleet``: ``gputui check`` on every node of a fleet, through the engines a fleet
already has (Slurm's ``srun``, the system ``ssh``), and one report that sets the nodes
side by side and names the slow one.  No agent and no protocol of gputui's own: each node
runs ``gputui check --json``, and what it printed comes back on the engine's stdout.

- :mod:`.node`: the command a node runs and how its output is read back;
- :mod:`.ssh`, :mod:`.slurm`: the two engines;
- :mod:`.results`: a node's result, kept as NODE.json (+ NODE.jsonl) in a folder;
- :mod:`.report`: the fleet report over such a folder;
- :mod:`.cli`: ``gputui fleet check`` and ``gputui fleet report``.
"""

# What other packages may import (what `gputui fleet` is made of; only cli.fleet_cli uses it); tests/whole/test_package_faces.py holds them to it.
__all__ = ["node", "peers", "report_files", "results", "slurm", "ssh"]

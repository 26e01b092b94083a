"""docs/reliability.md's tests across packages: faults, hostile input, trust in what gputui reads and writes, escaping."""

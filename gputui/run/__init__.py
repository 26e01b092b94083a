"""Launching a job and reading what it says: the runner and its guard, the output
stream, throughput parsers, the outcome, and signals passed on to the child."""

"""Running the child (gputui.run): the runner and its guard, throughput parsers, progress formats, the signal relay."""

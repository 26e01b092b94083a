"""Reading runs back (gputui.lookback and its commands): report, compare, export, replay, runs."""

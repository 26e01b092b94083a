"""Recordings and the run history (gputui.record), and `gputui --record` end to end."""

"""The diagnosis (gputui.diagnosis): each rule on traces and recordings, the hold machinery, settings, Session wiring."""

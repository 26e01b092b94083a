"""The dashboard (gputui.tui): screens, widgets, keys, drawing cost and snapshots; Pilot and tmux sessions."""

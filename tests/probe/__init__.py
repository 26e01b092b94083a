"""The zero-code PyTorch probe (gputui.probe) and `gputui -- CMD`, the user's own command."""

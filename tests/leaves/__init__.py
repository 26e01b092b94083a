"""The top-level leaf modules (docs/architecture.md's leaves): gputui.safe_write, gputui.stats."""

"""Presets files (gputui.presets): schema, merging, errors, editing."""

"""What to run: presets read from presets.toml, the user's store of them, the
`gputui preset` editing commands, and a command line turned into a preset."""

# What other packages may import (reading, storing and making presets); tests/whole/test_package_faces.py holds them to it.
__all__ = ["command_preset", "preset", "store"]

"""What to run: presets read from presets.toml, the user's store of them, the
`gputui preset` editing commands, and a command line turned into a preset."""

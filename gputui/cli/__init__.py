"""The command line: `gputui` itself (main.py) and each subcommand's face, which parse
arguments, call the library underneath and print."""

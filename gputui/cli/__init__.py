"""The command line: `gputui` itself (main.py) and each subcommand's face, which parse
arguments, call the library underneath and print."""

# What other packages may import (the entry point; each subcommand's module is loaded by main); tests/whole/test_package_faces.py holds them to it.
__all__ = ["main"]

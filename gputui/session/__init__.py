"""One run from start to summary: the options it runs with, its parts assembled, the
session that drives it, and what is made of it as it goes (summary, phases, ranks,
progress lines, the scaling baseline)."""

# What other packages may import (one run from start to summary); tests/whole/test_package_faces.py holds them to it.
__all__ = ["assemble", "baseline", "options", "pass_through", "progress", "ranks", "session", "summary"]

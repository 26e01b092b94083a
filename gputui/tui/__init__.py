"""The Textual dashboard.  Only this package imports Textual; the CLI imports it
lazily, so ``--record`` and the rest of the core run without it."""

# What other packages may import (the two apps; the command line loads them lazily); tests/whole/test_package_faces.py holds them to it.
__all__ = ["app", "replay"]

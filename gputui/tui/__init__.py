"""The dashboard's Textual face: the live app (``live_app``), the replay app
(``replay_app``), what they share (``app_base``), their screens and widgets, drawing the
view model of gputui.view.  Only this package imports Textual; the CLI imports it lazily,
so ``--record`` and the rest of the core run without it."""

# What other packages may import (the two apps; the command line loads them lazily); tests/whole/test_package_faces.py holds them to it.
__all__ = ["live_app", "replay_app"]

"""The dashboard's view model, without Textual: what the screen shows (``state``, folded
from a session's news, ``session_news``, carried by ``bridge``), the charts' arithmetic
(``charts``), the runs it drives or follows (``supervisor``, ``baseline_first``) and a
recording played back (``replay_player``).  gputui.tui draws it; tests drive it without a
terminal."""

# What other packages may import (the Textual face and the tests); tests/whole/test_package_faces.py holds them to it.
__all__ = ["baseline_first", "bridge", "charts", "replay_player", "session_news", "state", "supervisor"]

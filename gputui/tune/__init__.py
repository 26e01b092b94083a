"""``gputui tune``: short trials of the user's own command over its training DataLoader's
settings (``settings``), each a recorded run (``trial``), chosen from the box and the
trials so far (``grid``), one after another (``tuner``), judged against noise
(``verdict``), and shown (``faces``, ``report``)."""

# What other packages may import (the command line's engine); tests/whole/test_package_faces.py holds them to it.
__all__ = ["faces", "grid", "report", "settings", "trial", "tuner", "verdict"]

"""gputui's own lines on stderr (progress, warnings, errors), through one writer that
outlives the reader going away.

stderr may vanish under a run: ``gputui … 2>&1 | head -1`` closes the pipe after one
line, an SSH session drops, nohup runs without a log.  The first write that fails
(EPIPE, EIO) turns the writer off for good, so the run and its recording carry on and
the exit status stays the run's.  The stream's file descriptor is then pointed at
``/dev/null``: whatever else would write there (logging's last resort, a library,
Python's own flush of ``sys.stderr`` at exit, which otherwise turns a clean exit into
"Exception ignored … BrokenPipeError" and status 120) writes into nothing instead.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO


class LineWriter:
    """Writes whole lines to ``stream`` (``sys.stderr`` as it is at each write, when
    None) until a write fails; then nothing, and never an exception."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self.broken = False

    def line(self, text: str) -> None:
        if self.broken:
            return
        stream = self._stream or sys.stderr
        try:
            stream.write(text + "\n")
            stream.flush()
        except (OSError, ValueError):  # the reader is gone, or the stream closed
            self.broken = True
            _point_at_devnull(stream)


def _point_at_devnull(stream: TextIO) -> None:
    """Make ``stream``'s descriptor write into /dev/null, and drop what its buffer holds."""
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):
        return  # no descriptor (a test's StringIO), or already closed
    try:
        os.dup2(devnull, fd)
    except OSError:
        pass
    finally:
        os.close(devnull)
    try:
        stream.flush()  # the bytes the failed write left behind go to /dev/null now
    except (OSError, ValueError):
        pass


stderr = LineWriter()  # gputui's one writer to its own stderr


def say(text: str) -> None:
    """One line of gputui's own on stderr; nothing once stderr has gone away."""
    stderr.line(text)

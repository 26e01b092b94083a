"""A pseudo-terminal for a user's command, so that it prints as it would on a terminal.

Libraries decide how to show progress by asking whether their output is a terminal:
tqdm redraws its bar in place either way, but Rich (Lightning's default progress bar
where Rich is installed, as it is beside gputui) draws nothing live on a pipe, and
many scripts colour their logs only on a terminal.  A user's command therefore runs
with its stdout and stderr on the slave side of a pseudo-terminal of the size of
gputui's own terminal, and gputui reads the master side.

What that changes, compared with pipes:
- stdout and stderr arrive merged, in the order written, as on a terminal: the
  recording keeps every line as stdout.
- Line endings arrive as ``\\r\\n`` (the terminal's own translation); the line splitter
  takes that as one newline.
- The child's output is line-buffered, as on a terminal, rather than block-buffered.
- Colours and cursor moves arrive too: the pass-through shows them, the recording and
  the parsers strip them (:func:`gputui.run.output_stream.strip_ansi`).
- stdin stays ``/dev/null``, and the pseudo-terminal is not the child's controlling
  terminal: nothing the child does to it can send gputui's run a hang-up.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import termios
from typing import Protocol

# Where gputui itself has no terminal (a detached run, a pipe): wide enough that a
# progress bar keeps its figures.
FALLBACK_SIZE = (120, 40)


class OutputSink(Protocol):
    """Where a command's output passes through as it comes (the user's terminal)."""

    def child_size(self) -> tuple[int, int]:
        """The (columns, rows) the command's pseudo-terminal should have."""
        ...

    def output(self, chunk: bytes) -> None:
        """A chunk of the command's output, unchanged; called from the reader thread."""
        ...


def open_pseudo_terminal(columns: int, rows: int) -> tuple[int, int]:
    """A new pseudo-terminal's (master, slave) descriptors, sized ``columns`` × ``rows``."""
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", max(1, rows), max(1, columns), 0, 0))
    except OSError:
        pass  # an unsized terminal reads as 0 × 0: libraries fall back to 80 columns
    return master, slave


def resize(fd: int, columns: int, rows: int) -> None:
    """Give the pseudo-terminal behind ``fd`` a new size (the user's terminal changed)."""
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", max(1, rows), max(1, columns), 0, 0))
    except OSError:
        pass


def size_of_own_terminal() -> tuple[int, int]:
    """gputui's terminal as (columns, rows), or $COLUMNS/$LINES, or :data:`FALLBACK_SIZE`."""
    size = shutil.get_terminal_size(FALLBACK_SIZE)
    return size.columns, size.lines

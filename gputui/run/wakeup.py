"""A wake-up a thread blocked in ``poll`` can wait on beside its own file descriptors.

The runner's monitor blocks on the run's exit (a pidfd) until the next deadline it
keeps; ``stop()`` sets a new one (SIGKILL after the grace), so it wakes the monitor to
look again.  Waking up ten times a second to look instead costs CPU for nothing: each of
CPython's timed waits has a price (docs/performance.md#figures-behind-the-codes-choices).
"""

from __future__ import annotations

import os
import threading


class Wakeup:
    """A pipe: ``set()`` makes ``fileno()`` readable until ``clear()``.  ``set()`` is
    safe from any thread or a signal handler, and after ``close()`` does nothing."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._lock = threading.RLock()  # re-entrant: a signal handler may interrupt set() on its own thread
        self._closed = False

    def fileno(self) -> int:
        return self._read

    def set(self) -> None:
        with self._lock:
            if self._closed:
                return  # the descriptor's number may belong to another file by now
            try:
                os.write(self._write, b"\0")
            except BlockingIOError:
                pass  # the pipe is full: it is readable already

    def clear(self) -> None:
        try:
            while os.read(self._read, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                os.close(self._read)
                os.close(self._write)

"""Signals handled outside the signal handler.

Python runs a signal handler in the main thread, between two of its bytecodes: perhaps
while that thread holds a lock (a ``queue.Queue``'s, an ``Event``'s) that stopping the
run needs too, and a non-reentrant lock taken again by the thread that holds it never
comes free.  The headless recorder hung that way after a SIGTERM (its main thread was
inside ``Queue.get`` when ``Session.stop`` put to the same queue).

So the handler here only notes the signal and writes its number to a pipe, which takes
no lock, and a thread of its own reads the pipe and calls ``on_signal`` there.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill, a dropped SSH session


class SignalRelay:
    """Install handlers for ``signals`` (from the main thread); each signal received is
    appended to ``received`` at once and handed to ``on_signal(signum)`` on the relay's
    thread.  ``on_signal`` may be replaced later (the next session to stop).  SIGHUP
    ignored when the relay is made (under nohup) stays ignored: the user asked."""

    def __init__(self, signals: Iterable[signal.Signals], on_signal: Callable[[int], None]) -> None:
        self.on_signal = on_signal
        self.received: list[int] = []
        self._read_fd, self._write_fd = os.pipe()
        self._closed = False
        self._previous = {
            sig: signal.signal(sig, self._handle)
            for sig in signals
            if not (sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN)
        }  # fmt: skip
        self._thread = threading.Thread(target=self._relay, name="gputui-signals", daemon=True)
        self._thread.start()

    def _handle(self, signum: int, _frame: object) -> None:
        self.received.append(signum)  # list.append is atomic: safe here
        if not self._closed:
            os.write(self._write_fd, bytes([signum]))

    def _relay(self) -> None:
        try:
            while chunk := os.read(self._read_fd, 64):
                for signum in chunk:
                    self.on_signal(signum)
        finally:
            os.close(self._read_fd)

    def close(self, timeout: float = 5.0) -> None:
        """Put the previous handlers back, then end the relay's thread once it has
        passed on every signal already received."""
        if self._closed:
            return
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._closed = True  # our handler can no longer run; the pipe may close
        os.close(self._write_fd)
        self._thread.join(timeout)

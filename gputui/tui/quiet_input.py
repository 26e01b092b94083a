"""The terminal's input thread, asleep until there is input.

Textual 8.2's Linux driver reads the terminal in a thread that wakes ten times a
second whether or not a key came (``select`` with a 0.1 s timeout): to let a lone
Escape's wait run out, and to notice the app leaving: a cost for nothing on a dashboard
whose whole cost is compared with nvitop's (docs/performance.md#figures-behind-the-codes-choices).

Here the thread waits with no timeout unless the key parser holds part of a sequence
(then until the parser's own deadline, as Textual's 0.1 s ticks would), and the driver
wakes it through a pipe when it stops reading input.  Keys are parsed and delivered
by Textual's own parser and driver, as before.

It leans on Textual internals (the parser's deadline, the driver's input loop), so it
applies only to the Linux driver of a Textual it was checked with
(gputui.tui.textual_version); anywhere else the driver is Textual's own.
"""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder
from functools import cache
from typing import Any

from textual.driver import Driver

# Where the parser has no deadline (an unknown Textual's parser, seen through getattr):
# Textual's own pace.
TEXTUAL_TICK_S = 0.1


def parser_wait(parser: Any, now: float) -> float | None:
    """How long the input thread may sleep: until the parser's deadline for a partial
    sequence (a lone Escape), or for good (None) when it holds none."""
    deadline = getattr(parser, "_timeout_time", now + TEXTUAL_TICK_S)
    if deadline is None:
        return None
    return max(0.0, deadline - now)


def quiet_input(driver_class: type[Driver]) -> type[Driver]:
    """``driver_class`` with an input thread that sleeps until there is input, where
    it is the Linux driver of a tested Textual; else ``driver_class`` itself."""
    from gputui.tui.textual_version import textual_is_tested

    try:
        from textual.drivers.linux_driver import LinuxDriver
    except ImportError:  # not a POSIX terminal (termios): Textual's other drivers poll differently
        return driver_class
    if not textual_is_tested() or not issubclass(driver_class, LinuxDriver):
        return driver_class
    return type(f"Quiet{driver_class.__name__}", (_mixin(LinuxDriver), driver_class), {})


@cache
def _mixin(linux_driver: type[Any]) -> type[Any]:
    from textual._parser import ParseError
    from textual._time import get_time
    from textual._xterm_parser import XTermParser

    class QuietInput(linux_driver):
        _wake: tuple[int, int] | None = None  # a pipe: a byte in it stops the input thread
        _input_stopping = False

        def start_application_mode(self) -> None:
            self._close_wake()
            self._wake, self._input_stopping = os.pipe(), False
            super().start_application_mode()

        def disable_input(self) -> None:
            # Textual sets its exit event and joins the thread: the thread must wake to see it.
            self._input_stopping = True
            if self._wake is not None:
                os.write(self._wake[1], b"\0")
            super().disable_input()

        def stop_application_mode(self) -> None:
            super().stop_application_mode()  # the input thread has been joined
            self._close_wake()

        def _close_wake(self) -> None:
            if self._wake is not None:
                for fd in self._wake:
                    os.close(fd)
                self._wake = None

        def run_input_thread(self) -> None:
            """Textual's input loop (LinuxDriver.run_input_thread), sleeping while idle."""
            assert self._wake is not None
            fileno, wake = self.fileno, self._wake[0]
            selector = selectors.SelectSelector()  # as Textual's: epoll refuses a regular file as stdin
            selector.register(fileno, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            parser = XTermParser(self._debug)
            decode = getincrementaldecoder("utf-8")().decode
            try:
                while not (self._input_stopping or self.exit_event.is_set()):
                    ready = selector.select(parser_wait(parser, get_time()))
                    if any(key.fd == fileno for key, _mask in ready):
                        data = os.read(fileno, 1024 * 4)
                        if not data:  # stdin piped, and at its end: only the wake is left to wait for
                            selector.unregister(fileno)
                        text = decode(data)  # "" while a character's bytes are still coming
                        for event in parser.feed(text) if text else ():
                            self.process_message(event)
                    for event in parser.tick():
                        self.process_message(event)
            finally:
                selector.close()
                try:
                    for _event in parser.feed(""):
                        pass
                except (EOFError, ParseError):
                    pass

    return QuietInput

"""The terminal's input thread sleeps until there is input (gputui.tui.quiet_input).

Textual's Linux driver is driven here on a pipe in place of the terminal: built
without its constructor (which takes the process's stdin and its stop signals), with
the attributes its input loop and ``disable_input`` use."""

from __future__ import annotations

import os
import selectors
import threading
import time
from typing import Any

import pytest
from textual import events
from textual.drivers.linux_driver import LinuxDriver

from gputui.tui.quiet_input import TEXTUAL_TICK_S, parser_wait, quiet_input
from gputui.tui.textual_version import textual_is_tested
from gputui.tui.typing_bursts import delivering_in_bulk

pytestmark = pytest.mark.skipif(not textual_is_tested(), reason="gputui.tui.quiet_input applies only on the Textual it was checked with")


class _Writes:
    def write(self, data: str) -> None:
        pass


def _driver(keys_fd: int, received: list[Any]) -> Any:
    cls = quiet_input(delivering_in_bulk(LinuxDriver))
    driver = cls.__new__(cls)
    driver.fileno, driver._debug, driver.exit_event = keys_fd, False, threading.Event()
    driver._writer_thread, driver._file, driver._mouse = _Writes(), None, False
    driver._wake, driver._input_stopping = os.pipe(), False
    driver.process_message = received.append  # what the parser made of the input, in order
    return driver


@pytest.fixture
def selects(monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    """The timeout of every select() the input thread makes."""
    calls: list[float | None] = []
    real = selectors.SelectSelector.select

    def counted(self: selectors.SelectSelector, timeout: float | None = None) -> Any:
        calls.append(timeout)
        return real(self, timeout)

    monkeypatch.setattr(selectors.SelectSelector, "select", counted)
    return calls


def _wait_for(predicate: Any, seconds: float = 3.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_only_the_linux_driver_of_a_textual_is_tested_is_changed() -> None:
    from textual.drivers.headless_driver import HeadlessDriver

    assert quiet_input(HeadlessDriver) is HeadlessDriver
    quiet = quiet_input(LinuxDriver)
    assert issubclass(quiet, LinuxDriver) and quiet is not LinuxDriver


def test_the_wait_is_the_parser_s_deadline_or_none() -> None:
    class Parser:
        _timeout_time: float | None = None

    parser = Parser()
    assert parser_wait(parser, now=10.0) is None
    parser._timeout_time = 10.04
    assert parser_wait(parser, now=10.0) == pytest.approx(0.04)
    parser._timeout_time = 9.0
    assert parser_wait(parser, now=10.0) == 0.0
    assert parser_wait(object(), now=10.0) == pytest.approx(TEXTUAL_TICK_S)  # a parser without a deadline: Textual's own pace


class Reading:
    """The input thread of a quiet driver, reading a pipe: write to ``keys``."""

    def __init__(self) -> None:
        self.fd, self.keys = os.pipe()
        self.received: list[Any] = []
        self.driver = _driver(self.fd, self.received)
        self.thread = threading.Thread(target=self.driver.run_input_thread, daemon=True)
        self.driver._key_thread = self.thread
        self.thread.start()

    def close(self) -> None:
        self.driver.exit_event.set()
        self.driver._input_stopping = True
        os.write(self.driver._wake[1], b"\0")
        self.thread.join(timeout=2)
        for fd in (self.fd, self.keys, *self.driver._wake):
            try:
                os.close(fd)
            except OSError:  # closed by the test
                pass


@pytest.fixture
def reading():
    started = Reading()
    yield started
    started.close()


def test_the_input_thread_sleeps_while_nothing_is_typed_and_reads_what_is(selects: list[float | None], reading: Reading) -> None:
    time.sleep(1.0)
    # Textual's own loop selects every 0.1 s: ten times in this second
    assert len(selects) <= 2 and selects[0] is None

    os.write(reading.keys, "ab€".encode())
    _wait_for(lambda: len(reading.received) >= 3)
    assert [event.character for event in reading.received if isinstance(event, events.Key)] == ["a", "b", "€"]

    # a lone Escape is a key once the parser's wait for the rest of a sequence runs out
    def escaped() -> bool:
        return any(isinstance(e, events.Key) and e.key == "escape" for e in reading.received)

    os.write(reading.keys, b"\x1b")
    _wait_for(escaped)
    assert escaped()
    assert any(timeout is not None and 0 < timeout <= TEXTUAL_TICK_S for timeout in selects)

    started = time.monotonic()
    reading.driver.disable_input()  # Textual's way to stop reading: it joins the thread
    assert not reading.thread.is_alive() and time.monotonic() - started < 0.5


def test_input_that_ends_leaves_the_thread_waiting_for_the_stop(selects: list[float | None], reading: Reading) -> None:
    os.write(reading.keys, b"x")
    os.close(reading.keys)  # stdin piped, and at its end: no key is left to come
    _wait_for(lambda: len(selects) >= 3)
    time.sleep(0.3)
    assert len(selects) <= 4, "the ended input woke the thread again and again"
    reading.driver.disable_input()
    assert not reading.thread.is_alive()

"""The user's terminal during a headless run: the command's own output, as it comes and
unchanged, with gputui's status line kept on the terminal's last row, out of its way.

On a terminal, the last row is taken out of the scrolling region (as apt does for its
progress line): the command's output, tqdm's ``\\r`` redraws and Rich's cursor moves
included, scrolls in the rows above it, and the status line is drawn in the last row
with the cursor saved and restored around it.  gputui's own messages (a finding, the
summary) are written between the command's lines.  The command's terminal is one row
shorter, so that what it draws fits.

Not on a terminal (a log file, a pipe), the command's lines are written as text, its
colours and cursor moves stripped, its ``\\r`` redraws kept as ``\\r``: what the
command would have written there itself, had it not been on gputui's terminal.

Writes never raise: once the terminal is gone (the SSH session dropped) they stop, and
the run goes on.
"""

from __future__ import annotations

import codecs
import os
import re
import threading
from collections import deque
from collections.abc import Callable

from gputui.run.output_stream import LineSplitter, strip_ansi
from gputui.run.pseudo_terminal import size_of_own_terminal

ESC = "\x1b"
SAVE, RESTORE = ESC + "7", ESC + "8"  # the cursor's position and attributes
CLEAR_ROW = ESC + "[2K"
TAIL_KEPT = 256  # bytes of the output kept to tell whether it stopped inside a sequence
PENDING_LIMIT = 4 << 20  # bytes that may wait for a slow reader before output is dropped
STATUS_SKIPPED_ABOVE = 64 << 10  # a status line waits behind no more than this
CLOSE_WAIT_S = 5.0  # at the run's end, how long what waits may take to be written
# A whole escape sequence from its ESC: CSI, OSC (BEL or ST ended), a string, or a short
# one (whose final byte is not one that opens the longer kinds).
_COMPLETE_ESCAPE = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|[ -/]*[0-OQ-WYZ\\`-~])")


def stopped_inside_a_sequence(tail: bytes) -> bool:
    """Whether output ending in ``tail`` stopped inside an escape sequence or a UTF-8
    character: anything written now would land inside it and garble both."""
    escape = tail.rfind(b"\x1b")
    if escape >= 0 and _COMPLETE_ESCAPE.match(tail, escape) is None:
        return True
    for back in range(1, min(4, len(tail)) + 1):
        byte = tail[-back]
        if byte < 0x80:
            return False
        if byte >= 0xC0:  # a lead byte: how long its character is
            length = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return length > back
    return False


class _Writer:
    """The writes to ``fd``, made by a thread of their own: a reader that stops reading
    (a pipe nobody drains, a terminal paused with Ctrl-S) blocks that thread alone, never
    gputui's reading of the run.  At most :data:`PENDING_LIMIT` bytes wait; the output
    beyond that is dropped, counted, and said once writing resumes."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._queue: deque[bytes] = deque()
        self._pending = 0
        self._dropped = 0
        self._done = False
        self._broken = False
        self._changed = threading.Condition()
        threading.Thread(target=self._run, name="gputui-pass-through", daemon=True).start()

    @property
    def backed_up(self) -> bool:
        return self._pending > STATUS_SKIPPED_ABOVE

    def put(self, data: bytes) -> None:
        with self._changed:
            if self._broken or self._done:
                return
            if self._pending + len(data) > PENDING_LIMIT:
                self._dropped += len(data)
                return
            if self._dropped:
                note = f"\r\n[gputui: {self._dropped:,} bytes of the output not shown here: the reader fell behind; the recording keeps its lines]\r\n"
                self._queue.append(note.encode())
                self._pending += len(note)
                self._dropped = 0
            self._queue.append(data)
            self._pending += len(data)
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._queue and not self._done:
                    self._changed.wait()
                if not self._queue:
                    return
                data = self._queue.popleft()
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view) :]
            except OSError:  # the terminal went away: the run goes on without it
                with self._changed:
                    self._broken = True
                    self._queue.clear()
                    self._pending = 0
                    self._changed.notify_all()
                return
            with self._changed:
                self._pending -= len(data)
                self._changed.notify_all()

    def drain(self, timeout: float) -> None:
        """Wait, at most ``timeout`` seconds, until what waits is written."""
        with self._changed:
            self._changed.wait_for(lambda: self._pending == 0 or self._broken, timeout)

    def close(self, timeout: float) -> None:
        """Write what waits, for at most ``timeout`` seconds, and stop."""
        with self._changed:
            self._done = True
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._pending == 0 or self._broken, timeout)


class PassThrough:
    """The command's output and gputui's status line on file descriptor ``fd``."""

    def __init__(self, fd: int = 1, *, messages_here: bool | None = None) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self.is_terminal = _is_terminal(fd)
        # gputui's messages share the output's rows where stderr is that terminal too.
        self.messages_here = self.is_terminal and _is_terminal(2) if messages_here is None else messages_here
        self._columns, self._rows = self._size()
        self._reserved = False  # the last row is out of the scrolling region
        self._mid_line = False  # the output's last line has not ended
        self._tail = b""
        self._writer = _Writer(fd)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._splitter = LineSplitter(self._write_line)
        self.on_resize: Callable[[int, int], None] | None = None  # the command's terminal should follow

    # -- the command's side --------------------------------------------------------

    def child_size(self) -> tuple[int, int]:
        """The command's terminal: this one less the status row."""
        if not self.is_terminal:
            return size_of_own_terminal()
        return self._columns, max(1, self._rows - 1)

    def output(self, chunk: bytes) -> None:
        with self._lock:
            if self.is_terminal:
                self._write(chunk)
                self._tail = (self._tail + chunk)[-TAIL_KEPT:]
                self._mid_line = not chunk.endswith(b"\n")
            else:
                self._splitter.feed(self._decoder.decode(chunk))

    def _write_line(self, text: str, progress: bool, truncated: bool) -> None:
        text = strip_ansi(text)
        if progress and not text:
            return  # the empty segment before a bar's leading '\r'
        self._write((text + ("\r" if progress else "\n")).encode("utf-8", "replace"))

    # -- gputui's side ---------------------------------------------------------------

    def start(self) -> None:
        """Reserve the last row for the status line (on a terminal)."""
        with self._lock:
            if self.is_terminal and self._rows > 2:
                self._reserve()

    def status(self, text: str) -> None:
        """Draw ``text`` in the reserved row; skipped while the output is inside a sequence
        (the next status comes soon)."""
        with self._lock:
            if not self._reserved or stopped_inside_a_sequence(self._tail) or self._writer.backed_up:
                return
            self._follow_resize()
            self._write(f"{SAVE}{ESC}[{self._rows};1H{CLEAR_ROW}{_fit(text, self._columns - 1)}{RESTORE}".encode())

    def message(self, text: str) -> None:
        """One line of gputui's own, between the command's lines."""
        with self._lock:
            prefix = "\n" if self._mid_line and not stopped_inside_a_sequence(self._tail) else ""
            self._write(f"{prefix}{text}\n".encode("utf-8", "replace"))
            self._mid_line = False

    def flush(self, timeout: float = CLOSE_WAIT_S) -> None:
        """Wait until what was passed so far is written (or ``timeout`` passes)."""
        self._writer.drain(timeout)

    def close(self) -> None:
        """The run has ended: the rest of the output, and the whole terminal scrolls again."""
        with self._lock:
            if not self.is_terminal:
                self._splitter.feed(self._decoder.decode(b"", final=True))
                self._splitter.close()
            elif self._mid_line:
                self._write(b"\n")
                self._mid_line = False
            if self._reserved:
                self._write(f"{SAVE}{ESC}[r{ESC}[{self._rows};1H{CLEAR_ROW}{RESTORE}".encode())
                self._reserved = False
        self._writer.close(CLOSE_WAIT_S)

    # -- the terminal ----------------------------------------------------------------

    def _reserve(self) -> None:
        # A new line first, then back up: the cursor must not sit on the row taken away.
        self._write(f"\n{SAVE}{ESC}[1;{self._rows - 1}r{RESTORE}{ESC}[1A".encode())
        self._reserved = True

    def _follow_resize(self) -> None:
        size = self._size()
        if size == (self._columns, self._rows):
            return
        self._write(f"{SAVE}{ESC}[{self._rows};1H{CLEAR_ROW}{RESTORE}".encode())  # the old status row
        self._columns, self._rows = size
        if self._rows > 2:
            self._reserve()
        if self.on_resize is not None:
            self.on_resize(*self.child_size())

    def _size(self) -> tuple[int, int]:
        try:
            size = os.get_terminal_size(self._fd)
        except OSError:
            return size_of_own_terminal()
        if not size.columns or not size.lines:  # a terminal nobody sized
            return size_of_own_terminal()
        return size.columns, size.lines

    def _write(self, data: bytes) -> None:
        self._writer.put(data)


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd) and os.environ.get("TERM", "") not in ("dumb", "unknown")
    except OSError:
        return False


def _fit(text: str, width: int) -> str:
    """``text`` in at most ``width`` columns, so the status row never wraps."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"

"""A child's output as lines: read its stdout and stderr pipes in arrival order, cut
the bytes into lines (``\n``, ``\r``, ``\r\n``), strip ANSI escapes, bound each line's
length.  Knows nothing of processes or outcomes: :mod:`gputui.run.runner` owns the child
and hands its pipes to :func:`read_pipes`."""

from __future__ import annotations

import codecs
import errno
import logging
import os
import re
import select
import selectors
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

READ_CHUNK = 64 * 1024
LINE_CAP = 64 * 1024  # characters kept of one line; the rest up to the newline is dropped
TRUNCATION_MARK = "…"
CR_SETTLE_S = 0.05  # a '\r' at the end of a read waits this long for a '\n' (CRLF)
# A line left open this long with nothing more (tqdm's bar after its '\r', waiting for
# the next step) is shown as it stands: a terminal shows it, so the Output pane does.
OPEN_LINE_SHOW_S = 0.25


@dataclass
class OutputLine:
    text: str  # one line, ANSI escape codes stripped, no trailing newline/CR
    stream: str  # "stdout" or "stderr"
    progress: bool  # the segment ended with '\r': a redraw that the next one overwrites
    # the line so far, not ended yet (a bar's current state): shown, never read for
    # rates, as it comes again whole when it ends (progress is then True too)
    open: bool = False


# --- text --------------------------------------------------------------------------

_ANSI_RE = re.compile(
    r"""
      \x1b\][^\x07\x1b]*(?:\x07|\x1b\\|$)     # OSC ... (BEL | ST), e.g. titles, hyperlinks
    | \x1b[P^_X][^\x1b]*(?:\x1b\\|$)          # DCS / PM / APC / SOS strings
    | \x1b\[[0-?]*[ -/]*[@-~]                 # CSI, e.g. colours, cursor moves
    | \x1b\[[0-?]*[ -/]*$                     # CSI cut off by the end of the line
    | \x1b[ -/]*[0-~]                         # other escapes: ESC ( B, ESC 7, ESC =
    | \x1b                                    # a lone ESC
    | \x9b[0-?]*[ -/]*[@-~]                   # 8-bit CSI
    | [\x00-\x08\x0b-\x1f\x7f]                # other C0 controls (keep tab)
    """,
    re.VERBOSE,
)


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences (CSI, OSC, DCS, simple ESC) and control characters."""
    if "\x1b" not in text and "\x9b" not in text and text.isprintable():
        return text
    return _ANSI_RE.sub("", text)


_EOL_RE = re.compile(r"[\r\n]")


class LineSplitter:
    """Cut a text stream into lines on '\\n', '\\r' and '\\r\\n' (one newline).

    ``emit(text, progress, truncated)`` is called per segment; ``progress`` is True for
    a segment ended by a lone '\\r'.  At most ``cap`` characters of a line are kept; the
    rest, up to its end, is dropped and ``truncated`` is True, so memory stays bounded
    whatever the line length.  A '\\r' at the very end of the fed text is held back
    (``pending_cr``) until the next text shows whether a '\\n' follows; the owner may
    settle it earlier with :meth:`settle_cr`.
    """

    def __init__(self, emit: Callable[[str, bool, bool], None], cap: int = LINE_CAP) -> None:
        self._emit = emit
        self._cap = cap
        self._parts: list[str] = []
        self._len = 0
        self._truncated = False
        self.pending_cr = False
        self._swallow_lf = False

    def _append(self, s: str) -> None:
        if not s:
            return
        room = self._cap - self._len
        if room <= 0:
            self._truncated = True
            return
        if len(s) > room:
            s = s[:room]
            self._truncated = True
        self._parts.append(s)
        self._len += len(s)

    def _end(self, progress: bool) -> None:
        text = "".join(self._parts)
        truncated = self._truncated
        self._parts.clear()
        self._len = 0
        self._truncated = False
        self._emit(text, progress, truncated)

    def open_text(self) -> tuple[str, bool]:
        """The line begun and not ended yet (and whether it was cut at the cap)."""
        return ("" if self.pending_cr else "".join(self._parts)), self._truncated

    def settle_cr(self) -> None:
        """No '\\n' came soon after a trailing '\\r': end the segment as progress now.
        A '\\n' arriving first in the next text is then the rest of a slow CRLF."""
        if self.pending_cr:
            self.pending_cr = False
            self._swallow_lf = True
            self._end(progress=True)

    def feed(self, text: str) -> None:
        if not text:
            return
        i = 0
        if self._swallow_lf:
            self._swallow_lf = False
            if text[0] == "\n":
                i = 1
        if self.pending_cr:
            self.pending_cr = False
            if text[0] == "\n":
                self._end(progress=False)
                i = 1
            else:
                self._end(progress=True)
        n = len(text)
        while i < n:
            m = _EOL_RE.search(text, i)
            if m is None:
                self._append(text[i:])
                return
            j = m.start()
            self._append(text[i:j])
            if text[j] == "\n":
                self._end(progress=False)
                i = j + 1
            elif j + 1 == n:
                self.pending_cr = True
                return
            elif text[j + 1] == "\n":
                self._end(progress=False)
                i = j + 2
            else:
                self._end(progress=True)
                i = j + 1

    def close(self) -> None:
        """End of stream: deliver what is left (a final line without newline)."""
        if self.pending_cr:
            self.pending_cr = False
            self._end(progress=True)
        elif self._parts or self._truncated:
            self._end(progress=False)


# --- pipes -----------------------------------------------------------------------


def read_pipes(pipes: list[tuple[Any, str]], on_line: Callable[[OutputLine], None], on_bytes: Callable[[bytes], None] | None = None) -> None:
    """Read both pipes in one thread, in the order their bytes become readable: with
    a thread per pipe, a stderr line could overtake the stdout line printed before
    it whenever the stdout thread waited (for the GIL, or on a slow ``on_line``).
    Each line goes to ``on_line`` as an :class:`OutputLine`, and each chunk as read to
    ``on_bytes`` (the pass-through to the user's terminal), before it is cut into lines.
    Returns once every pipe is at EOF (or reading failed), and closes them.  A
    pseudo-terminal's master counts as a pipe: its EIO, once the child's side is
    closed, is its EOF."""
    sel = selectors.DefaultSelector()
    settle_at: dict[int, float] = {}  # fd -> when its trailing '\r' counts as progress
    show_at: dict[int, float] = {}  # fd -> when its open line is shown as it stands
    try:
        for pipe, stream in pipes:
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            splitter = LineSplitter(_emitter(stream, on_line))
            sel.register(pipe.fileno(), selectors.EVENT_READ, (pipe, stream, decoder, splitter))
        while sel.get_map():
            dues = [*settle_at.values(), *show_at.values()]
            timeout = max(0.0, min(dues) - time.monotonic()) if dues else None
            ready = sel.select(timeout)
            for key, _ in ready:
                pipe, stream, decoder, splitter = key.data
                settle_at.pop(key.fd, None)
                show_at.pop(key.fd, None)
                chunk = _read(key.fd)
                if chunk:
                    if on_bytes is not None:
                        on_bytes(chunk)
                    splitter.feed(decoder.decode(chunk))
                else:
                    sel.unregister(key.fd)
                    splitter.feed(decoder.decode(b"", final=True))
                    splitter.close()
                    continue
                if splitter.pending_cr:
                    settle_at[key.fd] = time.monotonic() + CR_SETTLE_S
                elif splitter.open_text()[0]:
                    show_at[key.fd] = time.monotonic() + OPEN_LINE_SHOW_S
            now = time.monotonic()
            for fd, due in list(settle_at.items()):
                if due <= now:  # no '\n' came soon after the '\r'
                    del settle_at[fd]
                    sel.get_key(fd).data[3].settle_cr()
            for fd, due in list(show_at.items()):
                if due <= now:  # nothing more came: the open line as it stands, once
                    del show_at[fd]
                    _pipe, stream, _decoder, splitter = sel.get_key(fd).data
                    text, truncated = splitter.open_text()
                    line = output_line(text, stream, True, truncated)
                    if line is not None:
                        on_line(OutputLine(line.text, stream, progress=True, open=True))
    except Exception:
        log.exception("runner: reading the output failed")
    finally:
        sel.close()
        for pipe, _ in pipes:
            try:
                pipe.close()
            except OSError:
                pass


def _read(fd: int) -> bytes:
    """A chunk of ``fd``; empty at EOF, which a pseudo-terminal's master says with EIO."""
    try:
        return os.read(fd, READ_CHUNK)
    except OSError as exc:
        if exc.errno == errno.EIO:
            return b""
        raise


def _emitter(stream: str, on_line: Callable[[OutputLine], None]) -> Callable[[str, bool, bool], None]:
    """What a stream's LineSplitter calls with each line."""

    def emit(text: str, progress: bool, truncated: bool) -> None:
        line = output_line(text, stream, progress, truncated)
        if line is not None:
            on_line(line)

    return emit


def output_line(text: str, stream: str, progress: bool, truncated: bool) -> OutputLine | None:
    """A LineSplitter segment as the line gputui shows; None for nothing to show."""
    text = strip_ansi(text)
    if truncated:
        text += TRUNCATION_MARK
    if progress and not text:
        return None  # e.g. the empty segment before tqdm's leading '\r'
    return OutputLine(text, stream, progress)


def readable_within(fd: int, timeout: float) -> bool:
    """Whether ``fd`` has data (or EOF) within ``timeout`` seconds (poll: any fd number)."""
    if hasattr(select, "poll"):
        p = select.poll()
        p.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        return bool(p.poll(max(0, int(timeout * 1000))))
    r, _, _ = select.select([fd], [], [], timeout)
    return bool(r)

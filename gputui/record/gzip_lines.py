"""Gzip-compressed recordings (a path ending in ``.gz``): writing lines, reading them back.

The writer keeps the plain file's promise that a killed recorder leaves a file readable
to its last whole line: each ``sync_flush`` ends a deflate block on a byte boundary
(``Z_SYNC_FLUSH``), so everything written before it decompresses even though the gzip
trailer never comes.  The reader therefore accepts a stream that stops early and says so.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from gputui.errors import UserError

GZIP_WBITS = 31  # zlib's window bits for the gzip container (16 + 15)
READ_CHUNK = 1 << 20


def is_gzip_path(path: Path) -> bool:
    return path.name.endswith(".gz")


class GzipLineWriter:
    """Text lines in, one gzip member out to ``raw`` (a binary file the caller opened).

    Offers the part of a text file the Recorder uses: ``write``, ``flush``, ``fileno``,
    ``close`` and ``closed``.  ``flush`` only hands the compressor's finished output to
    the file; ``sync_flush`` is what makes every line so far readable after a crash.
    """

    def __init__(self, raw: IO[bytes], level: int = 6) -> None:
        self._raw = raw
        self._compressor = zlib.compressobj(level, zlib.DEFLATED, GZIP_WBITS)
        self._finished = False

    @property
    def closed(self) -> bool:
        return self._raw.closed

    def fileno(self) -> int:
        return self._raw.fileno()

    def write(self, text: str) -> int:
        self._raw.write(self._compressor.compress(text.encode("utf-8")))
        return len(text)

    def flush(self) -> None:
        self._raw.flush()

    def sync_flush(self) -> None:
        """Everything written so far becomes decodable from the file alone."""
        if not self._finished:
            self._raw.write(self._compressor.flush(zlib.Z_SYNC_FLUSH))
        self._raw.flush()

    def finish(self) -> None:
        """End the stream with its trailer (the last thing written)."""
        if not self._finished:
            self._finished = True
            self._raw.write(self._compressor.flush(zlib.Z_FINISH))

    def close(self) -> None:
        """Close the file; without :meth:`finish` first it is left a cut stream."""
        self._raw.close()


def _not_gzip(path: Path) -> UserError:
    return UserError(f"{path}: not a gzip file (the name ends in .gz; expected a gzip-compressed recording)")


# Reading is bounded, so that a gzip bomb (a small file that inflates to gigabytes) is
# refused in one line within a second, not read until memory runs out.  A recording
# compresses about 5 to 15 times (docs/record-format.md); deflate reaches 1,032 at most,
# on runs of one byte.  So past the first MiBs, more than RATIO_CAP times the compressed
# bytes read is refused; MAX_BYTES caps what may come out whatever the ratio (a 24 h,
# 8-GPU recording is ~0.5 GiB), and MAX_SECONDS the time a stream may take.
RATIO_CAP = 250
RATIO_FROM_BYTES = 64 * 1024 * 1024  # below this any ratio is let through: no bomb yet
MAX_BYTES = 4 * 1024**3
MAX_SECONDS = 60.0
OUT_CHUNK = 1 << 20  # decompressed bytes per step: the bounds are checked between steps


class _Bounds:
    """Counts what went in and came out of one file's decompression; a UserError naming
    the file as soon as a bound is passed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.read = self.out = 0
        self.deadline = time.monotonic() + MAX_SECONDS

    def add(self, out: int, unread: int) -> None:
        """``out`` more bytes came out; ``unread`` of the bytes read are not decompressed yet."""
        self.out += out
        consumed = self.read - unread
        if self.out > MAX_BYTES:
            raise self._refuse(f"it decompresses to over {MAX_BYTES:,} bytes (expected a recording of at most that)")
        if self.out > RATIO_FROM_BYTES and self.out > RATIO_CAP * consumed:
            raise self._refuse(
                f"it decompresses to over {RATIO_CAP} times its compressed size ({self.out:,} bytes from {consumed:,}; "
                "expected a recording, which compresses 5 to 15 times)"
            )
        if time.monotonic() > self.deadline:
            raise self._refuse(f"decompressing it took over {MAX_SECONDS:.0f} s (expected a recording of at most {MAX_BYTES:,} bytes)")

    def _refuse(self, why: str) -> UserError:
        return UserError(f"{self.path}: not read: {why}")


class GzipChunks:
    """The decompressed bytes of ``handle``, chunk by chunk, within the bounds above;
    several members (``cat a.gz b.gz``) are read in turn.  After the loop, :attr:`cut`
    says whether the last member stopped before its trailer (a recorder killed mid-run)."""

    def __init__(self, path: Path, handle: IO[bytes]) -> None:
        self.path, self.handle = path, handle
        self.cut = False

    def __iter__(self) -> Iterator[bytes]:
        bounds = _Bounds(self.path)
        decompressor = zlib.decompressobj(GZIP_WBITS)
        in_member = False
        while data := self.handle.read(READ_CHUNK):
            bounds.read += len(data)
            while True:
                if decompressor.eof:
                    if not data:
                        break
                    decompressor = zlib.decompressobj(GZIP_WBITS)
                try:
                    out = decompressor.decompress(data, OUT_CHUNK)
                except zlib.error:
                    raise _not_gzip(self.path) from None
                in_member = not decompressor.eof
                data = decompressor.unused_data if decompressor.eof else decompressor.unconsumed_tail
                if out:
                    bounds.add(len(out), unread=len(data))
                    yield out
                if not data and len(out) < OUT_CHUNK:  # this read is used up, and nothing is held back
                    break
        self.cut = in_member


def read_gzip(path: Path, handle: IO[bytes]) -> tuple[bytes, bool]:
    """(the decompressed bytes, whether the stream was cut before its end)."""
    chunks = GzipChunks(path, handle)
    data = b"".join(chunks)
    return data, chunks.cut

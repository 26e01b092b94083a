"""Reading the small text files a user writes (presets, settings.toml, themes) so that no
file can hang gputui, fill its memory or end it in a traceback.

- Only a regular file is read: a FIFO would block for ever, ``/dev/zero`` would never
  end.  The file is opened without blocking and checked with ``fstat`` before a byte
  is read (so a FIFO swapped in after a check is refused too).
- At most ``MAX_TEXT_BYTES`` are read; a larger file is refused in one line.
- TOML that Python's parser cannot take (nested 100,000 deep: RecursionError; a
  5,000-digit integer: ValueError past the int-string limit) is a UserError naming
  the file, like a syntax error.

A missing file raises FileNotFoundError, for the caller to treat as it should (no
settings file is normal, no presets file named on the command line is not).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

from gputui.config import tomllib
from gputui.errors import UserError

# Hand-written files: the largest real presets file is a few KB; 4 MiB leaves room
# for generated ones and keeps a mistaken path from costing more than that.
MAX_TEXT_BYTES = 4 * 1024 * 1024


def open_regular_file(path: Path, what: str) -> BinaryIO:
    """``path`` opened for reading (binary) when it is a regular file.  Raises
    FileNotFoundError when it does not exist, UserError when it is something else (a FIFO
    is refused at once, not waited on) or cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UserError(f"{path}: {_kind(mode)}, not a file; expected a {what}")
    return os.fdopen(fd, "rb")


def read_bytes_bounded(handle: BinaryIO, path: Path, what: str, limit: int) -> bytes:
    """At most ``limit`` bytes of ``handle``; UserError past them, or on a read error."""
    try:
        data = handle.read(limit + 1)
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise UserError(f"{path}: larger than {limit // (1024 * 1024)} MiB; expected a {what} (not read)")
    return data


def read_text_file(path: Path, what: str = "text file", limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``limit`` bytes.  Raises
    FileNotFoundError when it does not exist, UserError for anything else wrong."""
    with open_regular_file(path, what) as handle:
        data = read_bytes_bounded(handle, path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start})") from None


#: A TOML table as ``tomllib`` gives it: the parse edge, before its loader checks its keys.
TomlTable = dict[str, Any]


def parse_toml(text: str, path: Path) -> TomlTable:
    """``text`` parsed as TOML; every way it can fail is a UserError naming ``path``
    (a syntax error says the line and column tomllib gives)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(_syntax_error_message(path, exc)) from None
    except RecursionError:  # tomllib recurses per nesting level
        raise UserError(f"{path}: nested too deeply to read (arrays or tables inside each other)") from None
    except ValueError as exc:  # an integer past Python's int-string limit (4,300 digits)
        raise UserError(f"{path}: a number too long to read ({str(exc).split(':')[0]})") from None


def load_toml(path: Path, what: str = "TOML file") -> TomlTable:
    """Read and parse a small TOML file; see :func:`read_text_file` and :func:`parse_toml`."""
    return parse_toml(read_text_file(path, what), path)


def _syntax_error_message(path: Path, exc: tomllib.TOMLDecodeError) -> str:
    """``FILE:LINE:COLUMN: TOML syntax error: REASON``, from tomllib's "(at line L, column C)"."""
    text = str(exc)
    match = re.search(r"\(at line (\d+), column (\d+)\)", text)
    reason = text[: match.start()].strip() if match else text
    if match:
        return f"{path}:{match.group(1)}:{match.group(2)}: TOML syntax error: {reason}"
    return f"{path}: TOML syntax error: {reason}"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"

"""Writing a file so that a crash leaves the old version or the new one, never half of one.

The text goes to a temporary file in the same directory (so the rename stays on one
file system), is flushed and fsynced, then ``os.replace``s the target; the directory
is fsynced so the rename itself survives a power cut.  Used for settings.toml,
presets files, reports and exports.  No Textual here.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def write_atomic(path: Path, text: str, *, backup: Path | None = None) -> None:
    """Replace ``path`` with ``text`` atomically.  With ``backup``, the previous
    version (if any) is first copied there (itself atomically).  Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if backup is not None and path.exists():
        previous = path.read_bytes()
        _replace_with(backup, lambda handle: handle.write(previous), binary=True)
    _replace_with(path, lambda handle: handle.write(text))


def write_atomic_with(path: Path, fill: Callable[[IO[Any]], object], *, binary: bool = False) -> None:
    """Replace ``path`` atomically with what ``fill(handle)`` writes: for files too big
    to build in memory first (an exported table) or binary ones (a PNG).  Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace_with(path, fill, binary=binary)


def _replace_with(path: Path, fill: Callable[[IO[Any]], object], binary: bool = False) -> None:
    if path.is_symlink():  # a dotfiles link: replace what it points to, keep the link
        path = path.resolve()
    mode = _mode_for(path)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)  # mkstemp makes 0600: keep the file's own mode, or the usual one
        handle: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        with handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


def _mode_for(path: Path) -> int:
    """The mode the file has now, else what a plain open() would give it (0666 less umask)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (POSIX); harmless where unsupported."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

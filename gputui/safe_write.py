"""Writing a file a user named, so that a crash leaves the old version or the new one,
never half of one, and nothing that is not a file is destroyed.

For a regular file (or a path that does not exist yet) the text goes to a temporary file
in the same directory (so the rename stays on one file system), is flushed and fsynced,
then ``os.replace``s the target; the directory is fsynced so the rename itself survives a
power cut.  A symlink to a regular file replaces what it points to and keeps the link.

What is not a regular file is never replaced by one: renaming over ``/dev/null`` (as
root, on a rented box) would swap the system's device for a plain file.  A character
device (``/dev/null``, ``/dev/stdout`` on a terminal) and a FIFO with a reader are
written into, as a shell redirection would; a FIFO without a reader, a block device, a
socket or a directory is refused with an OSError whose ``strerror`` says why.

The new file's mode is its old one, or the usual one for a new file; ``like`` makes it
no looser than another file's (a backup of a 0600 presets file stays 0600).  Used for
settings.toml, presets files and their backups, reports, exports.  No Textual here.

A command that writes a file the user named at its end (``check --metrics-file``, its
``--markdown``, ``export``, ``report --out``) first claims it (:func:`claim_output`),
before any work: what the write would refuse is refused then, in the same words.  A character
device or a FIFO is opened then and held until the write, so that a FIFO's reader sees
one writer from first to last and a device that refuses every write (``/dev/full``)
says so at once; the write itself (``write_atomic_with``) takes the held handle.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

_claimed: dict[str, int] = {}  # absolute path -> the device's or FIFO's fd, held for its write
_claimed_lock = threading.Lock()


def claim_output(path: Path) -> None:
    """Check, before any work, that ``path`` can be written as :func:`write_atomic_with`
    would write it; raise the OSError the write would (its ``strerror`` says why).  A
    regular file, or a new one in an existing folder, is left alone (it is replaced at
    the write); a character device or a FIFO with a reader is opened now and held for
    the write; anything else is refused."""
    kind = _existing_kind(path)
    if kind is None:
        folder = (path.resolve() if path.is_symlink() else path).parent
        if not folder.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{folder} is not a directory", str(path))
        return
    fd = _open_into(path, kind)
    try:
        if kind == stat.S_IFCHR:
            os.write(fd, b"")  # a device that refuses every write (/dev/full) does so now
    except OSError:
        os.close(fd)
        raise
    with _claimed_lock:
        previous = _claimed.pop(os.path.abspath(path), None)
        _claimed[os.path.abspath(path)] = fd
    if previous is not None:
        os.close(previous)


def _take_claimed(path: Path) -> int | None:
    with _claimed_lock:
        return _claimed.pop(os.path.abspath(path), None)


def write_atomic(path: Path, text: str, *, backup: Path | None = None, like: Path | None = None, private: bool = False) -> None:
    """Replace ``path`` with ``text`` atomically.  With ``backup``, the previous
    version (if any) is first copied there (itself atomically, and no more readable
    than ``path``).  A ``private`` file is readable by its owner alone (0600).  Raises OSError."""
    if backup is not None and path.is_file():
        previous = path.read_bytes()
        write_atomic_with(backup, lambda handle: handle.write(previous), binary=True, like=path)
    write_atomic_with(path, lambda handle: handle.write(text), like=like, private=private)


def write_atomic_with(path: Path, fill: Callable[[IO[Any]], object], *, binary: bool = False, like: Path | None = None, private: bool = False) -> None:
    """Write what ``fill(handle)`` writes to ``path``: atomically for a regular file,
    into it for a character device or a FIFO.  For files too big to build in memory
    first (an exported table) or binary ones (a PNG).  Raises OSError."""
    kind = _existing_kind(path)
    if kind is not None:
        _write_into(path, kind, fill, binary)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace_with(path.resolve() if path.is_symlink() else path, fill, binary, like, private)


def _existing_kind(path: Path) -> int | None:
    """The file type bits of what ``path`` names (through symlinks) when it is not a
    regular file, None when it is one or does not exist."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise
    return None if stat.S_ISREG(mode) else stat.S_IFMT(mode)


def refusal_for(path: Path) -> OSError | None:
    """Why what ``path`` names now can never be written (a directory, a block device, a
    socket); None for a regular file, a device or FIFO one may write into, or nothing."""
    kind = _existing_kind(path)
    return None if kind is None else refusal_of_kind(path, kind)


def refusal_of_kind(path: Path, kind: int) -> OSError | None:
    """Why ``path`` (of file type ``kind``: ``stat.S_IFMT`` of its mode) cannot be
    written (into); None when it can."""
    if kind == stat.S_IFREG:
        return None
    if kind == stat.S_IFDIR:
        return IsADirectoryError(errno.EISDIR, "is a directory, expected a file", str(path))
    if kind == stat.S_IFBLK:
        return OSError(errno.EPERM, "is a block device: gputui writes only files, character devices and FIFOs", str(path))
    if kind not in (stat.S_IFCHR, stat.S_IFIFO):
        return OSError(errno.EPERM, "is not a file, a character device or a FIFO", str(path))
    return None


def _write_into(path: Path, kind: int, fill: Callable[[IO[Any]], object], binary: bool) -> None:
    """Write into a character device or a FIFO in place (nothing to rename, nothing to
    fsync).  A FIFO is opened without blocking, so one with no reader is refused at once
    instead of hanging the command."""
    fd = _take_claimed(path)
    if fd is None:
        fd = _open_into(path, kind)
    handle: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
    with handle:
        fill(handle)
        handle.flush()


def _open_into(path: Path, kind: int) -> int:
    """``path`` (of file type ``kind``) opened to be written into, or the refusal."""
    refusal = refusal_of_kind(path, kind)
    if refusal is not None:
        raise refusal
    flags = os.O_WRONLY | os.O_NOCTTY | (os.O_NONBLOCK if kind == stat.S_IFIFO else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO and kind == stat.S_IFIFO:
            raise OSError(errno.ENXIO, "a FIFO with no reader", str(path)) from None
        raise
    if kind == stat.S_IFIFO:  # a reader is there: block from now on, as a pipe does
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd


def _replace_with(path: Path, fill: Callable[[IO[Any]], object], binary: bool, like: Path | None, private: bool = False) -> None:
    mode = 0o600 if private else _mode_for(path, like)
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


def _mode_for(path: Path, like: Path | None = None) -> int:
    """The mode the file has now, else what a plain open() would give it (0666 less
    umask); no looser than ``like``'s where that file exists."""
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    if like is not None:
        try:
            mode &= like.stat().st_mode & 0o7777
        except OSError:
            pass
    return mode


def _umask() -> int:
    """The process's umask, read where it can be without changing it: setting it to learn
    it would, for that moment, leave every file another thread creates readable by all."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o077)  # Linux before 4.7, other systems: the strictest in the meantime
    os.umask(umask)
    return umask


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

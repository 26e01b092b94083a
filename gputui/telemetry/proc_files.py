"""Reading a small /proc or /sys file whole, with the system calls alone.

Python's ``open()`` builds a file object and its buffer for every file: about three times
what ``os.open``, ``os.read`` and ``os.close`` cost (docs/performance.md#figures-behind-the-codes-choices).
A host sample reads three files for each process of the run (a dozen or more with
data-loader workers) and a few of the machine's, every tick.
"""

from __future__ import annotations

import os

# procfs and sysfs hand over as much as asked for in one read: a file this size or
# smaller comes in one call, a bigger one (diskstats on a box of many disks) in more.
CHUNK = 65536


def read_whole(path: str) -> bytes:
    """The file's bytes.  Raises what ``open()`` raises: FileNotFoundError,
    ProcessLookupError (a process gone), PermissionError, other OSErrors."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, CHUNK)
        if len(data) < CHUNK:
            return data
        parts = [data]
        while data:
            data = os.read(fd, CHUNK)
            parts.append(data)
        return b"".join(parts)
    finally:
        os.close(fd)

"""The machine's memory and disk counters for a host sample, one /proc file each.

psutil reads /proc/meminfo twice a tick (``virtual_memory``, ``swap_memory``, which
also reads all of /proc/vmstat for swap-ins we do not show) and, for the disks,
/proc/diskstats with a filesystem check per device and its wrap-around bookkeeping:
over half of the machine part of a host sample
(docs/performance.md#figures-behind-the-codes-choices).  Here each is one read and a parse.  Without /proc (not Linux), psutil
reads the same figures.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

import psutil

from gputui.telemetry.proc_files import read_whole

PROC = "/proc"
SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's own size


@dataclass(frozen=True)
class Memory:
    total: int
    available: int
    used: int  # total - available: what free(1) calls used since procps 4
    swap_total: int
    swap_used: int


_MEMINFO_KEYS = frozenset((b"MemTotal", b"MemAvailable", b"MemFree", b"Buffers", b"Cached", b"SwapTotal", b"SwapFree"))


def read_memory(proc: str = PROC) -> Memory | None:
    """Memory and swap now, in bytes; None where neither /proc nor psutil says."""
    try:
        text = read_whole(f"{proc}/meminfo")
    except OSError:
        return _psutil_memory() if proc == PROC else None
    kib: dict[bytes, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(b":")
        if key in _MEMINFO_KEYS:
            kib[key] = int(rest.split()[0])
    if b"MemTotal" not in kib:
        return None
    total = kib[b"MemTotal"] * 1024
    # MemAvailable since Linux 3.14; before it, what free(1) estimated
    available = kib.get(b"MemAvailable", kib.get(b"MemFree", 0) + kib.get(b"Buffers", 0) + kib.get(b"Cached", 0)) * 1024
    available = min(max(0, available), total)
    swap_total = kib.get(b"SwapTotal", 0) * 1024
    swap_used = max(0, swap_total - kib.get(b"SwapFree", 0) * 1024)
    return Memory(total, available, total - available, swap_total, swap_used)


def _psutil_memory() -> Memory | None:
    try:
        vm, sw = psutil.virtual_memory(), psutil.swap_memory()
    except Exception:
        return None
    return Memory(vm.total, vm.available, vm.used, sw.total, sw.used)


def read_disk_bytes(proc: str = PROC, sys_block: str = "/sys/block") -> tuple[int, int] | None:
    """Bytes read and written so far by the machine's whole disks (not their
    partitions, which would count each byte twice), as iostat and psutil count them;
    None where neither /proc nor psutil says."""
    try:
        lines = read_whole(f"{proc}/diskstats").splitlines()
    except OSError:
        return _psutil_disk() if proc == PROC else None
    read = written = 0
    for line in lines:
        fields = line.split()
        # the layouts psutil knows: 14 fields, 18 (Linux 4.18) or 20 (5.5); 15 on some
        # 2.6 kernels (the name one field later); 7 for a partition before 2.6.25
        if len(fields) == 15:
            name, sectors_read, sectors_written = fields[3], fields[5], fields[9]
        elif len(fields) == 14 or len(fields) >= 18:
            name, sectors_read, sectors_written = fields[2], fields[5], fields[9]
        elif len(fields) == 7:
            name, sectors_read, sectors_written = fields[2], fields[4], fields[6]
        else:
            continue
        if _whole_disk(name.decode(errors="replace"), sys_block):
            read += int(sectors_read)
            written += int(sectors_written)
    return read * SECTOR_BYTES, written * SECTOR_BYTES


@cache
def _whole_disk(name: str, sys_block: str) -> bool:
    """A whole disk ("sda", "nvme0n1", a loop or RAM device) has a /sys/block entry;
    a partition ("sda1") does not.  Devices keep their kind: asked once per name."""
    return os.access(f"{sys_block}/{name.replace('/', '!')}", os.F_OK)


def _psutil_disk() -> tuple[int, int] | None:
    try:
        disk = psutil.disk_io_counters(perdisk=False)
    except Exception:
        return None
    return None if disk is None else (disk.read_bytes, disk.write_bytes)

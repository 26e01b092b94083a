"""One process's counters for a host sample: state, name, CPU time, memory, threads, I/O.

psutil reads a process through five files a tick (stat, status, statm, cmdline, io),
each with its own open and parse, and the run's tree is a dozen processes or more: a
host sample cost several times a GPU sample (docs/performance.md#figures-behind-the-codes-choices).  Everything
but the command line and the I/O is in ``/proc/<pid>/stat``, so a tick reads that file
and ``io``; the command line, which changes only with an exec (and the name with it),
is read when the process is first seen and again when its name changes.  Without
/proc (not Linux), psutil reads the same figures.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from gputui.telemetry.proc_files import read_whole

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
HAS_PROC_STAT = os.path.exists(f"/proc/{os.getpid()}/stat")
_COMM_MAX = 15  # the kernel keeps 15 bytes of a process's name


class ProcessGone(Exception):
    """It ended, or is a zombie: there is nothing to read."""


@dataclass(frozen=True)
class Counters:
    name: str
    ppid: int | None
    cpu_s: float  # user + system seconds so far
    rss: int | None  # bytes
    threads: int | None
    io: tuple[int, int] | None  # read_bytes, write_bytes (None where /proc/<pid>/io is not ours to read)
    started: float  # when it started (clock ticks since boot, or psutil's create time): a pid reused is another start


def read_counters(proc: psutil.Process) -> Counters:
    """``proc``'s counters now; raises ProcessGone, or psutil.Error / OSError for the
    rest (the caller skips the process)."""
    if not HAS_PROC_STAT:
        return _psutil_counters(proc)
    pid = proc.pid
    try:
        stat = read_whole(f"/proc/{pid}/stat")
    except (FileNotFoundError, ProcessLookupError):
        raise ProcessGone(pid) from None
    # "pid (name) state ppid ...": the name may hold spaces and parentheses
    open_at, close_at = stat.find(b"("), stat.rfind(b")")
    fields = stat[close_at + 2 :].split()
    if fields[0] in (b"Z", b"X"):  # a zombie, or dead
        raise ProcessGone(pid)
    return Counters(
        name=stat[open_at + 1 : close_at].decode("utf-8", "replace"),
        ppid=int(fields[1]),
        cpu_s=(int(fields[11]) + int(fields[12])) / _CLOCK_TICKS,  # fields 14 and 15: utime, stime
        threads=int(fields[17]),  # field 20
        rss=int(fields[21]) * _PAGE_SIZE,  # field 24, in pages
        io=_io(pid),
        started=int(fields[19]),  # field 22
    )


def _io(pid: int) -> tuple[int, int] | None:
    try:
        text = read_whole(f"/proc/{pid}/io")
    except OSError:  # another user's process, or gone meanwhile (the next tick says so)
        return None
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition(b":")
        if key in (b"read_bytes", b"write_bytes"):
            values[key] = int(value)
    if len(values) < 2:
        return None
    return values[b"read_bytes"], values[b"write_bytes"]


def _psutil_counters(proc: psutil.Process) -> Counters:
    try:
        with proc.oneshot():
            if proc.status() == psutil.STATUS_ZOMBIE:
                raise ProcessGone(proc.pid)
            times = proc.cpu_times()
            rss = threads = io = None
            try:
                rss = proc.memory_info().rss
                threads = proc.num_threads()
            except psutil.AccessDenied:
                pass
            try:
                counters = proc.io_counters()
                io = (counters.read_bytes, counters.write_bytes)
            except (psutil.AccessDenied, AttributeError, NotImplementedError):
                pass
            return Counters(proc.name(), proc.ppid(), times.user + times.system, rss, threads, io, proc.create_time())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        raise ProcessGone(proc.pid) from None


def read_cmdline(proc: psutil.Process) -> list[str] | None:
    try:
        return proc.cmdline()
    except psutil.AccessDenied:
        return None


def full_name(name: str, cmdline: list[str] | None) -> str:
    """The kernel cuts a name at 15 bytes; the command's own name is whole (psutil's rule)."""
    if len(name) >= _COMM_MAX and cmdline:
        whole = os.path.basename(cmdline[0])
        if whole.startswith(name):
            return whole
    return name

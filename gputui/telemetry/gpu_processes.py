"""Whose is each process on a GPU: the run's, someone else's we can see, or one our PID
namespace hides.

NVML lists a GPU's processes by pid (compute and graphics lists); the run is known by
its process tree.  A pid in the tree, or descending from one of its members, is the
run's.  A pid psutil can read that is not the run's is another process, with its user
and a short command.  A pid psutil cannot read is another container's, but only once
NVML's pids are known to be ours: in a container with a PID namespace of its own, NVML
reports the host's pids, our run's own included, so until a run pid has matched, a pid
we cannot read is "unmatched" rather than a guess.

psutil is read only for the few processes NVML lists, on the sampler's slow cadence,
and what does not change (user, command, ancestry) is cached by pid and start time.
Nothing here raises into the sampler: a process that ends between NVML's list and our
read simply has no user or command.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass

import psutil

from gputui.model import HIDDEN, OTHER, RUN, UNMATCHED, GpuProcess, Owner

# /proc/self/ns/pid of the initial (host) PID namespace: the kernel's PROC_PID_INIT_INO
INIT_PID_NS_INODE = 0xEFFFFFFC
# NVML's NVML_VALUE_NOT_AVAILABLE (ULL max); older nvidia-ml-py passes it through raw
_NOT_AVAILABLE_FROM = 1 << 63
_MAX_ANCESTORS = 64
_CACHE_MAX = 512  # processes remembered; beyond it the cache starts afresh
_ERRORS = (psutil.Error, OSError, ValueError)


def in_own_pid_namespace() -> bool:
    """Whether this process runs in a PID namespace other than the host's (a container)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino != INIT_PID_NS_INODE
    except OSError:
        return False  # no /proc (not Linux): pids are the host's


@dataclass(frozen=True)
class NvmlProcess:
    """One entry of NVML's process lists, merged across the compute and graphics lists."""

    pid: int
    used_memory: int | None
    kind: str  # "compute", "graphics" or "compute+graphics"


def memory_of_entry(entry: object) -> int | None:
    used = getattr(entry, "usedGpuMemory", None)
    if not isinstance(used, int) or used < 0 or used >= _NOT_AVAILABLE_FROM:
        return None
    return used


def merge_lists(compute: Iterable[object] | None, graphics: Iterable[object] | None) -> list[NvmlProcess]:
    """One entry per pid, in NVML's order; a process with both kinds of context is listed
    in both lists (with the same memory), so it is counted once."""
    merged: dict[int, tuple[int | None, list[str]]] = {}
    for kind, entries in (("compute", compute), ("graphics", graphics)):
        for entry in entries or ():
            pid = getattr(entry, "pid", None)
            if not isinstance(pid, int):
                continue
            used = memory_of_entry(entry)
            known, kinds = merged.get(pid, (None, []))
            merged[pid] = (used if known is None else max(known, used or 0), [*kinds, kind])
    return [NvmlProcess(pid, used, "+".join(kinds)) for pid, (used, kinds) in merged.items()]


@dataclass(frozen=True)
class ProcessFacts:
    """What psutil says of a process and does not change while it lives."""

    create_time: float
    name: str | None
    user: str | None
    command: str | None
    ancestors: tuple[int, ...]  # parent, grandparent, … as seen when first read


def short_command(name: str | None, cmdline: list[str] | None) -> str | None:
    """The program and the script it runs ("python3 train.py", "python -m torch.distributed.run"),
    never its other arguments: those may hold tokens and paths that are nobody's business."""
    if not cmdline:
        return name
    program = os.path.basename(cmdline[0]) or name
    script = next((os.path.basename(a) for a in cmdline[1:] if a.endswith((".py", ".sh"))), None)
    if script is None and "-m" in cmdline[1:-1]:
        script = f"-m {cmdline[cmdline.index('-m', 1) + 1]}"
    return f"{program} {script}"[:60] if script else program


def _optional(read, *errors: type[BaseException]):
    try:
        return read()
    except errors:
        return None


def read_process(pid: int) -> ProcessFacts | None:
    """psutil's view of ``pid``, or None where this PID namespace does not show it."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            create_time = proc.create_time()
            name = _optional(proc.name, psutil.AccessDenied)
            user = _optional(proc.username, psutil.AccessDenied, KeyError)
            cmdline = _optional(proc.cmdline, psutil.AccessDenied)
            ppid = _optional(proc.ppid, psutil.AccessDenied)
    except _ERRORS:
        return None
    return ProcessFacts(create_time, name, user, short_command(name, cmdline), _ancestors(ppid))


def _ancestors(ppid: int | None) -> tuple[int, ...]:
    out: list[int] = []
    while ppid and len(out) < _MAX_ANCESTORS and ppid not in out:
        out.append(ppid)
        try:
            ppid = psutil.Process(ppid).ppid()
        except _ERRORS:
            break
    return tuple(out)


def _start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except _ERRORS:
        return None


class ProcessAttributor:
    """Attributes NVML's processes to the run or to others.  One per sampler (not
    thread-safe); ``own_pid_namespace`` and ``lookup`` are for tests."""

    def __init__(self, *, own_pid_namespace: bool | None = None, lookup=read_process, start_time=_start_time) -> None:
        self.own_pid_namespace = in_own_pid_namespace() if own_pid_namespace is None else own_pid_namespace
        # In the host's namespace NVML's pids are ours; in a container, once one matched the run.
        self.pids_match = not self.own_pid_namespace
        self._lookup = lookup
        self._start_time = start_time
        self._facts: dict[int, ProcessFacts] = {}
        self._self_pid = os.getpid()  # gputui's own children (check's benchmarks) are ours too

    def _facts_of(self, pid: int) -> ProcessFacts | None:
        """Cached facts while the pid keeps its start time (a reused pid is read afresh)."""
        known = self._facts.get(pid)
        if known is not None and self._start_time(pid) == known.create_time:
            return known
        facts = self._lookup(pid)
        if facts is None:
            self._facts.pop(pid, None)
            return None
        if len(self._facts) >= _CACHE_MAX:
            self._facts.clear()
        self._facts[pid] = facts
        return facts

    def attribute(self, entries: list[NvmlProcess], run_pids: Collection[int] | None, sm_util: dict[int, float] | None = None) -> list[GpuProcess]:
        """``run_pids``: the run's process tree (roots first); None while it is not known
        yet, when the processes are listed without an owner."""
        out = []
        for entry in entries:
            facts = self._facts_of(entry.pid)
            process = GpuProcess(pid=entry.pid, used_memory=entry.used_memory, kind=entry.kind, sm_util=(sm_util or {}).get(entry.pid))
            if facts is not None:
                process.name, process.user, process.command = facts.name, facts.user, facts.command
            if run_pids is not None:
                process.owner = self._owner(entry.pid, facts, run_pids)
            out.append(process)
        if run_pids is not None and not self.pids_match and any(p.owner == RUN for p in out):
            self.pids_match = True  # NVML speaks our namespace: the earlier unmatched ones were others'
            for p in out:
                if p.owner == UNMATCHED:
                    p.owner = HIDDEN
        return out

    def _owner(self, pid: int, facts: ProcessFacts | None, run_pids: Collection[int]) -> Owner:
        ours = {*run_pids, self._self_pid}
        if pid in ours or (facts is not None and any(a in ours for a in facts.ancestors)):
            return RUN
        if not self.pids_match:
            return UNMATCHED  # a container seeing the host's pids: ours or not, nobody can say
        if facts is None and self.own_pid_namespace:
            return HIDDEN
        return OTHER  # in the host's namespace an unreadable pid is another user's (or just ended)

    def forget_except(self, pids: Collection[int]) -> None:
        """Drop what is cached of processes no GPU lists any more."""
        for pid in [p for p in self._facts if p not in pids]:
            del self._facts[pid]

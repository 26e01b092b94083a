"""Host telemetry: the machine's CPU, memory and disk, and the run's process tree.

:func:`host_info` describes the machine once per run; :class:`HostTelemetry` is
sampled every interval (0.1 s to a few seconds).  Rates (CPU percent, bytes per
second) are deltas between two consecutive :meth:`HostTelemetry.sample` calls on
the same instance, so each sampler keeps its own state and never disturbs (or is
disturbed by) other users of psutil's module-level ``cpu_percent`` state.

Every value that cannot be read is ``None``; processes that vanish, turn into
zombies or deny access while they are being read are skipped or reported with
``None`` fields: sampling never raises because of the processes it watches.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
from collections.abc import Collection, Iterable, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from gputui.model import HostInfo, HostSample, ProcessSample
from gputui.telemetry.machine_counters import read_disk_bytes, read_memory
from gputui.telemetry.proc_files import read_whole
from gputui.telemetry.process_counters import ProcessGone, full_name, read_cmdline, read_counters

__all__ = [
    "HostTelemetry",
    "host_info",
    "classify_role",
    "WORKER_MARKERS",
    "MP_MARKERS",
    "cgroup_file",
    "cpu_available",
    "cgroup_memory_limit",
    "CpuThrottling",
    "read_cpu_throttling",
    "steal_percent",
]

_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess)
_PROC_ERRORS = (psutil.Error, OSError)

# --- roles -------------------------------------------------------------------------

#: Command-line fragments of Python multiprocessing children started with the
#: "spawn" or "forkserver" start method (``python -c "from multiprocessing.spawn
#: import spawn_main; ..." --multiprocessing-fork``).
MP_MARKERS = ("multiprocessing.spawn", "multiprocessing.forkserver", "from multiprocessing")

#: Process-name / command-line fragments (matched case-insensitively) of data-loader
#: workers that say what they are: PyTorch >= 2.2 names its DataLoader worker
#: processes ``pt_data_worker``; tools using setproctitle often say "DataLoader".
WORKER_MARKERS = ("pt_data_worker", "dataloader")

# multiprocessing's own helper processes: they match MP_MARKERS but load no data.
_MP_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.semaphore_tracker")
_FORKSERVER = "multiprocessing.forkserver"


def classify_role(
    cmdline: Sequence[str] | None,
    name: str | None,
    root_cmdline: Sequence[str] | None,
    parent_cmdline: Sequence[str] | None = None,
) -> str:
    """Role of a *descendant* of a run's root process: ``"worker"`` or ``"child"``.

    (The root itself is always ``"main"``; this function is for the processes below
    it.)  A descendant is a data-loader ``"worker"`` when any of these holds:

    1. it is a fork of the main program: its command line equals the root's
       (PyTorch DataLoader workers with the default "fork" start method, and any
       ``multiprocessing`` fork child);
    2. it is a Python multiprocessing child of the "spawn" or "forkserver" start
       method: its command line contains one of :data:`MP_MARKERS`;
    3. its process name or command line mentions one of :data:`WORKER_MARKERS`
       ("pt_data_worker", "DataLoader"; case-insensitive).

    Exceptions, which are ``"child"``: multiprocessing's resource tracker, and the
    forkserver server process itself (a forkserver-marked process whose parent is
    not forkserver-marked; the workers are the server's forks, whose parent is).
    Anything else (a shell, ``sleep``, a compiler, a second program) is ``"child"``.

    ``cmdline`` may be ``None``/empty when it could not be read; then only the name
    can make a worker.  Rule 1 needs a non-empty root command line.  Caveat: a child
    caught between ``fork()`` and ``exec()`` (e.g. ``subprocess.Popen``) briefly has
    the root's command line and is a "worker" for that one sample.
    """
    args = list(cmdline) if cmdline else []
    text = " ".join(args)
    lowered = text.lower()
    name_lowered = (name or "").lower()
    if any(marker in name_lowered or marker in lowered for marker in WORKER_MARKERS):
        return "worker"
    if args and root_cmdline and args == list(root_cmdline):
        return "worker"
    if any(helper in text for helper in _MP_HELPERS):
        return "child"
    if _FORKSERVER in text:
        parent_text = " ".join(parent_cmdline) if parent_cmdline else ""
        return "worker" if _FORKSERVER in parent_text else "child"
    if any(marker in text for marker in MP_MARKERS):
        return "worker"
    return "child"


# --- static host description ---------------------------------------------------------


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, sep, value = line.partition(":")
                if sep and key.strip() in ("model name", "Model name", "cpu model", "Hardware"):
                    value = value.strip()
                    if value:
                        return value
    except OSError:
        pass
    model = platform.processor() or platform.machine()
    return model or None


def _os_string() -> str:
    if sys.platform.startswith("linux"):
        try:
            release = platform.freedesktop_os_release()
            pretty = release.get("PRETTY_NAME") or release.get("NAME")
            if pretty:
                return f"{pretty} (Linux {platform.release()}, {platform.machine()})"
        except OSError:
            pass
    return platform.platform()


CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_file(name_v2: str, name_v1: str, root: Path | None = None) -> str | None:
    """The text of a cgroup control file for this process (v2, else v1), or None.
    ``root`` defaults to :data:`CGROUP_ROOT` (tests pass a folder of fake files)."""
    root = CGROUP_ROOT if root is None else root
    for name in (name_v2, name_v1):
        try:  # no pathlib, no file object: cpu.stat is read every tick (gputui.telemetry.proc_files)
            return read_whole(os.path.join(root, name)).decode("utf-8", "replace").strip()
        except OSError:
            continue
    return None


def cpu_available(root: Path | None = None) -> float | None:
    """Cores we may use: affinity, capped by a cgroup quota (v2 cpu.max, v1 cfs quota)."""
    try:
        cores: float | None = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cores = float(os.cpu_count() or 0) or None
    quota = cgroup_file("cpu.max", "cpu/cpu.cfs_quota_us", root)
    period = None
    if quota and " " in quota:  # v2: "max 100000" or "800000 100000"
        quota, period = quota.split()[:2]
    elif quota:
        period = cgroup_file("cpu.max", "cpu/cpu.cfs_period_us", root)
    try:
        limit = int(quota) / int(period) if quota and period and quota != "max" and int(quota) > 0 else None
    except ValueError:
        limit = None
    if limit is not None and (cores is None or limit < cores):
        return round(limit, 2)
    return cores


def cgroup_memory_limit(memory_total: int | None, root: Path | None = None) -> int | None:
    """A cgroup memory limit below physical memory: what gets a rented instance OOM-killed."""
    text = cgroup_file("memory.max", "memory/memory.limit_in_bytes", root)
    try:
        limit = int(text) if text and text != "max" else None
    except ValueError:
        return None
    if limit is None or (memory_total is not None and limit >= memory_total):
        return None
    return limit


@dataclass
class CpuThrottling:
    """cgroup CPU-quota statistics since the cgroup was created."""

    periods: int
    throttled: int
    throttled_s: float | None = None

    @property
    def share(self) -> float:
        return self.throttled / self.periods if self.periods else 0.0


def read_cpu_throttling(cgroup_root: Path | None = None) -> CpuThrottling | None:
    """``cpu.stat``: v2 ``nr_periods nr_throttled throttled_usec``, v1 ``throttled_time`` (ns)."""
    text = cgroup_file("cpu.stat", "cpu/cpu.stat", cgroup_root)
    if not text:
        return None
    stats: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        try:
            stats[key] = int(value)
        except ValueError:
            continue
    if "nr_periods" not in stats or "nr_throttled" not in stats:
        return None  # v2 without the cpu controller: usage only
    if "throttled_usec" in stats:
        seconds: float | None = stats["throttled_usec"] / 1e6
    elif "throttled_time" in stats:
        seconds = stats["throttled_time"] / 1e9
    else:
        seconds = None
    return CpuThrottling(stats["nr_periods"], stats["nr_throttled"], seconds)


def steal_percent(prev, cur) -> float | None:
    """% of CPU time the hypervisor gave to other guests between two machine-wide
    ``cpu_times`` readings; None where the kernel reports no steal (not Linux)."""
    if not hasattr(cur, "steal") or not hasattr(prev, "steal"):
        return None
    total = _busy_and_total(cur)[1] - _busy_and_total(prev)[1]
    if total <= 0:
        return None
    return round(max(0.0, cur.steal - prev.steal) / total * 100.0, 2)


def _add_cpu_contention(out: HostSample, prev_total, cur_total, cgroup_root: Path | None = None) -> None:
    """Steal over the interval (from the machine-wide totals the CPU figure was computed
    from), and the cgroup's throttling counters (cumulative)."""
    if prev_total is not None and cur_total is not None:
        out.steal_pct = steal_percent(prev_total, cur_total)
    throttling = read_cpu_throttling(cgroup_root)
    if throttling is not None:
        out.cpu_periods, out.cpu_throttled_periods = throttling.periods, throttling.throttled
        out.cpu_throttled_s = throttling.throttled_s


def host_info() -> HostInfo:
    """What does not change during a run: hostname, OS, CPU model, cores, memory, Python."""
    try:
        memory_total: int | None = psutil.virtual_memory().total
    except Exception:  # pragma: no cover - psutil unsupported here
        memory_total = None
    try:
        physical = psutil.cpu_count(logical=False)
    except Exception:  # pragma: no cover
        physical = None
    return HostInfo(
        hostname=socket.gethostname() or platform.node(),
        os=_os_string(),
        cpu_model=_cpu_model(),
        cpu_logical=psutil.cpu_count(logical=True) or os.cpu_count(),
        cpu_physical=physical,
        cpu_available=cpu_available(),
        memory_total=memory_total,
        memory_limit=cgroup_memory_limit(memory_total),
        python=f"{platform.python_implementation()} {platform.python_version()}",
    )


# --- live sampling ---------------------------------------------------------------------

PROC = Path("/proc")
_HAS_CHILDREN_FILES: bool | None = None  # does this kernel have CONFIG_PROC_CHILDREN?


def child_pids(pid: int, proc_root: Path | None = None, every_thread: bool = True) -> list[int] | None:
    """The pids whose parent is ``pid``, from Linux's ``/proc/<pid>/task/<tid>/children``
    (each thread lists the children it forked); ``[]`` when ``pid`` is gone.  None where
    the kernel has no such files (not Linux, or built without CONFIG_PROC_CHILDREN).
    ``every_thread=False``: only those its main thread forked (one file, not one a thread)."""
    global _HAS_CHILDREN_FILES
    if proc_root is None and _HAS_CHILDREN_FILES is None:
        _HAS_CHILDREN_FILES = os.path.exists(f"{PROC}/self/task/{os.getpid()}/children")
    if proc_root is None and not _HAS_CHILDREN_FILES:
        return None
    task_dir = f"{PROC if proc_root is None else proc_root}/{pid}/task"  # plain strings: this runs every tick
    pids: list[int] = []
    try:
        tasks = os.listdir(task_dir) if every_thread else [str(pid)]
    except OSError:
        return []
    for tid in tasks:
        try:
            text = read_whole(f"{task_dir}/{tid}/children")
        except OSError:
            continue  # the thread ended meanwhile
        pids.extend(int(word) for word in text.split())
    return pids


# PyTorch's autograd engine runs a CUDA backward on a thread of its own per device, named
# so (torch/csrc/autograd/engine.cpp), while the thread that called backward() waits: the
# two take turns at one step's work, so the training loop's share is the sum of both.
AUTOGRAD_THREAD_PREFIX = b"pt_autograd_"


# A thread names itself just after it starts: a name is read at a thread's first readings,
# so that one read before the naming is read again, then kept.
NAME_READS = 2


@dataclass
class ThreadNames:
    """Which threads of one process are PyTorch autograd device threads, by their names."""

    autograd: set[int] = field(default_factory=set)
    others: dict[int, int] = field(default_factory=dict)  # thread id -> readings that found another name

    def autograd_threads(self, pid: int, tids: Collection[int], proc_root: Path | None = None) -> Set[int]:
        """Which of ``tids`` (threads of ``pid`` now) are autograd threads (a view: read, don't keep)."""
        task_dir = f"{PROC if proc_root is None else proc_root}/{pid}/task"
        for tid in tids:
            if tid in self.autograd or self.others.get(tid, 0) >= NAME_READS:
                continue
            try:
                name = read_whole(f"{task_dir}/{tid}/comm")
            except OSError:
                continue  # the thread ended meanwhile
            if name.startswith(AUTOGRAD_THREAD_PREFIX):
                self.autograd.add(tid)
            else:
                self.others[tid] = self.others.get(tid, 0) + 1
        alive = set(tids)  # an ended thread's id may come back as another thread's
        self.autograd &= alive
        for tid in self.others.keys() - alive:
            del self.others[tid]
        return self.autograd


@dataclass
class _Tracked:
    """What is remembered about one process between samples."""

    proc: psutil.Process
    started: float  # process_counters.Counters.started: it tells a reused pid apart
    t: float  # time.monotonic() of the last reading
    cpu: float | None  # user + system seconds at that time
    io: tuple[int, int] | None  # read_bytes, write_bytes at that time
    name: str | None = None  # as the kernel has it; it changes with an exec
    cmdline: list[str] | None = None  # read again when the name changes
    threads: dict[int, float] | None = None  # thread id -> user + system seconds (busy processes only, not workers)
    threads_t: float = 0.0  # time.monotonic() when the threads were read
    top_thread_pct: float | None = None  # the busiest thread's share at that reading, carried until the next
    names: ThreadNames = field(default_factory=ThreadNames)  # which of its threads are autograd's
    ppid: int | None = None  # its parent, as the tree walk found it (None: a root)


# A process below this share of a core cannot have a thread near 100 %: its threads are
# not read (a PyTorch process has dozens; reading them costs about as much as the rest).
# Nor are a data-loader worker's: the Python-bound rule looks for the busiest thread
# outside the workers, and a dozen busy workers' threads were read every second for nothing.
THREADS_FROM_PCT = 50.0
# A busy process's threads are read on two ticks in a row (its first share), then every
# THREADS_EVERY_S, the share carried in between: reading 40 threads' files costs five
# times the rest of a process's reading, and a DDP run has a busy main per GPU.
THREADS_EVERY_S = 5.0

# Each thread lists the children it forked in its own file, and a trainer has dozens of
# threads: reading every file each tick was most of the tick
# (docs/performance.md#figures-behind-the-codes-choices).  Children come from the main
# thread almost always (data-loader workers, torchrun's ranks, subprocess), so a tick
# reads the main thread's file and keeps the children found before; every thread's file
# is read every CHILDREN_SCAN_S, so a child another thread forked is found within that.
CHILDREN_SCAN_S = 5.0


def _thread_times(proc: psutil.Process) -> dict[int, float] | None:
    try:
        return {t.id: t.user_time + t.system_time for t in proc.threads()}
    except _PROC_ERRORS:
        return None


def _top_thread_pct(prev: dict[int, float] | None, cur: dict[int, float] | None, dt: float, loop: Set[int] = frozenset()) -> float | None:
    """The busiest thread's share of one core between two readings (threads seen in both),
    the threads in ``loop`` (the main thread and those that work while it waits) counted as one."""
    if not prev or not cur or dt <= 0:
        return None
    deltas = {tid: cur[tid] - prev[tid] for tid in cur.keys() & prev.keys()}
    if not deltas:
        return None
    chain = sum(deltas.get(tid, 0.0) for tid in loop)
    return round(max(0.0, chain, *deltas.values()) / dt * 100.0, 1)


def _busy_and_total(times) -> tuple[float, float]:
    """Busy and total CPU seconds of one ``cpu_times`` tuple, as psutil computes them."""
    total = sum(times)
    if sys.platform.startswith("linux"):
        # guest time is already counted in user / nice
        total -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    busy = total - times.idle - getattr(times, "iowait", 0.0)
    return busy, total


def _percent(prev, cur) -> float:
    busy0, total0 = _busy_and_total(prev)
    busy1, total1 = _busy_and_total(cur)
    d_total = total1 - total0
    if d_total <= 0:
        return 0.0
    d_busy = busy1 - busy0
    return round(min(100.0, max(0.0, d_busy / d_total * 100.0)), 1)


def _rate(prev: int | None, cur: int | None, dt: float) -> float | None:
    if prev is None or cur is None or dt <= 0 or cur < prev:
        return None
    return (cur - prev) / dt


class HostTelemetry:
    """Samples the machine and the process trees of a run.

    One instance per sampler: it keeps the previous CPU, disk and per-process
    counters so that :meth:`sample` can report rates over the interval since the
    previous call.  The constructor takes the first CPU reading, so even the first
    sample has machine CPU percentages (over the time since construction); disk
    and per-process rates are ``None`` until a process has been seen twice.
    """

    def __init__(self) -> None:
        self._cpu_prev = self._cpu_times()
        self._disk_prev: tuple[float, int, int] | None = None
        self._procs: dict[int, _Tracked] = {}
        self._roots: dict[int, psutil.Process] = {}
        self._tree_pids: frozenset[int] | None = None  # the run's tree at the last sample; None before one
        self._scanned_at = -CHILDREN_SCAN_S  # time.monotonic() of the last read of every thread's children

    def run_pids(self) -> frozenset[int] | None:
        """The pids of the trees the last :meth:`sample` read (roots included), for the
        GPU sampler to tell the run's GPU processes from others'; None before the first
        sample, when the run is not known yet."""
        return self._tree_pids

    # machine ---------------------------------------------------------------

    @staticmethod
    def _cpu_times():
        try:
            return psutil.cpu_times(percpu=True)
        except Exception:
            return None

    def _machine(self, out: HostSample, now: float) -> None:
        cur = self._cpu_times()
        prev, self._cpu_prev = self._cpu_prev, cur
        prev_total = cur_total = None
        if cur:
            if prev and len(prev) == len(cur):
                prev_total, cur_total = _sum_times(prev), _sum_times(cur)
                out.per_core = [_percent(p, c) for p, c in zip(prev, cur)]
                out.cpu_percent = _percent(prev_total, cur_total)
            else:  # no earlier reading (or CPUs went on/offline): 0 until the next call
                out.per_core = [0.0] * len(cur)
                out.cpu_percent = 0.0
        _add_cpu_contention(out, prev_total, cur_total)
        try:
            out.load_avg = [round(x, 2) for x in psutil.getloadavg()]
        except (OSError, AttributeError):
            pass
        memory = read_memory()
        if memory is not None:
            out.memory_used, out.memory_total, out.memory_available = memory.used, memory.total, memory.available
            out.swap_used, out.swap_total = memory.swap_used, memory.swap_total
        disk = read_disk_bytes()
        if disk is None:
            self._disk_prev = None
            return
        if self._disk_prev is not None:
            t0, r0, w0 = self._disk_prev
            out.disk_read_bps = _rate(r0, disk[0], now - t0)
            out.disk_write_bps = _rate(w0, disk[1], now - t0)
        self._disk_prev = (now, *disk)

    # processes -------------------------------------------------------------

    def _root(self, pid: int) -> psutil.Process | None:
        proc = self._roots.get(pid)
        if proc is not None:
            try:
                if proc.is_running():  # also false when the pid was reused
                    return proc
            except psutil.Error:
                pass
            del self._roots[pid]
        try:
            proc = psutil.Process(pid)
        except (psutil.Error, ValueError, TypeError):
            return None
        self._roots[pid] = proc
        return proc

    def _tree(self, root_pids: Iterable[int], every_thread: bool = True) -> list[tuple[psutil.Process, int | None]]:
        """(process, parent pid) for every root and descendant, each pid once, roots
        first; a root's parent is None (read from the process itself).

        Walked down from the roots through each member's own children, so a tick
        reads a few files per process of the run instead of every process on the
        host (psutil's ``children()`` builds a parent map of the whole host).  The
        walk also gives each descendant's parent: psutil's ``ppid()`` would check for
        pid reuse by reading the process again.  ``every_thread``: see CHILDREN_SCAN_S."""
        members: list[tuple[psutil.Process, int | None]] = []
        seen: set[int] = set()
        roots = []
        for pid in root_pids:
            proc = self._root(pid)
            if proc is None or proc.pid in seen:
                continue
            seen.add(proc.pid)
            roots.append(proc)
            members.append((proc, None))
        known: dict[int, list[int]] = {}  # parent -> children found by earlier ticks
        if not every_thread:
            for pid, tracked in self._procs.items():
                if tracked.ppid is not None:
                    known.setdefault(tracked.ppid, []).append(pid)
        descendants: list[tuple[psutil.Process, int]] = []
        frontier = list(roots)
        while frontier:
            children: list[psutil.Process] = []
            for parent in frontier:
                for child in self._children(parent, every_thread, known.get(parent.pid, ())):
                    if child.pid not in seen:
                        seen.add(child.pid)
                        children.append(child)
                        descendants.append((child, parent.pid))
            frontier = children
        members.extend(sorted(descendants, key=lambda member: member[0].pid))
        return members

    def _children(self, parent: psutil.Process, every_thread: bool, known: Iterable[int]) -> list[psutil.Process]:
        """The direct children of ``parent`` (with ``known``, its children found before,
        unless every thread is read), reusing the Process objects of those already
        tracked (their create time tells a reused pid apart)."""
        pids = child_pids(parent.pid, every_thread=every_thread)
        if pids is None:  # no /proc/<pid>/task/<tid>/children here: psutil's own scan
            try:
                return parent.children()
            except _PROC_ERRORS:
                return []
        if not every_thread:
            pids = list(dict.fromkeys([*pids, *known]))
        out = []
        for pid in pids:
            tracked = self._procs.get(pid)
            if tracked is not None:
                out.append(tracked.proc)
                continue
            try:
                out.append(psutil.Process(pid))
            except _PROC_ERRORS:
                continue  # gone since its parent listed it
        return out

    def _read(self, proc: psutil.Process, ppid: int | None, now: float):
        """One reading of a process (gputui.telemetry.process_counters); None when it is
        gone or a zombie.  ``ppid``: its parent where the tree walk knows it, else the
        one the process says."""
        pid = proc.pid
        tracked = self._procs.get(pid)
        try:
            counters = read_counters(proc)
            if tracked is not None and tracked.started != counters.started:
                # the pid was reused: another process (a psutil object's cached create time cannot tell)
                tracked, proc = None, psutil.Process(pid)
            elif tracked is not None:
                proc = tracked.proc
            # the command line changes with an exec, and the name with it
            cmdline = tracked.cmdline if tracked is not None and tracked.name == counters.name else read_cmdline(proc)
        except (ProcessGone, *_GONE):
            self._procs.pop(pid, None)
            return None
        except _PROC_ERRORS:
            return None
        sample = ProcessSample(
            pid=pid, ppid=counters.ppid if ppid is None else ppid, name=full_name(counters.name, cmdline), rss=counters.rss, threads=counters.threads
        )
        cpu, io = counters.cpu_s, counters.io
        earlier_threads: tuple[dict[int, float] | None, float, float | None] = (None, 0.0, None)
        if tracked is not None:
            dt = now - tracked.t
            if tracked.cpu is not None and dt > 0:
                sample.cpu_percent = round(max(0.0, cpu - tracked.cpu) / dt * 100.0, 1)
            if tracked.io is not None and io is not None:
                sample.read_bps = _rate(tracked.io[0], io[0], dt)
                sample.write_bps = _rate(tracked.io[1], io[1], dt)
            earlier_threads = (tracked.threads, tracked.threads_t, tracked.top_thread_pct)
        threads, threads_t, top_thread_pct = earlier_threads
        self._procs[pid] = _Tracked(
            proc=proc,
            started=counters.started,
            t=now,
            cpu=cpu,
            io=io,
            name=counters.name,
            cmdline=cmdline,
            threads=threads,
            threads_t=threads_t,
            top_thread_pct=top_thread_pct,
            names=tracked.names if tracked is not None else ThreadNames(),
            ppid=ppid,
        )
        return sample, cmdline

    def _read_threads(self, sample: ProcessSample, now: float) -> None:
        """The busiest thread of a busy process that is no worker (its role known now):
        its share of a core between two readings of its threads (see THREADS_EVERY_S)."""
        tracked = self._procs.get(sample.pid)
        if tracked is None:
            return
        if sample.role == "worker" or (sample.cpu_percent or 0.0) < THREADS_FROM_PCT:
            # read afresh once busy again: a share over a quiet spell says little
            tracked.threads, tracked.top_thread_pct = None, None
            return
        if tracked.top_thread_pct is not None and now - tracked.threads_t < THREADS_EVERY_S:
            sample.top_thread_pct = tracked.top_thread_pct
            return
        threads = _thread_times(tracked.proc)
        loop = {sample.pid, *tracked.names.autograd_threads(sample.pid, threads)} if threads and sys.platform.startswith("linux") else set()
        sample.top_thread_pct = _top_thread_pct(tracked.threads, threads, now - tracked.threads_t, loop)
        tracked.threads, tracked.threads_t, tracked.top_thread_pct = threads, now, sample.top_thread_pct

    # public ----------------------------------------------------------------

    def sample(self, root_pids: Sequence[int] = ()) -> HostSample:
        """The machine now, and every process of the trees rooted at ``root_pids``.

        Processes come root first ("main"), then its descendants by pid, each
        classified by :func:`classify_role`.  Per-process ``cpu_percent`` (100 =
        one full core) and I/O rates are ``None`` the first time a process is
        seen; I/O rates stay ``None`` where ``/proc/<pid>/io`` is not readable.
        """
        now = time.monotonic()
        out = HostSample()
        self._machine(out, now)

        readings: list[tuple[ProcessSample, list[str] | None, bool]] = []
        every_thread = now - self._scanned_at >= CHILDREN_SCAN_S
        if every_thread:
            self._scanned_at = now
        for proc, parent in self._tree(root_pids, every_thread):
            is_root = parent is None
            got = self._read(proc, parent, now)
            if got is not None:
                readings.append((got[0], got[1], is_root))

        cmdlines = {s.pid: cmd for s, cmd, _ in readings}
        root_cmd: dict[int, list[str] | None] = {}
        # the root each process descends from (walk up through the parents we saw)
        parents = {s.pid: s.ppid for s, _, _ in readings}
        for s, cmd, is_root in readings:
            if is_root:
                root_cmd[s.pid] = cmd
        for s, cmd, is_root in readings:
            if is_root:
                s.role = "main"
                continue
            ancestor, hops = s.ppid, 0
            while ancestor is not None and ancestor not in root_cmd and hops < 64:
                ancestor, hops = parents.get(ancestor), hops + 1
            s.role = classify_role(
                cmd,
                s.name,
                root_cmd.get(ancestor) if ancestor is not None else None,
                cmdlines.get(s.ppid) if s.ppid is not None else None,
            )
        for s, _, _ in readings:
            self._read_threads(s, now)
        out.processes = [s for s, _, _ in readings]
        self._tree_pids = frozenset(cmdlines) | frozenset(root_pids)

        alive = set(cmdlines)
        for pid in list(self._procs):
            if pid not in alive:
                del self._procs[pid]
        wanted = set(root_pids)
        for pid in list(self._roots):
            if pid not in wanted:
                del self._roots[pid]
        return out


def _sum_times(per_cpu):
    """Element-wise sum of per-CPU ``cpu_times`` tuples (the machine's total)."""
    first = per_cpu[0]
    return type(first)(*(sum(values) for values in zip(*per_cpu)))

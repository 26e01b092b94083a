"""Preflight checks of the host around the GPUs: enough CPU (and is it ours?), memory,
/dev/shm and a working directory with room and speed.

Readers take injectable paths and functions (the cgroup root, psutil's ``cpu_times``
and ``virtual_memory``, the shm path) so tests fake them with files under tmp_path;
graders are pure.  Every number that makes a verdict lives in
:mod:`gputui.check.thresholds`.
"""

from __future__ import annotations

import mmap
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from gputui.check import thresholds as t
from gputui.check.result import AT_LEAST, AT_MOST, INFO, OK, PREFLIGHT, CheckResult, ResultFields, Status, skipped
from gputui.check.result_data import DiskReadData
from gputui.check.stage_context import GpuUnderTest
from gputui.fmt import GIB
from gputui.telemetry.host import CpuThrottling, cgroup_memory_limit, cpu_available, read_cpu_throttling, steal_percent  # noqa: F401 - re-exported

if TYPE_CHECKING:
    from typing_extensions import Unpack

MIB = 1024**2
SHM_PATH = Path("/dev/shm")
READ_TEST_BYTES = 256 * MIB
READ_TEST_QUICK_BYTES = 64 * MIB
# Read with O_DIRECT, straight from the disk into our buffer, one request per block: a
# reader with nothing to copy sleeps through the whole block and wakes once, so a busy CPU
# can hold it off only once per block, and no page cache is left to drop.
READ_BLOCK_BYTES = 64 * MIB
# Without O_DIRECT (some file systems refuse it): cached reads, the file's pages dropped
# before each pass; blocks this size keep the kernel's readahead a request ahead.
CACHED_READ_BLOCK_BYTES = 16 * MIB
WRITE_BLOCK_BYTES = 4 * MIB
# The file is read again and again for this long (at least one pass), and the best pass is
# the disk's figure: a neighbour's I/O or a late wake-up only ever slows a pass, so a single
# short pass is decided by the noise as often as by the disk.
READ_BUDGET_S = 3.0
READ_QUICK_BUDGET_S = 1.5
READ_MAX_PASSES = 16  # a fast disk's passes last milliseconds: enough samples, little I/O
MEMORY_FILE_SYSTEMS = frozenset({"tmpfs", "ramfs"})  # their files are the page cache
STEAL_INTERVAL_S = 1.0  # long enough for a few hundred scheduler ticks per core
STEAL_QUICK_INTERVAL_S = 0.5

# --- readers -------------------------------------------------------------------------


def _affinity_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


@dataclass
class HostFacts:
    workdir: Path
    cores: float | None = None  # affinity capped by the cgroup quota
    affinity_cores: int | None = None  # before the quota
    throttling: CpuThrottling | None = None
    memory_total: int | None = None
    memory_limit: int | None = None  # a cgroup limit below RAM
    shm_path: Path = SHM_PATH
    shm_bytes: int | None = None
    shm_error: str | None = None
    disk_free: int | None = None
    disk_error: str | None = None

    @property
    def memory_usable(self) -> int | None:
        if self.memory_limit is not None:
            return self.memory_limit
        return self.memory_total


def _disk_usage(path: Path, disk_usage: Callable[[Path], Any] = shutil.disk_usage) -> tuple[Any, str | None]:
    try:
        return disk_usage(path), None
    except OSError as exc:
        return None, exc.strerror or str(exc)


def read_host_facts(
    workdir: Path,
    *,
    cgroup_root: Path | None = None,
    shm_path: Path = SHM_PATH,
    virtual_memory: Callable[[], Any] = psutil.virtual_memory,
    disk_usage: Callable[[Path], Any] = shutil.disk_usage,
) -> HostFacts:
    facts = HostFacts(workdir=workdir, shm_path=shm_path)
    facts.cores = cpu_available(cgroup_root)
    facts.affinity_cores = _affinity_cores()
    facts.throttling = read_cpu_throttling(cgroup_root)
    try:
        facts.memory_total = virtual_memory().total
    except Exception:  # noqa: BLE001 - psutil unsupported here: memory unknown
        facts.memory_total = None
    facts.memory_limit = cgroup_memory_limit(facts.memory_total, cgroup_root)
    shm, facts.shm_error = _disk_usage(shm_path, disk_usage)
    facts.shm_bytes = shm.total if shm else None
    disk, facts.disk_error = _disk_usage(workdir, disk_usage)
    facts.disk_free = disk.free if disk else None
    return facts


def measure_steal(interval_s: float, *, cpu_times: Callable[[], Any] = psutil.cpu_times, sleep: Callable[[float], object] = time.sleep) -> float | None:
    """Percent of CPU time the hypervisor gave to others over ``interval_s``; None where
    the kernel does not report steal (not Linux)."""
    before = cpu_times()
    sleep(interval_s)
    return steal_percent(before, cpu_times())


@dataclass
class ReadTest:
    directory: Path
    size_bytes: int
    pass_seconds: list[float] = field(default_factory=list)  # each full read of the file
    block_bytes: int = READ_BLOCK_BYTES
    direct: bool = False  # read with O_DIRECT
    cache_dropped: bool = False  # cached reads: the file's pages dropped before each pass
    cache_note: str | None = None  # why the page cache could not be dropped
    fstype: str | None = None
    error: str | None = None

    @property
    def seconds(self) -> float | None:
        """The fastest pass: the others lost time to something other than the disk."""
        timed = [s for s in self.pass_seconds if s > 0]
        return min(timed) if timed else None

    @property
    def mb_per_s(self) -> float | None:
        seconds = self.seconds
        return self.size_bytes / seconds / 1e6 if seconds else None

    @property
    def pass_mb_per_s(self) -> list[float]:
        return [self.size_bytes / s / 1e6 for s in self.pass_seconds if s > 0]


def _fstype(directory: Path) -> str | None:
    """The file system holding ``directory``: the longest mount point above it."""
    try:
        target = str(directory.resolve())
        mounts = [p for p in psutil.disk_partitions(all=True) if target == p.mountpoint or target.startswith(p.mountpoint.rstrip("/") + "/")]
    except (OSError, psutil.Error):
        return None
    return max(mounts, key=lambda p: len(p.mountpoint)).fstype if mounts else None


def _drop_page_cache(fd: int) -> str | None:
    """Ask the kernel to forget the file's (clean, fsynced) pages; None on success."""
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except AttributeError:
        return "posix_fadvise is not available on this system"
    except OSError as exc:
        return f"posix_fadvise failed: {exc.strerror or exc}"
    return None


def measure_read_throughput(
    directory: Path,
    size_bytes: int,
    *,
    budget_s: float = READ_BUDGET_S,
    max_passes: int = READ_MAX_PASSES,
    block_bytes: int = READ_BLOCK_BYTES,
    cached_block_bytes: int = CACHED_READ_BLOCK_BYTES,
    direct: bool = True,
    clock: Callable[[], float] = time.perf_counter,
    stopped: Callable[[], bool] = lambda: False,
) -> ReadTest:
    """Write a ``size_bytes`` temp file in ``directory`` and fsync it, then read it back
    sequentially, pass after pass for ``budget_s`` (at most ``max_passes``): with O_DIRECT
    in ``block_bytes`` blocks, or where that is refused (or ``direct`` is False), cached in
    ``cached_block_bytes`` blocks with its pages dropped before each pass.  The file is
    always deleted.  Random bytes, so compressing file systems cannot cheat."""
    test = ReadTest(directory=directory, size_bytes=size_bytes, block_bytes=block_bytes, fstype=_fstype(directory))
    usage, error = _disk_usage(directory)
    if usage is None or usage.free < 2 * size_bytes:  # never fill a user's disk for a test
        test.error = f"{directory}: {error}" if usage is None else f"only {usage.free // MIB} MiB free in {directory}, too little for the read test"
        return test
    block = os.urandom(min(WRITE_BLOCK_BYTES, size_bytes))
    try:
        fd, name = tempfile.mkstemp(dir=directory, prefix=".gputui-read-test-")
    except OSError as exc:
        test.error = f"could not create a test file in {directory}: {exc.strerror or exc}"
        return test
    try:
        with os.fdopen(fd, "wb", buffering=0) as fh:
            left = size_bytes
            while left > 0:
                left -= fh.write(block[: min(len(block), left)])
            os.fsync(fh.fileno())  # dirty pages can be neither dropped nor bypassed
        passes = _Passes(test, budget_s, max_passes, clock, stopped)
        if not (direct and test.fstype not in MEMORY_FILE_SYSTEMS and _direct_passes(name, passes)):
            test.block_bytes = cached_block_bytes
            _cached_passes(name, passes)
    except OSError as exc:
        test.error = f"read test in {directory} failed: {exc.strerror or exc}"
    finally:
        try:
            os.unlink(name)
        except OSError:
            pass
    return test


@dataclass
class _Passes:
    """When the read test has read enough: its budget spent, its passes done, or the check stopped."""

    test: ReadTest
    budget_s: float
    max_passes: int
    clock: Callable[[], float]
    stopped: Callable[[], bool]
    begun: float | None = None

    def timed(self, read: Callable[[], object]) -> bool:
        """Time one pass of ``read``; whether another should follow."""
        start = self.clock()
        if self.begun is None:
            self.begun = start
        read()
        end = self.clock()
        self.test.pass_seconds.append(end - start)
        return len(self.test.pass_seconds) < self.max_passes and end - self.begun < self.budget_s and not self.stopped()


def _direct_passes(name: str, passes: _Passes) -> bool:
    """Read the file with O_DIRECT until ``passes`` has enough; False, having read nothing,
    where the system or the file system refuses O_DIRECT."""
    test = passes.test
    flag = getattr(os, "O_DIRECT", None)
    if flag is None:
        return False
    try:
        fd = os.open(name, os.O_RDONLY | flag)
    except OSError:
        return False
    buffer = mmap.mmap(-1, min(test.block_bytes, test.size_bytes))  # page-aligned, as O_DIRECT needs
    try:
        try:
            os.readv(fd, [buffer])
        except OSError:  # accepted at open, refused at the read: some FUSE and network file systems
            return False

        def read() -> None:
            os.lseek(fd, 0, os.SEEK_SET)
            while os.readv(fd, [buffer]):
                pass

        while passes.timed(read):
            pass
        test.direct = True
        return True
    finally:
        os.close(fd)
        buffer.close()


def _cached_passes(name: str, passes: _Passes) -> None:
    test = passes.test
    buffer = bytearray(test.block_bytes)
    if test.fstype in MEMORY_FILE_SYSTEMS:  # posix_fadvise succeeds there and drops nothing
        test.cache_note = f"{test.fstype} keeps its files in memory"
    with open(name, "rb", buffering=0) as fh:

        def read() -> None:
            while fh.readinto(buffer):
                pass

        while True:
            fh.seek(0)
            test.cache_note = test.cache_note or _drop_page_cache(fh.fileno())
            if not passes.timed(read) or test.cache_note is not None:  # no dropping: later passes would read memory
                break
    test.cache_dropped = test.cache_note is None


# --- graders ---------------------------------------------------------------------------


def _result(key: str, name: str, status: Status, **fields: Unpack[ResultFields]) -> CheckResult:
    return CheckResult(id=f"host.{key}", group=PREFLIGHT, name=name, status=status, **fields)


def _gib(num_bytes: float) -> float:
    return round(num_bytes / GIB, 1)


def grade_host(facts: HostFacts, gpus: list[GpuUnderTest]) -> list[CheckResult]:
    """The host checks that need no waiting, in the order a person reads them."""
    return [grade_cores(facts, len(gpus)), grade_throttling(facts.throttling), grade_memory(facts, gpus), grade_shm(facts), grade_disk_free(facts)]


def grade_cores(facts: HostFacts, gpu_count: int) -> CheckResult:
    name = "CPU cores per GPU"
    cores = facts.cores
    if cores is None:
        return skipped("host.cores", PREFLIGHT, name, "the number of usable CPU cores is not known here")
    capped = facts.affinity_cores is not None and cores < facts.affinity_cores
    quota = f"; the cgroup CPU quota caps the {facts.affinity_cores} cores we may run on" if capped else ""
    if gpu_count == 0:
        return _result("cores", "CPU cores", INFO, value=cores, unit="cores", detail=f"{cores:g} usable cores{quota}; no GPU to feed")
    per_gpu = cores / gpu_count
    status = t.grade_floor(per_gpu, ok_at=t.CORES_PER_GPU_OK, fail_below=t.CORES_PER_GPU_FAIL)
    result = _result(
        "cores",
        name,
        status,
        value=round(per_gpu, 2),
        unit="cores",
        expected=t.CORES_PER_GPU_OK,
        bound=AT_LEAST,
        expected_source="4-8 cores per GPU keep a typical input pipeline ahead of the GPU",
        detail=f"{cores:g} usable cores for {gpu_count} GPU(s){quota}",
    )
    if status != OK:
        quota = ", capped by the container's CPU quota" if capped else ""
        result.cause = (
            f"{cores:g} CPU cores for {gpu_count} GPU(s) ({per_gpu:.1f} per GPU{quota}): decoding and augmentation run on the CPU, so the GPUs wait for data"
        )
        result.advice = "Rent a size with more vCPUs per GPU, decode on the GPU (NVIDIA DALI), or pre-process the dataset once and train from the result."
    return result


def grade_throttling(throttling: CpuThrottling | None) -> CheckResult:
    name = "CPU quota throttling"
    if throttling is None:
        return skipped("host.cpu_throttling", PREFLIGHT, name, "no cgroup CPU statistics (cpu.stat) here")
    if throttling.periods == 0:
        return _result("cpu_throttling", name, OK, value=0.0, unit="% of periods", detail="no CPU quota enforced (no scheduler periods counted)")
    share = throttling.share
    status = t.grade_ceiling(share, warn_at=t.CPU_THROTTLED_WARN_SHARE, fail_at=t.CPU_THROTTLED_FAIL_SHARE)
    spent = f", {throttling.throttled_s:.1f} s paused" if throttling.throttled_s is not None else ""
    result = _result(
        "cpu_throttling",
        name,
        status,
        value=round(share * 100, 2),
        unit="% of periods",
        expected=t.CPU_THROTTLED_WARN_SHARE * 100,
        bound=AT_MOST,
        expected_source=(
            f"a quota that pauses the container in over {t.CPU_THROTTLED_WARN_SHARE:.0%} of periods slows its input pipeline "
            f"({t.CPU_THROTTLED_FAIL_SHARE:.0%} fails)"
        ),
        detail=f"{throttling.throttled} of {throttling.periods} scheduler periods throttled{spent}, since the container started",
    )
    if status != OK:
        result.cause = f"the container's CPU quota ran out in {share:.0%} of scheduler periods: its processes were paused until the next period"
        result.advice = "Run fewer threads and DataLoader workers than the quota's cores (OMP_NUM_THREADS, torch.set_num_threads), or rent more CPU."
    return result


def grade_steal(steal_pct: float | None, interval_s: float) -> CheckResult:
    name = "CPU steal time"
    if steal_pct is None:
        return skipped("host.steal", PREFLIGHT, name, "steal time is not reported here (not Linux)")
    status = t.grade_ceiling(steal_pct, warn_at=t.STEAL_WARN_PCT, fail_at=t.STEAL_FAIL_PCT)
    result = _result(
        "steal",
        name,
        status,
        value=steal_pct,
        unit="%",
        expected=t.STEAL_WARN_PCT,
        bound=AT_MOST,
        expected_source=f"CPU time given to other tenants is lost to CPU-bound input pipelines: over {t.STEAL_WARN_PCT:g} % shows ({t.STEAL_FAIL_PCT:g} % fails)",
        detail=f"share of CPU time given to other virtual machines over {interval_s:g} s",
    )
    if status != OK:
        result.cause = f"the hypervisor gave {steal_pct:.0f}% of our CPU time to other tenants: an oversubscribed host or a noisy neighbour"
        result.advice = "CPU-bound input pipelines slow down by about as much: ask for another host or an instance with dedicated CPUs."
    return result


def grade_memory(facts: HostFacts, gpus: list[GpuUnderTest]) -> CheckResult:
    name = "Host memory per GPU"
    usable = facts.memory_usable
    if usable is None:
        return skipped("host.memory", PREFLIGHT, name, "host memory is not reported here")
    limit = f", a cgroup limit of {_gib(facts.memory_limit)} GiB" if facts.memory_limit is not None else ""
    detail = f"{_gib(facts.memory_total or usable)} GiB RAM{limit}"
    vram = [gpu.info.memory_total for gpu in gpus if gpu.info.memory_total]
    if not gpus or not vram:
        why = "no GPU to compare with" if not gpus else "the GPUs' memory is not reported"
        return _result("memory", "Host memory", INFO, value=_gib(usable), unit="GiB", detail=f"{detail}; {why}")
    per_gpu, vram_per_gpu = usable / len(gpus), sum(vram) / len(vram)
    status = t.grade_floor(per_gpu / vram_per_gpu, ok_at=t.RAM_PER_VRAM_OK, fail_below=t.RAM_PER_VRAM_FAIL)
    result = _result(
        "memory",
        name,
        status,
        value=_gib(per_gpu),
        unit="GiB",
        expected=_gib(vram_per_gpu * t.RAM_PER_VRAM_OK),
        bound=AT_LEAST,
        expected_source="as much host memory as each GPU has",
        detail=f"{detail} for {len(gpus)} GPU(s) of {_gib(vram_per_gpu)} GiB",
    )
    if status != OK:
        where = "the container's memory limit" if facts.memory_limit is not None else "host RAM"
        result.cause = (
            f"{_gib(per_gpu)} GiB of {where} per GPU for {_gib(vram_per_gpu)} GiB of GPU memory: "
            "data pipelines, pinned buffers and checkpoints in RAM get OOM-killed"
        )
        result.advice = "Rent a size with more RAM per GPU or ask for a higher memory limit; meanwhile use fewer DataLoader workers and memory-map datasets."
    return result


def grade_shm(facts: HostFacts) -> CheckResult:
    name = "/dev/shm size"
    if facts.shm_bytes is None:
        return skipped("host.shm", PREFLIGHT, name, f"{facts.shm_path}: {facts.shm_error or 'not found'}")
    size = facts.shm_bytes
    status = t.grade_floor(size, ok_at=t.SHM_WARN_BYTES, fail_below=t.SHM_FAIL_BYTES)
    result = _result(
        "shm",
        name,
        status,
        value=round(size / MIB),
        unit="MiB",
        expected=t.SHM_WARN_BYTES // MIB,
        bound=AT_LEAST,
        expected_source="room for DataLoader workers' batches in flight",
        detail=str(facts.shm_path),
    )
    if status != OK:
        default = " (Docker's default)" if size <= 64 * MIB else ""
        result.cause = (
            f"{facts.shm_path} is only {round(size / MIB)} MiB{default}: DataLoader workers hand every "
            "batch over through it and die with 'bus error' or 'unable to write to file'"
        )
        result.advice = (
            "Start the container with more: docker run --shm-size=16g ... or docker run --ipc=host "
            "(Kubernetes: an emptyDir with medium: Memory mounted at /dev/shm)."
        )
    return result


def grade_disk_free(facts: HostFacts) -> CheckResult:
    name = "Free disk in the working directory"
    if facts.disk_free is None:
        return skipped("host.disk_free", PREFLIGHT, name, f"{facts.workdir}: {facts.disk_error or 'not readable'}")
    free = facts.disk_free
    status = t.grade_floor(free, ok_at=t.DISK_FREE_WARN_BYTES, fail_below=t.DISK_FREE_FAIL_BYTES)
    result = _result(
        "disk_free",
        name,
        status,
        value=_gib(free),
        unit="GiB",
        expected=_gib(t.DISK_FREE_WARN_BYTES),
        bound=AT_LEAST,
        expected_source="room for a dataset and checkpoints",
        detail=str(facts.workdir),
    )
    if status != OK:
        result.cause = f"only {_gib(free)} GiB free in {facts.workdir}: checkpoints and datasets will not fit"
        result.advice = "Free space, or mount a larger volume and work there (gputui check --workdir DIR)."
    return result


def grade_disk_read(test: ReadTest) -> CheckResult:
    name = "Disk read speed"
    if test.error is not None:
        return skipped("host.disk_read", PREFLIGHT, name, test.error)
    mbs = test.mb_per_s
    if mbs is None:
        return skipped("host.disk_read", PREFLIGHT, name, "the read took no measurable time")
    where = f"{test.directory}" + (f" ({test.fstype})" if test.fstype else "")
    passes = test.pass_mb_per_s
    if test.direct:
        how = f"{test.size_bytes // MIB} MiB read with O_DIRECT (no page cache) in {test.block_bytes // MIB} MiB blocks from {where}"
    else:
        cache = (
            "page cache dropped before each pass"
            if test.cache_dropped
            else f"the page cache could not be dropped ({test.cache_note}): this may be memory speed, not the disk's"
        )
        how = f"{test.size_bytes // MIB} MiB read sequentially in {test.block_bytes // MIB} MiB blocks from {where}; {cache}"
    if len(passes) > 1:
        how = f"best of {len(passes)} passes ({min(passes):,.0f}-{max(passes):,.0f} MB/s) over {how}"
    status = t.grade_ratio(mbs / t.DISK_READ_EXPECTED_MBS)
    result = _result(
        "disk_read",
        name,
        status,
        value=round(mbs),
        unit="MB/s",
        expected=t.DISK_READ_EXPECTED_MBS,
        expected_source="streaming a JPEG dataset at 3,000 images/s needs ~330 MB/s",
        detail=how,
        data=DiskReadData(bytes=test.size_bytes, block_bytes=test.block_bytes, direct=test.direct, passes_mb_per_s=[round(p) for p in passes]),
    )
    if status != OK:
        result.cause = f"{where} reads at {mbs:.0f} MB/s at best: a network disk or a throttled cloud volume"
        result.advice = (
            "Keep datasets on local NVMe (often /tmp, /scratch or an instance-store mount) or in RAM, "
            "and pack small files into large shards (WebDataset, TFRecord)."
        )
    return result

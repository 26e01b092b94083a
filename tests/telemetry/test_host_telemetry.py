"""Host telemetry against real processes: roles, CPU, memory, I/O, vanishing processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from gputui.model import HostInfo, HostSample
from gputui.telemetry.host import HostTelemetry, classify_role, host_info

# A training-like root: N busy data-loader workers via multiprocessing, plus one
# unrelated child.  Workers spin until their parent goes away (or 30 s pass).
ROOT_SCRIPT = textwrap.dedent(
    """
    import multiprocessing as mp
    import os
    import subprocess
    import sys
    import time

    def busy(parent):
        deadline = time.monotonic() + 30
        n = 0
        while time.monotonic() < deadline:
            n += 1
            if n % 100000 == 0 and os.getppid() != parent:
                break

    if __name__ == "__main__":
        ctx = mp.get_context(sys.argv[1])
        workers = [ctx.Process(target=busy, args=(os.getpid(),), daemon=True) for _ in range(3)]
        for w in workers:
            w.start()
        other = subprocess.Popen(["sleep", "30"])
        print("ready", flush=True)
        sys.stdin.readline()  # until the test closes our stdin (or kills us)
        other.kill()
    """
)

# Writes ~20 MB and fsyncs when told to, then waits.
WRITER_SCRIPT = textwrap.dedent(
    """
    import os
    import sys

    path = sys.argv[1]
    print("ready", flush=True)
    sys.stdin.readline()
    block = os.urandom(1 << 20)
    with open(path, "wb") as fh:
        for _ in range(20):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
    print("done", flush=True)
    sys.stdin.readline()
    """
)


def _kill_tree(proc: subprocess.Popen) -> None:
    try:
        family = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        family = []
    for p in family:
        try:
            p.kill()
        except psutil.Error:
            pass
    proc.kill()
    proc.wait(timeout=10)
    # dead means gone or a zombie (init reaps those, sometimes only after a while)
    deadline = time.monotonic() + 5
    for p in family:
        while time.monotonic() < deadline:
            try:
                if p.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.Error:
                break
            time.sleep(0.02)
    for stream in (proc.stdin, proc.stdout):
        if stream:
            stream.close()


def _start(tmp_path, script: str, *args: str) -> subprocess.Popen:
    path = tmp_path / "prog.py"
    path.write_text(script)
    proc = subprocess.Popen(
        [sys.executable, str(path), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line.strip() == "ready", f"test program did not start: {line!r}"
    return proc


def _wait_for(telemetry: HostTelemetry, pid: int, predicate, timeout: float = 10.0) -> HostSample:
    deadline = time.monotonic() + timeout
    while True:
        sample = telemetry.sample([pid])
        if predicate(sample) or time.monotonic() > deadline:
            return sample
        time.sleep(0.05)


def _check_tree(tmp_path, method: str) -> None:
    proc = _start(tmp_path, ROOT_SCRIPT, method)
    try:
        telemetry = HostTelemetry()

        def complete(s: HostSample) -> bool:
            return sum(p.role == "worker" for p in s.processes) >= 3 and any(p.name == "sleep" for p in s.processes)

        first = _wait_for(telemetry, proc.pid, complete)
        assert complete(first), first.processes
        time.sleep(0.5)
        sample = telemetry.sample([proc.pid])

        by_role: dict[str, list] = {}
        for p in sample.processes:
            by_role.setdefault(p.role, []).append(p)
        assert [p.pid for p in by_role["main"]] == [proc.pid]
        assert sample.processes[0].pid == proc.pid  # root first
        workers = by_role["worker"]
        assert len(workers) == 3, sample.processes
        assert all(w.ppid == proc.pid for w in workers)
        sleeps = [p for p in sample.processes if p.name == "sleep"]
        assert len(sleeps) == 1 and sleeps[0].role == "child"
        # with "spawn", multiprocessing's resource tracker is the only other process
        others = [p for p in by_role.get("child", []) if p.name != "sleep"]
        assert len(others) <= 1, others

        # Busy workers share two cores with whatever else runs: compare, don't hard-code.
        main = by_role["main"][0]
        idle = [main.cpu_percent, sleeps[0].cpu_percent]
        assert None not in idle and max(idle) < 2, (main, sleeps)
        for w in workers:
            assert w.cpu_percent is not None and w.cpu_percent > 3 * max(idle, default=0) + 2, workers
        assert sum(w.cpu_percent for w in workers) > 15, workers
        for p in sample.processes:
            assert p.rss is not None and p.rss > 0
            assert p.threads is not None and p.threads >= 1
            assert p.name
    finally:
        _kill_tree(proc)


def test_fork_workers_and_child(tmp_path):
    _check_tree(tmp_path, "fork")


def test_spawn_workers_recognized(tmp_path):
    _check_tree(tmp_path, "spawn")


def test_vanishing_processes_and_missing_root(tmp_path):
    script = textwrap.dedent(
        """
        import subprocess, sys, time
        quick = subprocess.Popen(["sleep", "0.4"])
        print("ready", flush=True)
        quick.wait()      # reaped: it is gone
        sys.stdin.readline()
        """
    )
    proc = _start(tmp_path, script)
    try:
        telemetry = HostTelemetry()
        first = telemetry.sample([proc.pid])
        assert [p.role for p in first.processes] == ["main", "child"]
        quick_pid = first.processes[1].pid
        time.sleep(0.8)
        second = telemetry.sample([proc.pid])
        assert [p.pid for p in second.processes] == [proc.pid]
        assert quick_pid not in [p.pid for p in second.processes]
        assert second.processes[0].cpu_percent is not None

        # the root itself goes away: an empty list, no error
        proc.kill()
        proc.wait(timeout=10)
        assert telemetry.sample([proc.pid]).processes == []
    finally:
        _kill_tree(proc)


def test_zombie_child_is_not_listed(tmp_path):
    script = textwrap.dedent(
        """
        import subprocess, sys
        zombie = subprocess.Popen(["true"])   # never waited for: stays a zombie
        print("ready", flush=True)
        sys.stdin.readline()
        """
    )
    proc = _start(tmp_path, script)
    try:
        deadline = time.monotonic() + 5
        kids = psutil.Process(proc.pid).children()
        while time.monotonic() < deadline and not (kids and all(k.status() == psutil.STATUS_ZOMBIE for k in kids)):
            time.sleep(0.05)
            kids = psutil.Process(proc.pid).children()
        assert kids and kids[0].status() == psutil.STATUS_ZOMBIE
        sample = HostTelemetry().sample([proc.pid])
        assert [p.pid for p in sample.processes] == [proc.pid]
    finally:
        _kill_tree(proc)


def test_nonexistent_root_pid():
    telemetry = HostTelemetry()
    pid = 2**22 + 12345  # above Linux's pid_max limit
    while psutil.pid_exists(pid):
        pid += 1
    assert telemetry.sample([pid]).processes == []
    assert telemetry.sample([pid, -5]).processes == []


def test_machine_fields():
    telemetry = HostTelemetry()
    first = telemetry.sample()
    assert first.processes == []
    assert first.per_core is not None and len(first.per_core) == psutil.cpu_count()
    assert first.memory_total and first.memory_total > 0
    assert first.memory_used is not None and first.memory_available is not None
    assert first.swap_total is not None and first.swap_used is not None
    assert first.load_avg is not None and len(first.load_avg) == 3
    assert first.disk_read_bps is None and first.disk_write_bps is None

    end = time.monotonic() + 0.3
    while time.monotonic() < end:  # some CPU work so the percentages move
        pass
    second = telemetry.sample()
    assert second.per_core is not None and len(second.per_core) == psutil.cpu_count()
    assert all(0.0 <= c <= 100.0 for c in second.per_core)
    assert second.cpu_percent is not None and 0.0 < second.cpu_percent <= 100.0
    if psutil.disk_io_counters() is None:
        # this machine has no disk counters: the rates stay honestly unknown
        assert second.disk_read_bps is None and second.disk_write_bps is None
    else:
        assert second.disk_read_bps is not None and second.disk_read_bps >= 0
        assert second.disk_write_bps is not None and second.disk_write_bps >= 0


def test_process_write_rate(tmp_path):
    try:
        psutil.Process().io_counters()
    except (psutil.AccessDenied, AttributeError, NotImplementedError) as exc:
        pytest.skip(f"per-process io_counters unavailable here: {type(exc).__name__}")
    proc = _start(tmp_path, WRITER_SCRIPT, str(tmp_path / "blob.bin"))
    try:
        telemetry = HostTelemetry()
        first = telemetry.sample([proc.pid])
        assert first.processes[0].write_bps is None  # first sighting: no rate yet
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "done"
        second = telemetry.sample([proc.pid])
        writer = second.processes[0]
        if writer.write_bps is None:
            pytest.skip("io_counters of the child could not be read here")
        if writer.write_bps == 0:
            pytest.skip("this filesystem does not account written bytes per process")
        # ~20 MB over well under 10 s
        assert writer.write_bps > 1_000_000
        assert writer.read_bps is not None and writer.read_bps >= 0
    finally:
        _kill_tree(proc)


def test_host_info():
    info = host_info()
    assert isinstance(info, HostInfo)
    assert info.hostname and info.os
    assert info.cpu_model
    assert info.cpu_logical == psutil.cpu_count()
    assert info.cpu_physical is None or 1 <= info.cpu_physical <= info.cpu_logical
    assert info.memory_total == psutil.virtual_memory().total
    assert info.python and sys.version.split()[0] in info.python


def test_classify_role_rule():
    root = ["python", "train.py", "--epochs", "3"]
    # a fork of the main program
    assert classify_role(root, "python", root) == "worker"
    # spawn / forkserver children
    spawn = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)", "--multiprocessing-fork"]
    assert classify_role(spawn, "python", root, root) == "worker"
    fs = ["python", "-c", "from multiprocessing.forkserver import main; main(3, 4, ['__main__'])"]
    assert classify_role(fs, "python", root, fs) == "worker"  # a fork of the forkserver
    assert classify_role(fs, "python", root, root) == "child"  # the forkserver itself
    tracker = ["python", "-c", "from multiprocessing.resource_tracker import main;main(6)"]
    assert classify_role(tracker, "python", root, root) == "child"
    # named workers
    assert classify_role(root[:2], "pt_data_worker", root) == "worker"
    assert classify_role(["python", "DataLoader worker 0"], "python", root) == "worker"
    assert classify_role(None, "pt_data_worker", None) == "worker"
    # anything else
    assert classify_role(["sleep", "30"], "sleep", root) == "child"
    assert classify_role(["python", "train.py"], "python", root) == "child"
    assert classify_role(None, "python", None) == "child"
    assert classify_role([], "python", []) == "child"


def test_cgroup_cpu_quota_and_memory_limit_are_read(tmp_path, monkeypatch):
    """A rented container: the host has many cores and much memory, the cgroup allows less."""
    from gputui.telemetry import host

    (tmp_path / "cpu.max").write_text("150000 100000\n")  # 1.5 cores
    (tmp_path / "memory.max").write_text(str(2 * 1024**3) + "\n")
    monkeypatch.setattr(host, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(host.os, "sched_getaffinity", lambda pid: set(range(64)))
    assert host.cpu_available() == 1.5
    assert host.cgroup_memory_limit(64 * 1024**3) == 2 * 1024**3
    assert host.cgroup_memory_limit(1024**3) is None  # a limit above RAM is no limit

    (tmp_path / "cpu.max").write_text("max 100000\n")
    (tmp_path / "memory.max").write_text("max\n")
    assert host.cpu_available() == 64.0
    assert host.cgroup_memory_limit(64 * 1024**3) is None

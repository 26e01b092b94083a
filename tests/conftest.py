"""Shared test setup: no test sees the real user's files or GPUTUI_* settings; GPU tests
run only where NVML finds a GPU, and say why not."""

from __future__ import annotations

import functools
import os
import runpy
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.isolation import USER_FOLDERS, isolate_user

TORCHVISION_SHIM = Path(__file__).parent / "shims" / "torchvision_cpu"
# Whether this session needs the shim ("1" or "0"), set by the first pytest process that
# asks: pytest-xdist's workers inherit it and skip the probe (a child that imports torch).
# Not a GPUTUI_ name: the tests' isolation clears those.
SHIM_DECIDED = "TESTS_TORCHVISION_SHIM"

# ssh_hosts and slurm_cluster (the fleet tests' real ssh and Slurm): one definition for
# the whole session, so that every module shares a single private Slurm.
pytest_plugins = ["tests.support.cluster"]


def _enable_torchvision_shim_if_needed() -> None:
    """CPU-only CI pairs torch's CPU wheel with a CUDA torchvision wheel: see the shim."""
    if os.environ.get(SHIM_DECIDED) not in ("0", "1"):
        probe = subprocess.run([sys.executable, "-c", "import torchvision"], capture_output=True, text=True)
        # Not needed where it works, or fails for another reason that tests should report.
        needed = probe.returncode != 0 and "operator torchvision::" in probe.stderr
        os.environ[SHIM_DECIDED] = "1" if needed else "0"
    if os.environ[SHIM_DECIDED] == "0":
        return
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(TORCHVISION_SHIM) not in paths:  # an xdist worker has it from the process that started it
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TORCHVISION_SHIM), os.environ.get("PYTHONPATH")]))
    runpy.run_path(str(TORCHVISION_SHIM / "sitecustomize.py"))  # and for imports in this process


_enable_torchvision_shim_if_needed()

# The signal tests expect a terminal's SIGHUP: when the suite itself runs under nohup,
# every child would inherit SIGHUP ignored, and gputui (rightly) keeps ignoring it.
# The tests of the nohup case start their children under nohup themselves.
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.fixture(scope="session", autouse=True)
def _no_real_user_files_for_shared_fixtures(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Session and module fixtures (which start before any test's own isolation) see a
    user of their own too.  Matplotlib's font cache is shared by the whole session so
    that each report child does not rebuild it."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate_user(monkeypatch, tmp_path_factory.mktemp("user"))
        monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path_factory.mktemp("matplotlib")))
        yield


@pytest.fixture(autouse=True)
def _no_real_user_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test's user folders lie under its tmp_path (tests/support/isolation.py);
    a run it left going there (a detached one outlives the test) is stopped, and fails it."""
    isolate_user(monkeypatch, tmp_path)
    yield
    state_home = tmp_path / USER_FOLDERS["XDG_STATE_HOME"]
    if (state_home / "gputui" / "live").is_dir():
        from tests.support.live import stop_leftovers

        left = stop_leftovers(state_home)
        assert not left, f"the test left these runs going (stopped now): {[run.name for run in left]}"


@functools.lru_cache(maxsize=1)
def _gpu_unavailable_reason() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            if pynvml.nvmlDeviceGetCount() == 0:
                return "NVML found no GPU"
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # any failure means: no usable GPU here
        return f"no NVIDIA GPU or driver ({type(exc).__name__}: {exc})"
    return None


# Most tests spend their time waiting on real child processes (workloads, recorders,
# terminals), so ``-n auto`` starts two workers a core: on 2 cores the parallel pass took
# 403 s against 525 s with one a core.  Capped: a TensorFlow run holds a few GB.
WORKERS_PER_CORE = 2
MAX_WORKERS = 16


def pytest_xdist_auto_num_workers(config) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(MAX_WORKERS, WORKERS_PER_CORE * cores)


def pytest_collection_modifyitems(config, items):
    reason = _gpu_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"GPU test skipped: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

"""Slurm integration (issue 24) on a real single-node Slurm (tests/support/cluster.py):
scripts/slurm-health-check.sh drains the node when gputui's quick check fails, and
leaves a healthy node idle.  The failure is planted for real: the check's working
directory sits on a 1 MiB tmpfs, far below host.disk_free's fail line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gputui.check.thresholds import DISK_FREE_FAIL_BYTES
from tests.support.cluster import START_TIMEOUT_S, SlurmCluster
from tests.support.leftovers import no_leftovers  # noqa: F401 - fixture
from tests.support.process import REPO, gputui_env, wait_for

pytestmark = [
    pytest.mark.usefixtures("no_leftovers"),
    # Real daemons (tests/support/cluster.py) on ports picked before they bind, and a
    # private Slurm per pytest process: alone, after the parallel pass, with one Slurm.
    pytest.mark.serial,
]

HEALTH_CHECK = REPO / "scripts" / "slurm-health-check.sh"


def _mount_tiny_tmpfs(where: Path) -> bool:
    where.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "gputui-tiny", str(where)], capture_output=True).returncode == 0


def _small_mounted_filesystem() -> Path | None:
    """A file system already below the fail line where mount is not allowed (a
    container's /dev or /dev/shm)."""
    for partition in psutil.disk_partitions(all=True):
        try:
            usage = shutil.disk_usage(partition.mountpoint)
        except OSError:
            continue
        if usage.total > 0 and usage.free < DISK_FREE_FAIL_BYTES:
            return Path(partition.mountpoint)
    return None


@pytest.fixture
def tiny_workdir(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "tiny"
    if not _mount_tiny_tmpfs(where):
        small = _small_mounted_filesystem()
        if small is None:
            pytest.skip(f"cannot mount a tmpfs and no mounted file system has under {DISK_FREE_FAIL_BYTES >> 30} GiB free")
        yield small
        return
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


@pytest.fixture
def slurm_node(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The cluster, its node resumed after the test (the health check never resumes)."""
    yield slurm_cluster
    if state_and_reason(slurm_cluster)[0].startswith("drain"):
        slurm_cluster.resume()
        # resumed, the node reads "idle*" (not responding) until slurmctld's ping comes back
        wait_for(lambda: state_and_reason(slurm_cluster)[0] == "idle", timeout=START_TIMEOUT_S, interval=0.2)


def run_health_check(cluster: SlurmCluster, tmp_path: Path, check_args: str = "") -> subprocess.CompletedProcess:
    """The script as slurmd runs a HealthCheckProgram: as root on the node, with this checkout's gputui."""
    env = {
        **gputui_env(tmp_path),
        "SLURM_CONF": str(cluster.conf),
        "GPUTUI": f"{sys.executable} -m gputui",
        "GPUTUI_PYTHON": sys.executable,
        "GPUTUI_CHECK_ARGS": check_args,
        "GPUTUI_HEALTH_DIR": str(tmp_path / "health"),
    }
    return subprocess.run([str(HEALTH_CHECK)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def state_and_reason(cluster: SlurmCluster) -> tuple[str, str]:
    _node, state, reason = f"{cluster.node_state()}  ".split(" ", 2)
    return state, reason.strip()


def test_the_health_check_drains_the_node_on_a_failed_check(slurm_node, tmp_path, tiny_workdir):
    assert state_and_reason(slurm_node)[0] == "idle"

    result = run_health_check(slurm_node, tmp_path, f"--workdir {tiny_workdir}")

    assert result.returncode == 1, result.stderr
    state, reason = state_and_reason(slurm_node)
    assert state.startswith("drain"), (state, reason, result.stderr)
    assert reason.startswith("gputui:") and "host.disk_free" in reason, reason
    kept = list((tmp_path / "health").glob("fail-*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["verdict"]["verdict"] == "fail"


def test_a_healthy_check_leaves_the_node_idle(slurm_node, tmp_path):
    result = run_health_check(slurm_node, tmp_path)

    assert result.returncode in (0, 1), result.stderr
    if result.returncode == 1:  # drained for a real fault of this host, e.g. a container's 64 MB /dev/shm
        pytest.skip(f"this host fails gputui check on its own: {result.stderr.strip()[-300:]}")
    assert state_and_reason(slurm_node) == ("idle", "none")
    assert json.loads((tmp_path / "health" / "latest.json").read_text())["verdict"]["verdict"] in ("ok", "warn")


# --- gputui fleet check through the real srun, then the report -------------------------


def gputui_with(env_extra: dict[str, str], args: list[str], tmp_path: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args], cwd=tmp_path, env={**gputui_env(tmp_path), **env_extra}, capture_output=True, text=True, timeout=timeout
    )


def test_fleet_check_through_srun_brings_each_node_back_and_the_report_reads_them(slurm_node, tmp_path):
    remote = f"env PYTHONPATH={REPO} {sys.executable} -m gputui"
    env = {"SLURM_CONF": str(slurm_node.conf)}
    done = gputui_with(env, ["fleet", "check", "--slurm", "--quick", "--out", "fleet", "--remote-gputui", remote, "--", "-N", "1"], tmp_path)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    node = json.loads((tmp_path / "fleet" / f"{slurm_node.node}.json").read_text())
    assert node["node"] == slurm_node.node and node["status"] in ("ok", "warn", "fail") and node["check"]["checks"]
    assert done.stdout.splitlines()[0].startswith(f"{slurm_node.node}: {node['status']}")
    recording = (tmp_path / "fleet" / f"{slurm_node.node}.jsonl").read_text().splitlines()
    assert json.loads(recording[0])["check"]["quick"] is True and json.loads(recording[-1])["type"] == "summary"
    report = gputui_with(env, ["fleet", "report", "fleet", "--out", "report"], tmp_path)
    assert report.stdout.startswith("fleet: 1 node") and (tmp_path / "report" / "fleet.md").exists(), report.stderr

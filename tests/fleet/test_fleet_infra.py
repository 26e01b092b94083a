"""The fleet tests' clusters work on their own: ssh reaches node-a and fails fast on
node-down; srun runs a step on the private Slurm's node.  The fixtures come from
tests/support/cluster.py (registered in tests/conftest.py)."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.support.leftovers import no_leftovers  # noqa: F401 - fixture

pytestmark = [
    pytest.mark.usefixtures("no_leftovers"),
    # Real daemons (tests/support/cluster.py) on ports picked before they bind, and a
    # private Slurm per pytest process: alone, after the parallel pass, with one Slurm.
    pytest.mark.serial,
]

QUICK_FAILURE_S = 10.0  # connection refused on loopback: well under ConnectTimeout


def ssh(hosts, host: str, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ssh", host, *command], env=hosts.env(), capture_output=True, text=True, timeout=60)


def test_ssh_runs_a_command_on_node_a(ssh_hosts):
    result = ssh(ssh_hosts, "node-a", "true")
    assert result.returncode == 0, result.stderr


def test_ssh_runs_this_checkouts_gputui_on_node_a(ssh_hosts):
    result = ssh(ssh_hosts, "node-a", f"{ssh_hosts.remote_gputui()} --version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()


def test_ssh_to_node_down_fails_quickly_with_255(ssh_hosts):
    started = time.monotonic()
    result = ssh(ssh_hosts, "node-down", "true")
    assert result.returncode == 255, result.stderr
    assert time.monotonic() - started < QUICK_FAILURE_S


def test_srun_runs_a_step_on_the_node(slurm_cluster):
    result = slurm_cluster.run(["srun", "-N1", "--ntasks-per-node=1", "hostname", "-s"])
    assert result.returncode == 0, result.stderr + slurm_cluster.logs()
    assert result.stdout.strip() == slurm_cluster.node

"""gputui fleet check over real SSH (issue 24): a private sshd on 127.0.0.1
(tests/support/cluster.py's ssh_hosts: Debian's openssh-server, a generated key) as
node-a, and node-down where nothing listens.  node-a's check comes back whole, node-down
is a result that says why, and the report reads both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.leftovers import no_leftovers  # noqa: F401 - fixture
from tests.support.process import user_folders

pytestmark = [
    pytest.mark.usefixtures("no_leftovers"),
    # A real sshd (tests/support/cluster.py) on a port picked before it binds, and a real
    # quick check of this machine through it: alone, after the parallel pass.
    pytest.mark.serial,
]


def test_two_hosts_one_unreachable_each_a_result(ssh_hosts, tmp_path: Path):
    (tmp_path / "hosts").write_text("node-a\nnode-down  # nothing listens there\n")
    env = {**ssh_hosts.env(), **user_folders(tmp_path / "local-user")}
    args = ["fleet", "check", "--hosts", "hosts", "--quick", "--out", "fleet", "--connect-timeout", "5", "--remote-gputui", ssh_hosts.remote_gputui()]
    done = subprocess.run([sys.executable, "-m", "gputui", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr  # one node unreachable
    good = json.loads((tmp_path / "fleet" / "node-a.json").read_text())
    down = json.loads((tmp_path / "fleet" / "node-down.json").read_text())
    assert good["status"] in ("ok", "warn") and good["check"]["verdict"]["verdict"] == good["status"], good
    assert (tmp_path / "fleet" / "node-a.jsonl").read_text().count("\n") > 2
    assert down["status"] == "unreachable" and "Connection refused" in down["reason"], down
    lines = done.stdout.splitlines()
    assert sum(line.startswith(("node-a:", "node-down:")) for line in lines) == 2
    report = subprocess.run(
        [sys.executable, "-m", "gputui", "fleet", "report", "fleet", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    data = json.loads(report.stdout)
    assert report.returncode == 1 and {n["node"]: n["status"] for n in data["nodes"]} == {"node-a": good["status"], "node-down": "unreachable"}

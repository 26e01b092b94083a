"""gputui fleet: the report over many nodes' checks finds exactly the planted outliers,
and the two engines (ssh, srun) bring each node's check back as a result, unreachable
nodes and nodes without gputui included.  The nodes are made from a real check
(docs/check-results/h200-check.json, an H200 on the device machine) with its per-GPU
results copied onto 4 GPUs.  The engines here are test doubles of ssh and srun on PATH
that run the node's script locally, as the real ones run it remotely;
tests/fleet/test_fleet_slurm.py and tests/fleet/test_fleet_ssh.py run the real ones."""

from __future__ import annotations

import base64
import copy
import gzip
import json
import os
import random
import stat
import sys
from pathlib import Path

import pytest

from gputui.errors import UserError
from gputui.fleet.node import node_script, split_output
from gputui.fleet.peers import build_report, load_report, read_node
from gputui.fleet.results import FAIL, NO_GPUTUI, OK, UNREACHABLE, WARN, node_result
from gputui.fleet.ssh import read_hostfile
from tests.support.process import REPO, gputui_env

H200 = REPO / "docs" / "check-results" / "h200-check.json"
GPUS = 4


def synthetic_node(seed: int, *, slow_gpu: int | None = None, link: str | None = None) -> dict:
    """A 4-GPU node's check JSON: the H200's per-GPU results copied to every GPU, each
    measured value within ±2 % (seeded); ``slow_gpu`` 10 % slow on every micro-benchmark
    and workload; ``link`` a PCIe link on every GPU, with host-device copies at half speed."""
    rng = random.Random(seed)
    real = json.loads(H200.read_text())
    check = {"header": copy.deepcopy(real["header"]), "verdict": real["verdict"], "checks": []}
    check["header"]["gpus"] = [dict(real["header"]["gpus"][0], index=i) for i in range(GPUS)]
    for item in real["checks"]:
        copies = [item] if "gpu0" not in item["id"] else [dict(item, id=item["id"].replace("gpu0", f"gpu{i}"), gpu=i) for i in range(GPUS)]
        for c in copies:
            c = dict(c)
            gpu = c.get("gpu")
            if isinstance(c.get("value"), float) and c["id"].startswith(("micro.", "workload.")):
                c["value"] = round(c["value"] * rng.uniform(0.98, 1.02), 2)
                if slow_gpu is not None and gpu == slow_gpu:
                    c["value"] = round(c["value"] * 0.90, 2)
                if link and c["id"].endswith((".h2d", ".d2h")):
                    c["value"] = round(c["value"] * 0.5, 2)
            if link and c["id"].endswith("pcie_link_loaded"):
                c["value"], c["status"] = link, "warn"
            check["checks"].append(c)
    return check


def write_fleet(folder: Path) -> None:
    for n in range(16):
        plant = {"slow_gpu": 2} if n == 5 else {"link": "Gen4 x16"} if n == 11 else {}
        node = {"fleet_node": 1, "node": f"node-{n:02d}", "status": "ok", "check": synthetic_node(n, **plant)}
        (folder / f"node-{n:02d}.json").write_text(json.dumps(node))


def test_sixteen_nodes_with_two_planted_outliers_flag_exactly_those_two(tmp_path):
    write_fleet(tmp_path)
    report = load_report([tmp_path], price=20.0)
    assert report.flagged == ["node-05 GPU2", "node-11"]
    assert report.exit_code == 1
    slow = {(o.check, o.gpu) for o in report.outliers if o.node == "node-05"}
    assert ("micro.matmul_bf16", 2) in slow and all(gpu == 2 for _, gpu in slow)
    assert {o.check for o in report.outliers if o.node == "node-11"} == {"micro.h2d", "micro.d2h", "pcie_link_loaded"}
    median, unit = report.medians["micro.matmul_bf16"]["NVIDIA H200"]
    measured = next(c["value"] for c in json.loads(H200.read_text())["checks"] if c["id"] == "micro.gpu0.matmul_bf16")
    assert unit == "TFLOP/s" and median == pytest.approx(measured, rel=0.02)  # the H200's own figure, give or take the ±2 %
    cost = report.cost_per_million(next(n for n in report.nodes if n.name == "node-00"))
    rate = next(v for (c, g), (v, _u) in report.nodes[0].values.items() if c == "workload.resnet50_tuned" and g == 0)
    assert cost is not None and 0.9 < cost / (20.0 / 3600 / (rate * GPUS) * 1e6) < 1.1


def test_a_fleet_without_outliers_exits_0_and_a_failed_node_exits_1(tmp_path):
    nodes = [read_node_dict(tmp_path, f"n{i}", synthetic_node(i)) for i in range(3)]
    assert build_report(nodes).flagged == [] and build_report(nodes).exit_code == 0
    failed = synthetic_node(9)
    failed["checks"].append({"id": "host.shm", "status": "fail", "value": 64, "unit": "MiB"})
    nodes.append(read_node_dict(tmp_path, "n9", failed, status="fail"))
    report = build_report(nodes)
    assert report.exit_code == 1 and report.nodes[-1].failed == ["host.shm: 64 MiB"]


def read_node_dict(folder: Path, name: str, check: dict, status: str = "ok"):
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"fleet_node": 1, "node": name, "status": status, "check": check}))
    return read_node(path)


def test_the_report_cli_writes_markdown_html_plots_and_json(tmp_path):
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    write_fleet(fleet)
    out = tmp_path / "report"
    done = gputui(["fleet", "report", str(fleet), "--out", str(out), "--json", "--price", "20"], tmp_path)
    assert done.returncode == 1, done.stderr  # outliers
    data = json.loads(done.stdout)
    assert data["flagged"] == ["node-05 GPU2", "node-11"] and len(data["nodes"]) == 16
    assert data["nodes"][0]["cost_per_million_samples"] > 0
    md = (out / "fleet.md").read_text()
    assert "node-05 GPU2: micro.matmul_bf16" in md and "fleet median" in md
    assert (out / "fleet-matmul_bf16.png").stat().st_size > 1000 and (out / "fleet-resnet50_tuned.png").exists()
    assert "data:image/png;base64," in (out / "fleet.html").read_text()
    text = gputui(["fleet", "report", str(fleet)], tmp_path)
    assert text.stdout.startswith("fleet: 16 nodes (16 ok); 2 outliers: node-05 GPU2, node-11")


def test_the_committed_single_machine_checks_read_as_a_fleet(tmp_path):
    files = [REPO / "docs" / "check-results" / name for name in ("h200-check.json", "h100-check.json", "2xh100-check.json")]
    report = load_report(files)
    assert [n.name for n in report.nodes] == ["h200-check", "h100-check", "2xh100-check"]
    assert all(n.gpus in (1, 2) for n in report.nodes) and "micro.matmul_bf16" in report.medians
    # an H100 is compared with H100s, not called a slow H200; and no H100 here is slow
    assert report.peer_groups[:2] == ["1x NVIDIA H100 80GB HBM3", "1x NVIDIA H200"] and report.flagged == []
    assert set(report.medians["micro.matmul_bf16"]) == {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("good\n-oProxyCommand=touch /tmp/x\n", r":2: '-oProxyCommand=touch': expected an ssh destination"),
        ("a\nb # comment\na slots=8\n", ":3: 'a' is listed twice"),
        ("# nothing\n\n", "no hosts in it"),
    ],
)
def test_a_hostfile_is_read_line_by_line_with_one_line_errors(tmp_path, text, expected):
    path = tmp_path / "hosts"
    path.write_text(text)
    with pytest.raises(UserError, match=expected):
        read_hostfile(path)


def test_a_hostfile_takes_mpi_slots_and_comments(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("# the rack\ngpu-01 slots=8\nroot@10.0.0.2  # spare\n[fe80::1]:2222\n")
    assert read_hostfile(path) == ["gpu-01", "root@10.0.0.2", "[fe80::1]:2222"]


def node_output(hostname: str, check: str, recording: str, status: int, width: int = 76) -> str:
    """What the node script prints: base64 in lines of ``width`` (base64's own 76; srun
    may break long lines further)."""

    def lines(data: bytes) -> str:
        text = base64.b64encode(data).decode()
        return "".join(text[i : i + width] + "\n" for i in range(0, len(text), width))

    recorded = lines(gzip.compress(recording.encode())) if recording else ""
    return f"@@gputui-fleet node {hostname}\n@@gputui-fleet check\n{lines(check.encode())}@@gputui-fleet recording\n{recorded}@@gputui-fleet exit {status}\n"


@pytest.mark.parametrize("width", [76, 7])  # 7: a line broken into pieces on its way back
def test_node_output_is_split_at_its_markers_and_decoded(width):
    out = split_output(node_output("gpu-07", '{"a": 1}', '{"h": 1}\n' * 100, 0, width))
    assert (out.hostname, out.check_json, out.recording, out.exit_status) == ("gpu-07", '{"a": 1}', '{"h": 1}\n' * 100, 0)


def test_node_results_are_classified():
    assert node_result("x", 255, "", "ssh: connect to host x port 22: Connection refused\n", 1.0).status == UNREACHABLE
    missing = node_result("x", 127, node_output("x", "", "", 127), "sh: 3: gputui: not found\n", 1.0)
    assert missing.status == NO_GPUTUI and "not found" in missing.reason
    assert node_result("x", None, "", "", 300.0).reason == "no answer before the timeout"


# --- the engines, with test doubles of ssh and srun ----------------------------------------

FAKE_SSH = r"""#!/bin/sh
# ssh's test double: the destination after "--", then the remote command, run here by sh
while [ "$1" != "--" ]; do shift; done; shift
host=$1; shift
case $host in down*) echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255 ;; esac
exec sh -c "$*"
"""

FAKE_SRUN = r"""#!/bin/sh
# srun's test double: two tasks on nodes "sim-a" and "sim-b", each stdout line labelled "N: " as --label does
while [ "$1" != "sh" ]; do shift; done; shift; shift   # past the srun options, to sh -c SCRIPT
for task in 0 1; do
  name=sim-a; [ $task = 1 ] && name=sim-b
  SLURMD_NODENAME=$name sh -c "$1" 2>/dev/null | sed -u "s/^/$task: /" &   # a line at a time, as srun writes
done
wait
"""


def fake_bin(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return folder


def gputui(args: list[str], tmp_path: Path, path_first: Path | None = None):
    import subprocess

    env = gputui_env(tmp_path)
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env['PATH']}"
    return subprocess.run([sys.executable, "-m", "gputui", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


REMOTE = f"env PYTHONPATH={REPO} {sys.executable} -m gputui"


@pytest.mark.serial  # a real quick check of this machine: after the parallel pass, alone
def test_the_ssh_engine_checks_each_host_and_keeps_the_unreachable_and_those_without_gputui(tmp_path):
    bin_dir = fake_bin(tmp_path, "ssh", FAKE_SSH)
    (tmp_path / "hosts").write_text("node-a\ndown-b\n")
    done = gputui(["fleet", "check", "--hosts", "hosts", "--out", "out", "--quick", "--remote-gputui", REMOTE], tmp_path, bin_dir)
    assert done.returncode == 1, done.stderr  # one node unreachable
    node = json.loads((tmp_path / "out" / "node-a.json").read_text())
    # healthy, as its own check judged this machine (a slow moment of its disk may warn)
    assert node["status"] == node["check"]["verdict"]["verdict"] and node["status"] in (OK, WARN), node
    lines = done.stdout.splitlines()
    assert any(line.startswith(f"node-a: {node['status']}") for line in lines), lines
    assert any(line.startswith("down-b: unreachable: ssh: connect to host down-b") for line in lines), lines
    assert json.loads((tmp_path / "out" / "node-a.jsonl").read_text().splitlines()[0])["check"]  # the check's recording header
    assert json.loads((tmp_path / "out" / "down-b.json").read_text())["status"] == UNREACHABLE
    missing = gputui(["fleet", "check", "--hosts", "hosts", "--out", "out2", "--quick", "--remote-gputui", "no-such-gputui"], tmp_path, bin_dir)
    assert json.loads((tmp_path / "out2" / "node-a.json").read_text())["status"] == NO_GPUTUI, missing.stdout
    report = gputui(["fleet", "report", "out"], tmp_path)
    assert report.returncode == 1 and "down-b: unreachable" in report.stdout


@pytest.mark.serial  # two real quick checks of this machine at once: after the parallel pass, so they share it only with each other
def test_the_slurm_engine_splits_srun_s_labelled_stream_into_nodes(tmp_path):
    """Each node's status is its own check's verdict, read whole from the interleaved stream.
    The two checks read this one disk at once, so either may warn of its speed: what the
    engine made of the verdict is checked, not the disk."""
    bin_dir = fake_bin(tmp_path, "srun", FAKE_SRUN)
    done = gputui(["fleet", "check", "--slurm", "--out", "out", "--quick", "--remote-gputui", REMOTE, "--", "-N", "2"], tmp_path, bin_dir)
    assert sorted(p.name for p in (tmp_path / "out").glob("*.json")) == ["sim-a.json", "sim-b.json"], done.stdout + done.stderr
    nodes = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "out").glob("*.json")}
    for name, node in nodes.items():
        assert node["node"] == node["hostname"] == name, node
        assert node["status"] == node["check"]["verdict"]["verdict"] and node["status"] in (OK, WARN, FAIL), node
        assert f"{name}: {node['status']}" in done.stdout, done.stdout
    assert done.returncode == (0 if all(node["status"] in (OK, WARN) for node in nodes.values()) else 1), done.stderr


def test_a_failed_check_is_a_failed_node(tmp_path):
    failed = synthetic_node(1)
    failed["verdict"] = {"verdict": "fail", "counts": {"fail": 1}}
    assert node_result("n", 1, node_output("n", json.dumps(failed), "", 1), "", 2.0).status == FAIL


def test_the_node_script_runs_check_with_the_options_passed_through():
    script = node_script("gputui", ["--quick", "--price", "2.5"])
    assert "gputui check --json --no-history --quick --price 2.5 --record" in script and "| base64" in script

"""What a fleet's nodes send cannot make a node vanish from the report, crash it, or
reach the operator's terminal raw: each case through the CLI (``python -m gputui``),
with test doubles of srun and ssh that print what a node might print.

A failing node and a healthy one under one name are both kept and the shared name is a
problem; NaN, Infinity, 1e400 and an int of 400 digits make their node ``bad-input``,
outside every median; ``$`` and control characters in names reach neither matplotlib's
math parser nor its warnings raw; a gzip bomb as a node's recording is refused within
the recording reader's bounds; a hostfile line too long for a host name is one line
before any ssh; a folder's stray JSON is skipped with a note; names, verdict keys and
ssh's stderr are printed escaped."""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.fleet.node import MAX_RECORDING_BYTES, split_output
from gputui.fmt import UNSAFE
from tests.fleet.test_fleet import fake_bin, gputui, node_output, synthetic_node
from tests.support.process import REPO, gputui_env

CHECK_RESULTS = REPO / "docs" / "check-results"

# srun's double: task N prints $CANNED/N (what a node's script printed), each line
# labelled "N: " as --label does, and $CANNED/N.err on stderr.
FAKE_SRUN = r"""#!/bin/sh
for out in "$CANNED"/[0-9]; do
  task=${out##*/}
  sed "s/^/$task: /" "$out"
  [ -f "$out.err" ] && sed "s/^/$task: /" "$out.err" >&2
done
exit 0
"""

# ssh's double: the destination after "--"; prints $CANNED/HOST, or fails as ssh does
# for a host whose name starts with "down" (its stderr with an escape sequence in it).
FAKE_SSH = r"""#!/bin/sh
while [ "$1" != "--" ]; do shift; done; shift
host=$1
echo "$host" >> "$CANNED/ssh-ran"
case $host in down*) printf 'ssh: connect to host %s: \033]0;PWNED\007Connection refused\n' "$host" >&2; exit 255 ;; esac
cat "$CANNED/$host"
"""


def canned(tmp_path: Path, outputs: dict[str, str]) -> Path:
    folder = tmp_path / "canned"
    folder.mkdir(exist_ok=True)
    for name, text in outputs.items():
        (folder / name).write_text(text)
    return folder


def fleet_cli(args: list[str], tmp_path: Path, engine: str, folder: Path) -> subprocess.CompletedProcess:
    """``gputui ARGS`` with the double of ``engine`` (srun or ssh) first on PATH."""
    bin_dir = fake_bin(tmp_path, engine, FAKE_SRUN if engine == "srun" else FAKE_SSH)
    env = {**gputui_env(tmp_path), "CANNED": str(folder)}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return subprocess.run([sys.executable, "-m", "gputui", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def check_json(seed: int, verdict: str = "ok") -> dict:
    check = synthetic_node(seed)
    check["verdict"] = {"verdict": verdict, "counts": {"ok": 30, verdict: 1} if verdict != "ok" else {"ok": 31}}
    return check


def said(check: dict, name: str, status: int = 0, recording: str = "") -> str:
    return node_output(name, json.dumps(check), recording, status)


def no_raw_controls(text: str) -> bool:
    return not UNSAFE.search(text.replace("\n", ""))


# --- one name, two nodes ----------------------------------------------------------------


def test_a_failing_node_and_a_healthy_one_under_one_name_are_both_kept_and_no_all_clear(tmp_path):
    """Before: the healthy node's file replaced the failing one's, and the report said
    "1 node (1 warn)", exit 0."""
    folder = canned(tmp_path, {"0": said(check_json(1, "fail"), "ubuntu", 1), "1": said(check_json(2), "ubuntu")})
    done = fleet_cli(["fleet", "check", "--slurm", "--out", "out"], tmp_path, "srun", folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert sorted(p.name for p in (tmp_path / "out").glob("*.json")) == ["ubuntu+2.json", "ubuntu.json"]
    assert "ubuntu: 2 nodes answered to this one name" in done.stdout and "1 name shared by several nodes: ubuntu" in done.stdout
    report = gputui(["fleet", "report", "out", "--json"], tmp_path)
    data = json.loads(report.stdout)
    assert report.returncode == 1, report.stderr
    assert sorted((n["node"], n["status"]) for n in data["nodes"]) == [("ubuntu (out/ubuntu+2.json)", "ok"), ("ubuntu (out/ubuntu.json)", "fail")]
    assert data["shared_names"] == {"ubuntu": ["ubuntu (out/ubuntu+2.json)", "ubuntu (out/ubuntu.json)"]}
    text = gputui(["fleet", "report", "out"], tmp_path).stdout
    assert text.startswith("fleet: 2 nodes (1 ok, 1 fail); no outliers; 1 name on several results: ubuntu")


def test_two_names_of_one_file_name_keep_two_files(tmp_path):
    """``gpu 1`` and ``gpu_1`` are both ``gpu_1.json`` as a file: before, one replaced the other."""
    folder = canned(tmp_path, {"0": said(check_json(1, "fail"), "gpu 1", 1), "1": said(check_json(2), "gpu_1")})
    done = fleet_cli(["fleet", "check", "--slurm", "--out", "out"], tmp_path, "srun", folder)
    assert done.returncode == 1 and sorted(p.name for p in (tmp_path / "out").glob("*.json")) == ["gpu_1+2.json", "gpu_1.json"]
    report = gputui(["fleet", "report", "out", "--json"], tmp_path)
    assert {n["node"]: n["status"] for n in json.loads(report.stdout)["nodes"]} == {"gpu 1": "fail", "gpu_1": "ok"}
    assert report.returncode == 1


def test_one_name_in_two_folders_is_both_nodes_and_a_problem(tmp_path):
    """Two plain check outputs named ``h200.json`` in two folders: before, two rows
    called h200 and exit 0."""
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(CHECK_RESULTS / "h200-check.json", tmp_path / folder / "h200.json")
    report = gputui(["fleet", "report", "a", "b", "--json"], tmp_path)
    data = json.loads(report.stdout)
    assert report.returncode == 1, report.stderr
    assert data["shared_names"] == {"h200": ["h200 (a/h200.json)", "h200 (b/h200.json)"]}
    assert [n["node"] for n in data["nodes"]] == ["h200 (a/h200.json)", "h200 (b/h200.json)"]
    same = gputui(["fleet", "report", "a", "a/h200.json"], tmp_path)  # one file named twice is read once
    assert same.returncode == 0 and same.stdout.startswith("fleet: 1 node (1 warn); no outliers"), same.stdout


# --- values that are not numbers a GPU measured --------------------------------------------


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "1" + "0" * 400, "-5.0"])
def test_a_value_that_is_not_a_finite_speed_makes_its_node_bad_input_and_stays_out_of_the_median(tmp_path, literal):
    """Before: NaN and Infinity went into the median (inf or nan, exit 0, the node not
    named), an int of 400 digits raised OverflowError."""
    nodes = {}
    for n in range(3):
        check = synthetic_node(n)
        nodes[f"n{n}"] = json.dumps({"fleet_node": 1, "node": f"n{n}", "status": "ok", "check": check})
    bad = json.loads(nodes["n2"])
    for item in bad["check"]["checks"]:
        if item["id"].startswith(("micro.", "workload.")) and isinstance(item.get("value"), float):
            item["value"] = "@VALUE@"
    nodes["n2"] = json.dumps(bad).replace('"@VALUE@"', literal)
    for name, text in nodes.items():
        (tmp_path / f"{name}.json").write_text(text)
    done = gputui(["fleet", "report", ".", "--json"], tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    data = json.loads(done.stdout)
    bad_node = next(n for n in data["nodes"] if n["node"] == "n2")
    assert bad_node["status"] == "bad-input" and "micro.gpu0.matmul_bf16" in bad_node["reason"] and bad_node["values"] == {}
    assert "expected a finite number from 0 to 1e+12" in bad_node["reason"]
    good = [v for n in data["nodes"] if n["node"] != "n2" for v in n["values"]["micro.matmul_bf16"].values()]
    assert data["medians"]["micro.matmul_bf16"]["NVIDIA H200"]["median"] == pytest.approx(statistics.median(good))
    text = gputui(["fleet", "report", "."], tmp_path).stdout
    assert "n2: bad-input: micro.gpu0.matmul_bf16" in text and "inf" not in text.split("\n\n")[1] and "nan" not in text.split("\n\n")[1]


# --- names that matplotlib would read -------------------------------------------------------


def test_dollars_and_control_characters_in_names_draw_plots_and_print_nothing_raw(tmp_path):
    """Before: ``$\\x$`` in a node name raised inside matplotlib's math-text parser, and an
    ESC in a GPU name reached the terminal raw in matplotlib's missing-glyph warning."""
    for n in range(2):
        check = synthetic_node(n)
        for gpu in check["header"]["gpus"]:
            gpu["name"] = "H200 $\\y$ \x1b]0;PWNED\x07"
        (tmp_path / f"n{n}.json").write_text(json.dumps({"fleet_node": 1, "node": f"gpu$\\x${n}\x1b[31m", "status": "ok", "check": check}))
    done = gputui(["fleet", "report", ".", "--out", "report"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report" / "fleet-matmul_bf16.png").stat().st_size > 1000
    assert no_raw_controls(done.stdout) and no_raw_controls(done.stderr), done.stderr
    assert "gpu$\\x$0\\x1b[31m" in done.stdout


# --- what a node sends back -----------------------------------------------------------------


def bomb_output(name: str) -> str:
    """A node's output whose recording is 200 MiB of zeros, gzipped to ~200 KB."""
    bomb = base64.b64encode(gzip.compress(b"\0" * (200 * 1024 * 1024), 9)).decode()
    lines = "".join(bomb[i : i + 76] + "\n" for i in range(0, len(bomb), 76))
    return said(check_json(1), name).replace("@@gputui-fleet recording\n", "@@gputui-fleet recording\n" + lines)


def test_a_gzip_bomb_as_a_node_s_recording_is_refused_within_the_reader_s_bounds(tmp_path):
    """Before: 209 MB written to NODE.jsonl."""
    folder = canned(tmp_path, {"node-a": bomb_output("node-a")})
    (tmp_path / "hosts").write_text("node-a\n")
    done = fleet_cli(["fleet", "check", "--hosts", "hosts", "--out", "out"], tmp_path, "ssh", folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "node-a: ok (31 ok) in under 1 s; recording not kept: it decompresses to over 250 times its compressed size" in done.stdout
    assert not (tmp_path / "out" / "node-a.jsonl").exists()
    assert json.loads((tmp_path / "out" / "node-a.json").read_text())["note"].startswith("recording not kept")


def test_a_recording_over_the_fleet_s_own_bound_is_refused(monkeypatch):
    monkeypatch.setattr("gputui.fleet.node.MAX_RECORDING_BYTES", 1000)
    out = split_output(node_output("n", "{}", '{"a": 1}\n' * 200, 0))
    assert out.recording == "" and out.recording_refused.startswith("recording not kept: it decompresses to over 1,000 bytes")
    assert MAX_RECORDING_BYTES >= 64 * 1024**2  # under it, the ratio bound has not begun to count


def test_names_verdict_keys_and_ssh_stderr_are_printed_escaped(tmp_path):
    """Before: each reached the terminal raw (an OSC sequence retitles it)."""
    check = check_json(1)
    check["verdict"]["counts"] = {"ok\x1b]0;PWNED\x07": 31}
    folder = canned(tmp_path, {"0": said(check, "evil\x1b[2J"), "0.err": "srun: \x1b]0;PWNED\x07 task 0 said something\n"})
    done = fleet_cli(["fleet", "check", "--slurm", "--out", "out"], tmp_path, "srun", folder)
    assert no_raw_controls(done.stdout) and no_raw_controls(done.stderr), done.stdout
    assert "evil\\x1b[2J: ok (31 ok\\x1b]0;PWNED\\x07) in under 1 s" in done.stdout
    (tmp_path / "hosts").write_text("down-b\n")
    ssh = fleet_cli(["fleet", "check", "--hosts", "hosts", "--out", "out2"], tmp_path, "ssh", folder)
    assert ssh.returncode == 1 and no_raw_controls(ssh.stdout), ssh.stdout
    assert "down-b: unreachable: ssh: connect to host down-b: \\x1b]0;PWNED\\x07Connection refused" in ssh.stdout


# --- the hostfile ---------------------------------------------------------------------------


def test_a_legal_253_character_host_is_checked_and_kept_in_a_shortened_file(tmp_path):
    """Before: 'File name too long' as a traceback, after ssh had run."""
    host = ".".join(["a" * 63] * 3 + ["a" * 61])  # 253 characters, labels of at most 63: a legal FQDN
    assert len(host) == 253
    folder = canned(tmp_path, {host: said(check_json(1), "whatever")})
    (tmp_path / "hosts").write_text(host + "\n")
    done = fleet_cli(["fleet", "check", "--hosts", "hosts", "--out", "out"], tmp_path, "ssh", folder)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    (saved,) = (tmp_path / "out").glob("*.json")
    assert len(saved.name) < 255 and "~" in saved.name and json.loads(saved.read_text())["node"] == host


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("a" * 254, "'" + "a" * 60 + "'…: a host name of 254 characters; expected at most 253 (DNS's limit)"),
        ("x" * 40 + "@host:22", "@host:22': a user name of 40 characters; expected at most 32"),
        ("root@" + "a" * 100_000, "'root@" + "a" * 55 + "'…: a host name of 100000 characters"),
        ("gpu\x1b]0;PWNED\x07", "'gpu\\x1b]0;PWNED\\x07': expected an ssh destination"),
    ],
)
def test_a_long_or_odd_hostfile_line_is_one_line_and_exit_2_before_any_ssh(tmp_path, line, expected):
    folder = canned(tmp_path, {})
    (tmp_path / "hosts").write_text(f"ok-host\n{line}\n")
    done = fleet_cli(["fleet", "check", "--hosts", "hosts", "--out", "out"], tmp_path, "ssh", folder)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("gputui: error: hosts:2: ") and expected in done.stderr, done.stderr
    assert no_raw_controls(done.stderr) and len(done.stderr) < 300
    assert not (folder / "ssh-ran").exists() and not (tmp_path / "out").exists()


# --- the results folder ---------------------------------------------------------------------


def test_a_folder_s_stray_json_is_skipped_with_a_note_and_a_damaged_node_file_is_a_bad_node(tmp_path):
    """Before: one stray JSON refused the whole report ("verdict: expected the JSON of
    gputui check --json"), exit 2."""
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for n in range(2):
        (fleet / f"n{n}.json").write_text(json.dumps({"fleet_node": 1, "node": f"n{n}", "status": "ok", "check": synthetic_node(n)}))
    (fleet / "package.json").write_text('{"name": "x", "version": "1.0"}')
    (fleet / "list.json").write_text("[1, 2]")
    first = gputui(["fleet", "report", "fleet", "--json"], tmp_path)
    (fleet / "fleet.json").write_text(first.stdout)  # the report's own JSON, kept beside the nodes
    done = gputui(["fleet", "report", "fleet"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("fleet: 2 nodes (2 ok); no outliers")
    notes = done.stderr.splitlines()
    assert sorted(notes) == [
        f"note: fleet/{name}.json: skipped: not a node result; expected the JSON of gputui fleet check or gputui check --json"
        for name in ("fleet", "list", "package")
    ]
    assert sorted(s["file"] for s in json.loads(gputui(["fleet", "report", "fleet", "--json"], tmp_path).stdout)["skipped"]) == [
        "fleet/fleet.json",
        "fleet/list.json",
        "fleet/package.json",
    ]
    named = gputui(["fleet", "report", "fleet/package.json"], tmp_path)  # a file named on its own is refused, as before
    assert named.returncode == 2 and "package.json: not a node result" in named.stderr
    (fleet / "n2.json").write_text('{"fleet_node": 1, "node": "n2", "status": "fa')  # a node's file cut short
    (fleet / "n3.json").write_text(json.dumps({"fleet_node": 1, "node": "n3", "status": "sideways", "check": None}))
    damaged = gputui(["fleet", "report", "fleet"], tmp_path)
    assert damaged.returncode == 1 and damaged.stdout.startswith("fleet: 4 nodes (2 ok, 2 bad-input)"), damaged.stdout
    assert "n2: bad-input: not JSON (line 1, column" in damaged.stdout
    assert "n3: bad-input: status: expected one of ok, warn, fail, unreachable, no-gputui, error" in damaged.stdout

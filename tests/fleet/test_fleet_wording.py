"""The line `gputui fleet check` prints as each node finishes says how long it took in
words that read as time spent: a node answering within half a second is "under 1 s",
never "in 0 s" (as if nothing had run)."""

from __future__ import annotations

import re

import pytest

from gputui.fleet.results import NodeResult
from tests.fleet.test_fleet_hostile import canned, check_json, fleet_cli, said


@pytest.mark.parametrize(
    "seconds, took",
    [(0.0, "in under 1 s"), (0.5, "in under 1 s"), (0.99, "in under 1 s"), (1.0, "in 1 s"), (12.4, "in 12 s"), (1234.0, "in 1,234 s")],
)
def test_a_node_line_says_how_long_it_took(seconds, took):
    line = NodeResult("node-a", "unreachable", "no answer before the timeout", seconds=seconds).line()
    assert line == f"node-a: unreachable: no answer before the timeout {took}"


def test_a_node_that_answers_at_once_is_not_said_to_take_0_s(tmp_path):
    (tmp_path / "hosts").write_text("node-a\n")
    folder = canned(tmp_path, {"node-a": said(check_json(1), "node-a")})
    done = fleet_cli(["fleet", "check", "--hosts", "hosts", "--out", "out"], tmp_path, "ssh", folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^node-a: ok \(31 ok\) in (under 1|[1-9][\d,]*) s  -> out/node-a.json$", done.stdout, re.MULTILINE), done.stdout
    assert " in 0 s" not in done.stdout

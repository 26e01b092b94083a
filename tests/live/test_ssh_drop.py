"""A real SSH drop: ``ssh -tt`` into the private sshd of the fleet tests
(tests/support/cluster.py), a training loop started there, then the ssh client killed as a
dropped connection kills it.  The loop goes on; a second ``ssh -tt`` session attaches,
sees the run from its start (readings from before the drop), stops it with ``s`` and
``y``, and nothing of the run is left.  Once with the dashboard, once with ``--detach``.

The loop prints 900 samples/s until the test, after the drop, makes a file named
``slow``, then 100: an attached dashboard that says "100 ... now" with its chart scaled
to 1.0k holds the readings from both sides of the drop (100s alone scale it to 100)."""

from __future__ import annotations

import os
import shlex
import signal
import sys

import pytest

from gputui.record.recording import read_recording
from tests.support.cluster import SshHosts, ssh_hosts  # noqa: F401  (the fixture)
from tests.support.live import run_processes, stop_leftovers, wait_live, wait_readings
from tests.support.process import gone, wait_for
from tests.support.tmux import Tmux, needs_tmux, wait_gone

pytestmark = [pytest.mark.serial, needs_tmux]  # a private sshd on a port of its own, real terminals

FAST_THEN_SLOW = """\
import itertools, os, time
for step in itertools.count(1):
    time.sleep(0.2)
    rate = 100.0 if os.path.exists("slow") else 900.0
    print(f"step {step} | {rate:.1f} samples/s", flush=True)
"""


def ssh_words(hosts: SshHosts, remote: str) -> list[str]:
    """A shell command line that runs ``remote`` over ``ssh -tt node-a`` (a terminal there)."""
    env = hosts.env()
    return ["exec", "env", shlex.quote(f"HOME={env['HOME']}"), shlex.quote(f"PATH={env['PATH']}"), "ssh", "-tt", "node-a", shlex.quote(remote)]


def drop_and_come_back(hosts: SshHosts, tmp_path, first_remote: str, attach_remote: str, first_shows: str) -> None:
    (tmp_path / "loop.py").write_text(FAST_THEN_SLOW)
    state = hosts.remote_user_root / "state"
    terminals = Tmux(tmp_path)
    try:
        client = terminals.start_command(ssh_words(hosts, first_remote), size=(120, 40))
        terminals.wait_for(first_shows, timeout=60)
        live = wait_live(state)
        processes = run_processes(live)
        seen = wait_readings(live.recording, 6)  # readings at 900 before the drop
        os.kill(client, signal.SIGKILL)  # the ssh client is gone: sshd hangs up the session's terminal
        wait_gone([client])
        (tmp_path / "slow").touch()
        wait_readings(live.recording, seen + 3)  # nobody watches: the run goes on
        assert live.alive()

        viewer = terminals.start_command(ssh_words(hosts, attach_remote), size=(120, 40), session="u")
        terminals.wait_for(r"100 samples/s now", timeout=60, session="u")
        terminals.wait_for(r"1\.0k┤", session="u")  # the readings from before the drop are in the chart
        terminals.keys("s", session="u")
        terminals.wait_for(r"Stop #1 loop\.py\?", session="u")
        terminals.keys("y", session="u")
        terminals.wait_for(r"stopped: by the dashboard \(pid \d+ on /dev/pts/\d+\)", session="u")
        wait_for(lambda: gone(processes), timeout=30)
        terminals.escape_from(r"Enter/Esc close", session="u")  # the summary: it may open after the outcome shows
        terminals.keys("q", session="u")
        wait_gone([viewer])
    finally:
        terminals.kill_server()
        left = stop_leftovers(state)
    assert not left
    outcome = read_recording(live.kept_path or live.recording).summary.outcome
    assert outcome.kind == "stopped" and outcome.message.startswith("stopped: by the dashboard (pid ")


def test_a_dropped_ssh_session_leaves_the_dashboard_s_run_going_and_a_new_one_attaches_and_stops_it(ssh_hosts, tmp_path):  # noqa: F811
    gputui = ssh_hosts.remote_gputui()
    first = f"cd {shlex.quote(str(tmp_path))} && exec {gputui} -- {shlex.quote(sys.executable)} loop.py"
    drop_and_come_back(ssh_hosts, tmp_path, first, f"exec {gputui} attach", first_shows=r"900 samples/s now")


def test_a_detached_run_started_over_ssh_outlives_the_session_and_a_new_one_attaches_and_stops_it(ssh_hosts, tmp_path):  # noqa: F811
    gputui = ssh_hosts.remote_gputui()
    first = f"cd {shlex.quote(str(tmp_path))} && {gputui} --record r.jsonl --detach -- {shlex.quote(sys.executable)} loop.py; exec sleep 600"
    drop_and_come_back(ssh_hosts, tmp_path, first, f"exec {gputui} attach", first_shows=r"runs detached \(pid \d+\)")

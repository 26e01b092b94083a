"""The probe's channel is bounded: datagrams of a capped size, at a capped rate, from the
run's process tree alone, each kind of excess dropped with one note the recording
keeps; and a folder a killed gputui left behind goes when the next channel is made."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from gputui.probe import BURST, MAX_DATAGRAM, ProbeChannel, remove_stale_folders
from gputui.protocol import decode
from tests.support.other_user import other_user  # noqa: F401  (the fixture)
from tests.support.process import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCM_CREDENTIALS and /proc: Linux")


def received(channel: ProbeChannel, send) -> list[str]:
    """The lines ``channel`` passed on while ``send()`` ran (and it drained)."""
    lines: list[str] = []
    channel.start(lines.append)
    try:
        send()
    finally:
        channel.close()
    return lines


def notes(lines: list[str]) -> list[dict]:
    payloads = [decode(line) for line in lines if line.startswith("@gputui ")]
    return [p for p in payloads if p is not None and p["event"] == "probe_status" and p.get("state") == "dropped"]


def sender() -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    return sock


def test_an_oversized_datagram_is_dropped_with_one_note():
    channel = ProbeChannel()

    def send():
        with sender() as sock:
            for data in (b"first", b"x" * (MAX_DATAGRAM + 1), b"y" * (MAX_DATAGRAM + 100), b"last"):
                sock.sendto(data, channel.path)

    lines = received(channel, send)
    (note,) = notes(lines)
    assert note["reason"] == "size" and str(MAX_DATAGRAM) in note["note"]
    assert [line for line in lines if not line.startswith("@gputui ")] == ["first", "last"]


def test_a_flood_is_cut_to_the_rate_with_one_note():
    channel = ProbeChannel()
    count = int(BURST) * 3

    def send():
        with sender() as sock:
            for i in range(count):
                while True:
                    try:
                        sock.sendto(f"line {i}".encode(), channel.path)
                        break
                    except BlockingIOError:
                        time.sleep(0.001)

    lines = received(channel, send)
    passed = [line for line in lines if line.startswith("line ")]
    assert int(BURST) <= len(passed) < count  # the burst, and what the rate refilled meanwhile
    (note,) = notes(lines)
    assert note["reason"] == "rate"


def test_only_the_runs_process_tree_is_heard():
    """The run is a child that starts a grandchild: both are heard; this process, the
    child's parent, is not (one note, naming its pid)."""
    channel = ProbeChannel()
    script = textwrap.dedent(
        """
        import socket, subprocess, sys
        path = sys.argv[1]
        def say(text):
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                s.sendto(text.encode(), path)
        if len(sys.argv) > 2:
            say("grandchild")
        else:
            say("child")
            subprocess.run([sys.executable, __file__, path, "again"], check=True)
            sys.stdin.read()  # until the test has sent its own
        """
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(script)
        lines: list[str] = []
        channel.start(lines.append)
        run = subprocess.Popen([sys.executable, path, channel.path], stdin=subprocess.PIPE)
        try:
            channel.watch(run.pid)
            deadline = time.monotonic() + 30
            while "grandchild" not in lines and time.monotonic() < deadline:
                time.sleep(0.02)
            with sender() as sock:
                sock.sendto(b"outsider", channel.path)
                sock.sendto(b"outsider again", channel.path)
        finally:
            run.communicate(b"", timeout=30)
            channel.close()
    assert [line for line in lines if not line.startswith("@gputui ")] == ["child", "grandchild"]
    (note,) = notes(lines)
    assert note["reason"] == "sender" and f"pid {os.getpid()}" in note["note"]


def test_a_folder_a_killed_gputui_left_behind_goes_when_the_next_channel_is_made():
    code = "import os, signal; from gputui.probe import ProbeChannel; c = ProbeChannel(); print(c.directory, flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    killed = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    left = killed.stdout.strip()
    assert killed.returncode == -9 and os.path.isdir(left) and os.path.exists(os.path.join(left, "s"))
    live = ProbeChannel()  # this process's own: kept
    try:
        assert not os.path.exists(left)
        assert os.path.isdir(live.directory)
        assert live.directory not in remove_stale_folders()
        assert os.path.isdir(live.directory)
    finally:
        live.close()


def test_an_older_gputuis_folder_goes_only_once_no_one_answers_its_socket(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    listening, silent = tmp_path / "gputui-probe-abc123", tmp_path / "gputui-probe-def456"
    for folder in (listening, silent):
        folder.mkdir(mode=0o700)
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    bound.bind(str(listening / "s"))
    gone = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    gone.bind(str(silent / "s"))
    gone.close()  # its gputui died: the socket file stays, no one behind it
    try:
        assert remove_stale_folders() == [str(silent)]
        assert listening.is_dir() and not silent.exists()
    finally:
        bound.close()


def test_another_user_cannot_send_to_the_channel(other_user):  # noqa: F811
    """A second local user, made for the test, cannot even reach the socket (its folder
    is the user's alone), so it never gets as far as the sender check."""
    channel = ProbeChannel()
    send = "import socket, sys\ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\ns.sendto(b'from another user', sys.argv[1])\n"
    lines: list[str] = []
    channel.start(lines.append)
    try:
        done = other_user.run([sys.executable, "-I", "-c", send, channel.path], timeout=60)
    finally:
        channel.close()
    assert done.returncode != 0 and "PermissionError" in done.stderr, done.stderr
    assert "from another user" not in lines

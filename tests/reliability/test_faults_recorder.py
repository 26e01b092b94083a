"""The headless recorder killed mid-run, under nohup, in its own session without a
terminal, and with its terminal closed: the recording reads back to its last whole
line, and no process is left (``no_leftovers``)."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from gputui.record import events as ev
from gputui.record.recording import read_recording
from tests.support.leftovers import no_leftovers  # noqa: F401  (the fixture)
from tests.support.presets import slow_presets
from tests.support.process import gputui_env, try_read, wait_for

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
    pytest.mark.usefixtures("no_leftovers"),
]


def gputui_args(tmp_path: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gputui",
        "--presets",
        str(slow_presets(tmp_path)),
        "--record",
        str(out),
        "--preset",
        "slow",
        "--interval",
        "0.1",
        "--no-history",
        "--headless",
    ]


def start(tmp_path: Path, out: Path, how: str) -> subprocess.Popen:
    """``nohup``: as `nohup gputui ... &` leaves it; ``setsid``: its own session, no
    controlling terminal, nothing on stdin."""
    argv = gputui_args(tmp_path, out)
    if how == "nohup":
        argv = ["nohup", *argv]
    return subprocess.Popen(
        argv, cwd=tmp_path, env=gputui_env(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )


def sampling(out: Path, at_least: int = 3):
    rec = try_read(out)
    return rec if rec is not None and rec.events_of(ev.STARTED) and len(rec.samples) >= at_least else None


EXIT_CODES = {signal.SIGTERM: 143, signal.SIGINT: 130}


@pytest.mark.parametrize("how", ["nohup", "setsid"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: signal.Signals(s).name)
def test_the_recorder_killed_mid_run_leaves_a_readable_recording_and_no_process(tmp_path, how, sig):
    out = tmp_path / "r.jsonl"
    proc = start(tmp_path, out, how)
    try:
        seen = len(wait_for(lambda: sampling(out), timeout=60).samples)
        proc.send_signal(sig)
        if sig == signal.SIGHUP:
            # A hangup (a closed terminal; nohup or not) is no request to stop: it keeps recording.
            wait_for(lambda: sampling(out, at_least=seen + 5), timeout=60)
            assert proc.poll() is None
            proc.send_signal(signal.SIGTERM)
            sig = signal.SIGTERM
        code = proc.wait(timeout=60)
        stderr = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    rec = read_recording(out)
    assert len(rec.samples) >= 3
    if sig == signal.SIGKILL:
        assert rec.summary is None and rec.cut
        return
    assert code == EXIT_CODES[sig], stderr
    assert "Traceback" not in stderr
    assert rec.cut is None and rec.summary.outcome.kind == "stopped"
    assert rec.events_of(ev.STOPPING)[0].data["reason"] == f"received {signal.Signals(sig).name}"


def test_closing_the_terminal_leaves_the_run_going_and_sigterm_then_finishes_the_recording(tmp_path):
    """The terminal (a pty) goes away while the recorder writes its progress lines to it:
    SIGHUP, then writes to a hung-up terminal fail; the run and its recording go on
    (gputui attach shows it) until it is stopped, and the recording gets its summary."""
    out = tmp_path / "r.jsonl"
    master, slave = pty.openpty()

    def take_the_terminal() -> None:  # in the child: new session, this pty as its terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        gputui_args(tmp_path, out),
        cwd=tmp_path,
        env=gputui_env(tmp_path),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=take_the_terminal,
    )  # noqa: PLW1509 - the only way to take a controlling tty
    os.close(slave)
    try:
        seen = len(wait_for(lambda: sampling(out), timeout=60).samples)
        os.close(master)  # the terminal window closes
        wait_for(lambda: sampling(out, at_least=seen + 5), timeout=60)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 143
    rec = read_recording(out)
    assert rec.cut is None and rec.summary.outcome.kind == "stopped"
    assert rec.events_of(ev.STOPPING)[0].data["reason"] == "received SIGTERM"

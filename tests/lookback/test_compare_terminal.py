"""`gputui compare` in a terminal: its table fits the terminal's width, long cells
wrapped within their column (the first hour's list: lines ran past 300 columns); to a
pipe it stays one line a row, for grep and scripts."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

from tests.support.lookback import RECORDINGS
from tests.support.process import gputui_env, run_gputui

RUNS = [str(RECORDINGS / name) for name in ("torch-resnet50.jsonl", "torch-resnet50-input-bound.jsonl", "torch-resnet50-input-fed.jsonl")]


def in_a_terminal(args: list[str], tmp_path, columns: int) -> str:
    """gputui's output on a pseudo-terminal ``columns`` wide (no COLUMNS in its
    environment: the terminal's own size counts)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {k: v for k, v in gputui_env(tmp_path).items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-m", "gputui", *args], cwd=tmp_path, env=env, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its side
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(timeout=60) == 0, out.decode(errors="replace")
    finally:
        proc.kill()
        os.close(master)
    return out.decode().replace("\r\n", "\n")


def characters(text: str) -> list[str]:
    """Every character the table shows but spaces and its rule under the heading."""
    return sorted("".join("".join(line.split()) for line in text.splitlines() if not set(line) <= set("- ")))


def test_in_a_terminal_the_table_fits_its_width_and_keeps_every_word(tmp_path):
    piped = run_gputui(["compare", *RUNS], tmp_path, timeout=60).stdout
    assert max(len(line) for line in piped.splitlines()) > 150  # one line a row: wider than the terminal below
    shown = in_a_terminal(["compare", *RUNS], tmp_path, 100)
    lines = shown.rstrip("\n").splitlines()
    assert max(len(line) for line in lines) <= 100, shown
    assert characters(shown) == characters(piped), shown  # wrapped, nothing left out
    finding = next(i for i, line in enumerate(lines) if line.startswith("findings"))
    assert "Input-bound:" in lines[finding] and lines[finding + 1].startswith(" " * 20), shown  # the rest under its column

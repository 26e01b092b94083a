"""A user's command on a pseudo-terminal, and its output passed through unchanged: the
runner's side (what the command sees, what gputui reads) and the face's (what reaches
gputui's own terminal, or a log)."""

from __future__ import annotations

import os
import sys
import textwrap
import time

from gputui.run.pseudo_terminal import resize
from gputui.run.runner import Runner
from gputui.session.pass_through import PassThrough, stopped_inside_a_sequence

ASKS_ITS_TERMINAL = textwrap.dedent(
    """
    import shutil, sys
    print("stdout", sys.stdout.isatty(), "stderr", sys.stderr.isatty(), "size", *shutil.get_terminal_size())
    print("to stderr", file=sys.stderr, flush=True)
    for i in range(3):
        print(f"\\r{i * 50}%", end="", flush=True)
    print()
    raise SystemExit("the last words")
    """
)


def run_on_terminal(code: str, size=(97, 31)) -> tuple[Runner, list, list[bytes]]:
    lines: list = []
    chunks: list[bytes] = []
    runner = Runner([sys.executable, "-c", code], terminal=size, on_line=lines.append, on_bytes=chunks.append)
    runner.start()
    try:
        assert runner.wait(30) is not None
    finally:
        runner.close()
    return runner, lines, chunks


def test_the_command_sees_a_terminal_of_the_size_asked_on_stdout_and_stderr():
    runner, lines, chunks = run_on_terminal(ASKS_ITS_TERMINAL)
    assert lines[0].text == "stdout True stderr True size 97 31"
    # stderr arrives in order with stdout, as on a terminal (merged: labelled stdout)
    assert [line.text for line in lines if not line.progress][1:] == ["to stderr", "100%", "the last words"]
    assert [line.text for line in lines if line.progress] == ["0%", "50%"]
    # the raw bytes are what a terminal would show: CR LF line ends, the \r redraws
    raw = b"".join(chunks)
    assert b"to stderr\r\n\r0%\r50%\r100%\r\n" in raw
    # the outcome still quotes the command's last words, now on the one merged stream
    assert runner.outcome is not None and "the last words" in runner.outcome.message


def test_a_pipe_run_is_unchanged_without_a_terminal():
    lines: list = []
    runner = Runner([sys.executable, "-c", "import sys; print(sys.stdout.isatty()); print('e', file=sys.stderr)"], on_line=lines.append)
    runner.start()
    runner.wait(30)
    runner.close()
    assert ("stdout", "False") in [(line.stream, line.text) for line in lines]
    assert ("stderr", "e") in [(line.stream, line.text) for line in lines]


def test_a_failing_pass_through_never_stops_the_reading():
    lines: list = []

    def broken(_chunk: bytes) -> None:
        raise OSError("the terminal went away")

    runner = Runner([sys.executable, "-c", "print('a'); print('b')"], terminal=(80, 24), on_line=lines.append, on_bytes=broken)
    runner.start()
    runner.wait(30)
    runner.close()
    assert [line.text for line in lines] == ["a", "b"]


# --- the face ---------------------------------------------------------------------------


def read_all(fd: int) -> bytes:
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # a pseudo-terminal's EIO, or nothing more
            return data
        if not chunk:
            return data
        data += chunk


def test_off_a_terminal_the_output_is_text_its_colours_gone_its_redraws_kept():
    read_end, write_end = os.pipe()
    face = PassThrough(write_end)
    assert not face.is_terminal
    face.output(b"\x1b[32mgreen\x1b[0m line\r\n\r10%")
    face.output(b"\r20%\r\nlast words, no newline")
    face.close()
    os.close(write_end)
    assert read_all(read_end) == b"green line\n10%\r20%\nlast words, no newline\n"
    os.close(read_end)


def test_on_a_terminal_the_output_passes_unchanged_and_the_status_keeps_to_the_last_row(monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    master, slave = os.openpty()
    os.set_blocking(master, False)
    resize(slave, 100, 30)
    face = PassThrough(slave, messages_here=True)
    assert face.is_terminal and face.child_size() == (100, 29)
    face.start()
    face.flush()
    setup = read_all(master)
    assert b"\x1b[1;29r" in setup  # the scrolling region stops above the status row
    chunk = b"\x1b[1mepoch 1\x1b[0m\r\n\rtrain:  50%|#####     | 5/10"
    face.output(chunk)
    face.status("gputui status")
    face.message("gputui: a finding")
    face.close()
    written = read_all(master)
    os.close(slave)
    os.close(master)
    # (the terminal's own line discipline turns a lone \n into \r\n)
    assert written.startswith(chunk.replace(b"\r\n", b"\r\r\n"))
    assert b"\x1b7\x1b[30;1H\x1b[2Kgputui status\x1b8" in written
    # a message after a bar that has not ended starts a line of its own
    assert written.index(b"5/10") < written.index(b"\x1b8\r\ngputui: a finding\r\n")
    assert written.endswith(b"\x1b7\x1b[r\x1b[30;1H\x1b[2K\x1b8")  # the whole terminal scrolls again


def test_no_status_is_drawn_inside_a_sequence_the_command_has_not_finished(monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    master, slave = os.openpty()
    os.set_blocking(master, False)
    resize(slave, 80, 24)
    face = PassThrough(slave)
    face.start()
    face.flush()
    read_all(master)
    face.output(b"colour \x1b[3")  # the rest of the sequence comes in the next read
    face.status("not now")
    face.flush()
    assert b"not now" not in read_all(master)
    face.output(b"1mred\x1b[0m")
    face.status("now")
    face.flush()
    assert b"now" in read_all(master)
    face.close()
    os.close(slave)
    os.close(master)


def test_where_a_sequence_or_a_character_is_cut():
    assert stopped_inside_a_sequence(b"abc\x1b[")
    assert stopped_inside_a_sequence(b"abc\x1b]8;;http://x")
    assert stopped_inside_a_sequence("é".encode()[:1])
    assert stopped_inside_a_sequence("€".encode()[:2])
    assert not stopped_inside_a_sequence(b"abc\x1b[0m")
    assert not stopped_inside_a_sequence(b"abc\x1b]8;;http://x\x07link")
    assert not stopped_inside_a_sequence("done €".encode())
    assert not stopped_inside_a_sequence(b"")


def test_a_reader_that_stops_reading_never_blocks_gputui_and_what_it_missed_is_said():
    read_end, write_end = os.pipe()
    face = PassThrough(write_end)
    line = b"x" * 1023 + b"\n"
    began = time.monotonic()
    for _ in range(8 * 1024):  # 8 MiB: far more than a pipe holds, and than may wait
        face.output(line)  # returns at once though nobody reads
    assert time.monotonic() - began < 5
    os.set_blocking(read_end, False)
    got = b""

    def read_what_is_there() -> None:
        nonlocal got
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 0.5:
            try:
                chunk = os.read(read_end, 1 << 20)
            except BlockingIOError:
                time.sleep(0.01)
                continue
            got += chunk
            quiet_since = time.monotonic()

    read_what_is_there()  # the reader comes back
    face.output(b"the last line\n")
    face.flush()
    read_what_is_there()
    face.close()
    os.close(write_end)
    os.close(read_end)
    assert got.endswith(b"bytes of the output not shown here: the reader fell behind; the recording keeps its lines]\r\nthe last line\n")
    assert len(got) < 6 << 20  # what could not wait was dropped, not kept

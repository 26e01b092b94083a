"""Atomic writes keep what the user set up: the file's mode, and a symlink to it."""

from __future__ import annotations

import errno
import os
import socket
import stat
import threading
import time

import pytest

from gputui.safe_write import write_atomic, write_atomic_with


def test_a_new_file_gets_the_usual_mode_and_an_existing_one_keeps_its_own(tmp_path):
    umask = os.umask(0o022)
    try:
        new = tmp_path / "report.md"
        write_atomic(new, "hello\n")
        assert stat.S_IMODE(new.stat().st_mode) == 0o644  # not mkstemp's 0600
        kept = tmp_path / "presets.toml"
        kept.write_text("old\n")
        kept.chmod(0o640)
        write_atomic(kept, "new\n")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640
        assert kept.read_text() == "new\n"
    finally:
        os.umask(umask)


def test_a_symlinked_file_is_written_through_its_link(tmp_path):
    target = tmp_path / "dotfiles" / "presets.toml"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "presets.toml"
    link.symlink_to(target)
    write_atomic(link, "new\n")
    assert link.is_symlink()
    assert target.read_text() == "new\n"


# --- what is not a regular file is never replaced by one (issue 26, class 1) -------------


def device_copy(tmp_path, name: str, minor: int):
    """A private copy of /dev/null (minor 3) or /dev/full (minor 7), as the issue's test made."""
    path = tmp_path / name
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"mknod is not allowed here ({exc})")
    return path


def test_a_character_device_is_written_into_and_stays_a_device(tmp_path):
    null = device_copy(tmp_path, "null", 3)
    write_atomic(null, "report\n")
    write_atomic_with(null, lambda handle: handle.write(b"csv\n"), binary=True)
    assert stat.S_ISCHR(null.stat().st_mode)
    link = tmp_path / "out.md"  # a symlink to a device: through the link, into the device
    link.symlink_to(null)
    write_atomic(link, "x\n")
    assert link.is_symlink() and stat.S_ISCHR(null.stat().st_mode)


def test_a_full_device_fails_the_write_and_stays_a_device(tmp_path):
    full = device_copy(tmp_path, "full", 7)
    with pytest.raises(OSError) as caught:
        write_atomic(full, "x" * 100_000)
    assert caught.value.errno == errno.ENOSPC
    assert stat.S_ISCHR(full.stat().st_mode)


def test_a_fifo_with_a_reader_gets_the_text_and_one_without_is_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="a FIFO with no reader"):
        write_atomic(fifo, "nobody listens\n")  # refused, not blocked
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    deadline = time.monotonic() + 10
    while True:  # the reader's open() may come a moment after the thread starts
        try:
            write_atomic(fifo, "through the pipe\n")
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    reader.join(10)
    assert got == [b"through the pipe\n"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_directory_socket_or_block_device_is_refused_and_left_alone(tmp_path):
    with pytest.raises(IsADirectoryError):
        write_atomic(tmp_path, "x")
    sock_path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        with pytest.raises(OSError, match="not a file, a character device or a FIFO"):
            write_atomic(sock_path, "x")
        assert stat.S_ISSOCK(sock_path.stat().st_mode)
    finally:
        server.close()
    block = tmp_path / "loop"
    try:
        os.mknod(block, stat.S_IFBLK | 0o600, os.makedev(7, 0))
    except OSError:
        return  # no mknod here: the socket and directory cases stand
    with pytest.raises(OSError, match="block device"):
        write_atomic(block, "x")
    assert stat.S_ISBLK(block.stat().st_mode)


def test_a_backup_is_no_more_readable_than_the_file_it_keeps(tmp_path):
    umask = os.umask(0o022)
    try:
        secret = tmp_path / "presets.toml"
        secret.write_text('[presets.a]\nenv = { WANDB_API_KEY = "s3cret" }\n')
        secret.chmod(0o600)
        backup = tmp_path / "presets.toml.bak"
        write_atomic(secret, "new\n", backup=backup)
        assert stat.S_IMODE(backup.stat().st_mode) == 0o600 and "s3cret" in backup.read_text()
        kept = tmp_path / "presets.toml.edited"
        write_atomic_with(kept, lambda handle: handle.write(b"edit"), binary=True, like=secret)
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    finally:
        os.umask(umask)

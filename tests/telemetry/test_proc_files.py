"""read_whole: a /proc or /sys file whole, as open().read() gives it, with the
system calls alone (a host sample reads a few dozen such files a tick)."""

import os
import subprocess
import sys

import pytest

from gputui.telemetry import proc_files
from gputui.telemetry.proc_files import read_whole


@pytest.mark.parametrize("name", ["stat", "io", "status", "cmdline"])
def test_a_process_file_reads_as_open_reads_it(name):
    path = f"/proc/{os.getpid()}/{name}"
    if not os.path.exists(path):
        pytest.skip(f"no {path} here (not Linux)")
    with open(path, "rb") as fh:
        expected = fh.read()
    got = read_whole(path)
    if name == "stat":  # counters move between the two reads: the same process, as many fields
        assert got.split()[:2] == expected.split()[:2] and got.split()[3] == expected.split()[3]
        assert len(got.split()) == len(expected.split())
    elif name in ("io", "status"):  # the same keys, in order
        assert [line.split(b":")[0] for line in got.splitlines()] == [line.split(b":")[0] for line in expected.splitlines()]
    else:
        assert got == expected


def test_a_file_longer_than_one_read_comes_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(proc_files, "CHUNK", 1000)
    data = os.urandom(4321)
    (tmp_path / "big").write_bytes(data)
    assert read_whole(str(tmp_path / "big")) == data
    (tmp_path / "exact").write_bytes(data[:2000])  # a multiple of the chunk: the empty read ends it
    assert read_whole(str(tmp_path / "exact")) == data[:2000]


def test_a_missing_file_or_a_process_gone_raises_as_open_does(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_whole(str(tmp_path / "absent"))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("no /proc here")
    with pytest.raises((FileNotFoundError, ProcessLookupError)):
        read_whole(f"/proc/{child.pid}/stat")


def test_no_descriptor_is_left_open(tmp_path):
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc/self/fd here")
    (tmp_path / "f").write_bytes(b"x")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        read_whole(str(tmp_path / "f"))
    assert len(os.listdir("/proc/self/fd")) == before

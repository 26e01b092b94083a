"""Every write goes through one door (gputui.safe_write): ``--record`` (with or without
``--force``), ``check --metrics-file`` and ``--markdown``, ``export`` and ``report --out``
refuse a directory, a block device, a socket and a FIFO with no reader, and every one of
them says so before any work starts; a FIFO with a reader and a character device are
written into, never replaced."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from tests.support.leftovers import no_leftovers  # noqa: F401  (the fixture)
from tests.support.process import REPO, run_gputui, start_gputui

pytestmark = pytest.mark.usefixtures("no_leftovers")

RECORDING = REPO / "docs" / "recordings" / "torch-resnet50.jsonl"
BLOCK_DEVICE = "is a block device: gputui writes only files, character devices and FIFOs"


def make_target(tmp_path: Path, kind: str) -> Path:
    """A path of the kind a user might name by mistake; a block device node only where
    mknod is allowed (root), and one no driver answers to (major 240, local use), so
    that even a writer that got through could touch no disk."""
    if kind == "/dev/full":
        return Path("/dev/full")
    path = tmp_path / kind
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "block":
        try:
            os.mknod(path, stat.S_IFBLK | 0o600, os.makedev(240, 0))
        except OSError as exc:
            pytest.skip(f"cannot make a block device node here (not root: uid {os.geteuid()}; {exc.strerror})")
    return path


WHY = {
    "directory": "is a directory, expected a file",
    "fifo": "a FIFO with no reader",
    "/dev/full": "No space left on device",
    "block": BLOCK_DEVICE,
}


def one_error(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


# --- --record ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["block", "directory", "fifo"])
def test_record_with_force_refuses_what_is_not_a_file_and_starts_nothing(tmp_path, kind):
    """A block device was written onto (every other writer refused one); a FIFO with no
    reader hung the run before it started, in an open() no signal could end."""
    target = make_target(tmp_path, kind)
    marker = tmp_path / "started"
    began = time.monotonic()
    result = run_gputui(["--record", str(target), "--force", "--no-history", "--headless", "--", "touch", str(marker)], tmp_path, timeout=30)
    assert result.returncode == 2, result.stderr
    assert one_error(result) == f"gputui: error: {target}: cannot write the recording ({WHY[kind]})"
    assert not marker.exists(), "the command ran"
    assert time.monotonic() - began < 20
    assert stat.S_IFMT(os.stat(target).st_mode) == {"block": stat.S_IFBLK, "directory": stat.S_IFDIR, "fifo": stat.S_IFIFO}[kind]


def test_record_without_force_refuses_a_block_device_as_an_existing_file(tmp_path):
    target = make_target(tmp_path, "block")
    result = run_gputui(["--record", str(target), "--no-history", "--headless", "--", "true"], tmp_path, timeout=30)
    assert result.returncode == 2
    assert "already exists" in one_error(result)


# --- gputui check --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["directory", "fifo", "/dev/full", "block"])
@pytest.mark.parametrize("option, what", [("--metrics-file", "the metrics"), ("--markdown", "the Markdown report")])
def test_check_refuses_an_output_it_cannot_write_before_the_check_starts(tmp_path, kind, option, what):
    """Was: refused only once the whole check had run, and its verdict never printed."""
    target = make_target(tmp_path, kind)
    began = time.monotonic()
    result = run_gputui(["check", "--quick", "--no-history", option, str(target)], tmp_path, timeout=300)
    took = time.monotonic() - began
    assert result.returncode == 2, result.stderr
    assert one_error(result) == f"gputui: error: {target}: cannot write {what} ({WHY[kind]})"
    assert result.stdout == "", "the check started"  # not one stage's line
    assert took < 10, f"took {took:.1f} s"  # gputui's start alone: the check itself is not begun


def test_check_writes_its_metrics_into_a_fifo_with_a_reader(tmp_path):
    """Checked at the start and held to the end: the reader sees one writer, so the metrics
    reach it whole (a check that opened it and let go at the start would end its read)."""
    fifo = make_target(tmp_path, "fifo")
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = run_gputui(["check", "--quick", "--no-history", "--skip", "micro,workload", "--metrics-file", str(fifo)], tmp_path, timeout=300)
    reader.join(30)
    assert result.returncode in (0, 1), result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("verdict:")
    assert got and b"# TYPE " in got[0] and got[0].endswith(b"\n")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


# --- export and report ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["directory", "fifo", "/dev/full", "block"])
def test_export_refuses_its_output_before_reading_the_recording(tmp_path, kind):
    """The output is checked first: the recording named here does not even exist."""
    target = make_target(tmp_path, kind)
    result = run_gputui(["export", str(tmp_path / "missing.jsonl"), "--csv", str(target), "--force"], tmp_path, timeout=60)
    assert result.returncode == 2
    line = one_error(result)
    assert line.startswith(f"gputui: error: {target}: "), line
    assert (WHY[kind] if kind != "directory" else "is a directory, expected a file to write") in line


@pytest.mark.parametrize("kind", ["block", "fifo"])
def test_report_out_refuses_what_is_not_a_folder_before_reading_the_recording(tmp_path, kind):
    """Was: the recording read, then "File exists" from making the folder."""
    target = make_target(tmp_path, kind)
    result = run_gputui(["report", str(tmp_path / "missing.jsonl"), "--out", str(target)], tmp_path, timeout=60)
    assert result.returncode == 2
    assert one_error(result) == f"gputui: error: --out {target}: cannot write the report (not a directory, expected a folder for report.md and its plots)"


def test_report_out_refuses_a_report_file_it_cannot_write_before_reading_the_recording(tmp_path):
    out = tmp_path / "rep"
    out.mkdir()
    os.mkfifo(out / "report.md")
    result = run_gputui(["report", str(tmp_path / "missing.jsonl"), "--out", str(out)], tmp_path, timeout=60)
    assert result.returncode == 2
    assert one_error(result) == f"gputui: error: --out {out}: cannot write the report (report.md: a FIFO with no reader)"


def test_a_report_into_a_good_folder_is_still_written(tmp_path):
    out = tmp_path / "rep"
    result = run_gputui(["report", str(RECORDING), "--out", str(out)], tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (out / "report.md").is_file()


def test_a_write_that_fails_only_at_the_end_still_prints_the_verdict(tmp_path):
    """Claimed at the start, the FIFO's reader goes away during the check: the metrics are
    lost (one line, exit 74, as for a recording), the verdict is not."""
    fifo = make_target(tmp_path, "fifo")
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # there at the start
    proc = start_gputui(["check", "--quick", "--no-history", "--skip", "micro,workload", "--metrics-file", str(fifo)], tmp_path)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the first stage has begun: the FIFO was claimed before it
        assert first.startswith("gputui check: "), first
        os.close(reader)
        reader = -1
        out, err = proc.communicate(timeout=300)
    finally:
        if reader >= 0:
            os.close(reader)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 74, err
    assert out.strip().splitlines()[-1].startswith("verdict:")
    assert err.strip().splitlines() == [f"gputui: error: {fifo}: cannot write the metrics (Broken pipe)"]

"""The headless check's lines: a check that is not ok says its cause and what to do right
there, and ``--verbose`` says where every expectation comes from, without ``--json``."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from gputui.check import preflight
from gputui.check.preflight_host import ReadTest
from gputui.check.result import FAIL, INFO, OK, PREFLIGHT, WARN, CheckResult, skipped
from gputui.check.verdict_text import progress_lines
from gputui.cli.check_headless import ProgressLines
from gputui.cli.main import main

MIB = 1024**2
ADVICE = "Start the container with more: docker run --shm-size=16g ..."
SOURCE = "room for DataLoader workers' batches in flight"


def _shm(status: str) -> CheckResult:
    return CheckResult(
        id="host.shm",
        group=PREFLIGHT,
        name="/dev/shm size",
        status=status,
        value=64,
        unit="MiB",
        expected=4096,
        expected_source=SOURCE,
        detail="/dev/shm",
        cause="/dev/shm is only 64 MiB" if status != OK else None,
        advice=ADVICE if status != OK else None,
    )


def _printed(result: CheckResult, *, verbose: bool = False) -> str:
    stream = io.StringIO()
    ProgressLines(stream, verbose=verbose).on_result(result)
    return stream.getvalue()


def test_a_failing_line_prints_its_cause_what_to_do_and_where_its_expectation_comes_from():
    text = _printed(_shm(FAIL))
    assert text.splitlines() == [
        "  [FAIL] /dev/shm size: 64 MiB (expected 4,096 MiB); /dev/shm",
        "         Cause: /dev/shm is only 64 MiB",
        f"         What to do: {ADVICE}",
        f"         Expected from: {SOURCE}",
    ]


def test_a_warning_line_prints_its_advice_too():
    assert f"What to do: {ADVICE}" in _printed(_shm(WARN))


def test_an_info_or_skipped_line_prints_its_advice_and_says_its_cause_once():
    missing = CheckResult(
        id="workload.gpu0.resnet50_tuned",
        group=PREFLIGHT,
        name="ResNet-50",
        status=INFO,
        cause="the run ended without a result: exited 2",
        advice="install the PyTorch stack",
    )
    assert _printed(missing).splitlines()[1:] == ["         Cause: the run ended without a result: exited 2", "         What to do: install the PyTorch stack"]
    line = skipped("host.disk_read", PREFLIGHT, "Disk read speed", "the read took no measurable time")
    assert _printed(line).count("no measurable time") == 1


def test_an_ok_line_is_one_line_and_verbose_adds_its_expectation_source():
    assert _printed(_shm(OK)).splitlines() == ["  [  ok] /dev/shm size: 64 MiB (expected 4,096 MiB); /dev/shm"]
    assert _printed(_shm(OK), verbose=True).splitlines()[1:] == [f"         Expected from: {SOURCE}"]
    plain = CheckResult(id="driver.version", group=PREFLIGHT, name="NVIDIA driver", status=INFO, value="580.1")
    assert len(_printed(plain, verbose=True).splitlines()) == 1  # nothing expected, nothing to source


def test_every_line_is_escaped_for_the_terminal():
    hostile = _shm(FAIL)
    hostile.cause = "another process used this GPU (pid 7 evil\x1b]0;pwned\x07)"
    lines = progress_lines(hostile)
    assert not any("\x1b" in line or "\x07" in line for line in lines)
    assert "evil\\x1b]0;pwned\\x07" in lines[1]


def _slow_disk(directory: Path, size_bytes: int, **kwargs) -> ReadTest:
    return ReadTest(directory=directory, size_bytes=size_bytes, pass_seconds=[1.0, 0.9], direct=True)


def test_gputui_check_prints_what_to_do_under_a_failing_check(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(preflight, "measure_read_throughput", _slow_disk)
    code = main(["check", "--quick", "--skip", "micro", "--no-history", "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1 and "[FAIL] Disk read speed: 75 MB/s (expected 500 MB/s)" in out
    assert "         What to do: Keep datasets on local NVMe" in out
    assert "         Expected from: streaming a JPEG dataset at 3,000 images/s needs ~330 MB/s" in out
    assert "Expected from: room for a dataset and checkpoints" not in out  # ok lines stay one line


def test_gputui_check_verbose_gives_every_expectation_its_source(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gputui", "check", "--quick", "--skip", "micro", "--no-history", "--verbose", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    lines = proc.stdout.splitlines()
    disk_free = next(i for i, line in enumerate(lines) if "Free disk in the working directory" in line)
    assert "Expected from: room for a dataset and checkpoints" in "\n".join(lines[disk_free + 1 : disk_free + 4])
    assert "Expected from: streaming a JPEG dataset at 3,000 images/s needs ~330 MB/s" in proc.stdout


def test_whole_numbers_have_thousands_separators_as_the_fractional_ones_do():
    from gputui.check.verdict_text import value_text

    assert value_text(1370, "MB/s") == "1,370 MB/s"
    assert value_text(24106, "MiB") == "24,106 MiB"
    assert value_text(1847.4, "MB/s") == "1,847 MB/s"
    assert value_text(16, "cores") == "16 cores"

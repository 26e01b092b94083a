"""Faults of the child: each through `gputui --record` as a user runs it, asserting that
the recording is finished and readable and that no process is left (``no_leftovers``)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from gputui.record import events as ev
from gputui.record.recording import read_recording
from tests.support.leftovers import no_leftovers  # noqa: F401  (the fixture)
from tests.support.presets import write_preset
from tests.support.process import start_gputui

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
    pytest.mark.usefixtures("no_leftovers"),
]

RSS_BOUND_MB = 400  # generous: gputui idles near 60 MB; an unbounded queue of 1M lines is far more


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for row in f:
                if row.startswith("VmRSS:"):
                    return int(row.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def record(tmp_path: Path, code: str, timeout: float | None = None, limit: float = 120) -> tuple[int, str, float, float]:
    """Run the child under `gputui --record`; (exit code, stderr, peak RSS MB, seconds)."""
    presets = write_preset(tmp_path, code, timeout)
    out = tmp_path / "r.jsonl"
    t0 = time.monotonic()
    proc = start_gputui(["--presets", str(presets), "--record", str(out), "--preset", "fault", "--interval", "0.2", "--no-history"], tmp_path)
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.append(proc.stderr.read()), daemon=True)
    reader.start()
    peak = 0.0
    try:
        while proc.poll() is None and time.monotonic() - t0 < limit:
            peak = max(peak, rss_mb(proc.pid))
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(10)
    return proc.returncode, "".join(stderr), peak, time.monotonic() - t0


def finished(tmp_path: Path):
    rec = read_recording(tmp_path / "r.jsonl")
    assert rec.cut is None and rec.summary is not None
    return rec


def test_a_crashing_child_is_signaled_and_recorded(tmp_path):
    code, stderr, _, _ = record(tmp_path, "import os, signal\nprint('about to crash', flush=True)\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert code == 1, stderr
    outcome = finished(tmp_path).summary.outcome
    assert outcome.kind == "signaled" and outcome.signal == "SIGSEGV"
    assert "Traceback" not in stderr


def test_a_child_that_hangs_and_ignores_sigterm_is_killed_after_its_timeout(tmp_path):
    child = """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("hanging", flush=True)
        time.sleep(600)
    """
    code, stderr, _, took = record(tmp_path, child, timeout=2)
    assert code == 1, stderr
    outcome = finished(tmp_path).summary.outcome
    assert outcome.kind == "timeout" and outcome.signal == "SIGKILL"
    assert took < 60  # the timeout, the 5 s grace, and a slow start on a loaded machine


# A grandchild that leaves the run's process group and session, ignoring SIGTERM too.
SETSID_GRANDCHILD = """
    import os, signal, subprocess, sys, time
    code = "import os, signal, time; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN); print('detached', os.getpid(), flush=True); time.sleep(600)"
    subprocess.Popen([sys.executable, "-c", code])
    time.sleep({child_sleep})
"""


@pytest.mark.parametrize("child_sleep, timeout", [(1.5, None), (600, 2)], ids=["child-exits", "child-times-out"])
def test_a_grandchild_that_calls_setsid_is_still_stopped(tmp_path, child_sleep, timeout):
    _, stderr, _, _ = record(tmp_path, SETSID_GRANDCHILD.format(child_sleep=child_sleep), timeout=timeout)
    assert "Traceback" not in stderr
    rec = finished(tmp_path)
    detached = [e for e in rec.events_of(ev.OUTPUT) if e.data["text"].startswith("detached ")]
    assert detached, "the grandchild never started"
    # no_leftovers fails the test if the detached grandchild is still running.


def test_a_flood_of_a_million_lines_ends_promptly_after_the_timeout_with_bounded_memory(tmp_path):
    child = """
        import sys, time
        out = sys.stdout
        for i in range(1_000_000):
            out.write(f"line {i}\\n")
        out.flush()
        time.sleep(600)
    """
    code, stderr, peak, took = record(tmp_path, child, timeout=5, limit=240)
    assert code == 1, stderr
    rec = finished(tmp_path)
    assert rec.summary.outcome.kind == "timeout"
    assert took < 90, f"took {took:.0f} s to finish after a 5 s timeout"
    assert peak < RSS_BOUND_MB, f"gputui's RSS reached {peak:.0f} MB"


def test_100_mb_without_a_newline_is_kept_to_one_capped_line_with_bounded_memory(tmp_path):
    child = """
        import sys
        chunk = "x" * (1 << 20)
        for _ in range(100):
            sys.stdout.write(chunk)
        sys.stdout.flush()
        print("\\nafter", flush=True)
    """
    code, stderr, peak, _ = record(tmp_path, child, limit=240)
    assert code == 0, stderr
    texts = [e.data["text"] for e in finished(tmp_path).events_of(ev.OUTPUT)]
    assert texts[-1] == "after"
    assert texts[0].startswith("xxx") and len(texts[0]) <= 2001
    assert peak < RSS_BOUND_MB, f"gputui's RSS reached {peak:.0f} MB"


def test_invalid_utf8_and_escape_garbage_are_recorded_as_plain_text(tmp_path):
    child = r"""
        import os, sys
        garbage = b"\xff\xfe bad \xc3( utf8 \x1b]0;title\x07\x1b[2J\x1b[31mred\x1b[0m \x9b1;1H \x00\x07\x08 end\n"
        os.write(1, garbage * 50)
        os.write(2, garbage)
        os.write(1, bytes(b for b in range(256) if b not in (10, 13)) + b"\n")
    """
    code, stderr, _, _ = record(tmp_path, child)
    assert code == 0, stderr
    texts = [e.data["text"] for e in finished(tmp_path).events_of(ev.OUTPUT)]
    assert len(texts) == 52
    for text in texts:
        assert "\x1b" not in text and "\x07" not in text and "\x00" not in text
    assert "red" in texts[0] and texts[0].endswith(" end")
    assert "Traceback" not in stderr
    assert "\x1b" not in stderr  # the progress lines show the child's last words escaped


def test_a_child_out_of_host_memory_is_classified_oom(tmp_path):
    child = """
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
        hog = []
        while True:
            hog.append(bytearray(64 << 20))
    """
    code, stderr, _, _ = record(tmp_path, child)
    assert code == 1, stderr
    outcome = finished(tmp_path).summary.outcome
    assert outcome.kind == "oom", outcome
    assert "host memory" in outcome.message
    assert "Traceback" not in stderr


@pytest.mark.gpu
def test_a_child_out_of_gpu_memory_is_classified_oom(tmp_path):
    child = """
        import torch
        hog = []
        while True:  # 1 GiB at a time until CUDA refuses
            hog.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
    """
    code, stderr, _, _ = record(tmp_path, child, limit=300)
    assert code == 1, stderr
    outcome = finished(tmp_path).summary.outcome
    assert outcome.kind == "oom", outcome
    assert "CUDA out of memory" in outcome.message

"""Recordings made in a test for report/compare/export: a cut copy, a check recording."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from gputui.check.result import CheckResult
from tests.support.process import REPO

RECORDINGS = REPO / "docs" / "recordings"
TRACES = REPO / "tests" / "data" / "traces"
OWN_TRAINING = REPO / "docs" / "own-training-results" / "cpu"


def cut_copy(source: Path, dest: Path, keep_share: float = 0.6) -> Path:
    """``source`` cut like a SIGKILL would leave it: the first lines whole, then half a line."""
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    keep = int(len(lines) * keep_share)
    dest.write_text("".join(lines[:keep]) + lines[keep][: len(lines[keep]) // 2], encoding="utf-8")
    return dest


def write_lines(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def without_gpus(source: Path, dest: Path) -> Path:
    """``source`` as a machine without a GPU records it: no GPU in the header or the
    samples, and no summary, so the figures are rebuilt from what is left."""
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    records[0]["gpus"] = []
    records[0]["gpu_unavailable_reason"] = "no NVIDIA driver"
    for record in records:
        if record.get("type") == "sample":
            record["gpus"] = []
    return write_lines(dest, [r for r in records if r.get("type") != "summary"])


def check_recording(path: Path, hostname: str, results: list[CheckResult], verdict: str) -> Path:
    """A small ``gputui check`` recording: header with the check options, one event per check."""
    header = {
        "type": "header",
        "schema": 1,
        "interval": 1.0,
        "host": {"hostname": hostname, "os": "Linux", "cpu_model": "Xeon", "cpu_logical": 16},
        "driver_version": "580.95.05",
        "gpus": [{"index": 0, "name": "NVIDIA H200", "memory_total": 150754820096, "temp_slowdown_c": 89.0}],
        "check": {"quick": True, "price_per_hour": None},
    }
    events = [{"type": "event", "t": float(i), "event": "check", **r.to_dict()} for i, r in enumerate(results)]
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = {"type": "summary", "window": "all", "duration_s": 10.0, "samples": 0, "check": {"verdict": verdict, "counts": counts}}
    return write_lines(path, [header, *events, summary])


def power_limit(**changes: object) -> CheckResult:
    """GPU 0's power-limit check, at its 700 W (``changes`` replace fields)."""
    fields: dict = dict(
        id="gpu0.power_limit", group="preflight", name="power limit", status="ok", value=700.0, unit="W", expected=700.0, expected_source="datasheet", gpu=0
    )
    return CheckResult(**{**fields, **changes})


def power_limit_lowered(**changes: object) -> CheckResult:
    """A failed check: GPU 0's power limit lowered to 450 W of its 700 W (``changes``
    replace fields: the cause, the advice)."""
    return power_limit(**{"status": "fail", "value": 450.0, "cause": "the limit was lowered", "advice": "ask the provider", **changes})


def two_check_recordings(tmp_path: Path) -> tuple[Path, Path]:
    fast = [
        power_limit(),
        CheckResult(
            id="micro.gpu0.matmul_bf16",
            group="micro",
            name="bf16 matmul",
            status="ok",
            value=800.0,
            unit="TFLOPS",
            expected=850.0,
            expected_source="datasheet x0.85",
            gpu=0,
        ),
        CheckResult(id="host.shm", group="preflight", name="shared memory", status="ok", value=64.0, unit="GiB"),
    ]
    slow = [
        power_limit_lowered(cause="the power limit was lowered", advice="ask the provider to restore 700 W"),
        CheckResult(
            id="micro.gpu0.matmul_bf16",
            group="micro",
            name="bf16 matmul",
            status="warn",
            value=600.0,
            unit="TFLOPS",
            expected=850.0,
            expected_source="datasheet x0.85",
            gpu=0,
        ),
        CheckResult(id="host.disk", group="preflight", name="disk read", status="skipped", cause="no fio"),
    ]
    return (check_recording(tmp_path / "node-a.jsonl", "node-a", fast, "ok"), check_recording(tmp_path / "node-b.jsonl", "node-b", slow, "fail"))


def with_started_at(tmp_path, name: str, source: str, started: dt.datetime):
    """A fixture copied into a runs folder with its own start time."""
    lines = (RECORDINGS / source).read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    header["started_at"] = started.isoformat(timespec="seconds")
    path = tmp_path / name
    path.write_text(json.dumps(header) + "\n" + "".join(lines[1:]), encoding="utf-8")
    return path

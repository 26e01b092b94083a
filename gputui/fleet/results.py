"""A node's result, as the fleet check gathers it and the fleet report reads it.

Each node is kept in the output folder as ``NODE.json`` (what the node's ``gputui check
--json`` said, wrapped with how the node was reached) and ``NODE.jsonl`` (the check's
recording, when there is one).  A node that could not be reached, or that has no
gputui, is a result too: its status says so and ``reason`` says why.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from gputui.check.verdict_text import CheckJson
from gputui.fleet.node import NOT_FOUND, parse_check, split_output
from gputui.safe_write import write_atomic

# How a node ended up.  The first three are the check's own verdict.
OK, WARN, FAIL = "ok", "warn", "fail"
UNREACHABLE = "unreachable"  # the engine could not run anything there
NO_GPUTUI = "no-gputui"  # reached, but gputui is not installed (or not on PATH)
ERROR = "error"  # gputui ran but printed no result
STATUSES = (OK, WARN, FAIL, UNREACHABLE, NO_GPUTUI, ERROR)
HEALTHY = (OK, WARN)
FORMAT = 1  # of NODE.json


class NodeJson(TypedDict):
    """NODE.json: how the node was reached and what its ``gputui check --json`` said, whole."""

    fleet_node: int  # FORMAT
    node: str
    hostname: str | None
    status: str
    reason: str | None
    seconds: float | None
    check: CheckJson | None


@dataclass
class NodeResult:
    node: str  # as the user named it (a hostfile line) or Slurm's node name
    status: str
    reason: str = ""
    hostname: str | None = None
    seconds: float | None = None
    check: CheckJson | None = None  # kept whole, to be written back as it came
    recording: str = field(default="", repr=False)

    @property
    def counts(self) -> dict[str, int]:
        counts = (self.check.get("verdict") or {}).get("counts") if self.check is not None else None
        return counts if isinstance(counts, dict) else {}

    def line(self) -> str:
        """The one line the fleet check prints as the node finishes."""
        took = f" in {self.seconds:.0f} s" if self.seconds is not None else ""
        if self.status in HEALTHY or self.status == FAIL:
            counts = ", ".join(f"{n} {k}" for k, n in self.counts.items() if n)
            return f"{self.node}: {self.status} ({counts}){took}"
        return f"{self.node}: {self.status}: {self.reason}{took}"

    def to_json(self) -> NodeJson:
        return {
            "fleet_node": FORMAT,
            "node": self.node,
            "hostname": self.hostname,
            "status": self.status,
            "reason": self.reason or None,
            "seconds": self.seconds,
            "check": self.check,
        }


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def node_result(node: str, returncode: int | None, stdout: str, stderr: str, seconds: float | None) -> NodeResult:
    """Classify what one node's run gave (``returncode`` None: it timed out)."""
    out = split_output(stdout)
    why = _last_line(stderr)
    if returncode is None and out.hostname is None:
        return NodeResult(node, UNREACHABLE, "no answer before the timeout", seconds=seconds)
    if out.hostname is None:  # the script never started: the engine could not reach the node
        return NodeResult(node, UNREACHABLE, why or f"exit status {returncode}", seconds=seconds)
    check = parse_check(out.check_json)
    if check is None and out.exit_status == NOT_FOUND:
        return NodeResult(node, NO_GPUTUI, f"gputui is not installed there, or not on its PATH ({why or 'command not found'})", out.hostname, seconds)
    if check is None:
        status = "timed out" if returncode is None else f"exit status {out.exit_status if out.exit_status is not None else returncode}"
        return NodeResult(node, ERROR, f"gputui check printed no result ({status}){': ' + why if why else ''}", out.hostname, seconds)
    verdict = check["verdict"].get("verdict")
    status = verdict if verdict in (OK, WARN, FAIL) else ERROR
    return NodeResult(node, status, "" if status != ERROR else f"unknown verdict {verdict!r}", out.hostname, seconds, check, out.recording)


def file_stem(node: str) -> str:
    """A file name for a node name (``user@gpu-07:2222`` -> ``user@gpu-07_2222``)."""
    return re.sub(r"[^A-Za-z0-9@._-]", "_", node).strip(".") or "node"


def save(result: NodeResult, folder: Path) -> Path:
    """Write NODE.json (and NODE.jsonl); returns the JSON's path."""
    stem = file_stem(result.node)
    path = folder / f"{stem}.json"
    write_atomic(path, json.dumps(result.to_json(), indent=1) + "\n")
    if result.recording.strip():
        write_atomic(folder / f"{stem}.jsonl", result.recording)
    return path

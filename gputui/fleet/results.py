"""A node's result, as the fleet check gathers it and the fleet report reads it.

Each node is kept in the output folder as ``NODE.json`` (what the node's ``gputui check
--json`` said, wrapped with how the node was reached) and ``NODE.jsonl`` (the check's
recording, when there is one).  A node that could not be reached, or that has no
gputui, is a result too: its status says so and ``reason`` says why.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from gputui.check.verdict_text import CheckJson
from gputui.fleet.node import NOT_FOUND, parse_check, split_output
from gputui.fmt import printable
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
    note: str | None  # what the node sent that was not kept, and why
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
    note: str = ""

    @property
    def counts(self) -> dict[str, int]:
        counts = (self.check.get("verdict") or {}).get("counts") if self.check is not None else None
        return counts if isinstance(counts, dict) else {}

    def line(self) -> str:
        """The one line the fleet check prints as the node finishes, escaped for a
        terminal: the node's name, its check's counts and the engine's stderr all come
        from the node."""
        took = f" in {took_text(self.seconds)}" if self.seconds is not None else ""
        note = f"; {self.note}" if self.note else ""
        if self.status in HEALTHY or self.status == FAIL:
            counts = ", ".join(f"{n} {k}" for k, n in self.counts.items() if n)
            return printable(f"{self.node}: {self.status} ({counts}){took}{note}")
        return printable(f"{self.node}: {self.status}: {self.reason}{took}{note}")

    def to_json(self) -> NodeJson:
        return {
            "fleet_node": FORMAT,
            "node": self.node,
            "hostname": self.hostname,
            "status": self.status,
            "reason": self.reason or None,
            "seconds": self.seconds,
            "note": self.note or None,
            "check": self.check,
        }


def took_text(seconds: float) -> str:
    """How long a node took, in whole seconds: "under 1 s" where they would say "0 s",
    as if nothing had run."""
    return "under 1 s" if seconds < 1 else f"{seconds:,.0f} s"


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
    reason = "" if status != ERROR else f"unknown verdict {str(verdict)[:100]!r}"
    return NodeResult(node, status, reason, out.hostname, seconds, check, out.recording, out.recording_refused)


# A file name holds 255 bytes; a stem keeps room for ".jsonl", a "+N" of its own and the
# ".NAME.XXXXXXXX.tmp" that write_atomic writes first.
MAX_STEM = 200
_HASHED = 16  # hex digits of the name's hash that end a shortened stem


def file_stem(node: str) -> str:
    """A file name for a node name (``user@gpu-07:2222`` -> ``user@gpu-07_2222``); a
    long name (a 253-character FQDN) is cut and ends in ``~`` and a hash of the whole
    name, so two long names stay apart.  Never has a ``+`` (``ResultFolder``'s own)."""
    stem = re.sub(r"[^A-Za-z0-9@._-]", "_", node).strip(".") or "node"
    if len(stem) <= MAX_STEM:
        return stem
    digest = hashlib.sha256(node.encode("utf-8", errors="surrogatepass")).hexdigest()[:_HASHED]
    return f"{stem[: MAX_STEM - _HASHED - 1]}~{digest}"


class ResultFolder:
    """Where one fleet check keeps its nodes: a file of its own for every result.  Two
    results whose names make one file name (``gpu 1`` and ``gpu_1``; two nodes that both
    call themselves ``ubuntu``) are both kept, the later as ``STEM+2.json``, never one
    over the other; :meth:`shared_names` names nodes that answered to the same name."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._stems: set[str] = set()  # lower-cased: one file on a case-insensitive file system
        self._files: dict[str, list[Path]] = {}  # node name -> the files of its results

    def _stem(self, node: str) -> str:
        base = stem = file_stem(node)
        n = 1
        while stem.lower() in self._stems:
            n += 1
            stem = f"{base}+{n}"
        self._stems.add(stem.lower())
        return stem

    def save(self, result: NodeResult) -> Path:
        """Write NODE.json (and NODE.jsonl); returns the JSON's path.  OSError when it
        cannot be written."""
        stem = self._stem(result.node)
        path = self.folder / f"{stem}.json"
        self._files.setdefault(result.node, []).append(path)
        write_atomic(path, json.dumps(result.to_json(), indent=1) + "\n")
        if result.recording.strip():
            write_atomic(self.folder / f"{stem}.jsonl", result.recording)
        return path

    def shared_names(self) -> dict[str, list[Path]]:
        """Node names more than one result came back under, with their files."""
        return {name: files for name, files in self._files.items() if len(files) > 1}

"""What each node runs, and how its output is read back.

A node runs one POSIX ``sh`` script: it names itself, runs ``gputui check --json`` with a
recording in a temporary file, then prints the JSON and the (gzipped) recording in
base64 after marker lines, and its exit status last.  One stream carries all of it, so
the engine (``ssh``, ``srun``) needs no shared file system and nothing on the node but
gputui, gzip and base64; and base64's short lines pass through srun, which breaks long
lines of a task's output into several labelled ones.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import shlex
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from gputui.check.verdict_text import CheckJson

MARK = "@@gputui-fleet"
NOT_FOUND = 127  # the shell's status for a command it cannot find


HOSTNAME = "$(hostname)"
SLURM_NODENAME = "${SLURMD_NODENAME:-$(hostname)}"  # Slurm's name for the node, which sinfo shows


def node_script(gputui: str, check_args: Sequence[str], name: str = HOSTNAME) -> str:
    """The script a node runs.  ``gputui`` is a command line (``gputui``, or ``env
    PYTHONPATH=... python3 -m gputui``), left for the node's shell to split; ``name`` is
    how the node names itself (a shell expression)."""
    args = " ".join(shlex.quote(a) for a in ["check", "--json", "--no-history", *check_args])
    return "\n".join(
        [
            f'echo "{MARK} node {name}"',
            't=$(mktemp "${TMPDIR:-/tmp}/gputui-fleet.XXXXXX") || exit 70',
            f'{gputui} {args} --record "$t.jsonl" --force > "$t"',
            "rc=$?",
            f'echo "{MARK} check"',
            'base64 < "$t"',
            f'echo "{MARK} recording"',
            '[ -s "$t.jsonl" ] && gzip -c "$t.jsonl" | base64',
            'rm -f "$t" "$t.jsonl"',
            f'echo "{MARK} exit $rc"',
        ]
    )


@dataclass
class NodeOutput:
    """What a node printed, split at the markers."""

    hostname: str | None = None
    check_json: str = ""  # what gputui check --json printed
    recording: str = ""
    exit_status: int | None = None  # gputui check's own, None when the script did not get that far


def split_output(text: str) -> NodeOutput:
    """Read back what :func:`node_script` printed (or the part of it that came)."""
    out = NodeOutput()
    parts: dict[str, list[str]] = {"check": [], "recording": []}
    part: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(MARK + " "):
            word, _, rest = line[len(MARK) + 1 :].partition(" ")
            if word == "node":
                out.hostname, part = rest.strip() or None, None
            elif word in parts:
                part = parts[word]
            elif word == "exit" and rest.strip().lstrip("-").isdigit():
                out.exit_status, part = int(rest.strip()), None
            continue
        if part is not None:
            part.append(line.strip())
    out.check_json = _decoded("".join(parts["check"]))
    out.recording = _decoded("".join(parts["recording"]), gzipped=True)
    return out


def _decoded(text: str, gzipped: bool = False) -> str:
    """base64 (of gzip) back to text; "" when it does not decode (a node cut short)."""
    try:
        data = base64.b64decode(text, validate=True)
        return (gzip.decompress(data) if gzipped and data else data).decode("utf-8", errors="replace")
    except (binascii.Error, ValueError, EOFError, OSError, zlib.error):
        return ""


def parse_check(text: str) -> CheckJson | None:
    """The check's JSON object, None when it is not one (the check died before printing)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("checks"), list) or not isinstance(data.get("verdict"), dict):
        return None
    return cast("CheckJson", data)

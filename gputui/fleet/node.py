"""What each node runs, and how its output is read back.

A node runs one POSIX ``sh`` script: it names itself, runs ``gputui check --json`` with a
recording in a temporary file, then prints the recording after a marker line and its
exit status last.  One stream carries all of it, so the engine (``ssh``, ``srun``) needs
no shared file system and nothing on the node but gputui.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

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
            f'{gputui} {args} --record "$t" --force',
            "rc=$?",
            f'echo "{MARK} recording"',
            'cat "$t" 2>/dev/null; rm -f "$t"',
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
    part: list[str] | None = None
    check: list[str] = []
    recording: list[str] = []
    for line in text.splitlines():
        if line.startswith(MARK + " "):
            word, _, rest = line[len(MARK) + 1 :].partition(" ")
            if word == "node":
                out.hostname, part = rest.strip() or None, check
            elif word == "recording":
                part = recording
            elif word == "exit" and rest.strip().lstrip("-").isdigit():
                out.exit_status, part = int(rest.strip()), None
            continue
        if part is not None:
            part.append(line)
    out.check_json = "\n".join(check).strip()
    out.recording = "\n".join(recording) + ("\n" if recording else "")
    return out


def parse_check(text: str) -> dict | None:
    """The check's JSON object, None when it is not one (the check died before printing)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("checks"), list) or not isinstance(data.get("verdict"), dict):
        return None
    return data

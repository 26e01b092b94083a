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
import io
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from gputui.errors import UserError
from gputui.record.gzip_lines import GzipChunks

if TYPE_CHECKING:
    from gputui.check.verdict_text import CheckJson

MARK = "@@gputui-fleet"
NOT_FOUND = 127  # the shell's status for a command it cannot find
MAX_NAME = 300  # characters of a node's name: user@ and a 253-character DNS name, and a port
MAX_RECORDING_BYTES = 256 * 1024**2  # what one node's recording may hold in memory; a check's is far smaller


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
    recording_refused: str = ""  # why a recording that came was not kept
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
                out.hostname, part = short_name(rest.strip()) or None, None
            elif word in parts:
                part = parts[word]
            elif word == "exit" and rest.strip().lstrip("-").isdigit():
                out.exit_status, part = int(rest.strip()), None
            continue
        if part is not None:
            part.append(line.strip())
    out.check_json = _unbased("".join(parts["check"])).decode("utf-8", errors="replace")
    out.recording, out.recording_refused = _recording(_unbased("".join(parts["recording"])))
    return out


def short_name(name: str) -> str:
    """A node's name as it names itself, cut to ``MAX_NAME`` characters: the node sends
    it, and a name is shown on every line about the node."""
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


def _unbased(text: str) -> bytes:
    """base64 back to bytes; none when it does not decode (a node cut short)."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""


_RECORDING = Path("recording")  # how the gzip reader names the stream in its refusals


def _unzipped(data: bytes) -> bytes:
    """The recording's gzip, decompressed within the bounds the recording reader keeps
    (ratio, bytes, time), and at most ``MAX_RECORDING_BYTES``: a node's output is
    trusted no more than a file is, and a fleet check holds several at once."""
    chunks = GzipChunks(_RECORDING, io.BytesIO(data))
    out = bytearray()
    for chunk in chunks:
        out += chunk
        if len(out) > MAX_RECORDING_BYTES:
            raise UserError(f"{_RECORDING}: not read: it decompresses to over {MAX_RECORDING_BYTES:,} bytes (expected a check's recording, a few MB)")
    return bytes(out if not chunks.cut else out[: out.rfind(b"\n") + 1])  # a node cut short: its whole lines


def _recording(data: bytes) -> tuple[str, str]:
    """(the recording's text, why it was not kept): ("", "") when none came or it is
    not gzip (a node cut short)."""
    if not data:
        return "", ""
    try:
        return _unzipped(data).decode("utf-8", errors="replace"), ""
    except UserError as exc:
        why = str(exc).removeprefix(f"{_RECORDING}: ")
        if not why.startswith("not read: "):  # not gzip: cut short or garbled on its way
            return "", ""
        return "", "recording not kept: " + why.removeprefix("not read: ")


def parse_check(text: str) -> CheckJson | None:
    """The check's JSON object, None when it is not one (the check died before printing)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("checks"), list) or not isinstance(data.get("verdict"), dict):
        return None
    return cast("CheckJson", data)

"""Re-diagnose a recording: ``python -m gputui.diagnosis RECORDING.jsonl [--set KEY=VALUE ...] [--json]``.

Uses the settings the recording's header names (else the defaults), changed by
``--set``; prints each finding's final state and what could not be judged, or every
finding event with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gputui.config import tomllib
from gputui.diagnosis.engine import Diagnoser, replay
from gputui.diagnosis_settings import KEYS, Settings, check_value
from gputui.errors import UserError
from gputui.fmt import printable
from gputui.record import events as ev
from gputui.record.recording import read_recording


def _value(raw: str) -> object:
    """A ``--set`` value as TOML reads it (a number, a boolean, a list), else the text itself."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gputui.diagnosis", description="Re-diagnose a gputui recording.")
    parser.add_argument("recording", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="change one [diagnosis] setting")
    parser.add_argument("--json", action="store_true", help="every finding event as JSON Lines")
    args = parser.parse_args(argv)
    try:
        rec = read_recording(args.recording)
        table = {k: v for k, v in (rec.header.diagnosis or {}).items() if k in KEYS}
        for item in args.set:
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep:
                raise UserError(f"--set {item}: expected KEY=VALUE")
            try:
                table[key] = check_value(key, _value(raw))
            except KeyError:
                raise UserError(f"--set {key}: unknown key (expected one of: {', '.join(KEYS)})") from None
            except ValueError as exc:
                raise UserError(f"--set {key}: expected {exc}") from None
        diagnoser = Diagnoser(Settings.from_tables(table))
        events = replay(rec.header, rec.samples, rec.events, diagnoser=diagnoser)
    except UserError as exc:
        print(f"gputui: error: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    if rec.cut:
        print(f"gputui: note: {printable(str(args.recording))}: {rec.cut}", file=sys.stderr)
    if args.json:
        for event in events:
            print(json.dumps({"t": round(event.t, 3), **ev.payload_fields(event.payload)}))
        return 0
    final: dict[str, ev.Finding] = {}
    opened: dict[str, float] = {}
    for event in events:
        if isinstance(event.payload, ev.Finding):
            final[event.payload.id] = event.payload
            opened.setdefault(event.payload.id, event.t)
    measure = next((e.t for e in rec.events if isinstance(e.payload, ev.PhaseChange) and e.payload.phase == "measure"), None)
    if measure is not None:
        print(f"measured phase from {measure:.1f} s")
    if not final:
        print("no findings" if rec.samples else "no findings: the recording has no samples to diagnose")
    for fid, finding in sorted(final.items(), key=lambda item: item[1].since or 0.0):
        when = f"opened at {opened[fid]:.1f} s"
        if measure is not None:
            when += f" ({opened[fid] - measure:+.1f} s from the measured phase)"
        print(f"[{finding.severity}] {printable(finding.title)}")
        print(f"    {finding.kind}: {when}; active {finding.since or 0.0:.1f}-{finding.until or 0.0:.1f} s; {finding.state} at the end")
        print("    evidence: " + printable(", ".join(f"{k}={v}" for k, v in (finding.evidence or {}).items())))
    for note in diagnoser.notes():
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Formatting for people: numbers, and user text made safe to print.  Shared by the
progress line, the CLIs, reports and the TUI."""

from __future__ import annotations

import re
from collections import Counter

GIB = 1024**3


def gib(num_bytes: float | None) -> str:
    return "-" if num_bytes is None else f"{num_bytes / GIB:.1f}"


def rate(samples_per_sec: float | None) -> str:
    """Throughput with sensible precision: 1771, 85.3, 5.12."""
    if samples_per_sec is None:
        return "-"
    if samples_per_sec >= 100:
        return f"{samples_per_sec:,.0f}"
    if samples_per_sec >= 10:
        return f"{samples_per_sec:.1f}"
    return f"{samples_per_sec:.2f}"


def per_second(unit: str | None) -> str:
    """A throughput unit as a label: "samples/s", "tokens/s", "steps/s" (absent: samples,
    as in recordings made before readings carried a unit)."""
    return f"{unit or 'samples'}/s"


def per_second_short(unit: str | None) -> str:
    """The same, short, for narrow columns: "/s" for samples (the usual), "tok/s", "steps/s"."""
    return {"tokens": "tok/s", "steps": "steps/s"}.get(unit or "samples", "/s")


def rate_in(value: float | None, unit: str | None) -> str:
    """A rate with its unit: "1,771 samples/s", "48,213 tokens/s", "3.20 steps/s"."""
    return f"{rate(value)} {per_second(unit)}"


def phase_line(phases: list[tuple[str | None, float | None]]) -> str:
    """The phases a job went through, (name, seconds) each, with their durations:
    "startup 0:17, training 2:03, tail 0:04"."""
    return ", ".join(f"{name} {duration(seconds)}" for name, seconds in phases)


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def num(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}{unit}"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = round(seconds)  # a 3 s run timed at 2.97 s reads 0:03, as asked
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def short_gpu_name(name: str) -> str:
    """ "NVIDIA H200" -> "H200": the brand says nothing on a GPU machine."""
    for noise in ("NVIDIA ", "GeForce ", "Tesla "):
        name = name.replace(noise, "")
    return name


def gpu_summary(names: list[str]) -> str:
    """ "2× H200" (or "1× H200, 1× A100"); empty for no GPU."""
    return ", ".join(f"{n}× {name}" for name, n in Counter(names).items())


# Characters that move the cursor, set the title, or reorder text when printed raw:
# C0 and C1 controls (ESC, BEL, CSI; category Cc), the line and paragraph separators
# (Zl, Zp) and the bidi overrides; and lone surrogates (Cs), which psutil makes of a
# command line's bytes that are no UTF-8: a UTF-8 terminal or file refuses them (a
# traceback), and written with surrogateescape they are those bytes again, 0x9b a CSI.
# gputui.escape builds every output kind on this.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: object) -> str:
    """User text (a preset name, argv, a run's output) safe for a terminal: control
    characters and escape sequences shown escaped (ESC as ``\\x1b``), all else as is."""
    return UNSAFE.sub(_escape, str(text))

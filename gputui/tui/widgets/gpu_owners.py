"""Whose memory is on a GPU, in one line: "ours 12.3 GiB · others 2 (4.1 GiB)" in a panel,
"ours 12.3G · others 2 (4.1G)" in a one-line row.  Nothing where nobody told whose the
processes are (no run to match, a recording from before attribution)."""

from __future__ import annotations

from gputui import fmt
from gputui.model import RUN, UNMATCHED, GpuProcess, memory_of, others_of


def _gib(num: int, short: bool) -> str:
    return f"{num / fmt.GIB:.1f}" + ("G" if short else " GiB")


def ownership(processes: list[GpuProcess] | None, short: bool = False, narrow: bool = False) -> str | None:
    """``narrow`` (an 80-column row): only what is not ours, "others 1 (20.9G)", so that the
    co-tenant is what fits; nothing when every process is the run's."""
    if not processes or all(p.owner is None for p in processes):
        return None
    ours = [p for p in processes if p.owner == RUN]
    others = others_of(processes)
    unmatched = [p for p in processes if p.owner == UNMATCHED]
    if narrow:
        narrow_parts = [f"others {len(others)} ({_gib(memory_of(others), short)})"] if others else []
        narrow_parts += [f"unmatched {len(unmatched)}"] if unmatched else []
        return " · ".join(narrow_parts) or None
    parts = [f"ours {_gib(memory_of(ours), short)}" if ours else "ours none"]
    parts.append(f"others {len(others)} ({_gib(memory_of(others), short)})" if others else "no others")
    if unmatched:  # a container seeing the host's pids: ours or not, nobody can say
        parts.append(f"unmatched {len(unmatched)} ({_gib(memory_of(unmatched), short)})")
    return " · ".join(parts)


OWNER_WORDS = {RUN: "ours", "other": "other", "hidden": "another container", UNMATCHED: "unmatched pid"}


def process_line(p: GpuProcess) -> str:
    """One process in the drill-down: pid, owner, memory, SM share, user, command."""
    owner = OWNER_WORDS.get(p.owner, "?") if p.owner is not None else "?"
    memory = "-" if p.used_memory is None else _gib(p.used_memory, short=True)
    sm = "-" if p.sm_util is None else f"{p.sm_util:.0f}%"
    who = " ".join(part for part in (p.user, p.command or p.name) if part) or "-"
    return f"{p.pid:>8}  {owner:<17} {memory:>7} {sm:>5}  {who}"

"""What a run's end means: the :class:`Outcome` of a finished child (exited, signaled,
timeout, out of memory, stopped, failed to start) from its exit status, how it was
stopped and what it printed.  Pure classification: :mod:`gputui.run.runner` owns the
process and gathers the facts; nothing here starts, signals or waits."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from gputui.fmt import printable
from gputui.run.output_stream import TRUNCATION_MARK, OutputLine

_MESSAGE_CAP = 300


OutcomeKind = Literal["exited", "signaled", "timeout", "oom", "stopped", "failed_to_start"]


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind  # "exited": with code 0 or not
    exit_code: int | None = None
    signal: str | None = None  # e.g. "SIGKILL"
    message: str | None = None  # a human one-liner
    duration_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "exited" and self.exit_code == 0


# --- OOM ---------------------------------------------------------------------------

_OOM_RE = re.compile(
    r"CUDA out of memory"
    r"|CUDA error: out of memory"
    r"|OutOfMemoryError"  # torch.OutOfMemoryError, torch.cuda.OutOfMemoryError
    r"|ResourceExhaustedError"
    r"|OOM when allocating"
    r"|RESOURCE_EXHAUSTED: Out of memory"  # XLA
    r"|CUBLAS_STATUS_ALLOC_FAILED"
    r"|cudaErrorMemoryAllocation"
)
# Host memory: Python's MemoryError (as under an RLIMIT_AS), C++'s bad_alloc, ENOMEM.
_HOST_OOM_RE = re.compile(r"^\s*MemoryError\b|std::bad_alloc|Cannot allocate memory")
_EXC_PREFIX_RE = re.compile(r"^\s*[\w.]*(?:Error|Exception)\s*:\s*")


def short_message(text: str, cap: int = _MESSAGE_CAP) -> str:
    """``text`` as a one-line message of at most ``cap`` characters."""
    text = text.strip()
    return text if len(text) <= cap else text[: cap - 1] + TRUNCATION_MARK


def _oom_detail(line: str) -> str:
    """'torch.OutOfMemoryError: CUDA out of memory. ...' -> 'CUDA out of memory. ...'"""
    detail = _EXC_PREFIX_RE.sub("", line, count=1).strip()
    return short_message(detail or line)


def cgroup_oom_kill_count() -> int | None:
    """The kernel OOM killer's ``oom_kill`` counter for our cgroup, or None.

    cgroup v2: ``<cgroup2 mount>/<path from /proc/self/cgroup "0::">/memory.events``;
    cgroup v1 (hybrid hosts): ``<memory mount>/<path>/memory.oom_control``.  Inside a
    container the recorded path may not exist under the mount (no cgroup namespace),
    so the mount's root is tried as well.  Anything missing or unreadable: None.
    """
    try:
        with open("/proc/self/cgroup") as f:
            cgroup_lines = f.read().splitlines()
        with open("/proc/self/mounts") as f:
            mounts = [line.split() for line in f.read().splitlines()]
    except OSError:
        return None
    v2_mount = v1_memory_mount = None
    for fields in mounts:
        if len(fields) < 4:
            continue
        if fields[2] == "cgroup2" and v2_mount is None:
            v2_mount = fields[1]
        elif fields[2] == "cgroup" and "memory" in fields[3].split(",") and v1_memory_mount is None:
            v1_memory_mount = fields[1]
    candidates: list[str] = []
    for line in cgroup_lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        rel = path.lstrip("/")
        if controllers == "" and v2_mount:
            candidates += [os.path.join(v2_mount, rel, "memory.events"), os.path.join(v2_mount, "memory.events")]
        elif "memory" in controllers.split(",") and v1_memory_mount:
            candidates += [
                os.path.join(v1_memory_mount, rel, "memory.oom_control"),
                os.path.join(v1_memory_mount, "memory.oom_control"),
            ]
    for path in candidates:
        try:
            with open(path) as f:
                for row in f:
                    key, _, value = row.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


# --- classification ----------------------------------------------------------------


def oom_evidence(text: str) -> str | None:
    """What an output line says about running out of memory, kept for the outcome; None
    for a line that says nothing of it."""
    if _OOM_RE.search(text):
        return text
    if _HOST_OOM_RE.search(text):
        return f"host memory ({text.strip()})"
    return None


def _last_error_line(tail: Sequence[OutputLine]) -> str | None:
    for stream in ("stderr", "stdout"):
        for line in reversed(tail):
            if line.stream == stream and line.text.strip():
                return short_message(line.text)
    return None


def stopped_outcome(reason: str | None, exit_code: int | None, sig: str | None, duration: float, timeout: float | None) -> Outcome:
    """The outcome of a run that gputui stopped: ``reason`` "timeout" (after ``timeout``
    seconds) or any other reason, "stopped" meaning the user."""
    reason = reason or "stopped"
    if reason == "timeout":
        return Outcome("timeout", exit_code, sig, f"timed out after {timeout:g} s", duration)
    message = "stopped by user" if reason == "stopped" else f"stopped: {reason}"
    return Outcome("stopped", exit_code, sig, message, duration)


@dataclass(frozen=True)
class RunEnd:
    """What is known of a run once its guard has exited: all :func:`classify` needs."""

    returncode: int  # the guard's; negative: the signal that ended it
    duration: float
    stop_reason: str | None  # why gputui stopped it; None: it ended by itself
    timeout: float | None = None
    start_error: str | None = None  # what the guard reported when it could not start the command
    guard_lost: bool = False  # the guard died while the run's processes lived on
    pid: int | None = None  # the command's; None when the guard never reported one
    killed: bool = False  # gputui sent SIGKILL
    oom_mark: str | None = None  # an OOM reported through the workload protocol
    oom_line: str | None = None  # the last :func:`oom_evidence` in the output
    oom_kills_before: int | None = None  # the cgroup's OOM-kill counter at the start
    oom_kill_count: Callable[[], int | None] = cgroup_oom_kill_count  # ... and how to read it now
    tail: Sequence[OutputLine] = ()  # the last output lines, oldest first, for the message's detail
    leftovers: Sequence[tuple[int, str]] = ()  # (pid, name) the guard stopped after the command exited
    leftover_count: int = 0  # how many it stopped: more than it named, past its cap


_NAMED_IN_MESSAGE = 3  # the rest are counted: the message stays one line


def _leftovers_said(end: RunEnd) -> str:
    """What the message adds ("; stopped 1 leftover process: sleep (pid 123)"); "" for none."""
    count = max(end.leftover_count, len(end.leftovers))
    if count == 0:
        return ""
    # A name is the process's own (it may set it to anything): shown escaped.
    named = [f"{printable(name)} (pid {pid})" for pid, name in end.leftovers[:_NAMED_IN_MESSAGE]]
    if count > len(named):
        named.append(f"and {count - len(named)} more")
    return f"; stopped {count} leftover process{'' if count == 1 else 'es'}: {', '.join(named)}"


def classify(end: RunEnd) -> Outcome:
    """The outcome of a run that ended as ``end`` says."""
    outcome = _classify(end)
    if end.stop_reason is not None or end.start_error is not None or end.guard_lost:
        return outcome  # stopping took every process of the run alike: none of them was left over
    said = _leftovers_said(end)
    if not said:
        return outcome
    return Outcome(outcome.kind, outcome.exit_code, outcome.signal, (outcome.message or "") + said, outcome.duration_s)


def _classify(end: RunEnd) -> Outcome:
    returncode, duration, stop_reason, timeout, tail = end.returncode, end.duration, end.stop_reason, end.timeout, end.tail
    exit_code = returncode if returncode >= 0 else None
    sig = _signal_name(-returncode) if returncode < 0 else None

    if end.start_error is not None:
        return Outcome("failed_to_start", exit_code, sig, end.start_error, duration)
    if end.guard_lost:
        how = sig or f"exit code {exit_code}"
        message = f"gputui's guard process was killed ({how}) while the run went on; gputui stopped what was left of the run"
        return Outcome("signaled" if sig else "exited", exit_code, sig, message, duration)
    if end.pid is None and stop_reason is None and returncode != 0:
        detail = _last_error_line(tail)
        message = f"the guard process failed ({f'exit code {exit_code}' if sig is None else sig})"
        return Outcome("failed_to_start", exit_code, sig, message + (f": {detail}" if detail else ""), duration)

    succeeded = returncode == 0 and stop_reason is None
    if not succeeded:
        oom = None
        if end.oom_mark is not None:
            oom = short_message(end.oom_mark)
        elif end.oom_line is not None:
            oom = _oom_detail(end.oom_line)
        elif sig == "SIGKILL" and not end.killed and end.oom_kills_before is not None:
            after = end.oom_kill_count()
            if after is not None and after > end.oom_kills_before:
                oom = "killed by the kernel OOM killer (host memory)"
        if oom is not None:
            message = oom if oom.lower().startswith("out of memory") else f"out of memory: {oom}"
            if stop_reason is not None:
                message += "; then " + (stopped_outcome(stop_reason, None, None, 0, timeout).message or "")
            return Outcome("oom", exit_code, sig, message, duration)

    if stop_reason is not None:
        return stopped_outcome(stop_reason, exit_code, sig, duration, timeout)
    if sig is not None:
        detail = _last_error_line(tail)
        return Outcome("signaled", None, sig, f"killed by signal {sig}" + (f": {detail}" if detail else ""), duration)
    message = f"exited with code {exit_code}"
    if exit_code != 0:
        detail = _last_error_line(tail)
        if detail:
            message += f": {detail}"
    return Outcome("exited", exit_code, None, message, duration)

"""A fixture that fails a test if any process it started, or any descendant of one,
is still alive after it: ``pytestmark = pytest.mark.usefixtures("no_leftovers")``
(import ``no_leftovers`` into the test module).

Processes are found two ways, read from ``/proc``: descendants of this pytest process
that were not there before the test, and any process whose environment carries the
test's own tag (``GPUTUI_FAULT_TAG``).  Every process a test starts inherits the tag,
so a grandchild that called ``setsid()`` and was re-parented to init is still found.
Survivors are SIGKILLed so that one failure does not spill into the next test.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator

import pytest

TAG_VARIABLE = "GPUTUI_FAULT_TAG"
SETTLE_S = 10.0  # how long stopping may take: the runner's grace plus a loaded machine


def _live() -> dict[int, int]:
    """pid -> ppid of every process that is not a zombie."""
    table: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 2 and fields[0] not in (b"Z", b"X"):
            table[int(name)] = int(fields[1])
    return table


def _descendants(root: int, table: dict[int, int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def _tagged(marker: bytes, table: dict[int, int]) -> set[int]:
    found = set()
    for pid in table:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    found.add(pid)
        except OSError:
            continue  # gone, or not ours to read
    return found


def survivors(marker: bytes, before: set[int]) -> set[int]:
    table = _live()
    me = os.getpid()
    return (_tagged(marker, table) | (_descendants(me, table) - before)) - {me}


def _describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        cmdline = "?"
    return f"{pid} ({cmdline[:120]})"


@pytest.fixture
def no_leftovers(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    tag = uuid.uuid4().hex
    marker = f"{TAG_VARIABLE}={tag}".encode()
    monkeypatch.setenv(TAG_VARIABLE, tag)
    before = _descendants(os.getpid(), _live())
    yield tag
    deadline = time.monotonic() + SETTLE_S
    left = survivors(marker, before)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = survivors(marker, before)
    if left:
        described = [_describe(pid) for pid in sorted(left)]
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        pytest.fail(f"processes left running after the test: {described}")

"""Raw keystrokes flooding the preset editor: how long until the dashboard settles, its
peak memory, and how long SIGTERM takes to end it.

    python benchmarks/editor_flood.py [--kb 100] [--sigterm-at SECONDS] [--json OUT.json]

gputui runs as a user runs it: ``python -m gputui`` (the dashboard, watching) in a
pseudo-terminal.  The script opens the editor (e) on the highlighted preset, tabs to
the description field and writes ``--kb`` kilobytes of plain text to the terminal as
fast as it takes them: what a paste without bracketed-paste mode, or a slow link
catching up, delivers as one raw key per character.

  settle_s      from the first byte until gputui's CPU stays under a quarter of one core
                for half a second (the flood handled and drawn)
  peak_rss_mb   gputui's RSS at its highest, sampled every 20 ms
  kept_chars    the description's length once saved (ctrl+o, Enter): every character
                typed must be there, in order (only without --sigterm-at)
  sigterm_exit_s  from SIGTERM to the process gone: sent --sigterm-at seconds into the
                flood, or once it has settled and been saved

Targets (issue 26): settle <= 10 s and peak RSS <= 150 MB for 100 KB; SIGTERM <= 3 s.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import pty
import select
import signal
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
TEXT = "the quick brown fox jumps over the lazy dog "
IDLE_CPU_SHARE = 0.25  # of one core: the watching dashboard idles far below this
IDLE_WINDOW_S = 0.5
TARGETS = {"settle_s": 10.0, "peak_rss_mb": 150.0, "sigterm_exit_s": 3.0}


class Terminal:
    """gputui in a pseudo-terminal: what it writes is drained (so it never blocks on a
    full terminal), its RSS sampled on every pass."""

    def __init__(self, scratch: Path, size: tuple[int, int] = (120, 40)) -> None:
        cols, rows = size
        env = dict(os.environ)
        env.update(
            XDG_CONFIG_HOME=str(scratch / "xdg"),
            XDG_DATA_HOME=str(scratch / "data"),
            XDG_STATE_HOME=str(scratch / "state"),
            PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
            TERM="xterm-256color",
            LINES=str(rows),
            COLUMNS=str(cols),
        )
        argv = [sys.executable, "-m", "gputui", "--no-history"]
        self.scratch = scratch
        self.pid, self.master = pty.fork()
        if self.pid == 0:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.chdir(scratch)
            os.execve(argv[0], argv, env)
        self.proc = psutil.Process(self.pid)
        self.seen = bytearray()
        self.peak_rss = 0
        self.status: int | None = None

    def pump(self, timeout: float = 0.02) -> None:
        """Read what gputui wrote (if anything) and sample its memory."""
        try:
            self.peak_rss = max(self.peak_rss, self.proc.memory_info().rss)
        except psutil.Error:
            pass
        try:
            if select.select([self.master], [], [], timeout)[0]:
                self.seen += os.read(self.master, 65536)
                del self.seen[:-20000]
        except OSError:
            time.sleep(timeout)

    def wait_for(self, mark: bytes, timeout: float = 60.0) -> None:
        self.seen.clear()
        deadline = time.monotonic() + timeout
        while mark not in self.seen:
            if time.monotonic() > deadline or self.exited():
                raise SystemExit(f"never saw {mark!r}; gputui wrote:\n{bytes(self.seen[-2000:]).decode(errors='replace')}")
            self.pump()

    def type(self, data: bytes) -> None:
        """Write ``data`` as fast as the terminal takes it, draining gputui meanwhile."""
        os.set_blocking(self.master, False)
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.master, view[:4096]) :]
            except BlockingIOError:
                pass
            self.pump(0.001)
        os.set_blocking(self.master, True)

    def cpu_s(self) -> float:
        times = self.proc.cpu_times()
        return times.user + times.system

    def settle(self, timeout: float) -> float | None:
        """Seconds until gputui goes idle (None: it did not within ``timeout``)."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            cpu0, t0 = self.cpu_s(), time.monotonic()
            while time.monotonic() - t0 < IDLE_WINDOW_S:
                self.pump()
            if self.cpu_s() - cpu0 < IDLE_CPU_SHARE * (time.monotonic() - t0):
                return t0 - start
        return None

    def exited(self) -> bool:
        if self.status is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = status
        return self.status is not None

    def stop(self, timeout: float) -> float | None:
        """SIGTERM; seconds until the process is gone (None: killed after ``timeout``)."""
        sent = time.monotonic()
        os.kill(self.pid, signal.SIGTERM)
        while time.monotonic() - sent < timeout:
            if self.exited():
                return time.monotonic() - sent
            self.pump()
        os.kill(self.pid, signal.SIGKILL)
        self.status = os.waitpid(self.pid, 0)[1]
        return None


def saved_description(scratch: Path) -> str | None:
    from gputui.presets.preset import load_file

    path = scratch / "xdg" / "gputui" / "presets.toml"
    return load_file(path)["smoke"].description if path.exists() else None


def measure(kb: float, sigterm_at: float | None, scratch: Path) -> dict:
    term = Terminal(scratch)
    typed = (TEXT * (int(kb * 1024) // len(TEXT) + 1))[: int(kb * 1024)]
    result: dict = {"kb": kb, "chars": len(typed)}
    try:
        term.wait_for(b"Presets")
        time.sleep(1.0)
        os.write(term.master, b"e")
        term.wait_for(b"read-only")  # the built-in smoke opens read-only: ctrl+o saves a copy
        os.write(term.master, b"\t")  # the name field has the focus; the description is next
        time.sleep(0.5)
        started = time.monotonic()
        if sigterm_at is not None:
            while time.monotonic() - started < sigterm_at:
                term.type(typed[:4096].encode())
            result["sigterm_at_s"] = sigterm_at
        else:
            term.type(typed.encode())
            result["written_s"] = round(time.monotonic() - started, 2)
            settled = term.settle(timeout=300)
            result["settle_s"] = None if settled is None else round(time.monotonic() - started - IDLE_WINDOW_S, 2)
            os.write(term.master, b"\x0f")  # ctrl+o: save a copy, named as offered
            term.wait_for(b"Save as")
            os.write(term.master, b"\r")
            term.wait_for(b"saved")
            description = saved_description(scratch) or ""
            kept = description[len(description) - len(typed) :]
            result["kept_chars"] = len(kept) if kept == typed else f"wrong: {len(description)} chars"
        result["sigterm_exit_s"] = None if (took := term.stop(timeout=60)) is None else round(took, 2)
        result["exit_code"] = os.waitstatus_to_exitcode(term.status) if term.status is not None else None
    finally:
        if not term.exited():
            os.kill(term.pid, signal.SIGKILL)
            os.waitpid(term.pid, 0)
        os.close(term.master)
    result["peak_rss_mb"] = round(term.peak_rss / 2**20, 1)
    return result


def machine() -> str:
    return f"{psutil.cpu_count()} logical CPUs, {psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb", type=float, default=100.0, help="kilobytes typed (default 100)")
    parser.add_argument("--sigterm-at", type=float, help="send SIGTERM this many seconds into the flood instead of waiting for it to settle")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gputui-editor-flood-") as scratch:
        result = measure(args.kb, args.sigterm_at, Path(scratch))
    result["machine"] = machine()
    for key, value in result.items():
        print(f"{key:>16}: {value}")
    missed = [key for key, limit in TARGETS.items() if key in result and (result[key] is None or result[key] > limit)]
    print("targets: " + ("all met" if not missed else "missed: " + ", ".join(missed)))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if not missed else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""What attaching to a long run costs before its whole history is drawn.

    python3 benchmarks/attach_catchup.py [--hours 1 4] [--gpus 1 8] [--out DIR]

A recording of H hours is made from a real one (docs/recordings/h200-torch-resnet50-tuned.jsonl,
one H200 at 0.5 s a sample: its lines repeated with their times moved on, its GPU
copied to N indices), then read as ``gputui attach`` reads it: the recording followed from
its first line by a FollowedRun, told to the dashboard's bridge, and folded into its
state as the dashboard's tick does.  Reported: the seconds until the viewer has caught up
(every line read and folded), with the latest samples only (what the viewer does) and with
every sample read (a whole read, as replay and report do), and the file's size.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
import psutil

from gputui.live import followed as followed_module
from gputui.live.followed import FollowedRun
from gputui.live.registry import LiveRun
from gputui.record.recording import read_header
from gputui.view import state as st
from gputui.view.bridge import SessionBridge
from gputui.view.replay_player import preset_from_header
from gputui.view.supervisor import SessionTicket

SOURCE = REPO / "docs" / "recordings" / "h200-torch-resnet50-tuned.jsonl"
ONCE = {"started", "workload", "outcome", "stopping", "result"}  # a run's events that come once


def make_recording(path: Path, hours: float, gpus: int) -> None:
    lines = [json.loads(line) for line in SOURCE.read_text().splitlines()]
    header, body = lines[0], [r for r in lines[1:] if r["type"] != "summary"]
    header["gpus"] = [{**header["gpus"][0], "index": i} for i in range(gpus)]
    span = max(r["t"] for r in body) + 0.5
    with path.open("w") as out:
        out.write(json.dumps(header, separators=(",", ":")) + "\n")
        offset, first = 0.0, True
        while offset < hours * 3600:
            for record in body:
                if record["type"] == "event" and record.get("event") in ONCE and not first:
                    continue
                moved = {**record, "t": round(record["t"] + offset, 4)}
                if record["type"] == "sample":
                    moved["gpus"] = [{**record["gpus"][0], "index": i} for i in range(gpus)]
                out.write(json.dumps(moved, separators=(",", ":")) + "\n")
            offset += span
            first = False


def catch_up(path: Path, recent_samples: int | None) -> tuple[float, int]:
    """Seconds until a viewer has read and folded the whole file; the items folded."""
    saved = followed_module.RECENT_SAMPLES
    followed_module.RECENT_SAMPLES = recent_samples  # type: ignore[assignment]
    try:
        preset = preset_from_header(read_header(path), path)
        ticket = SessionTicket(serial=1, run=1, preset=preset)
        bridge = SessionBridge(ticket, wake=lambda bridge: None)
        state = st.DashboardState()
        live = LiveRun(name="catch-up", pid=os.getpid(), pid_started=psutil.Process().create_time(), started_at="", label="x", recording=path)
        followed = FollowedRun(live, poll_s=0.01)
        idle = threading.Event()

        class CaughtUp(SessionBridge):
            def on_idle(self) -> None:  # the FollowedRun has read to the end of the file
                idle.set()

        followed.add_observer(bridge)
        followed.add_observer(CaughtUp(ticket, post=lambda message: None))
        began = time.perf_counter()
        thread = threading.Thread(target=followed.run, daemon=True)
        thread.start()
        folded = 0
        while not idle.is_set() or bridge._items:
            idle.wait(0.05)
            items = bridge.take()  # the dashboard's tick
            state.apply(ticket, items)
            folded += len(items)
        seconds = time.perf_counter() - began
        followed.release()
        thread.join()
        return seconds, folded
    finally:
        followed_module.RECENT_SAMPLES = saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, nargs="+", default=[1.0, 4.0])
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gputui-catch-up-") as folder:
        for gpus in args.gpus:
            for hours in args.hours:
                path = Path(folder) / f"{gpus}-{hours}.jsonl"
                make_recording(path, hours, gpus)
                recent, items = catch_up(path, followed_module.RECENT_SAMPLES)
                whole, all_items = catch_up(path, None)
                rows.append({"gpus": gpus, "hours": hours, "mb": round(path.stat().st_size / 1e6, 1), "catch_up_s": round(recent, 2), "items": items,
                             "every_sample_s": round(whole, 2), "every_item": all_items})  # fmt: skip
                print(rows[-1], flush=True)
                path.unlink()
    machine = f"{psutil.cpu_count()} logical CPUs ({platform.processor() or platform.machine()}), Python {platform.python_version()}"
    lines = [
        f"Machine: {machine}",
        "",
        "| GPUs | hours of run | file MB | caught up (latest samples) s | items | every sample read s | items |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {r['gpus']} | {r['hours']:g} | {r['mb']} | {r['catch_up_s']} | {r['items']:,} | {r['every_sample_s']} | {r['every_item']:,} |" for r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "attach-catchup.md").write_text(text)
        (args.out / "attach-catchup.json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

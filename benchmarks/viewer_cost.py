"""The dashboard as a viewer of a live run, beside nvitop alone and side by side.

    python3 benchmarks/viewer_cost.py --presets benchmarks/gpu-presets.toml --preset reattach-input-fed \\
        --warmup 60 --seconds 30 --sizes 140x40,80x24 --out DIR

First, before the run, nvitop alone on the idle GPU at each size (``nvitop idle``).  The
run is then started detached (``gputui --detach``), as from another terminal, and keeps
going for the whole measurement.  Once it has gone --warmup seconds, for each size, in
terminals of that size:

  nvitop alone   ``nvitop -m full --interval I`` with nothing else drawing: its CPU and
                 bytes over --seconds, after --nvitop-warmup seconds of its own;
  side by side   ``gputui attach RUN`` and nvitop, started together, both measured over
                 one window of --seconds once the viewer has drawn the run's history and
                 both have had --nvitop-warmup seconds.

Each window also measures the run's own process (its session, samplers and recorder:
what every viewer follows through the recording), so the viewer's cost is told apart
from the run's.  Bytes are broken down by widget for the viewer (tui_cost.py's
breakdown) and by row for nvitop; the table ends with nvitop's rows that wrote most
more side by side than alone, which says where its difference comes from.  The run is
stopped at the end.  --fake-gpus/--fake-cores as in tui_cost.py (no GPU here; nvitop
then exits at once and is left out).  Never changes the card's settings.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tui_cost import PROBE, REPO, Pty, _size, breakdown, live_runs, machine, nvitop_argv, program_text, read_layouts, stop_runs, terminal_env

FIRST_FRAME_MARK = b"Presets"
SETTLE_S = 5.0  # after the viewer's first frame: it has drawn the run's history and follows it


def gputui_env(scratch: Path, cols: int, rows: int, args: argparse.Namespace, layout: Path | None) -> dict[str, str]:
    probe = scratch / "probe"
    probe.mkdir(exist_ok=True)
    (probe / "sitecustomize.py").write_text(PROBE)
    env = terminal_env(cols, rows, truecolor=False)
    env.update(
        XDG_CONFIG_HOME=str(scratch / "xdg-config"),
        XDG_STATE_HOME=str(scratch / "xdg-state"),
        PYTHONPATH=os.pathsep.join([str(probe), str(REPO), env.get("PYTHONPATH", "")]),
        TUI_COST_REPO=str(REPO),
    )
    if layout is not None:
        env["TUI_COST_LAYOUT"] = str(layout)
    if args.fake_gpus:
        env["TUI_COST_FAKE_GPUS"] = str(args.fake_gpus)
    if args.fake_cores:
        env["TUI_COST_FAKE_CORES"] = str(args.fake_cores)
    return env


def start_run(args: argparse.Namespace, scratch: Path):
    argv = [sys.executable, "-m", "gputui", "--interval", f"{args.interval:g}", "--detach"]
    if args.presets:
        argv += ["--presets", str(args.presets)]
    argv += ["--preset", args.preset] if args.preset else ["--", sys.executable, "-c", STAND_IN]
    started = subprocess.run(argv, env=gputui_env(scratch, 80, 24, args, None), capture_output=True, text=True, timeout=180)
    if started.returncode != 0:
        raise SystemExit(f"the run did not start: {started.stderr.strip()}")
    (run,) = live_runs(scratch)
    return run, time.monotonic()


# Without --preset: a loop printing a throughput line ten times a second, for as long as it is let.
STAND_IN = "import itertools, time\nfor s in itertools.count(1):\n    time.sleep(0.1)\n    print(f'step {s} | 640.0 samples/s', flush=True)\n"


def pump(ptys: list[Pty], until: float) -> None:
    """Read what the programs write (a terminal that is not read blocks its program) until ``until``."""
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return
        open_fds = [p.fd for p in ptys if not p.ended]
        if not open_fds:
            time.sleep(left)
            return
        ready, _, _ = select.select(open_fds, [], [], min(left, 0.05))
        for p in ptys:
            if p.fd in ready:
                p.read()


def by_row(session: Pty) -> dict[str, float]:
    assert session.window_t
    seconds = max(session.window_t[1] - session.window_t[0], 1e-9)
    rows: collections.Counter[int] = collections.Counter()
    for (y, _), n in session.term.cell_bytes.items():
        rows[y + 1] += n
    return {str(row): round(n / seconds, 1) for row, n in sorted(rows.items())}


def frames(session: Pty, gap: float = 0.03) -> int:
    assert session.window_t
    t0, t1 = session.window_t
    count, last = 0, None
    for t, _, _ in session.reads:
        if t0 <= t <= t1:
            if last is None or t - last > gap:
                count += 1
            last = t
    return count


def nvitop_result(session: Pty) -> dict:
    if session.ended and session.window is None:
        return {"exited_early": " ".join(program_text(session).split())[:300]}
    return {**session.result(), "frames": frames(session), "bytes_per_s_by_row": by_row(session)}


def window(ptys: list[Pty], seconds: float, run_pid: int | None) -> float | None:
    """Open every program's window now, pump for ``seconds``, close them; the run's own CPU %
    (None without a run)."""
    import psutil

    run = psutil.Process(run_pid) if run_pid is not None else None
    cpu0, t0 = (sum(run.cpu_times()[:2]) if run else 0.0), time.monotonic()
    for p in ptys:
        p.open_window()
    pump(ptys, time.monotonic() + seconds)
    for p in ptys:
        if p.window is not None:
            p.close_window()
    if run is None:
        return None
    return round((sum(run.cpu_times()[:2]) - cpu0) / (time.monotonic() - t0) * 100, 2)


def nvitop_alone(args: argparse.Namespace, size: tuple[int, int], run_pid: int | None, keep_as: str) -> dict | None:
    """nvitop alone in a terminal of ``size`` over one window (the run's own CPU % beside it,
    where there is a run); None where nvitop cannot run here."""
    command = nvitop_argv(args.interval)
    if command is None:
        return None
    cols, rows = size
    alone = Pty(command, terminal_env(cols, rows, False), cols, rows)
    pump([alone], time.monotonic() + args.nvitop_warmup)
    if alone.ended:
        alone.stop([b"q"])
        return {"exited_early": " ".join(program_text(alone).split())[:300]}
    run_cpu = window([alone], args.seconds, run_pid)
    result = nvitop_result(alone)
    if run_cpu is not None:
        result["run_process_cpu_percent"] = run_cpu
    keep(args, keep_as, alone)
    alone.stop([b"q"])
    return result


def measure_size(args: argparse.Namespace, scratch: Path, run, size: tuple[int, int]) -> dict:
    cols, rows = size
    name = f"{cols}x{rows}"
    result: dict = {"size": name}
    alone = nvitop_alone(args, size, run.pid, f"nvitop-alone-{name}.stream")
    nvitop_cmd = nvitop_argv(args.interval) if alone is not None and "exited_early" not in alone else None
    if alone is not None:
        result["nvitop_alone"] = alone
    layout = scratch / f"viewer-{name}.layout.jsonl"
    viewer = Pty([sys.executable, "-m", "gputui", "attach", run.name], gputui_env(scratch, cols, rows, args, layout), cols, rows)
    beside = Pty(nvitop_cmd, terminal_env(cols, rows, False), cols, rows) if nvitop_cmd else None
    ptys = [viewer, *([beside] if beside else [])]
    deadline = time.monotonic() + 60
    while FIRST_FRAME_MARK not in viewer.stream:
        if time.monotonic() > deadline or viewer.ended:
            raise SystemExit(f"the viewer never drew its first frame: {program_text(viewer)[-500:]}")
        pump(ptys, time.monotonic() + 0.1)
    result["viewer_first_frame_s"] = round(time.monotonic() - viewer.started, 2)
    pump(ptys, time.monotonic() + max(SETTLE_S, args.nvitop_warmup))
    result["run_process_cpu_percent_side_by_side"] = window(ptys, args.seconds, run.pid)
    result["viewer"] = {**viewer.result(), "breakdown": breakdown(viewer, read_layouts(layout))}
    keep(args, f"viewer-{name}.stream", viewer)
    if beside is not None:
        result["nvitop_side_by_side"] = nvitop_result(beside)
        keep(args, f"nvitop-beside-{name}.stream", beside)
        beside.stop([b"q"])
    viewer.stop([b"q"])  # the viewer leaves; the run goes on
    if not run.alive():
        raise SystemExit("the run ended during the measurement: give it more steps (or a shorter --warmup/--seconds)")
    return result


def keep(args: argparse.Namespace, name: str, session: Pty) -> None:
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / name).write_bytes(bytes(session.stream))


def differences(result: dict, top: int = 6) -> list[tuple[str, float, float]]:
    """nvitop's rows that wrote most more side by side than alone: (row, alone, beside) B/s."""
    alone = result.get("nvitop_alone", {}).get("bytes_per_s_by_row")
    beside = result.get("nvitop_side_by_side", {}).get("bytes_per_s_by_row")
    if not alone or not beside:
        return []
    rows = set(alone) | set(beside)
    ranked = sorted(rows, key=lambda r: -(beside.get(r, 0.0) - alone.get(r, 0.0)))
    return [(r, alone.get(r, 0.0), beside.get(r, 0.0)) for r in ranked[:top]]


def table(results: list[dict], machine_text: str) -> str:
    lines = [
        f"Machine: {machine_text}",
        "",
        "| size | viewer B/s | viewer CPU % | nvitop alone B/s | nvitop alone CPU % | nvitop beside B/s | nvitop beside CPU % | nvitop, GPU idle: B/s, CPU % | run's own CPU % | bytes ≤ 1.5× nvitop alone | CPU ≤ nvitop alone |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        viewer, alone, beside = r["viewer"], r.get("nvitop_alone", {}), r.get("nvitop_side_by_side", {})
        idle = r.get("nvitop_idle_gpu") or {}
        idle_text = f"{idle['bytes_per_s']}, {idle['cpu_percent_of_one_core']}" if "bytes_per_s" in idle else "-"
        bytes_ok = cpu_ok = "-"
        if "bytes_per_s" in alone:
            bytes_ok = "met" if viewer["bytes_per_s"] <= 1.5 * alone["bytes_per_s"] else "no"
            cpu_ok = "met" if viewer["cpu_percent_of_one_core"] <= alone["cpu_percent_of_one_core"] else "no"
        lines.append(
            f"| {r['size']} | {viewer['bytes_per_s']} | {viewer['cpu_percent_of_one_core']} | {alone.get('bytes_per_s', '-')} | "
            f"{alone.get('cpu_percent_of_one_core', '-')} | {beside.get('bytes_per_s', '-')} | {beside.get('cpu_percent_of_one_core', '-')} | "
            f"{idle_text} | {r['run_process_cpu_percent_side_by_side']} | {bytes_ok} | {cpu_ok} |"
        )
    for r in results:
        idle, alone = r.get("nvitop_idle_gpu") or {}, r.get("nvitop_alone") or {}
        if "bytes_per_s_by_row" in idle and "bytes_per_s_by_row" in alone:
            ranked = sorted(alone["bytes_per_s_by_row"], key=lambda row: -(alone["bytes_per_s_by_row"][row] - idle["bytes_per_s_by_row"].get(row, 0.0)))[:6]
            lines += [
                "",
                f"nvitop alone at {r['size']}: {idle['bytes_per_s']} B/s with the GPU idle, {alone['bytes_per_s']} B/s while the run goes. "
                "The rows that wrote most more while it goes (B/s idle → running):",
                *[f"- row {row}: {idle['bytes_per_s_by_row'].get(row, 0.0)} → {alone['bytes_per_s_by_row'][row]}" for row in ranked],
            ]
    for r in results:
        rows = differences(r)
        if rows:
            alone, beside = r["nvitop_alone"], r["nvitop_side_by_side"]
            lines += [
                "",
                f"nvitop at {r['size']}: {alone['bytes_per_s']} B/s in {alone['frames']} frames alone, "
                f"{beside['bytes_per_s']} B/s in {beside['frames']} frames side by side. Rows that wrote most more beside the viewer (B/s alone → beside):",
                *[f"- row {row}: {a} → {b}" for row, a, b in rows],
            ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", help="the run (default: a stand-in loop printing throughput, no GPU needed)")
    parser.add_argument("--presets", type=Path, help="an extra presets file for --preset")
    parser.add_argument("--interval", type=float, default=1.0, help="gputui's and nvitop's sampling interval (default 1)")
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds of the run before the first window (default 60)")
    parser.add_argument("--seconds", type=float, default=30.0, help="each window (default 30)")
    parser.add_argument("--nvitop-warmup", type=float, default=10.0, help="nvitop's own seconds before its window (default 10)")
    parser.add_argument("--sizes", default="140x40,80x24", help="terminal sizes, comma-separated (default 140x40,80x24)")
    parser.add_argument("--fake-gpus", type=int, default=0, metavar="N", help="no GPU here: N GPUs of the NVML test double in gputui's processes")
    parser.add_argument("--fake-cores", type=int, default=0, metavar="N", help="N synthetic CPU cores in gputui's processes")
    parser.add_argument("--out", type=Path, help="the results (viewer-cost.json, viewer-cost.md) and each window's terminal stream")
    args = parser.parse_args()
    sizes = [_size(size) for size in args.sizes.split(",")]
    idle = {f"{c}x{r}": nvitop_alone(args, (c, r), None, f"nvitop-idle-{c}x{r}.stream") for c, r in sizes}  # the GPU idle, before the run
    with tempfile.TemporaryDirectory(prefix="gputui-viewer-cost-") as folder:
        scratch = Path(folder)
        run, began = start_run(args, scratch)
        results = []
        try:
            time.sleep(max(0.0, began + args.warmup - time.monotonic()))
            for size in sizes:
                result = measure_size(args, scratch, run, size)
                if idle.get(result["size"]) is not None:
                    result["nvitop_idle_gpu"] = idle[result["size"]]
                result["run_seconds_at_window_end"] = round(time.monotonic() - began, 1)
                results.append(result)
                print(
                    json.dumps({k: v for k, v in result.items() if k != "viewer"} | {"viewer": {k: v for k, v in result["viewer"].items() if k != "breakdown"}})
                )
        finally:
            stop_runs(scratch)
    text = table(results, machine())
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "viewer-cost.json").write_text(json.dumps({"run": run.label, "machine": machine(), "results": results}, indent=2) + "\n")
        (args.out / "viewer-cost.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

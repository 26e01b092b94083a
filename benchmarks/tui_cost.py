"""What the dashboard costs: CPU, bytes to the terminal, time to the first frame.

    python benchmarks/tui_cost.py [--seconds 30] [--size 140x40] [--interval 1] [--json OUT.json]
    python benchmarks/tui_cost.py --preset gpu-loop --presets benchmarks/gpu-presets.toml
    python benchmarks/tui_cost.py --headless        # the same run, recorded with no dashboard
    python benchmarks/tui_cost.py --state watching  # no run: the dashboard idle on the preset list
    python benchmarks/tui_cost.py --state summary   # the run summary left open (also: findings, editor, check)
    python benchmarks/tui_cost.py --all --out DIR   # every state at 140x40 and 80x24, a table in DIR
    python benchmarks/tui_cost.py --all --fake-gpus 1 --fake-cores 16 --out DIR   # the same, as on a GPU box

On a GPU machine (issue 25's states, nvitop beside gputui where it has a counterpart):

    python3 benchmarks/tui_cost.py --all --preset torch-resnet50 \
        --running-preset torch-resnet50-input-fed --findings-preset torch-resnet50-input-bound \
        --nvitop --warmup 20 --seconds 20 --out "$OUT/tui-cost"

gputui runs as a user runs it: ``python -m gputui`` in a pseudo-terminal of the given
size (TERM=xterm-256color unless --truecolor), with a preset started from the command
line and sampling every --interval seconds.  The script reads everything gputui
writes to the terminal and measures, over --seconds after a short warm-up:

  cpu       the dashboard's own CPU time (user + system) / wall time, in % of one core:
            the app and the thread that follows the run's recording; not the benchmark
            it runs.  The run lives in a process of its own (its session, samplers and
            recorder: gputui.live), measured over the same window as run_process
  bytes/s   bytes written to the terminal per second
  1st frame seconds from exec to the first full frame (the "Presets" panel drawn),
            and the CPU seconds gputui used until then (what a busy machine stretches)

Without --preset it runs its own stand-in workload (tui_bench_workload below): two
data-loader-like worker processes and a main process reporting throughput ten times
a second through gputui's protocol, plus a log line every two seconds, for as long
as the measurement lasts.  Targets: <= 3.4 % of one core, <= 2 KB/s, <= 1.0 s.
--dump FILE keeps the window's terminal output, to see what is being redrawn.

--state says what the user leaves on screen during the window: ``running`` (the
dashboard over the run, the default), ``watching`` (no run, the preset list focused:
``--preset watch``), ``summary`` (the run ends and its summary stays open over the
dashboard, which keeps sampling: the stand-in run ends after --run-seconds, a --preset
when it is done), ``findings`` (f, pressed every 3 s until the run has findings: the
findings view open over the run), ``editor`` (e: the preset editor open over the run)
or ``check`` (no run; k, then u: the Check screen during a quick check).  The window
opens once that view is up (2 s after; 0.5 s after u for the check) and the warm-up
is over.  --running-preset and --findings-preset pick other presets for those states
(--all: a run that outlasts the window; one that has findings while it runs).

Where the bytes go (--out DIR): each measurement keeps gputui's whole terminal stream
(NAME.stream; ``stream_window`` in tui-cost.json says where the window is in it), the
layout log (NAME.layout.jsonl) and a breakdown in tui-cost.json (tui-cost.md: the
table): bytes per widget (the screen's layout as gputui laid it out, read through a
probe loaded into gputui's process: see PROBE), per row, the busiest cells, the
biggest frames and what they drew, the layout passes and full-screen repaints in
the window, the frames that redrew the chart's whole plot (a longer span or a higher
scale: once at 1, 2, 3, 5, 10 minutes..., so a window holding one costs more than a
run's steady state) with the bytes per second without them, and the messages a
screen under a view handled (each one used to repaint the whole screen).  A byte counts where it is drawn: a cursor move at the cell it
moves to, colours and text at the cell they are written in; a move followed by
another, "(cursor parked)"; mode switches, "(terminal modes)".

--nvitop also runs nvitop (``python -m nvitop -m full --interval I``, I gputui's
--interval, when it can be imported) in a terminal of the same size over the same
window (its stream: NAME.nvitop.stream), its CPU and bytes measured as gputui's, for
the issue's comparison: in states nvitop has a counterpart for (watching, running)
gputui's targets are half of nvitop's bytes and no more than its CPU; elsewhere 1 KB/s.

Where the CPU goes (--out DIR): --thread-times wraps gputui's main functions (the
redraw tick, the compositor, each panel's lines, the session's dispatch, the sampler's
reads, the recorder) and the event loop's callbacks (each by what it serves: a timer, a
widget's message pump) and times them with time.thread_time() over the window: the
calling thread's CPU alone, waits excluded, exact on Python 3.12, where --cprofile's
cProfile sees every thread's calls on one stack.  Both write under --out
(NAME.thread-times.json; NAME.cprofile and its listing) and cost gputui CPU: measure
without them.

No GPU here?  --fake-gpus N and --fake-cores N load the project's NVML test double
(tests/support/fake_nvml.py; busy while gputui has a run, with another user's process
on it, idle otherwise) and N synthetic CPU cores (each a few % idle, six of them
loaded while a run goes) into gputui's process: the dashboard as on a GPU machine, to
reproduce its costs on a laptop.  Never on a real GPU machine.
"""

from __future__ import annotations

import argparse
import collections
import fcntl
import importlib.util
import json
import os
import platform
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import textwrap
import time
import unicodedata
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from gputui.live.registry import LiveRun, Registry

FIRST_FRAME_MARK = b"Presets"  # a border title in every layout: the first frame is up
STATES = ("running", "watching", "summary", "findings", "editor", "check")
ALL_STATES = ("watching", "running", "summary", "findings", "editor", "check")
NVITOP_STATES = ("watching", "running")  # what nvitop has a counterpart for
NO_RUN_STATES = ("watching", "check")  # the Check screen checks an idle machine (it refuses while a run goes)
VIEW_OF_STATE = {"summary": "SummaryScreen", "findings": "FindingsScreen", "editor": "PresetEditorScreen", "check": "CheckScreen"}
SUMMARY_RUN_S = 3.0  # --state summary: the stand-in run ends and its summary opens by itself
SETTLE_S = 2.0  # after the view is up, before the window opens
CHECK_SETTLE_S = 0.5  # after u: the window opens while the quick check is going
VIEW_TIMEOUT_S = 150.0  # a view that never comes (no findings, a run that never ends)
NVITOP_WARMUP_S = 5.0  # nvitop starts once gputui's window could open, and gets this long
OTHER_TARGET = 1024.0  # B/s where nvitop has no counterpart
BURST_GAP_S = 0.03  # terminal writes closer than this are one frame
FULL_REPAINT_ROWS = 0.9  # a frame writing on this share of the rows repaints the screen
# A frame writing in this share of the chart's columns and of its rows redrew the plot.
# A step writes a few new columns; a longer span clears the right half of the columns
# drawn (more, where the readings vary, as each column's mean changes).
PLOT_REWRITE_COLUMNS, PLOT_REWRITE_ROWS = 0.25, 0.5

WORKLOAD = textwrap.dedent(
    """
    import json, multiprocessing, sys, time

    def loader(stop):
        while not stop.is_set():  # a light data-loader worker: a little CPU, mostly waiting
            sum(i * i for i in range(20000))
            time.sleep(0.05)

    if __name__ == "__main__":
        run_for = float(sys.argv[1]) if len(sys.argv) > 1 else float("inf")
        stop = multiprocessing.Event()
        workers = [multiprocessing.Process(target=loader, args=(stop,)) for _ in range(2)]
        for w in workers:
            w.start()
        step, began = 0, time.monotonic()
        try:
            while time.monotonic() - began < run_for:
                step += 1
                phase = "warmup" if step <= 20 else "measure"
                print("@gputui " + json.dumps({"event": "step", "phase": phase, "step": step,
                      "samples": 64, "seconds": 0.1}), flush=True)
                if step % 20 == 0:
                    print(f"epoch {step // 20}: loss {1 / step:.5f} after {time.monotonic() - began:.0f}s", flush=True)
                time.sleep(0.1)
        finally:
            stop.set()
    """
)

# Loaded as sitecustomize into gputui's processes: the dashboard (``-m gputui``) and the
# process of the run it starts (``-m gputui.live``); every other Python (the run's
# command) leaves it at once.  In the dashboard it logs each layout pass of each screen,
# with the widgets' regions when they changed (the breakdown's map, and how the benchmark
# sees which view is up), and takes its measuring settings out of the environment; in
# both, --fake-gpus/--fake-cores put the NVML test double and synthetic cores in place of
# the machine's (the run's process samples the GPUs while the dashboard follows it).
PROBE = textwrap.dedent(
    r"""
    import os, sys
    try:
        _argv = open("/proc/self/cmdline", "rb").read().split(b"\0")
    except OSError:
        _argv = []
    _role = "dashboard" if b"gputui" in _argv else "run" if b"gputui.live" in _argv else None
    _measured = _role == "dashboard"
    _layout = os.environ.pop("TUI_COST_LAYOUT", "") if _measured else ""
    _gpus = int(os.environ.get("TUI_COST_FAKE_GPUS", "0") or 0) if _role else 0
    _cores = int(os.environ.get("TUI_COST_FAKE_CORES", "0") or 0) if _role else 0
    _repo = os.environ.get("TUI_COST_REPO", "")
    _cprofile = os.environ.pop("TUI_COST_CPROFILE", "") if _measured else ""

    # --thread-times: these functions' CPU time (time.thread_time, so the calling
    # thread's alone, waits excluded) from SIGUSR1 to SIGUSR2, written as JSON: per
    # function and thread, calls and seconds (inclusive of what they call).  cProfile
    # cannot say this on Python 3.12, where it sees every thread's calls on one stack.
    _window_opens, _window_closes = [], []  # what --thread-times and --cprofile do as the window opens and closes
    _thread_times = os.environ.pop("TUI_COST_THREAD_TIMES", "") if _measured else ""
    _TIMED = (
        "gputui.tui.app_base:DashboardApp.refresh_dashboard",
        "gputui.tui.app_base:DashboardApp._display",
        "gputui.tui.live_app:GpuTuiApp.take_news",
        "gputui.tui.live_app:GpuTuiApp.on_session_news",
        "gputui.tui.screens.dashboard_screen:DashboardScreen._compositor_refresh",
        "gputui.tui.compositor:CroppingCompositor._get_renders",
        "gputui.tui.widgets.state_view:StateView.sync",
        "gputui.tui.widgets.state_view:StateView.render_line",
        "gputui.tui.widgets.state_view:StateView._remember",
        "gputui.tui.widgets.throughput_chart:ThroughputChart.sync",
        "gputui.tui.widgets.throughput_chart:ThroughputChart._draw_plot",
        "gputui.tui.widgets.cpu:CpuPanel.build_lines",
        "gputui.tui.widgets.gpu_panel:GpuPanel.build_lines",
        "textual.message_pump:MessagePump._dispatch_message",
        "textual.timer:Timer._tick",
        "asyncio.base_events:BaseEventLoop._run_once",
        "textual._compositor:Compositor.render_update",
        "textual._styles_cache:StylesCache.render_widget",
        "textual.widget:Widget.refresh",
        "textual.message_pump:MessagePump.post_message",
        "gputui.session.session:Session._handle",
        "gputui.session.session:Session._take_sample",
        "gputui.session.session:Session._emit",
        "gputui.telemetry.host:HostTelemetry.sample",
        "gputui.telemetry.gpu:GpuTelemetry.sample",
        "gputui.record.recording:Recorder._write",
        "gputui.diagnosis.engine:Diagnoser.on_sample",
        "gputui.diagnosis.engine:Diagnoser.on_event",
        "gputui.session.summary:SummaryBuilder.on_sample",
        "gputui.session.summary:SummaryBuilder.counted",
        "gputui.view.bridge:SessionBridge._put",
        "gputui.live.followed:FollowedRun._tell",
        "gputui.record.follow:RecordingTail.read",
    )
    if _thread_times:
        import functools, importlib, inspect, json, threading, time

        _times = {}
        _timing = [False]

        def _timed(key, fn):
            if inspect.iscoroutinefunction(fn):
                return fn  # awaited: its time would include what runs while it waits

            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                if not _timing[0]:
                    return fn(*args, **kwargs)
                t0 = time.thread_time()
                try:
                    return fn(*args, **kwargs)
                finally:
                    slot = _times.setdefault((key, threading.current_thread().name), [0, 0.0])
                    slot[0] += 1
                    slot[1] += time.thread_time() - t0

            return wrapper

        for _target in _TIMED:
            _module, _, _path = _target.partition(":")
            _cls_name, _, _attr = _path.partition(".")
            try:
                _cls = getattr(importlib.import_module(_module), _cls_name)
                setattr(_cls, _attr, _timed(_target, getattr(_cls, _attr)))
            except Exception as exc:  # a renamed function: measured without it
                print(f"thread-times: {_target}: {exc!r}", file=sys.stderr)

        import gc

        _gc_started = {}

        def _gc_timed(phase, info):  # the collector's time, by generation, as one more row
            if phase == "start":
                _gc_started[threading.get_ident()] = time.thread_time()
            elif _timing[0] and threading.get_ident() in _gc_started:
                slot = _times.setdefault((f"gc:generation {info['generation']}", threading.current_thread().name), [0, 0.0])
                slot[0] += 1
                slot[1] += time.thread_time() - _gc_started.pop(threading.get_ident())

        gc.callbacks.append(_gc_timed)

        # What the event loop runs, each callback by what it serves: a Task's step by its
        # coroutine and the object that runs it (each Textual widget has a message
        # pump of its own), any other callback by its name.
        from asyncio import events as _events

        _handle_run = _events.Handle._run

        def _callback_label(callback):
            owner = getattr(callback, "__self__", None)
            get_coro = getattr(owner, "get_coro", None)
            if get_coro is None:
                return "loop: " + getattr(callback, "__qualname__", type(callback).__name__)
            coro = get_coro()
            frame = getattr(coro, "cr_frame", None)
            me = frame.f_locals.get("self") if frame is not None else None
            return f"loop: {getattr(coro, '__qualname__', '?')} of {type(me).__name__}" if me is not None else f"loop: {getattr(coro, '__qualname__', '?')}"

        def _timed_handle_run(self):
            if not _timing[0]:
                return _handle_run(self)
            try:
                label = _callback_label(self._callback)
            except Exception as exc:  # the probe must never break the loop it measures
                label = f"loop: ({type(exc).__name__}: {exc})"
            t0 = time.thread_time()
            try:
                return _handle_run(self)
            finally:
                slot = _times.setdefault((label, threading.current_thread().name), [0, 0.0])
                slot[0] += 1
                slot[1] += time.thread_time() - t0

        _events.Handle._run = _timed_handle_run

        def _times_start():
            _times.clear()
            _timing[0] = True

        def _times_stop():
            _timing[0] = False
            rows = [{"function": k, "thread": t, "calls": n, "cpu_s": round(c, 6)} for (k, t), (n, c) in sorted(_times.items(), key=lambda i: -i[1][1])]
            with open(_thread_times, "w") as fh:
                json.dump(rows, fh, indent=1)

        _window_opens.append(_times_start)
        _window_closes.append(_times_stop)

    # --cprofile: SIGUSR1 starts cProfile, SIGUSR2 stops it and writes the stats (the
    # benchmark sends them as the window opens and closes).  Python 3.11 profiles the
    # main thread only; 3.12's cProfile (sys.monitoring) every thread.
    if _cprofile:
        import cProfile
        _profiler = cProfile.Profile()

        def _profile_stop():
            _profiler.disable()
            _profiler.dump_stats(_cprofile)

        _window_opens.append(_profiler.enable)
        _window_closes.append(_profile_stop)

    if _window_opens:  # the benchmark signals the window's start and end
        import signal

        signal.signal(signal.SIGUSR1, lambda signum, frame: [start() for start in _window_opens])
        signal.signal(signal.SIGUSR2, lambda signum, frame: [stop() for stop in _window_closes])

    # Each Python thread gives its name to the OS (/proc/self/task/TID/comm, 15 bytes), so
    # the benchmark can tell whose CPU time is whose; time outside the GIL (NVML calls,
    # system calls) included, which py-spy's --gil samples do not see.
    import threading
    _bootstrap_inner = threading.Thread._bootstrap_inner

    def _named_bootstrap_inner(self):
        try:
            with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as fh:
                fh.write(self.name[:15])
        except OSError:
            pass
        _bootstrap_inner(self)

    if _role:
        threading.Thread._bootstrap_inner = _named_bootstrap_inner

    if _layout:
        import json, time
        from textual.screen import Screen
        from textual.scrollbar import ScrollBar, ScrollBarCorner

        _layout_file = open(_layout, "a", buffering=1, encoding="utf-8")
        _drawn = {}

        def _label(widget):
            if isinstance(widget, ScrollBar):
                return _label(widget.parent) + ("/scrollbar-v" if widget.vertical else "/scrollbar-h")
            if isinstance(widget, ScrollBarCorner):
                return _label(widget.parent) + "/scrollbar-corner"
            name = type(widget).__name__
            return f"{name}#{widget.id}" if widget.id else name

        _refresh_layout = Screen._refresh_layout

        def _logged_refresh_layout(self, *args, **kwargs):
            _refresh_layout(self, *args, **kwargs)
            try:
                widgets = []
                for widget, (region, clip) in self._compositor.visible_widgets.items():  # topmost first
                    shown = region.intersection(clip)
                    if shown.area:
                        widgets.append([_label(widget), shown.x, shown.y, shown.width, shown.height])
                record = {"t": time.monotonic(), "screen": type(self).__name__, "key": id(self), "current": self.is_current}
                if widgets != _drawn.get(id(self)):
                    _drawn[id(self)] = record["widgets"] = widgets
                _layout_file.write(json.dumps(record) + "\n")
            except Exception as exc:  # the probe must never break the app it measures
                _layout_file.write(json.dumps({"t": time.monotonic(), "error": repr(exc)}) + "\n")

        Screen._refresh_layout = _logged_refresh_layout

        # What a screen under a modal is sent: each message it handles may repaint it
        # (and the modal over it) whole, so the breakdown names them.
        _dispatch = Screen._dispatch_message

        async def _logged_dispatch(self, message):
            try:
                covered = self.is_attached and self.app.screen is not self and self in self.app._background_screens
            except Exception:
                covered = False
            if covered:
                sender = getattr(message, "_sender", None)
                _layout_file.write(json.dumps({"t": time.monotonic(), "covered": type(self).__name__, "message": type(message).__name__,
                                               "sender": _label(sender) if sender is not None and hasattr(sender, "id") else type(sender).__name__}) + "\n")
            return await _dispatch(self, message)

        Screen._dispatch_message = _logged_dispatch

    if _gpus or _cores:
        import random, threading, time
        import psutil

        _rng = random.Random(25)
        _me = psutil.Process()

        def _run_pids():
            try:
                return [p.pid for p in _me.children()]
            except Exception:
                return []

    if _cores:
        _Times = type(psutil.cpu_times(percpu=True)[0])
        _idle = _Times._fields.index("idle")
        _acc = [[0.0] * len(_Times._fields) for _ in range(_cores)]
        _last = [time.monotonic()]

        def _cpu_times(percpu=False):
            now = time.monotonic()
            dt, _last[0] = now - _last[0], now
            loaded = bool(_run_pids())
            for k, row in enumerate(_acc):  # idle cores a few %, six busy ones while a run goes
                share = _rng.uniform(0.3, 1.0) if loaded and k < 6 else _rng.uniform(0.0, 0.06)
                row[0] += dt * share
                row[_idle] += dt * (1 - share)
            per = [_Times(*row) for row in _acc]
            return per if percpu else _Times(*(sum(v) for v in zip(*per)))

        psutil.cpu_times = _cpu_times
        psutil.cpu_count = lambda logical=True: _cores if logical else max(1, _cores // 2)
        os.cpu_count = lambda: _cores

    if _gpus:
        sys.path.insert(0, _repo)
        from tests.support.fake_nvml import FakeGpu, FakeNvml

        _GIB = 1024 ** 3
        _fake = FakeNvml([
            FakeGpu(uuid=f"GPU-{i:08d}-1111-2222-3333-444444444444", processes=[], throttle_mask=0x1, util_gpu=0, util_mem=0,
                    power_mw=75_000, temp_c=33, memory_used=_GIB // 2, sm_clock=345)
            for i in range(_gpus)
        ])

        def _move():  # an idle GPU's readings jitter a little; a run's move a lot
            while True:
                time.sleep(0.5)
                pids = _run_pids()
                for gpu in _fake.gpus:
                    if pids:
                        gpu.util_gpu, gpu.util_mem = _rng.randint(92, 100), _rng.randint(35, 60)
                        gpu.power_mw, gpu.temp_c = _rng.randint(560_000, 690_000), min(70, gpu.temp_c + 1)
                        gpu.sm_clock, gpu.memory_used, gpu.throttle_mask = _rng.choice([1980, 1965, 1950]), 60 * _GIB, 0x4
                        gpu.processes = [(pids[0], 59 * _GIB), (1, 10 * _GIB)]  # and another user's: a co-tenant finding
                    else:
                        gpu.util_gpu, gpu.util_mem = 0, 0
                        gpu.power_mw, gpu.temp_c = _rng.randint(74_000, 77_000), max(33, gpu.temp_c - 1)
                        gpu.sm_clock, gpu.memory_used, gpu.throttle_mask = 345, _GIB // 2, 0x1
                        gpu.processes = []
                    gpu.energy_mj += gpu.power_mw // 2

        threading.Thread(target=_move, name="tui-cost-fake-gpu", daemon=True).start()
        sys.modules["pynvml"] = _fake
    """
)


def _size(text: str) -> tuple[int, int]:
    cols, rows = (int(v) for v in text.lower().split("x"))
    return cols, rows


# -- A terminal, just enough of one: where each byte lands, and what the screen shows ---
CSI = re.compile(rb"\x1b\[([0-9;?<=>]*)([ -/]*[@-~])")
OTHER_ESCAPE = re.compile(rb"\x1b(?:\][^\x07\x1b]*(?:\x07|\x1b\\)|P[^\x1b]*\x1b\\|[()][0-9A-Za-z]|[=>78M])")


MODES, PARKED = (-1, -1), (-2, -2)  # bytes that are not drawn at a cell: mode switches, a cursor parked
SPECIAL = {MODES: "(terminal modes)", PARKED: "(cursor parked)"}


def _cell_width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


class Terminal:
    """Follows the cursor through what gputui writes, keeps the screen's characters
    (to see which view is up) and, while ``counting``, the bytes written at each cell."""

    def __init__(self, cols: int, rows: int) -> None:
        self.cols, self.rows = cols, rows
        self.x = self.y = 0
        self.chars = [[" "] * cols for _ in range(rows)]
        self.counting = False
        self.cell_bytes: collections.Counter[tuple[int, int]] = collections.Counter()
        self._pending = b""
        self._move_bytes = 0  # a cursor move not yet followed by what it moved for

    def feed(self, data: bytes) -> None:
        data, self._pending = self._pending + data, b""
        pos, end = 0, len(data)
        while pos < end:
            esc = data.find(b"\x1b", pos)
            if esc < 0:
                esc = end
            if esc > pos:
                self._text(data[pos:esc])
                pos = esc
                continue
            match = CSI.match(data, pos) or OTHER_ESCAPE.match(data, pos)
            if match is None:
                if end - pos < 64:  # an escape cut in two by the read: wait for the rest
                    self._pending = data[pos:]
                    return
                self._count(1)
                pos += 1
                continue
            size = match.end() - pos
            if match.re is CSI:
                params, command = match.group(1), match.group(2)
                if command in (b"H", b"G", b"C"):  # to a cell, to a column, forward
                    self._moved()  # a move followed by another: the cursor parked, nothing drawn
                    if command == b"H":
                        row, col = (params.split(b";") + [b"1", b"1"])[:2]
                        self.y = min(self.rows - 1, max(0, int(row or 1) - 1))
                        self.x = min(self.cols - 1, max(0, int(col or 1) - 1))
                    else:
                        column = int(params or 1) - 1 if command == b"G" else self.x + int(params or 1)
                        self.x = min(self.cols - 1, max(0, column))
                    self._move_bytes = size  # counted where the next thing is drawn
                    pos = match.end()
                    continue
                if params.startswith(b"?"):  # modes: cursor shown or hidden, mouse, paste...
                    self._count(size, MODES)
                    pos = match.end()
                    continue
                if command == b"J" and params in (b"2", b"3"):
                    self.chars = [[" "] * self.cols for _ in range(self.rows)]
            self._count(size)
            pos = match.end()

    def _moved(self) -> None:
        if self._move_bytes:
            self._count(0, PARKED)

    def _count(self, n: int, where: tuple[int, int] | None = None) -> None:
        """``n`` bytes drawn at the cursor (or at ``where``), with the move that brought it there."""
        if where != MODES:
            n, self._move_bytes = n + self._move_bytes, 0
        if self.counting and n:
            self.cell_bytes[where or (self.y, min(self.x, self.cols - 1))] += n

    def end_frame(self) -> None:
        self._moved()

    def _text(self, data: bytes) -> None:
        text = data.decode("utf-8", errors="replace")
        for char in text:
            size = len(char.encode("utf-8", errors="replace"))
            if char == "\r":
                self.x = 0
                self._count(size)
                continue
            if char == "\n":
                self.y = min(self.rows - 1, self.y + 1)
                self._count(size)
                continue
            if char < " ":
                self._count(size)
                continue
            width = _cell_width(char)
            self._count(size)
            if width and self.x < self.cols:
                self.chars[self.y][self.x] = char
                self.x += width

    def text(self) -> str:
        return "\n".join("".join(row) for row in self.chars)


class Pty:
    """A program in a pseudo-terminal of the given size: its output, kept whole with the
    time of each read, followed on a Terminal; its CPU time."""

    def __init__(self, argv: list[str], env: dict[str, str], cols: int, rows: int) -> None:
        self.started = time.monotonic()
        self.cols, self.rows = cols, rows
        pid, fd = pty.fork()
        if pid == 0:  # the child: size the terminal before the program looks at it
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.execve(argv[0], argv, env)  # in the caller's directory: presets may name relative paths
        self.pid, self.fd = pid, fd
        self.proc = psutil.Process(pid)
        self.stream = bytearray()
        self.reads: list[tuple[float, int, int]] = []  # (time, offset, length)
        self.term = Terminal(cols, rows)
        self.ended = False
        self.window: tuple[int, int] | None = None  # offsets of the measured window
        self.window_t: tuple[float, float] | None = None
        self.cpu_window: tuple[float, float] | None = None
        self.threads_at_open: dict[int, tuple[str, float, float]] = {}  # thread_cpu() as the window opens and closes
        self.threads_at_close: dict[int, tuple[str, float, float]] = {}

    def read(self) -> bytes:
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            self.ended = True
            return b""
        self.reads.append((time.monotonic(), len(self.stream), len(chunk)))
        self.stream += chunk
        self.term.feed(chunk)
        return chunk

    def cpu(self) -> float:
        times = self.proc.cpu_times()
        return times.user + times.system

    def thread_cpu(self) -> dict[int, tuple[str, float, float]]:
        """Each thread's name (the probe names gputui's) and its user and system CPU
        seconds so far, from /proc; the main thread is "main"."""
        tick = os.sysconf("SC_CLK_TCK")
        threads = {}
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            try:
                stat = (task / "stat").read_text()
                name = "main" if task.name == str(self.pid) else (task / "comm").read_text().strip()
            except OSError:  # it ended
                continue
            fields = stat[stat.rindex(")") + 2 :].split()  # fields 3 on: utime and stime are 14 and 15
            threads[int(task.name)] = (name, int(fields[11]) / tick, int(fields[12]) / tick)
        return threads

    def write(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def open_window(self) -> None:
        self.window_t = (time.monotonic(), 0.0)
        self.window = (len(self.stream), len(self.stream))
        self.cpu_window = (self.cpu(), 0.0)
        self.threads_at_open = self.thread_cpu()
        self.term.counting = True

    def close_window(self) -> None:
        assert self.window_t and self.window and self.cpu_window
        self.window_t = (self.window_t[0], time.monotonic())
        self.window = (self.window[0], len(self.stream))
        self.cpu_window = (self.cpu_window[0], self.cpu())
        self.threads_at_close = self.thread_cpu()
        self.term.counting = False

    def cpu_by_thread(self, seconds: float) -> dict[str, dict[str, float]]:
        """Each thread name's user and system CPU over the window, in % of one core (a
        thread that ended inside the window is left out), busiest first."""
        by_name: dict[str, list[float]] = {}
        for tid, (name, user, system) in self.threads_at_close.items():
            _, user0, system0 = self.threads_at_open.get(tid, (name, 0.0, 0.0))
            shares = by_name.setdefault(name, [0.0, 0.0])
            shares[0] += (user - user0) / seconds * 100
            shares[1] += (system - system0) / seconds * 100
        ranked = sorted(by_name.items(), key=lambda item: -sum(item[1]))
        return {name: {"user": round(user, 2), "system": round(system, 2)} for name, (user, system) in ranked if user + system > 0}

    def result(self) -> dict:
        assert self.window_t and self.window and self.cpu_window
        seconds = self.window_t[1] - self.window_t[0]
        return {
            "window_s": round(seconds, 2),
            "cpu_percent_of_one_core": round((self.cpu_window[1] - self.cpu_window[0]) / seconds * 100, 2),
            "bytes_per_s": round((self.window[1] - self.window[0]) / seconds, 1),
            "cpu_percent_by_thread": self.cpu_by_thread(seconds),
        }

    def stop(self, keys: list[bytes] | None) -> None:
        """Quit with these keys (a pause between them: Esc then q is not Alt+q), or Ctrl-C."""
        if keys is None:
            os.kill(self.pid, signal.SIGINT)
        for key in keys or ():
            try:
                os.write(self.fd, key)
            except OSError:
                break
            time.sleep(0.3)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
            if done:
                break
            try:
                if select.select([self.fd], [], [], 0.1)[0]:
                    os.read(self.fd, 65536)
            except OSError:
                pass
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


# -- Where the window's bytes went ------------------------------------------------------
def read_layouts(path: Path) -> list[dict]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def screens_laid_out(path: Path) -> set[str]:
    return {r["screen"] for r in read_layouts(path) if r.get("current") and "screen" in r}


def _widget_maps(layouts: list[dict], until: float) -> tuple[list, list | None, str | None]:
    """The dashboard's widgets and the top view's (if another), as last laid out by ``until``."""
    maps: dict[int, list] = {}
    names: dict[int, str] = {}
    top: int | None = None
    for record in layouts:
        if "screen" not in record or record["t"] > until:
            continue
        if "widgets" in record:
            maps[record["key"]] = record["widgets"]
        names[record["key"]] = record["screen"]
        if record.get("current"):
            top = record["key"]
    dashboard = next((maps[k] for k, n in names.items() if n == "DashboardScreen" and k in maps), [])
    if top is None or names.get(top) == "DashboardScreen":
        return dashboard, None, None
    return dashboard, maps.get(top), names.get(top)


def _widget_at(widgets: list, y: int, x: int) -> str | None:
    for label, wx, wy, w, h in widgets:  # topmost first
        if wx <= x < wx + w and wy <= y < wy + h and not label.endswith("Screen") and "Screen#" not in label:
            return label
    return None


def _plot_rewrite(cell_bytes: collections.Counter, chart: tuple[int, int, int, int] | None) -> int:
    """The chart's bytes in a frame that rewrote most of its plot (a longer span, a
    higher scale: every column drawn again), else 0.  Such a frame comes once at each
    span (1, 2, 3, 5, 10 minutes...): a window that holds one costs it a share of its
    seconds that a run's steady state does not."""
    if chart is None:
        return 0
    cx, cy, cw, ch = chart
    mine = {(y, x): n for (y, x), n in cell_bytes.items() if cx <= x < cx + cw and cy <= y < cy + ch}
    columns, rows = {x for _, x in mine}, {y for y, _ in mine}
    return sum(mine.values()) if len(columns) >= PLOT_REWRITE_COLUMNS * cw and len(rows) >= PLOT_REWRITE_ROWS * ch else 0


def breakdown(session: Pty, layouts: list[dict]) -> dict:
    """The window's bytes per widget, row and cell; its layout passes and full repaints."""
    assert session.window_t and session.window
    t0, t1 = session.window_t
    seconds = max(t1 - t0, 1e-9)
    dashboard, top, top_name = _widget_maps(layouts, t1)
    per_widget: collections.Counter[str] = collections.Counter()
    per_row: collections.Counter[int] = collections.Counter()
    for (y, x), n in session.term.cell_bytes.items():
        if (y, x) in SPECIAL:
            per_widget[SPECIAL[(y, x)]] += n
            continue
        per_row[y + 1] += n
        label = _widget_at(top, y, x) if top else None
        if label is None and top:
            label = f"under {top_name}: {_widget_at(dashboard, y, x) or 'screen'}"
        per_widget[label or _widget_at(dashboard, y, x) or "screen"] += n
    # frames: reads closer together than BURST_GAP_S; full repaints write on most rows
    frames: list[list[tuple[float, int, int]]] = []
    for read in session.reads:
        if not (t0 <= read[0] <= t1):
            continue
        if frames and read[0] - frames[-1][-1][0] <= BURST_GAP_S:
            frames[-1].append(read)
        else:
            frames.append([read])
    full, sized, rewrites = [], [], []
    chart = next(((wx, wy, w, h) for label, wx, wy, w, h in dashboard if label.startswith("ThroughputChart")), None)
    for frame in frames:
        term = Terminal(session.cols, session.rows)
        term.counting = True
        term.x, term.y = session.cols - 1, session.rows - 1  # unknown until the frame's first move
        for _, offset, length in frame:
            term.feed(bytes(session.stream[offset : offset + length]))
        at, size = round(frame[0][0] - t0, 2), sum(length for _, _, length in frame)
        if len({y for y, _ in term.cell_bytes}) >= FULL_REPAINT_ROWS * session.rows:
            full.append({"at_s": at, "bytes": size})
        where: collections.Counter[str] = collections.Counter()
        term.end_frame()
        for (y, x), n in term.cell_bytes.items():
            where[SPECIAL.get((y, x)) or (_widget_at(top, y, x) if top else None) or _widget_at(dashboard, y, x) or "screen"] += n
        sized.append({"at_s": at, "bytes": size, "widgets": dict(where.most_common(4))})
        rewrite = _plot_rewrite(term.cell_bytes, chart)
        if rewrite:
            rewrites.append({"at_s": at, "bytes": rewrite})
    passes = collections.Counter(r["screen"] for r in layouts if "screen" in r and t0 <= r["t"] <= t1)
    covered = collections.Counter(f"{r['covered']}: {r['message']} from {r['sender']}" for r in layouts if "covered" in r and t0 <= r["t"] <= t1)
    return {
        "bytes_per_s_by_widget": {k: round(v / seconds, 1) for k, v in per_widget.most_common()},
        "bytes_per_s_by_row": {str(k): round(v / seconds, 1) for k, v in sorted(per_row.items())},
        "busiest_cells": [{"row": y + 1, "col": x + 1, "bytes": n} for (y, x), n in session.term.cell_bytes.most_common(30) if (y, x) not in SPECIAL][:25],
        "frames": len(frames),
        "full_repaints": full,
        "biggest_frames": sorted(sized, key=lambda f: -f["bytes"])[:10],
        "plot_rewrites": rewrites,
        "bytes_per_s_without_plot_rewrites": round((sum(session.term.cell_bytes.values()) - sum(r["bytes"] for r in rewrites)) / seconds, 1),
        "layout_passes": dict(passes),
        "messages_to_covered_screens": dict(covered.most_common()),
    }


# -- One measurement --------------------------------------------------------------------
def gputui_argv(args: argparse.Namespace, scratch: Path) -> tuple[list[str], str]:
    presets_args: list[str] = []
    preset = "watch" if args.state in NO_RUN_STATES else args.preset
    if args.state in ("running", "editor") and args.running_preset:
        preset = args.running_preset
    elif args.state == "findings" and args.findings_preset:
        preset = args.findings_preset
    if preset is None:
        workload = scratch / "tui_bench_workload.py"
        workload.write_text(WORKLOAD)
        run_for = [json.dumps(str(args.run_seconds))] if args.state == "summary" else []
        presets_file = scratch / "bench.toml"
        presets_file.write_text(
            f'[presets.tui-bench]\ndescription = "tui_cost stand-in workload"\n'
            f"command = [{', '.join([json.dumps(sys.executable), json.dumps(str(workload)), *run_for])}]\n"
        )
        presets_args, preset = ["--presets", str(presets_file)], "tui-bench"
    elif args.presets:
        presets_args = ["--presets", str(args.presets)]
    argv = [sys.executable, "-m", "gputui", *presets_args, "--interval", str(args.interval), "--no-confirm-quit"]
    if preset != "watch":
        argv += ["--preset", preset]
    if args.headless:  # the same session with no dashboard: what the dashboard itself adds
        argv += ["--record", str(scratch / "baseline.jsonl"), "--headless", "--quiet"]
    return argv, preset


def terminal_env(cols: int, rows: int, truecolor: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.update(TERM="xterm-256color", LINES=str(rows), COLUMNS=str(cols))
    env.pop("COLORTERM", None)
    if truecolor:
        env["COLORTERM"] = "truecolor"
    return env


def program_text(session: Pty) -> str:
    """What a program wrote, as text (its escapes left out)."""
    text = re.sub(rb"\x1b\[[0-9;?]*[ -/]*[@-~]", b"", bytes(session.stream))
    return text.decode("utf-8", errors="replace")


def nvitop_argv(interval: float) -> list[str] | None:
    """nvitop as issue 25 measured it: its full monitor, sampling at gputui's pace."""
    if importlib.util.find_spec("nvitop") is None:
        return None
    return [sys.executable, "-m", "nvitop", "-m", "full", "--interval", f"{interval:g}"]


class Driver:
    """Brings gputui to the state asked for: the keys to press, and when the window opens."""

    def __init__(self, args: argparse.Namespace, layout: Path) -> None:
        self.state, self.layout, self.warmup = args.state, layout, args.warmup
        self.view = VIEW_OF_STATE.get(args.state)
        self.view_up: float | None = None
        self.pressed_at = float("-inf")
        self.check_started = False
        self.check_running_at_start = False

    def step(self, session: Pty, first_frame: float | None, now: float) -> bool:
        """Press what is due; True once the view the window needs is up (and settled)."""
        if self.view is None:
            return True
        if first_frame is None:
            return False
        if self.view_up is None:
            if self.view in screens_laid_out(self.layout):
                self.view_up = now
            elif self.state in ("findings", "editor", "check") and now - self.pressed_at >= 3.0 and now >= session.started + first_frame + 1.0:
                if self.state == "check" and now < session.started + self.warmup:
                    return False  # the quick check starts after the warm-up: the window sees it going
                # f does nothing until the run has a finding: press it again every 3 s
                session.write({"findings": b"f", "editor": b"e", "check": b"k"}[self.state])
                self.pressed_at = now
            return False
        if self.state == "check" and not self.check_started:
            session.write(b"u")  # the quick check
            self.check_started, self.view_up = True, now
            return False
        return now >= self.view_up + (CHECK_SETTLE_S if self.state == "check" else SETTLE_S)


def live_runs(scratch: Path) -> list[LiveRun]:
    """The runs going under the benchmark's own XDG_STATE_HOME (the dashboard's, in a process of their own)."""
    return Registry(scratch / "xdg-state" / "gputui" / "live").runs()


class RunProcess:
    """The CPU of the run's own process (its session, samplers and recorder: what the
    dashboard follows through the recording) over the window."""

    def __init__(self, scratch: Path) -> None:
        runs = live_runs(scratch)
        self.process = psutil.Process(runs[0].pid) if runs else None
        self._cpu: list[float] = []
        self._t: list[float] = []

    def mark(self) -> None:
        if self.process is None:
            return
        try:
            times = self.process.cpu_times()
        except psutil.Error:
            self.process = None
            return
        self._cpu.append(times.user + times.system)
        self._t.append(time.monotonic())

    def result(self) -> dict | None:
        if self.process is None or len(self._cpu) < 2:
            return None
        seconds = self._t[-1] - self._t[0]
        return {"pid": self.process.pid, "cpu_percent_of_one_core": round((self._cpu[-1] - self._cpu[0]) / seconds * 100, 2)}


def stop_runs(scratch: Path, grace: float = 30.0) -> None:
    """Quitting the dashboard leaves its run going: stop it (SIGTERM: its group, then KILL)."""
    runs = live_runs(scratch)
    for run in runs:
        try:
            os.kill(run.pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while any(run.alive() for run in runs) and time.monotonic() < deadline:
        time.sleep(0.2)


def measure(args: argparse.Namespace, scratch: Path, name: str) -> dict:
    cols, rows = args.size
    argv, preset = gputui_argv(args, scratch)
    layout = scratch / f"{name}.layout.jsonl"
    probe = scratch / "probe"
    probe.mkdir(exist_ok=True)
    (probe / "sitecustomize.py").write_text(PROBE)
    env = terminal_env(cols, rows, args.truecolor)
    env.update(
        XDG_CONFIG_HOME=str(scratch / "xdg-config"),
        XDG_STATE_HOME=str(scratch / "xdg-state"),  # an empty run history, the same every time
        PYTHONPATH=os.pathsep.join([str(probe), str(REPO), env.get("PYTHONPATH", "")]),
        TUI_COST_LAYOUT=str(layout),
        TUI_COST_REPO=str(REPO),
    )
    if args.fake_gpus:
        env["TUI_COST_FAKE_GPUS"] = str(args.fake_gpus)
    if args.fake_cores:
        env["TUI_COST_FAKE_CORES"] = str(args.fake_cores)
    cprofile = scratch / f"{name}.cprofile" if args.cprofile else None
    if cprofile is not None:
        env["TUI_COST_CPROFILE"] = str(cprofile)
    thread_times = scratch / f"{name}.thread-times.json" if args.thread_times else None
    if thread_times is not None:
        env["TUI_COST_THREAD_TIMES"] = str(thread_times)
    signalled = cprofile is not None or thread_times is not None

    load_before = os.getloadavg()[0]
    gputui = Pty(argv, env, cols, rows)
    nvitop: Pty | None = None
    nvitop_cmd = nvitop_argv(args.interval) if args.nvitop and args.state in NVITOP_STATES and not args.headless else None
    driver = Driver(args, layout)
    first_frame: float | None = None
    first_frame_cpu: float | None = None
    window_end: float | None = None
    run_process: RunProcess | None = None
    profiler: subprocess.Popen | None = None
    ready_since = gputui.started + args.warmup
    deadline = gputui.started + args.warmup + VIEW_TIMEOUT_S
    # The window waits for the run's process to register (late on a loaded box), so that its CPU is measured too.
    awaits_run = not args.headless and preset != "watch" and args.state != "summary"
    try:
        while True:
            now = time.monotonic()
            if window_end is None:
                ready = driver.step(gputui, first_frame, now)
                run_up = not awaits_run or bool(live_runs(scratch))
                if ready and run_up and now >= ready_since and (nvitop is None or now >= nvitop.started + NVITOP_WARMUP_S):
                    if nvitop_cmd and nvitop is None:  # nvitop starts now, and gets NVITOP_WARMUP_S
                        nvitop = Pty(nvitop_cmd, terminal_env(cols, rows, args.truecolor), cols, rows)
                        continue
                    gputui.open_window()
                    run_process = RunProcess(scratch)
                    run_process.mark()
                    if signalled:
                        os.kill(gputui.pid, signal.SIGUSR1)
                    if args.profile:
                        profiler = start_profiler(gputui.pid, args.seconds, scratch / f"{name}.pyspy.txt")
                    driver.check_running_at_start = "Running:" in gputui.term.text()
                    if nvitop is not None:
                        nvitop.open_window()
                    window_end = now + args.seconds
                elif now >= deadline:
                    raise SystemExit(f"{name}: {driver.view}{'' if run_up else ' (or its run)'} never came up in {VIEW_TIMEOUT_S:.0f} s")
            elif now >= window_end:
                gputui.close_window()
                if run_process is not None:
                    run_process.mark()
                if signalled:
                    os.kill(gputui.pid, signal.SIGUSR2)
                if nvitop is not None:
                    nvitop.close_window()
                if profiler is not None:  # it writes its stacks at the end of its duration, from a live process
                    profiler.wait(timeout=30)
                break
            fds = [gputui.fd] + ([nvitop.fd] if nvitop is not None and not nvitop.ended else [])
            ready_fds, _, _ = select.select(fds, [], [], 0.05)
            if gputui.fd in ready_fds and not gputui.read():
                raise SystemExit(f"gputui exited early; it wrote:\n{bytes(gputui.stream[-2000:]).decode(errors='replace')}")
            if nvitop is not None and nvitop.fd in ready_fds:
                nvitop.read()
            if first_frame is None and FIRST_FRAME_MARK in gputui.stream and not args.headless:
                first_frame = time.monotonic() - gputui.started
                first_frame_cpu = gputui.cpu()
    finally:
        # quit as a user does (the view closed first); the benchmark's group stops with it
        gputui.stop(None if args.headless else [b"\x1b", b"q"] if driver.view else [b"q"])
        stop_runs(scratch)
        if nvitop is not None:
            nvitop.stop([b"q"])

    result = {
        "preset": preset,
        "state": args.state,
        "face": "headless --record" if args.headless else "dashboard",
        "interval_s": args.interval,
        "size": f"{cols}x{rows}",
        "colors": "truecolor" if args.truecolor else "256",
        **gputui.result(),
        "first_frame_s": None if first_frame is None else round(first_frame, 3),
        "first_frame_cpu_s": None if first_frame_cpu is None else round(first_frame_cpu, 3),
        "load_avg_at_start": round(load_before, 2),
        "bytes_total": len(gputui.stream),
    }
    followed = run_process.result() if run_process is not None and not args.headless else None
    if followed is not None:  # the dashboard follows a run in a process of its own: its CPU is not the dashboard's
        result["run_process"] = followed
    if args.fake_gpus or args.fake_cores:
        result["fake"] = f"{args.fake_gpus} NVML test-double GPUs, {args.fake_cores or 'real'} cores"
    if driver.view_up is not None:
        result["view_up_s"] = round(driver.view_up - gputui.started, 2)
    if args.state == "check":
        result["check_running_at_window_start"] = driver.check_running_at_start
        result["check_running_at_window_end"] = "Running:" in gputui.term.text()
    if args.dump:
        assert gputui.window
        args.dump.write(bytes(gputui.stream[gputui.window[0] : gputui.window[1]]))
    layouts = read_layouts(layout)
    if not args.headless:
        result["breakdown"] = breakdown(gputui, layouts)
        assert gputui.window_t
        t0, t1 = gputui.window_t
        opened = sorted({r["screen"] for r in layouts if "widgets" in r and t0 <= r["t"] <= t1} - {"DashboardScreen", driver.view or ""})
        if opened:  # a run ended (its summary opened), a view came up: not the state asked for
            result["warning"] = f"other views came up during the window: {', '.join(opened)}"
    if nvitop is not None and nvitop.ended:  # no GPU, no NVML, a broken install: it said why
        said = " ".join(program_text(nvitop).split())[:300]
        result["nvitop"] = {"exited_early": said}
    elif nvitop is not None:
        result["nvitop"] = nvitop.result()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{name}.stream").write_bytes(bytes(gputui.stream))
        (args.out / f"{name}.layout.jsonl").write_text(layout.read_text() if layout.exists() else "")
        result["stream_window"] = list(gputui.window or ())
        for log in scratch.glob("*.pyspy.log"):
            print(log.read_text(), file=sys.stderr)
        profile = scratch / f"{name}.pyspy.txt"
        if profile.exists():
            (args.out / profile.name).write_text(profile.read_text())
            result["profile"] = profile_totals(profile)
        if cprofile is not None:
            result["cprofile"] = keep_cprofile(cprofile, args.out, args.seconds)
        if thread_times is not None:
            result["thread_times"] = keep_thread_times(thread_times, args.out, gputui.window_t)
        if nvitop is not None:
            (args.out / f"{name}.nvitop.stream").write_bytes(bytes(nvitop.stream))
            result["nvitop"]["stream_window"] = list(nvitop.window or ())
            result["nvitop"]["command"] = nvitop_cmd
    return result


def start_profiler(pid: int, seconds: float, output: Path) -> subprocess.Popen | None:
    """py-spy over gputui's threads for the window: the samples where a thread holds the GIL
    (py-spy cannot tell a thread blocked in a system call from one running without it)."""
    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if py_spy is None:
        print("--profile: py-spy is not installed here (pip install py-spy)", file=sys.stderr)
        return None
    argv = [py_spy, "record", "--pid", str(pid), "--duration", f"{max(1, round(seconds))}", "--rate", "200"]
    argv += ["--format", "raw", "--gil", "--threads", "--output", str(output)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(output.with_suffix(".log"), "wb"))


def keep_thread_times(path: Path, out: Path, window_t: tuple[float, float] | None) -> list[dict]:
    """The instrumented functions' CPU over the window (--thread-times), in ms per second
    of window, busiest first; the JSON is kept under --out as NAME.thread-times.json."""
    deadline = time.monotonic() + 10
    rows: list[dict] = []
    while time.monotonic() < deadline:  # written by the signal's handler
        try:
            rows = json.loads(path.read_text())
            break
        except (OSError, ValueError):
            time.sleep(0.1)
    (out / path.name).write_text(json.dumps(rows, indent=1))
    seconds = (window_t[1] - window_t[0]) if window_t else 1.0
    return [
        {
            "function": r["function"] if r["function"].startswith(("loop:", "gc:")) else r["function"].partition(":")[2],
            "thread": r["thread"],
            "calls_per_s": round(r["calls"] / seconds, 2),
            "cpu_ms_per_s": round(r["cpu_s"] * 1000 / seconds, 3),
        }
        for r in rows
    ]


def keep_cprofile(path: Path, out: Path, seconds: float, top: int = 60) -> str:
    """The window's cProfile stats under --out (NAME.cprofile) and a listing beside them
    (NAME.cprofile.txt: calls and CPU per second of window, by cumulative time)."""
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:  # written by the signal's handler
        time.sleep(0.1)
    if not path.exists():
        return "no profile written"
    time.sleep(0.5)  # the handler may still be writing
    import io
    import pstats

    shutil.copy(path, out / path.name)
    text = io.StringIO()
    print(f"cProfile over a {seconds:.0f} s window: divide calls and times by {seconds:.0f} for a second's", file=text)
    stats = pstats.Stats(str(path), stream=text)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    (out / f"{path.name}.txt").write_text(text.getvalue())
    return f"{path.name}.txt"


def profile_totals(path: Path, top: int = 25) -> dict:
    """Where gputui's CPU went in the window: the share of samples under each function
    (anywhere on the stack), from py-spy's collapsed stacks."""
    under: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        total += int(count)
        for frame in set(stack.split(";")):
            under[frame] = under.get(frame, 0) + int(count)
    ranked = sorted(under.items(), key=lambda item: -item[1])[:top]
    return {"samples": total, "share_under": {frame: round(n / total, 3) for frame, n in ranked} if total else {}}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{psutil.cpu_count()} logical CPUs ({cpu}), {psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}"


def target_of(result: dict) -> tuple[float, str]:
    """Issue 25's bytes target: half of nvitop's where it has a counterpart, else 1 KB/s."""
    nvitop = result.get("nvitop")
    if nvitop is not None and "bytes_per_s" in nvitop:
        return nvitop["bytes_per_s"] / 2, "<= half of nvitop's"
    return OTHER_TARGET, "<= 1 KB/s"


def cpu_target_of(result: dict) -> dict | None:
    """Issue 25's CPU target where nvitop ran beside gputui: no more than nvitop's."""
    nvitop_cpu = result.get("nvitop", {}).get("cpu_percent_of_one_core")
    if nvitop_cpu is None:
        return None
    return {"cpu_percent": nvitop_cpu, "rule": "<= nvitop's", "met": result["cpu_percent_of_one_core"] <= nvitop_cpu}


def print_result(result: dict) -> None:
    for key, value in result.items():
        if key == "breakdown":
            print(f"{'bytes/s by widget':>24}:")
            for label, rate in list(value["bytes_per_s_by_widget"].items())[:12]:
                print(f"{'':>26}{rate:>9.1f}  {label}")
            print(f"{'full repaints':>24}: {len(value['full_repaints'])} {value['full_repaints'][:6]}")
            print(f"{'plot rewrites':>24}: {value['plot_rewrites']} (without them {value['bytes_per_s_without_plot_rewrites']} B/s)")
            print(f"{'layout passes':>24}: {value['layout_passes']}")
            print(f"{'messages under a view':>24}: {value['messages_to_covered_screens']}")
        else:
            print(f"{key:>24}: {value}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="measurement window (default 30)")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds before the window opens (default 5)")
    parser.add_argument("--size", type=_size, default=(140, 40), metavar="COLSxROWS", help="terminal size (default 140x40)")
    parser.add_argument("--interval", type=float, default=1.0, help="gputui's sampling interval (default 1)")
    parser.add_argument("--preset", help="a preset to run instead of the stand-in workload; 'watch' for none")
    parser.add_argument("--presets", type=Path, help="an extra presets file for --preset")
    parser.add_argument("--running-preset", metavar="NAME", help="running and editor: this preset instead of --preset (one that outlasts the window)")
    parser.add_argument("--findings-preset", metavar="NAME", help="findings: this preset instead of --preset (one that has findings while it runs)")
    parser.add_argument(
        "--run-seconds", type=float, default=SUMMARY_RUN_S, help=f"--state summary: how long the stand-in run lasts (default {SUMMARY_RUN_S:g})"
    )
    parser.add_argument("--truecolor", action="store_true", help="COLORTERM=truecolor (24-bit colour escapes)")
    parser.add_argument("--headless", action="store_true", help="baseline: the same run recorded headless (no dashboard), for comparison")
    parser.add_argument("--state", choices=STATES, default="running", help="what stays on screen during the window (default running)")
    parser.add_argument("--all", action="store_true", help="every state at each --sizes (a table in --out)")
    parser.add_argument("--sizes", default="140x40,80x24", help="--all's terminal sizes (default 140x40,80x24)")
    parser.add_argument("--states", default=",".join(ALL_STATES), help="--all's states, comma-separated (default: all of them)")
    parser.add_argument("--nvitop", action="store_true", help="nvitop beside gputui in watching and running (when it can be imported)")
    parser.add_argument("--fake-gpus", type=int, default=0, metavar="N", help="no GPU here: N GPUs of the NVML test double")
    parser.add_argument("--fake-cores", type=int, default=0, metavar="N", help="N synthetic CPU cores instead of the machine's")
    parser.add_argument("--json", type=Path, help="also write the result here")
    parser.add_argument("--out", type=Path, help="keep each measurement's terminal stream and breakdown in this folder")
    parser.add_argument("--dump", type=argparse.FileType("wb"), help="write the window's terminal output here")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="py-spy samples gputui's threads over the window (collapsed stacks: NAME.pyspy.txt under --out); it costs gputui CPU, so measure without it",
    )
    parser.add_argument(
        "--cprofile",
        action="store_true",
        help="cProfile in gputui's process over the window (NAME.cprofile and NAME.cprofile.txt under --out): calls per second; its times are inflated, so measure without it",
    )
    parser.add_argument(
        "--thread-times",
        action="store_true",
        help="the CPU of gputui's main functions over the window, by thread (NAME.thread-times.json under --out, and in tui-cost.json)",
    )
    args = parser.parse_args()
    if args.nvitop and nvitop_argv(args.interval) is None:
        print("nvitop cannot be imported here: measuring gputui alone", file=sys.stderr)
    if args.nvitop and (args.fake_gpus or args.fake_cores):
        print("--nvitop with --fake-*: nvitop sees this machine's real GPUs and cores, gputui the fake ones", file=sys.stderr)
    runs: list[tuple[str, argparse.Namespace]] = []
    if args.all:
        states = [state for state in ALL_STATES if state in args.states.split(",")]
        if not states:
            parser.error(f"--states: none of {args.states!r} is one of {', '.join(ALL_STATES)}")
        for size in args.sizes.split(","):
            for state in states:
                one = argparse.Namespace(**vars(args))
                one.size, one.state, one.dump = _size(size), state, None
                runs.append((f"{state}-{size}", one))
    else:
        runs.append((f"{args.state}-{args.size[0]}x{args.size[1]}", args))
    results = []
    for name, one in runs:
        # The window opens once the view is up (on a busy machine the first frame takes seconds).
        if one.state == "summary" and one.preset is None:
            one.warmup = max(one.warmup, one.run_seconds + 2.0)
        with tempfile.TemporaryDirectory(prefix="gputui-tui-cost-") as scratch:
            try:
                result = measure(one, Path(scratch), name)
            except SystemExit as stop:
                if not args.all:
                    raise
                print(f"{name}: not measured: {stop}", file=sys.stderr)
                results.append({"name": name, "state": one.state, "size": f"{one.size[0]}x{one.size[1]}", "not_measured": str(stop)})
                continue
        result = {"name": name, **result, "machine": machine()}
        limit, why = target_of(result)
        result["bytes_target"] = {"bytes_per_s": round(limit, 1), "rule": why, "met": result["bytes_per_s"] <= limit}
        cpu_target = cpu_target_of(result)
        if cpu_target is not None:
            result["cpu_target"] = cpu_target
        results.append(result)
        print(f"== {name}")
        print_result(result)
        if not args.all:
            targets = [("cpu_percent_of_one_core", 3.4)]
            if not args.headless:
                targets += [("bytes_per_s", 2048), ("first_frame_s", 1.0)]
            failed = [k for k, lim in targets if result[k] is None or result[k] > lim]
            # issue 11's fixed limits, then this state's own (issue 25: beside nvitop, or 1 KB/s)
            print("fixed targets (<= 3.4 % of a core, <= 2 KB/s, first frame <= 1 s): " + ("all met" if not failed else "missed: " + ", ".join(failed)))
            print(f"this state's targets ({result['bytes_target']['rule']}): {targets_met(result)}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "tui-cost.json").write_text(json.dumps(results, indent=2) + "\n")
        (args.out / "tui-cost.md").write_text(table(results))
        print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results[0] if len(results) == 1 else results, indent=2) + "\n")
    return 0


def targets_met(result: dict) -> str:
    """yes, or which of the bytes and CPU targets were missed."""
    missed = [what for what, key in (("bytes", "bytes_target"), ("CPU", "cpu_target")) if not result.get(key, {"met": True})["met"]]
    return f"NO ({', '.join(missed)})" if missed else "yes"


def table(results: list[dict]) -> str:
    lines = [
        "| state | size | gputui B/s | nvitop B/s | target | met | gputui CPU % | nvitop CPU % | full repaints | top widget (B/s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        if "not_measured" in r:
            lines.append(f"| {r['state']} | {r['size']} | not measured: {r['not_measured']} | | | | | | | |")
            continue
        nvitop_said = "exited" if "nvitop" in r else ""
        nv = r.get("nvitop", {}).get("bytes_per_s", nvitop_said)
        nv_cpu = r.get("nvitop", {}).get("cpu_percent_of_one_core", nvitop_said)
        widgets = r.get("breakdown", {}).get("bytes_per_s_by_widget", {})
        top = "; ".join(f"{k} {v}" for k, v in list(widgets.items())[:2])
        full = len(r.get("breakdown", {}).get("full_repaints", []))
        target = r["bytes_target"]
        warning = f" ({r['warning']})" if r.get("warning") else ""
        lines.append(
            f"| {r['state']}{warning} | {r['size']} | {r['bytes_per_s']} | {nv} | {target['bytes_per_s']} ({target['rule']}) | "
            f"{targets_met(r)} | {r['cpu_percent_of_one_core']} | {nv_cpu} | {full} | {top} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())

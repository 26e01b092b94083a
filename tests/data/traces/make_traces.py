"""Writes the recorded-style traces the diagnosis tests replay.

    python tests/data/traces/make_traces.py            # rewrites the *.jsonl next to this file
    python tests/data/traces/make_traces.py --out DIR  # somewhere else

Each trace is a gputui recording (docs/record-format.md) of one scenario on an H200
host (700 W limit, slowdown at 89 °C, SM clock max 1980 MHz, PCIe Gen5 x16, 16 CPU
cores, 128 GiB): header, 1-Hz samples, the events a session emits (started,
workload, phase, throughput, oom, result, outcome) and a summary computed by
gputui's own SummaryBuilder, written by gputui's own Recorder.  Values are
deterministic (seeded noise) so the files are reproducible byte for byte;
tests/diagnosis/test_diagnosis_traces.py checks that they are.  The traces hold no finding
events: the tests produce those by replaying the traces through the diagnoser.

The thermal, power and hardware-slowdown scenarios are synthetic on purpose: the
H200 used for validation must not be heated or power-capped to record them.  Their
numbers follow what NVML reports on that GPU under those conditions (clock-event
reason bits, clocks falling from 1980 MHz, power pinned at the limit).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the repository, when run as a script

from gputui.model import GpuProcess, GpuSample, HostSample, ProcessSample, Sample  # noqa: E402
from gputui.record.events import make_event  # noqa: E402
from gputui.record.recorder import Recorder  # noqa: E402
from gputui.record.schema import Header  # noqa: E402
from gputui.session.summary import SummaryBuilder  # noqa: E402
from gputui.telemetry.gpu import THROTTLE_REASONS  # noqa: E402

GIB = 1024**3
MIB = 1024**2
H200_MEMORY = 150_754_820_096  # 143,771 MiB as NVML reports it
HOST_MEMORY = 128 * GIB
CORES = 16
MAIN, WORKER0 = 4242, 4250
BIT = {name: bit for bit, name in THROTTLE_REASONS.items()}

H200 = {
    "index": 0,
    "name": "NVIDIA H200",
    "uuid": "GPU-6f3b1c2e-8d4a-4b6e-9f1a-2c3d4e5f6a7b",
    "memory_total": H200_MEMORY,
    "driver_version": "580.95.05",
    "cuda_version": "13.0",
    "power_limit_w": 700.0,
    "power_default_limit_w": 700.0,
    "temp_slowdown_c": 89.0,
    "temp_shutdown_c": 95.0,
    "temp_max_gpu_c": 87.0,
    "sm_clock_max_mhz": 1980,
    "mem_clock_max_mhz": 3201,
    "pcie_max_gen": 5,
    "pcie_max_width": 16,
    "gpm_supported": True,
}


class Trace:
    """One recording being built: samples and events on a timeline."""

    def __init__(self, name: str, preset: dict[str, Any], seed: int, command: list[str] | None = None) -> None:
        self.name = name
        self.rng = random.Random(seed)
        self.preset = {"name": name, "source": "/opt/gputui/presets.toml", **preset}
        self.command = command or ["/usr/bin/python3", "-m", "gputui.workloads", "--framework", "torch", "--model", str(preset.get("model", "resnet50"))]
        self.items: list[tuple[float, int, Any]] = []
        self.energy_mj = 41_234_567_890
        self.last_t = 0.0
        self.swap_used = 0
        self.interval = 1.0

    # --- noise ---------------------------------------------------------------------
    def n(self, mu: float, sd: float, lo: float = -math.inf, hi: float = math.inf) -> float:
        return min(hi, max(lo, self.rng.gauss(mu, sd)))

    # --- building blocks ------------------------------------------------------------
    def event(self, t: float, event: str, **data: Any) -> None:
        self.items.append((round(t, 4), 0, make_event(round(t, 4), event, data)))

    def rate(self, t: float, rate: float, phase: str | None = "measure", batch: int = 256) -> None:
        seconds = round(batch * 4 / rate, 4)
        data = {"samples_per_sec": round(rate, 2), "source": "gputui", "final": False, "samples": float(batch * 4), "seconds": seconds}
        if phase:
            data["phase"] = phase
        self.event(t, "throughput", **data)

    def gpu(
        self,
        t: float,
        *,
        util: float,
        sm: float | None,
        temp: float,
        power: float,
        clock: float = 1980,
        reasons: tuple[str, ...] = (),
        memory: float = 38 * GIB,
        gen: int = 5,
        width: int = 16,
        rx: float | None = None,
        tx: float | None = None,
        occ: float | None = None,
        tensor: float | None = None,
        first: bool = False,
    ) -> GpuSample:
        dt = t - self.last_t
        self.energy_mj += int(power * dt * 1000)
        mask = 0
        for reason in reasons:
            mask |= BIT[reason]
        idle = util < 1 and not reasons
        if idle:
            mask |= BIT["GpuIdle"]
        sample = GpuSample(
            index=0,
            util_gpu=float(round(util)),
            util_mem=float(round(util * 0.45)),
            memory_used=int(memory),
            memory_total=H200_MEMORY,
            temp_c=float(round(temp)),
            power_w=round(power, 2),
            power_limit_w=700.0,
            energy_mj=self.energy_mj,
            sm_clock_mhz=int(round(clock / 15) * 15),
            mem_clock_mhz=3201 if not idle else 1593,
            throttle_mask=mask,
            throttle_reasons=[THROTTLE_REASONS[b] for b in sorted(THROTTLE_REASONS) if mask & b],
            pstate=0,
            pcie_gen=gen,
            pcie_width=width,
            processes=[GpuProcess(pid=MAIN, used_memory=int(memory) - 600 * MIB)] if memory > GIB else [],
        )
        if not first:  # GPM needs two samples
            sample.sm_active = round(sm, 1) if sm is not None else None
            sample.sm_occupancy = round(occ if occ is not None else (sm or 0) * 0.42, 1)
            sample.tensor_active = round(tensor if tensor is not None else (sm or 0) * 0.55, 1)
            sample.dram_active = round((sm or 0) * 0.5, 1)
            sample.pcie_rx_bps = round(rx if rx is not None else self.n(0.35e9, 0.05e9, 0), 0) * 1.0
            sample.pcie_tx_bps = round(tx if tx is not None else self.n(0.05e9, 0.01e9, 0), 0) * 1.0
        return sample

    def host(
        self,
        t: float,
        *,
        main: float,
        workers: list[float],
        mem_used: float = 22 * GIB,
        other_cpu: float = 30.0,
        disk_read: float = 0.0,
        swap_used: float | None = None,
        first: bool = False,
        main_rss: float = 6.5 * GIB,
        worker_rss: float = 1.1 * GIB,
    ) -> HostSample:
        procs = [ProcessSample(pid=MAIN, ppid=MAIN - 2, name="python3", role="main", threads=48, rss=int(main_rss))]
        for i, _cpu in enumerate(workers):
            procs.append(ProcessSample(pid=WORKER0 + i, ppid=MAIN, name="python3", role="worker", threads=3, rss=int(worker_rss)))
        if not first:
            procs[0].cpu_percent = round(main, 1)
            for proc, cpu in zip(procs[1:], workers):
                proc.cpu_percent = round(cpu, 1)
            procs[0].read_bps, procs[0].write_bps = round(disk_read * 0.9, 0), 0.0
        busy = (sum(workers) + main + other_cpu) / CORES
        swap = self.swap_used if swap_used is None else swap_used
        return HostSample(
            cpu_percent=round(min(100.0, busy), 1),
            load_avg=[round(busy * CORES / 100, 2), round(busy * CORES / 110, 2), round(busy * CORES / 130, 2)],
            memory_used=int(mem_used),
            memory_total=HOST_MEMORY,
            memory_available=int(HOST_MEMORY - mem_used),
            swap_used=int(swap),
            swap_total=8 * GIB,
            disk_read_bps=None if first else round(disk_read, 0),
            disk_write_bps=None if first else round(self.n(20_000, 5_000, 0), 0),
            processes=procs,
        )

    def sample(self, t: float, gpu: GpuSample, host: HostSample) -> None:
        self.items.append((round(t, 4), 1, Sample(t=round(t, 4), gpus=[gpu], host=host)))
        self.last_t = t

    # --- a whole run ------------------------------------------------------------------
    def workload_run(
        self,
        *,
        warmup: float,
        measure: float,
        step: Callable[[Trace, float, str], tuple[GpuSample, HostSample, float | None]],
        batch: int = 256,
        model: str = "resnet50",
        end: str = "exited",
        phases: bool = True,
        oom: dict[str, Any] | None = None,
        interval: float = 1.0,
    ) -> None:
        """Samples every second from t=0; warm-up from 5 s, the measured phase from
        ``warmup`` s to ``measure`` s.  ``step(trace, t, phase)`` returns the GPU and
        host samples and the throughput at t (None: no reading)."""
        self.event(0.05, "started", pid=MAIN, command=self.command)
        if phases:
            self.event(
                3.2,
                "workload",
                v=1,
                framework="torch",
                model=model,
                batch_size=batch,
                precision=self.preset.get("precision", "bf16"),
                pipeline=self.preset.get("pipeline", "synthetic"),
                workers=self.preset.get("workers", 0),
            )
        rates = []
        phase: str | None = None
        self.interval = interval
        for k in range(int(measure / interval) + 1):
            t = k * interval + 0.0003 * (k % 7)
            if phases:
                now = None if t < 5 else "warmup" if t < warmup else "measure"
            else:
                now = None
            gpu, host, rate = step(self, t, now or "start")
            if k == 0:
                gpu, host = self._first(gpu, host)
            self.sample(t, gpu, host)
            if rate is not None and (now or not phases):
                if now != phase:
                    phase = now
                    self.event(t + 0.41, "phase", phase=now)
                self.rate(t + 0.42, rate, now, batch)
                if now in ("measure", None):
                    rates.append(rate)
            if oom and abs(t - oom["t"]) < interval / 2:
                self.event(t + 0.6, "oom", v=1, batch_size=batch, message=oom["message"])
                break
        t = self.last_t
        if end == "exited":
            if phases and rates:
                ordered = sorted(rates)
                self.event(
                    t + 0.5,
                    "result",
                    v=1,
                    samples_per_sec=round(ordered[len(ordered) // 2], 2),
                    p5=round(ordered[len(ordered) // 20], 2),
                    p95=round(ordered[-1 - len(ordered) // 20], 2),
                )
            self.event(t + 0.7, "outcome", kind="exited", ok=True, exit_code=0, signal=None, message="exited with code 0", duration_s=round(t + 0.7, 3))
        elif end == "oom":
            self.event(
                t + 0.9,
                "outcome",
                kind="oom",
                ok=False,
                exit_code=1,
                signal=None,
                message="out of memory: " + oom["message"] if oom else "out of memory",
                duration_s=round(t + 0.9, 3),
            )

    def _first(self, gpu: GpuSample, host: HostSample) -> tuple[GpuSample, HostSample]:
        for name in ("sm_active", "sm_occupancy", "tensor_active", "dram_active", "pcie_rx_bps", "pcie_tx_bps"):
            setattr(gpu, name, None)
        for proc in host.processes:
            proc.cpu_percent = proc.read_bps = proc.write_bps = None
        host.disk_read_bps = host.disk_write_bps = None
        return gpu, host

    # --- writing --------------------------------------------------------------------
    def header(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "gputui": "0.1.0",
            "started_at": "2026-11-20T09:00:00+00:00",
            "interval": self.interval,
            "host": {
                "hostname": "h200-node-07",
                "os": "Ubuntu 22.04.5 LTS (Linux 5.15.0-126-generic, x86_64)",
                "cpu_model": "Intel(R) Xeon(R) Platinum 8468",
                "cpu_logical": CORES,
                "cpu_physical": CORES,
                "memory_total": HOST_MEMORY,
                "python": "CPython 3.11.10",
            },
            "driver_version": "580.95.05",
            "cuda_version": "13.0",
            "gpus": [H200],
            "preset": self.preset,
            "command": self.command,
            "env": {},
            "cwd": "/workspace",
            "python": "3.11.10",
        }

    def write(self, directory: Path) -> Path:
        path = directory / f"{self.name}.jsonl"
        recorder, summary = Recorder(path), SummaryBuilder()
        recorder.on_header(Header.from_dict(self.header()))
        for _t, which, item in sorted(self.items, key=lambda x: (x[0], x[1])):
            for observer in (summary, recorder):
                if which == 1:
                    observer.on_sample(item)
                else:
                    observer.on_event(item)
        recorder.on_summary(summary.build())
        return path


# --- scenarios ---------------------------------------------------------------------------

WORKLOAD = {"framework": "torch", "model": "resnet50", "batch_size": 256, "precision": "bf16", "steps": 400, "warmup_steps": 40}


def busy(
    tr: Trace, t: float, *, sm: float = 86.0, temp: float = 68.0, power: float = 610.0, clock: float = 1980, reasons: tuple[str, ...] = (), **gpu: Any
) -> GpuSample:
    return tr.gpu(
        t, util=tr.n(99.5, 0.6, 95, 100), sm=tr.n(sm, 2.0, 0, 100), temp=tr.n(temp, 0.4), power=tr.n(power, 12, 80, 700), clock=clock, reasons=reasons, **gpu
    )


def loading(tr: Trace, t: float, **gpu: Any) -> GpuSample:
    """Before the first step: the model is being built, the GPU idles at a low link."""
    return tr.gpu(t, util=0, sm=0.0, temp=tr.n(34, 0.3), power=tr.n(75, 2), clock=345, gen=1, memory=0.5 * GIB, **gpu)


def healthy_synthetic(tr: Trace, t: float, phase: str):
    """GPU-bound with data on the device: nothing to find.  SwPowerCap flickers on in
    about one sample in seven (at 690+ W), a 15-s evaluation pass drops SM activity
    to 25% at full utilization, the GPU warms to 77 °C: all below the thresholds."""
    host = tr.host(t, main=tr.n(100, 1.5, 0, 101), workers=[])
    if phase == "start":
        return loading(tr, t), host, None
    capped = phase == "measure" and tr.rng.random() < 0.15
    temp = min(77.0, 60 + 0.12 * t)
    if phase == "measure" and 90 <= t < 105:  # evaluation pass: small kernels, not sustained
        return tr.gpu(t, util=100, sm=tr.n(25, 2), temp=tr.n(temp, 0.3), power=tr.n(330, 10)), host, tr.n(880, 15)
    gpu = busy(tr, t, temp=temp, power=tr.n(693, 3) if capped else 625, clock=1875 if capped else 1980, reasons=("SwPowerCap",) if capped else ())
    rate = tr.n(2930 if not capped else 2890, 20) if phase == "measure" else tr.n(2700, 80)
    return gpu, host, rate


def input_bound_1worker(tr: Trace, t: float, phase: str):
    """ResNet-50 fed by one DataLoader worker with heavy augmentation: the worker is
    pegged at one core, the GPU mostly waits (SM ~7%), the 16-core machine is ~8% busy."""
    if phase == "start":
        return loading(tr, t), tr.host(t, main=tr.n(100, 2, 0), workers=[]), None
    host = tr.host(t, main=tr.n(11, 3, 0), workers=[tr.n(98.5, 1.2, 0, 101)], disk_read=tr.n(24e6, 3e6, 0))
    gpu = tr.gpu(t, util=tr.n(14, 4, 0, 100), sm=tr.n(7, 1.5, 0), temp=tr.n(41, 0.4), power=tr.n(145, 12), rx=tr.n(0.12e9, 0.02e9, 0))
    return gpu, host, tr.n(205, 8)


def input_enough_workers(tr: Trace, t: float, phase: str):
    """Same model with 12 workers: they work hard (~88% of a core each) but keep the
    GPU fed (SM ~82%): busy workers alone are not input-bound."""
    if phase == "start":
        return loading(tr, t), tr.host(t, main=tr.n(100, 2, 0), workers=[]), None
    host = tr.host(t, main=tr.n(100, 1.5, 0, 101), workers=[tr.n(88, 5, 0, 101) for _ in range(12)], disk_read=tr.n(180e6, 10e6, 0), mem_used=34 * GIB)
    return busy(tr, t, sm=82, temp=66), host, tr.n(2810, 25)


def thermal_crossing(tr: Trace, t: float, phase: str):
    """Cooling fails: the GPU warms through 80 °C at ~70 s, reaches 86-88 °C, and from
    130 s to 200 s throttles itself (SwThermalSlowdown in ~90% of samples): SM clock
    1980 -> ~1600 MHz and throughput -19%.  Then the fans recover and it cools."""
    host = tr.host(t, main=tr.n(100, 1.5, 0, 101), workers=[])
    if phase == "start":
        return loading(tr, t), host, None
    if t < 120:
        temp = 70 + (t - 20) * 0.16 if t >= 20 else 62 + (t - 5) * 0.5
    elif t < 200:
        temp = 86 + 1.5 * math.sin(t / 9)
    else:
        temp = max(72.0, 86 - (t - 200) * 0.6)
    throttled = 130 <= t < 200 and tr.rng.random() < 0.9
    clock = tr.n(1600, 25) if throttled else 1980
    gpu = busy(tr, t, temp=temp, power=tr.n(600, 10), clock=clock, reasons=("SwThermalSlowdown",) if throttled else ())
    rate = tr.n(2930 * clock / 1980, 18)
    return gpu, host, rate if phase == "measure" else tr.n(2700, 80)


def thermal_flapping(tr: Trace, t: float, phase: str):
    """The fan controller hunts: after a warm-up to 82 °C the temperature swings across
    80 °C every 6 s (3-4 s at 81-82, 2-3 s at 78-79) for two minutes, about 40
    crossings, then cools."""
    host = tr.host(t, main=tr.n(100, 1.5, 0, 101), workers=[])
    if phase == "start":
        return loading(tr, t), host, None
    if t < 40:
        temp = 70 + (t - 20) * 0.6 if t >= 20 else 66.0
    elif t < 55:
        temp = tr.n(82.3, 0.3)
    elif t < 180:
        temp = tr.n(81.5, 0.3) if (t - 55) % 6 < 3.5 else tr.n(78.8, 0.3)
    else:
        temp = max(73.0, 79 - (t - 180) * 0.5)
    return busy(tr, t, temp=temp), host, tr.n(2930, 20) if phase == "measure" else tr.n(2700, 80)


def power_capped(tr: Trace, t: float, phase: str):
    """Heavy bf16 training pinned at the 700 W limit: SwPowerCap in ~85% of samples,
    the SM clock falls to ~1740 MHz while capped; 75 °C, below the thermal warning."""
    host = tr.host(t, main=tr.n(100, 1.5, 0, 101), workers=[])
    if phase == "start":
        return loading(tr, t), host, None
    capped = phase == "measure" and tr.rng.random() < 0.85
    clock = tr.n(1740, 40) if capped else 1980
    power = tr.n(697, 2, 0, 700) if capped else tr.n(655, 15)
    gpu = busy(tr, t, sm=92, temp=75, power=power, clock=clock, reasons=("SwPowerCap",) if capped else ())
    gpu.power_w = round(power, 2)
    return gpu, host, tr.n(3050 * (0.93 if capped else 1.0), 15) if phase == "measure" else tr.n(2800, 60)


def hw_slowdown(tr: Trace, t: float, phase: str):
    """The host's power supply brakes the GPU from 60 s to 110 s (HwPowerBrakeSlowdown):
    SM clock 990 MHz, power ~350 W, throughput halved, temperature normal."""
    host = tr.host(t, main=tr.n(100, 1.5, 0, 101), workers=[])
    if phase == "start":
        return loading(tr, t), host, None
    braked = phase == "measure" and 60 <= t < 110
    if braked:
        gpu = busy(tr, t, temp=63, power=tr.n(350, 10), clock=990, reasons=("HwPowerBrakeSlowdown",))
        return gpu, host, tr.n(1480, 15)
    return busy(tr, t, temp=66), host, tr.n(2930, 20) if phase == "measure" else tr.n(2700, 80)


def memory_pressure(tr: Trace, t: float, phase: str):
    """EfficientNet-B7 at a batch that nearly fills the GPU (~97% of its memory), eight
    workers caching decoded images in RAM: host memory climbs past 90% and the machine
    swaps; at 100 s the step runs out of GPU memory (oom event and outcome)."""
    used = min(0.965, 0.80 + max(0.0, t - 20) * 0.0022) * HOST_MEMORY
    if used > 0.9 * HOST_MEMORY:
        tr.swap_used += int(tr.n(45, 8, 0) * MIB)
    host = tr.host(
        t, main=tr.n(100, 1.5, 0, 101), workers=[tr.n(62, 6, 0, 101) for _ in range(8)], mem_used=used, disk_read=tr.n(90e6, 10e6, 0), worker_rss=11 * GIB
    )
    if phase == "start":
        return loading(tr, t), host, None
    memory = min(0.975 * H200_MEMORY, (20 + (t - 5) * 6) * GIB)
    gpu = busy(tr, t, sm=88, temp=70, memory=memory)
    return gpu, host, tr.n(190, 3) if phase == "measure" else tr.n(170, 10)


def launch_bound(tr: Trace, t: float, phase: str):
    """MobileNetV2 at batch 8: every kernel is tiny, the GPU is 'busy' 100% of the time
    yet its SMs are active ~27% of it."""
    host = tr.host(t, main=tr.n(100, 1, 0, 101), workers=[])
    if phase == "start":
        return loading(tr, t), host, None
    gpu = tr.gpu(t, util=100, sm=tr.n(27, 2.5, 0), temp=tr.n(52, 0.4), power=tr.n(240, 10), occ=tr.n(9, 1, 0))
    return gpu, host, tr.n(1650, 40)


def idle_io(tr: Trace, t: float, phase: str):
    """A training script (no gputui protocol, no phases) trains for 40 s, then stalls
    reading its next shard from slow network storage: GPU 0-2%, the run uses ~3% of a
    core, the machine reads ~1.5 MB/s."""
    if t < 40:
        host = tr.host(t, main=tr.n(100, 2, 0, 101), workers=[])
        return busy(tr, t, sm=80), host, tr.n(2750, 30)
    host = tr.host(t, main=tr.n(2.5, 0.8, 0), workers=[], other_cpu=6.0, disk_read=tr.n(1.5e6, 0.3e6, 0))
    gpu = tr.gpu(t, util=tr.n(1, 1, 0), sm=tr.n(0.5, 0.3, 0), temp=tr.n(45, 0.3), power=tr.n(120, 5))
    return gpu, host, None


def grace_startup(tr: Trace, t: float, phase: str):
    """A script without phases spends its first 25 s importing and waiting for its data
    (GPU idle, little CPU), then trains.  The start grace covers the wait: no finding."""
    if t < 25:
        host = tr.host(t, main=tr.n(4, 1, 0), workers=[])
        return tr.gpu(t, util=0, sm=0.0, temp=tr.n(34, 0.3), power=tr.n(75, 2), clock=345, gen=1), host, None
    host = tr.host(t, main=tr.n(100, 2, 0, 101), workers=[])
    return busy(tr, t, sm=80), host, tr.n(2750, 30)


def pcie_link(tr: Trace, t: float, phase: str):
    """The card sits behind a Gen4 riser: the link trains at Gen4 x16 under load, below
    the GPU's Gen5 x16 (idle at Gen1 while loading)."""
    host = tr.host(t, main=tr.n(100, 1.5, 0, 101), workers=[])
    if phase == "start":
        return loading(tr, t), host, None
    return busy(tr, t, gen=4), host, tr.n(2900, 20) if phase == "measure" else tr.n(2700, 80)


def pcie_idle_downshift(tr: Trace, t: float, phase: str):
    """A script alternating 30 s of GPU work with 30 s of CPU-side work (GPU idle at
    the power-saving Gen1 link; the CPU half busy): the low link is only ever seen idle."""
    gpu_busy = (t // 30) % 2 == 0
    if gpu_busy:
        host = tr.host(t, main=tr.n(100, 2, 0, 101), workers=[])
        return busy(tr, t, sm=80), host, tr.n(2750, 30)
    host = tr.host(t, main=tr.n(100, 2, 0, 101), workers=[tr.n(50, 3, 0) for _ in range(4)])
    gpu = tr.gpu(t, util=0, sm=0.0, temp=tr.n(45, 0.3), power=tr.n(90, 3), clock=345, gen=1)
    return gpu, host, None


def pcie_traffic(tr: Trace, t: float, phase: str):
    """Float32 batches copied from pageable memory every step: ~44 GB/s host-to-GPU on a
    Gen5 x16 link (~70% of it) while SM activity is ~30%; the 8 workers are not
    saturated (~40%), so it is the copy, not the loader."""
    host = tr.host(t, main=tr.n(100, 2, 0, 101), workers=[tr.n(40, 4, 0) for _ in range(8)])
    if phase == "start":
        return loading(tr, t), host, None
    gpu = tr.gpu(t, util=tr.n(62, 4, 0, 100), sm=tr.n(30, 3, 0), temp=tr.n(55, 0.4), power=tr.n(330, 12), rx=tr.n(44e9, 1.5e9, 0), tx=tr.n(0.2e9, 0.02e9, 0))
    return gpu, host, tr.n(1300, 20)


def warmup_only(tr: Trace, t: float, phase: str):
    """Everything looks wrong during a 40-s warm-up (cudnn autotuning: 100% util at 20%
    SM; the single worker pegged while the prefetch queue fills, the GPU waiting), then
    the measured phase is healthy.  Warm-up is excluded: no finding."""
    if phase in ("start", "warmup"):
        host = tr.host(t, main=tr.n(100, 2, 0, 101), workers=[tr.n(99, 1, 0, 101)])
        gpu = tr.gpu(t, util=100, sm=tr.n(20, 2, 0), temp=tr.n(50, 0.4), power=tr.n(200, 10))
        return gpu, host, tr.n(600, 100) if phase == "warmup" else None
    host = tr.host(t, main=tr.n(100, 2, 0, 101), workers=[tr.n(55, 5, 0, 101)])
    return busy(tr, t, temp=62), host, tr.n(2930, 20)


def build() -> list[Trace]:
    traces = []

    def add(fn, seed, *, warmup=20.0, measure=120.0, preset=None, **kw):
        tr = Trace(fn.__name__, {**WORKLOAD, **(preset or {})}, seed, command=kw.pop("command", None))
        tr.workload_run(warmup=warmup, measure=measure, step=fn, **kw)
        traces.append(tr)

    add(healthy_synthetic, 1, measure=125, preset={"pipeline": "synthetic"})
    add(input_bound_1worker, 2, measure=110, preset={"pipeline": "host", "workers": 1})
    add(input_enough_workers, 3, measure=90, preset={"pipeline": "host", "workers": 12})
    add(thermal_crossing, 4, measure=260, interval=2.0, preset={"pipeline": "synthetic"})
    add(thermal_flapping, 5, measure=220, preset={"pipeline": "synthetic"})
    add(power_capped, 6, measure=130, preset={"pipeline": "synthetic", "model": "resnet50"})
    add(hw_slowdown, 7, measure=140, preset={"pipeline": "synthetic"})
    add(
        memory_pressure,
        8,
        measure=130,
        model="efficientnet_b7",
        batch=96,
        end="oom",
        oom={"t": 100, "message": "CUDA out of memory. Tried to allocate 2.25 GiB. GPU 0 has a total capacity of 139.81 GiB of which 1.12 GiB is free."},
        preset={"model": "efficientnet_b7", "batch_size": 96, "pipeline": "host", "workers": 8},
    )
    add(launch_bound, 9, measure=110, model="mobilenetv2", batch=8, preset={"model": "mobilenetv2", "batch_size": 8, "pipeline": "synthetic"})
    script = ["/usr/bin/python3", "train.py", "--data", "/mnt/nfs/shards"]
    add(idle_io, 10, measure=140, phases=False, command=script, preset={"framework": None, "command": script})
    add(grace_startup, 11, measure=110, phases=False, command=script, preset={"framework": None, "command": script})
    add(pcie_link, 12, measure=100, preset={"pipeline": "synthetic"})
    add(pcie_idle_downshift, 13, measure=150, interval=2.0, phases=False, command=script, preset={"framework": None, "command": script})
    add(pcie_traffic, 14, measure=80, preset={"pipeline": "host", "workers": 8})
    add(warmup_only, 15, warmup=45, measure=110, preset={"pipeline": "host", "workers": 1})
    for tr in traces:  # command presets have no workload keys
        tr.preset = {k: v for k, v in tr.preset.items() if v is not None}
        if "command" in tr.preset:
            for key in list(WORKLOAD):
                tr.preset.pop(key, None)
    return traces


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for tr in build():
        print(tr.write(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

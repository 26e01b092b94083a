"""The rules: what each finding looks for in one sample, and how it explains itself.

A rule's :meth:`Rule.observe` returns ``(level, obs)`` for one sample: level 0 clear,
1 info, 2 warning, 3 critical, ``None`` when it cannot tell; ``obs`` holds the
numbers the evidence is later computed from.  Holding and clearing over time is
not the rules' business: :mod:`gputui.diagnosis.hold` does it.  :meth:`Rule.describe`
turns a finding's accumulated numbers into its title, evidence and advice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gputui.diagnosis.context import Accum, Context, med, rnd
from gputui.diagnosis.hold import Hold
from gputui.diagnosis.settings import Settings
from gputui.model import GpuSample

SEVERITIES = {1: "info", 2: "warning", 3: "critical"}
GIB = 1024**3
MIB = 1024**2
THERMAL_REASONS = ("SwThermalSlowdown", "HwThermalSlowdown")
# Bytes per second per lane and direction, after line coding, by PCIe generation.
PCIE_LANE_BPS = {1: 250e6, 2: 500e6, 3: 984.6e6, 4: 1969.2e6, 5: 3938.5e6, 6: 7877e6}


@dataclass
class Finding:
    id: str
    kind: str
    gpu: int | None
    severity: str
    since: float
    until: float
    opened_t: float
    state: str = "open"
    level: int = 0
    acc: Accum = field(default_factory=Accum)
    rates: Accum = field(default_factory=Accum)
    baseline_rate: float | None = None
    count: int = 1  # event findings: how many times it happened
    data: dict[str, Any] = field(default_factory=dict)  # event findings: what the event said
    title: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    advice: list[str] = field(default_factory=list)

    def payload(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "state": self.state,
            "severity": self.severity,
            "title": self.title,
            "since": round(self.since, 4),
            "until": round(self.until, 4),
            "evidence": dict(self.evidence),
            "advice": list(self.advice),
        }

    def series(self, key: str, since: float | None = None) -> list[float]:
        """This finding's values of ``key`` from ``since`` (default: its start) to its end."""
        return self.acc.values(key, until=self.until, since=self.since if since is None else since)

    def share(self, key: str, since: float | None = None) -> float | None:
        values = self.series(key, since)
        return sum(values) / len(values) if values else None

    def first_t(self, key: str) -> float | None:
        """When ``key`` was first non-zero within the finding."""
        values = self.acc.series.get(key)
        if values is None:
            return None
        for t, v in zip(self.acc.t, values):
            if t >= self.since and v == v and v > 0:
                return t
        return None

    def rate(self, since: float | None = None) -> float | None:
        return med(self.rates.values("rate", until=self.until, since=self.since if since is None else since))


def _clean(evidence: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in evidence.items() if v is not None}


def _pct(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return 100.0 * part / whole


def _share_pct(value: float | None) -> float | None:
    return None if value is None else 100.0 * value


def _gib(num: float | None) -> str:
    return "?" if num is None else f"{num / GIB:.1f}"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _throughput(f: Finding, since: float | None = None) -> dict[str, Any]:
    """Throughput during the finding (from ``since``), before it, and the drop."""
    during = f.rate(since)
    out: dict[str, Any] = {"samples_per_sec": rnd(during, 1)}
    if during is not None and f.baseline_rate:
        out["samples_per_sec_before"] = rnd(f.baseline_rate, 1)
        out["throughput_drop_pct"] = rnd(100.0 * (1 - during / f.baseline_rate), 1)
    return out


def _clock(f: Finding, ctx: Context, since: float | None = None) -> dict[str, Any]:
    info = ctx.gpu_info.get(f.gpu) if f.gpu is not None else None
    clock = med(f.series("sm_clock", since))
    top = info.sm_clock_max_mhz if info else None
    out: dict[str, Any] = {"sm_clock_median_mhz": rnd(clock, 0), "sm_clock_max_mhz": top}
    if clock is not None and top:
        out["clock_drop_pct"] = rnd(100.0 * (1 - clock / top), 1)
    return out


class Rule:
    kind = ""
    scope = "gpu"  # "gpu": one hold per GPU; "run": one for the run
    during_warmup = False  # judged in warm-up and the start grace period too
    event_only = False  # fed by events, not samples

    def hold(self, s: Settings) -> Hold:
        return Hold(s.open_after_s, s.close_after_s, s.hold_share, s.clear_share)

    def observe(self, ctx: Context, gpu: GpuSample | None) -> tuple[int | None, dict[str, Any]]:
        raise NotImplementedError

    def describe(self, f: Finding, ctx: Context) -> tuple[str, dict[str, Any], list[str]]:
        raise NotImplementedError


# --- 1. Input-bound -------------------------------------------------------------------


class InputBound(Rule):
    kind = "input_bound"
    scope = "run"

    def observe(self, ctx, gpu):
        s = ctx.s
        if ctx.setting("pipeline") == "synthetic" or not ctx.run_uses_gpu:
            return None, {}  # the data lives on the GPU (or no GPU is used): nothing to wait for
        d = ctx.d
        gpus = d.run_gpus
        if not gpus or not d.procs:
            return None, {}
        sm = [g.sm_active for g in gpus if g.sm_active is not None]
        util = [g.util_gpu for g in gpus if g.util_gpu is not None]
        # max over the GPUs: when the run's GPUs cannot be told apart, one busy GPU
        # among idle ones must not look under-busy.
        under = (max(sm) < s.input_sm_active_pct) if sm else (max(util) < s.input_util_pct) if util else None
        rate = ctx.recent_rate()
        ceiling = s.ceiling_samples_per_sec
        slow = (rate < ceiling * s.ceiling_below_pct / 100.0) if ceiling and rate is not None else None
        if under is None and slow is None:
            return None, {}
        host = ctx.sample.host if ctx.sample else None
        host_cpu = host.cpu_percent if host else None
        worker_cpu = _mean([p.cpu_percent for p in d.workers])
        main_cpu = d.main.cpu_percent if d.main else None
        by = {
            "by_workers": bool(d.workers) and worker_cpu is not None and worker_cpu >= s.worker_busy_pct,
            "by_cores": bool(ctx.cores) and d.run_cpu is not None and d.run_cpu >= s.run_cores_busy_pct * ctx.cores,
            "by_host": host_cpu is not None and host_cpu >= s.run_cores_busy_pct,
            "by_main": not d.workers and main_cpu is not None and main_cpu >= s.worker_busy_pct,
        }
        level = 2 if (under or slow) and any(by.values()) else 0
        obs = {
            "sm_active": max(sm) if sm else None,
            "util_gpu": max(util) if util else None,
            "rate": rate,
            "workers": float(len(d.workers)),
            "worker_cpu": worker_cpu,
            "run_cpu": d.run_cpu,
            "host_cpu": host_cpu,
            "main_cpu": main_cpu,
            **{k: float(v) for k, v in by.items()},
        }
        return level, obs

    def describe(self, f, ctx):
        s = ctx.s
        sm, util = med(f.series("sm_active")), med(f.series("util_gpu"))
        workers = max(f.series("workers"), default=0)
        worker_cpu, run_cpu = med(f.series("worker_cpu")), med(f.series("run_cpu"))
        host_cpu, main_cpu = med(f.series("host_cpu")), med(f.series("main_cpu"))
        cores, gpus = ctx.cores, max(ctx.n_gpus, 1)
        rate = f.rate()
        ceiling = s.ceiling_samples_per_sec
        evidence = _clean({
            "gpu_sm_active_pct": rnd(sm), "gpu_util_pct": rnd(util),
            "workers": int(workers), "worker_cpu_pct": rnd(worker_cpu),
            "main_cpu_pct": rnd(main_cpu), "run_cpu_pct": rnd(run_cpu), "host_cpu_pct": rnd(host_cpu),
            "cores": cores, "gpus": ctx.n_gpus,
            "samples_per_sec": rnd(rate, 1),
            "ceiling_samples_per_sec": ceiling,
            "ceiling_pct": rnd(_pct(rate, ceiling)) if ceiling else None,
            "duration_s": rnd(f.until - f.since),
        })
        if sm is not None:
            busy = f"SM activity {sm:.0f}%"
        elif util is not None:
            busy = f"utilization {util:.0f}%"
        else:
            busy = "under-busy"
        causes = {k: f.share(k) or 0.0 for k in ("by_workers", "by_cores", "by_host", "by_main")}
        cause = max(causes, key=lambda k: causes[k])
        if cause == "by_workers":
            plural = "worker runs" if workers == 1 else "workers run"
            title = f"Input-bound: GPU {busy} while {workers:.0f} data-loader {plural} at {worker_cpu:.0f}% of a core"
        elif cause == "by_cores":
            title = f"Input-bound: GPU {busy} while the run uses {run_cpu / 100:.1f} of {cores} CPU cores"
        elif cause == "by_host":
            title = f"Input-bound: GPU {busy} while the machine's CPU is {host_cpu:.0f}% busy"
        else:
            title = f"Input- or host-bound: GPU {busy} while the main process runs at {main_cpu:.0f}% of a core, with no data-loader workers"
        if ceiling and rate is not None:
            title += f"; {rate:.0f} samples/s is {100 * rate / ceiling:.0f}% of this model's {ceiling:.0f} with synthetic data"
        advice = []
        per_gpu = cores / gpus if cores else None
        if cause == "by_main":
            advice.append("The main process loads the data itself: start data-loader workers (PyTorch DataLoader(num_workers=...), tf.data map(num_parallel_calls=AUTOTUNE)).")
        if per_gpu is not None and per_gpu < 4:
            advice.append(f"This machine has {cores} CPU cores for {gpus} GPU(s), fewer than the 4-8 cores a GPU needs (AutoDL guide): more workers will not help much; do less work per sample or rent a machine with more cores.")
        else:
            have = f"{cores} cores for {gpus} GPU(s)" if cores else "the machine's cores"
            advice.append(f"Use more data-loader workers ({workers:.0f} now; {have}): give each GPU 4-8 cores (AutoDL guide); past that, Python multiprocessing overhead dominates.")
        advice += [
            "Cache decoded and resized samples (tf.data .cache(), or a pre-processed copy of the dataset) so each epoch decodes less.",
            "Prefetch so loading overlaps training: DataLoader(pin_memory=True, persistent_workers=True, prefetch_factor=4), tf.data .prefetch(AUTOTUNE).",
            "Lighten the CPU augmentation, or apply it to whole batches on the GPU (torchvision.transforms.v2 on CUDA tensors, Kornia).",
            "Decode and augment on the GPU with NVIDIA DALI: one core with DALI beat an 8-core Python loader (AutoDL guide).",
        ]
        return title, evidence, advice


# --- 2. Thermal ------------------------------------------------------------------------


class Thermal(Rule):
    kind = "thermal"

    def observe(self, ctx, gpu):
        reasons = gpu.throttle_reasons
        if reasons is None and gpu.temp_c is None:
            return None, {}
        throttled = bool(reasons) and any(r in THERMAL_REASONS for r in reasons)
        hot = gpu.temp_c is not None and gpu.temp_c >= ctx.s.thermal_warn_c
        level = 3 if throttled else 2 if hot else 0
        obs = {
            "temp": gpu.temp_c,
            "sm_clock": gpu.sm_clock_mhz,
            "power": gpu.power_w,
            "throttled": None if reasons is None else float(throttled),
        }
        return level, obs

    def describe(self, f, ctx):
        info = ctx.gpu_info.get(f.gpu)
        temps = f.series("temp")
        tmax, tmed = max(temps, default=None), med(temps)
        slowdown = info.temp_slowdown_c if info else None
        throttled_since = f.first_t("throttled")
        evidence = _clean({
            "gpu": f.gpu,
            "temp_max_c": rnd(tmax), "temp_median_c": rnd(tmed),
            "warn_c": ctx.s.thermal_warn_c,
            "slowdown_c": slowdown,
            "shutdown_c": info.temp_shutdown_c if info else None,
            "margin_to_slowdown_c": rnd(slowdown - tmax) if slowdown is not None and tmax is not None else None,
            "throttled_pct": rnd(_share_pct(f.share("throttled"))),
            **_clock(f, ctx, throttled_since),
            **_throughput(f, throttled_since),
            "duration_s": rnd(f.until - f.since),
        })
        name = f"GPU{f.gpu}"
        own = f"; it slows itself at {slowdown:.0f} °C" if slowdown is not None else ""
        if f.level >= 3:
            title = f"{name} thermal throttling at up to {tmax:.0f} °C" if tmax is not None else f"{name} thermal throttling"
            if evidence.get("clock_drop_pct") is not None:
                title += f": SM clock {evidence['sm_clock_median_mhz']} MHz, {evidence['clock_drop_pct']:.0f}% below its {evidence['sm_clock_max_mhz']} MHz max"
            if evidence.get("throughput_drop_pct") is not None:
                title += f", throughput {evidence['throughput_drop_pct']:.0f}% lower"
        else:
            title = f"{name} hot: up to {tmax:.0f} °C (warning at {ctx.s.thermal_warn_c:.0f} °C{own})"
        advice = []
        if f.level >= 3:
            advice.append("The GPU confirms it is slowing itself down for heat (SwThermalSlowdown / HwThermalSlowdown): the clock drop is lost speed.")
        advice += [
            "Improve cooling: airflow through the case, clean filters and heatsinks, working fans; leave a slot between cards or use PCIe risers (Tim Dettmers' GPU guide: above 80 °C a GPU throttles).",
            "On a rented machine, report the temperature to the provider or move to another machine: cooling is theirs to fix.",
            "A lower power limit (nvidia-smi -pl) cuts heat for a small loss: capping 50 W cost about 7% of BERT-large throughput on an RTX 2080 Ti (same guide).",
        ]
        return title, evidence, advice


# --- 3. Power cap ----------------------------------------------------------------------


class PowerCap(Rule):
    kind = "power_cap"

    def hold(self, s):
        return Hold(s.open_after_s, s.close_after_s, s.power_cap_share, s.clear_share)

    def observe(self, ctx, gpu):
        reasons = gpu.throttle_reasons
        if reasons is None:
            return None, {}
        s = ctx.s
        info = ctx.gpu_info.get(gpu.index)
        limit = gpu.power_limit_w or (info.power_limit_w if info else None)
        top = info.sm_clock_max_mhz if info else None
        capped = "SwPowerCap" in reasons
        if capped and gpu.power_w is not None and limit:
            capped = gpu.power_w >= limit * s.power_limit_pct / 100.0
        if capped and gpu.sm_clock_mhz is not None and top:
            capped = gpu.sm_clock_mhz < top * s.clock_below_max_pct / 100.0
        default = info.power_default_limit_w if info else None
        lowered = bool(limit and default and limit < 0.98 * default)
        level = (2 if lowered else 1) if capped else 0
        obs = {"capped": float(capped), "power": gpu.power_w, "limit": limit, "sm_clock": gpu.sm_clock_mhz if capped else None}
        return level, obs

    def describe(self, f, ctx):
        info = ctx.gpu_info.get(f.gpu)
        limit = med(f.series("limit"))
        default = info.power_default_limit_w if info else None
        evidence = _clean({
            "gpu": f.gpu,
            "capped_pct": rnd(_share_pct(f.share("capped"))),
            "power_median_w": rnd(med(f.series("power"))),
            "power_limit_w": rnd(limit),
            "power_default_limit_w": default,
            **_clock(f, ctx),
            **_throughput(f),
            "duration_s": rnd(f.until - f.since),
        })
        lowered = bool(limit and default and limit < 0.98 * default)
        where = f"its {limit:.0f} W limit" if limit else "its power limit"
        if lowered:
            where += f" (default {default:.0f} W)"
        title = f"GPU{f.gpu} power-capped {evidence.get('capped_pct', 0):.0f}% of the time at {where}"
        if evidence.get("clock_drop_pct") is not None:
            title += f": SM clock {evidence['sm_clock_median_mhz']} MHz, {evidence['clock_drop_pct']:.0f}% below max"
        advice = []
        if lowered:
            advice.append(f"The enforced limit ({limit:.0f} W) is below the card's default ({default:.0f} W): restore it with `sudo nvidia-smi -i {f.gpu} -pl {default:.0f}`, or ask the provider why it is lowered.")
        else:
            advice.append("The GPU draws all the power it is allowed: under heavy load this is normal and the clock drop is the price; compare energy per sample (in the summary) rather than clocks.")
        advice += [
            "A hot GPU needs more power for the same work: check the temperature and cooling as well.",
            "Mixed precision (bf16/fp16) and fused kernels do more work per joule.",
        ]
        return title, evidence, advice


# --- 4. Hardware slowdown / power brake ---------------------------------------------------


class HwSlowdown(Rule):
    kind = "hw_slowdown"

    def observe(self, ctx, gpu):
        reasons = gpu.throttle_reasons
        if reasons is None:
            return None, {}
        thermal = "HwThermalSlowdown" in reasons  # HwSlowdown with it is heat: the thermal rule's
        hw = "HwSlowdown" in reasons and not thermal
        brake = "HwPowerBrakeSlowdown" in reasons
        obs = {"hw": float(hw), "brake": float(brake), "active": float(hw or brake),
               "sm_clock": gpu.sm_clock_mhz if hw or brake else None,
               "temp": gpu.temp_c, "power": gpu.power_w}
        return (3 if hw or brake else 0), obs

    def describe(self, f, ctx):
        hw, brake = f.share("hw") or 0.0, f.share("brake") or 0.0
        evidence = _clean({
            "gpu": f.gpu,
            "active_pct": rnd(100.0 * (f.share("active") or 0.0)),
            "hw_slowdown_pct": rnd(100.0 * hw),
            "power_brake_pct": rnd(100.0 * brake),
            **_clock(f, ctx),
            "temp_max_c": rnd(max(f.series("temp"), default=None)),
            "power_median_w": rnd(med(f.series("power"))),
            **_throughput(f),
            "duration_s": rnd(f.until - f.since),
        })
        names = ", ".join(n for n, v in (("HwSlowdown", hw), ("HwPowerBrakeSlowdown", brake)) if v > 0)
        title = f"GPU{f.gpu} hardware slowdown ({names}) {evidence['active_pct']:.0f}% of the time"
        if evidence.get("clock_drop_pct") is not None:
            title += f": SM clock {evidence['sm_clock_median_mhz']} MHz, {evidence['clock_drop_pct']:.0f}% below max"
        advice = []
        if brake:
            advice.append("HwPowerBrakeSlowdown: the system asserted the external power brake; the host's power supply or power budget cannot feed the GPU. Check PSU capacity and cabling, or report the machine to the provider.")
        if hw:
            advice.append("HwSlowdown without a thermal reason: a power-delivery or cooling fault on the host (the GPU cuts its clocks by half or more). See `nvidia-smi -q -d PERFORMANCE`; check the power cables and PSU.")
        advice.append("No change to the training code fixes this: on a rented machine, move to another one and report it.")
        return title, evidence, advice


# --- 5. Memory -------------------------------------------------------------------------


class VramFull(Rule):
    kind = "vram_full"

    def observe(self, ctx, gpu):
        info = ctx.gpu_info.get(gpu.index)
        total = gpu.memory_total or (info.memory_total if info else None)
        if gpu.memory_used is None or not total:
            return None, {}
        pct = 100.0 * gpu.memory_used / total
        full = pct >= ctx.s.vram_full_pct
        level = (1 if ctx.framework == "tf" else 2) if full else 0
        return level, {"used_pct": pct, "used": float(gpu.memory_used), "total": float(total),
                       "procs": float(len(gpu.processes)) if gpu.processes is not None else None}

    def describe(self, f, ctx):
        used = max(f.series("used"), default=None)
        total = max(f.series("total"), default=None)
        procs = max(f.series("procs"), default=None)
        evidence = _clean({
            "gpu": f.gpu,
            "memory_used_max": int(used) if used is not None else None,
            "memory_total": int(total) if total is not None else None,
            "used_pct_max": rnd(max(f.series("used_pct"), default=None)),
            "threshold_pct": ctx.s.vram_full_pct,
            "gpu_processes": int(procs) if procs is not None else None,
            "duration_s": rnd(f.until - f.since),
        })
        title = f"GPU{f.gpu} memory {evidence.get('used_pct_max', 0):.0f}% full ({_gib(used)} of {_gib(total)} GiB)"
        advice = []
        if ctx.framework == "tf":
            title += ": TensorFlow reserves most of it up front"
            advice.append("TensorFlow maps nearly all GPU memory by default, so this need not be real use: set TF_FORCE_GPU_ALLOW_GROWTH=true (or tf.config.experimental.set_memory_growth) and read tf.config.experimental.get_memory_info('GPU:0')['peak'] for the real peak.")
        else:
            advice.append("One step from out-of-memory: a longer sequence or a bigger batch will fail. Lower the batch size, use mixed precision (bf16/fp16) or activation checkpointing; torch.cuda.max_memory_allocated() gives the framework's own peak.")
        if procs and procs > 1:
            advice.append(f"{procs:.0f} processes hold memory on this GPU: see nvidia-smi for the others.")
        return title, evidence, advice


class HostMemory(Rule):
    kind = "host_memory"
    scope = "run"
    during_warmup = True  # the kernel's or the provider's OOM killer does not wait for warm-up

    def observe(self, ctx, gpu):
        host = ctx.sample.host if ctx.sample else None
        if host is None or not host.memory_total or host.memory_available is None:
            return None, {}
        s = ctx.s
        used = 100.0 * (1 - host.memory_available / host.memory_total)
        growth = ctx.swap_growth()
        swapping = growth is not None and growth >= s.swap_growth_mib * MIB
        level = 3 if used >= s.host_memory_critical_pct else 2 if used >= s.host_memory_pct or swapping else 0
        return level, {"used_pct": used, "available": float(host.memory_available), "total": float(host.memory_total),
                       "swap_used": host.swap_used, "swap_growth": growth, "swapping": float(swapping),
                       "run_rss": ctx.d.run_rss}

    def describe(self, f, ctx):
        used = max(f.series("used_pct"), default=None)
        swap_growth = max(f.series("swap_growth"), default=None)
        rss = max(f.series("run_rss"), default=None)
        evidence = _clean({
            "memory_used_pct_max": rnd(used),
            "memory_available_min": int(min(f.series("available"), default=0)) if f.series("available") else None,
            "memory_total": int(max(f.series("total"))) if f.series("total") else None,
            "swap_used_max": int(max(f.series("swap_used"))) if f.series("swap_used") else None,
            "swap_growth_30s_max": int(swap_growth) if swap_growth is not None else None,
            "swapping_pct": rnd(_share_pct(f.share("swapping"))),
            "run_rss_max": int(rss) if rss else None,
            "duration_s": rnd(f.until - f.since),
        })
        title = f"Host memory {used:.0f}% used" if used is not None else "Host memory pressure"
        if evidence.get("swapping_pct"):
            title += ", swapping"
        advice = [
            "Rented instances kill processes that go over their memory limit (AutoDL guide): the run may die without a Python error.",
            "Use less host memory: fewer data-loader workers (each holds a copy of the dataset object), a shorter prefetch queue, no whole-dataset cache in RAM (tf.data .cache() crashed EfficientNet-B7 training on a 12 GB Colab), or cache to a file.",
        ]
        if evidence.get("swapping_pct"):
            advice.append("The machine is swapping: every touch of swapped memory waits on the disk. Free memory or use a machine with more RAM.")
        return title, evidence, advice


class OutOfMemory(Rule):
    """Fed by events: the workload's ``oom`` line, an ``oom`` outcome, or a SIGKILL
    while host memory was short."""

    kind = "oom"
    scope = "run"
    event_only = True

    def describe(self, f, ctx):
        data = f.data
        killed = data.get("killed")
        batch = data.get("batch_size")
        evidence = _clean({
            "oom_events": f.count,
            "batch_size": batch if isinstance(batch, (int, float)) and not isinstance(batch, bool) else None,
            "host_memory_used_pct": rnd(ctx.last_memory_used_pct),
            "gpu_memory_used_pct_max": rnd(data.get("gpu_memory_used_pct")),
        })
        searching = bool(ctx.setting("find_max_batch"))
        if killed:
            title = f"The run was killed ({killed}) while host memory was {ctx.last_memory_used_pct:.0f}% used: likely the machine's or the instance's memory limit"
            advice = [
                "Rented instances kill processes over their memory limit (AutoDL guide); so does the kernel's OOM killer (see `dmesg`).",
                "Use less host memory: fewer data-loader workers, a shorter prefetch queue, no whole-dataset cache in RAM.",
            ]
        else:
            title = "Out of memory" + (f" at batch size {batch}" if batch else "")
            message = str(data.get("message") or "").strip()
            if message:
                title += ": " + message.splitlines()[0][:120]
            if searching:
                title += " (expected while searching for the largest batch)"
            advice = [
                "Lower the batch size (find_max_batch = true searches the largest that fits), use mixed precision (bf16/fp16) or activation checkpointing.",
                "TensorFlow: enable memory growth (TF_FORCE_GPU_ALLOW_GROWTH=true) so one process does not hold all of it; check nvidia-smi for other processes on the GPU.",
            ]
        return title, evidence, advice


# --- 6. Busy but not working ----------------------------------------------------------------


class LaunchBound(Rule):
    kind = "launch_bound"

    def hold(self, s):
        return Hold(s.launch_open_after_s, s.close_after_s, s.hold_share, s.clear_share)

    def observe(self, ctx, gpu):
        if gpu.util_gpu is None or gpu.sm_active is None:
            return None, {}  # needs GPM: utilization alone cannot tell
        s = ctx.s
        level = 2 if gpu.util_gpu >= s.busy_util_pct and gpu.sm_active < s.launch_sm_active_pct else 0
        return level, {"util": gpu.util_gpu, "sm": gpu.sm_active, "occ": gpu.sm_occupancy, "tensor": gpu.tensor_active}

    def describe(self, f, ctx):
        util, sm = med(f.series("util")), med(f.series("sm"))
        batch = ctx.setting("batch_size")
        evidence = _clean({
            "gpu": f.gpu,
            "gpu_util_pct": rnd(util), "sm_active_pct": rnd(sm),
            "sm_occupancy_pct": rnd(med(f.series("occ"))), "tensor_active_pct": rnd(med(f.series("tensor"))),
            "batch_size": batch if isinstance(batch, int) else None,
            **_throughput(f),
            "duration_s": rnd(f.until - f.since),
        })
        title = f"GPU{f.gpu} busy but not working: utilization {util:.0f}% but SM activity {sm:.0f}% (launch- or latency-bound)"
        advice = [
            f"The kernels are too small to fill the GPU: raise the batch size{f' ({batch} now)' if batch else ''}.",
            "Cut launch overhead: CUDA graphs (torch.compile(mode='reduce-overhead'), torch.cuda.CUDAGraph) or compile and fuse (torch.compile, XLA jit_compile=True).",
            "Mixed precision (bf16/fp16), and channels_last for CNNs.",
            "Avoid host synchronisation in the loop: .item(), .cpu(), printing the loss every step.",
        ]
        return title, evidence, advice


# --- 7. Idle without cause -------------------------------------------------------------------


class Idle(Rule):
    kind = "idle"
    scope = "run"

    def observe(self, ctx, gpu):
        s, d = ctx.s, ctx.d
        if not d.procs or d.run_cpu is None:
            return None, {}
        util = None
        if d.run_gpus and ctx.run_uses_gpu:
            utils = [g.util_gpu for g in d.run_gpus if g.util_gpu is not None]
            if not utils:
                return None, {}
            sms = [g.sm_active for g in d.run_gpus if g.sm_active is not None]
            util = max(utils)
            gpu_idle = util < s.idle_gpu_pct and (not sms or max(sms) < s.idle_gpu_pct)
        elif ctx.n_gpus == 0 or not ctx.run_uses_gpu:
            gpu_idle = True  # no GPU at all, or the run uses none: the CPU decides
        else:
            return None, {}  # the GPUs are lost
        host = ctx.sample.host if ctx.sample else None
        level = 2 if gpu_idle and d.run_cpu < s.idle_cpu_pct else 0
        return level, {"util": util, "run_cpu": d.run_cpu, "host_cpu": host.cpu_percent if host else None,
                       "disk_read": host.disk_read_bps if host else None, "run_read": d.run_read_bps,
                       "pid": float(d.main.pid) if d.main else None}

    def describe(self, f, ctx):
        util, cpu = med(f.series("util")), med(f.series("run_cpu"))
        disk = med(f.series("disk_read"))
        evidence = _clean({
            "gpu_util_pct": rnd(util), "run_cpu_pct": rnd(cpu), "host_cpu_pct": rnd(med(f.series("host_cpu"))),
            "disk_read_bps": rnd(disk, 0), "run_read_bps": rnd(med(f.series("run_read")), 0),
            **_throughput(f),
            "duration_s": rnd(f.until - f.since),
        })
        if util is not None:
            title = f"The run is idle: GPU {util:.0f}% busy and its processes use {cpu:.0f}% of one core"
        else:
            title = f"The run is idle: its processes use {cpu:.0f}% of one core (no GPU)"
        pids = f.series("pid")
        pid = f"{pids[-1]:.0f}" if pids else "PID"
        io = f" (the machine reads {disk / 1e6:.1f} MB/s)" if disk is not None else ""
        advice = [
            f"It is waiting, not working: on disk or network I/O{io}, a lock or a collective (NCCL, a barrier), or a sleep.",
            f"See where it waits: `py-spy dump --pid {pid}` prints every thread's stack.",
            "Data on network storage: copy it to the local disk first; many small files: pack them (tar shards, TFRecord, WebDataset).",
        ]
        return title, evidence, advice


# --- 8. PCIe ---------------------------------------------------------------------------------


def link_bps(gen: int | None, width: int | None) -> float | None:
    if not gen or not width:
        return None
    return PCIE_LANE_BPS.get(gen, PCIE_LANE_BPS[max(PCIE_LANE_BPS)]) * width


class PcieLink(Rule):
    kind = "pcie_link"

    def observe(self, ctx, gpu):
        info = ctx.gpu_info.get(gpu.index)
        if info is None or gpu.util_gpu is None or gpu.util_gpu < ctx.s.pcie_busy_util_pct:
            return None, {}  # GPUs lower the link at idle to save power: judge it only under load
        gen_low = gpu.pcie_gen is not None and info.pcie_max_gen is not None and gpu.pcie_gen < info.pcie_max_gen
        width_low = gpu.pcie_width is not None and info.pcie_max_width is not None and gpu.pcie_width < info.pcie_max_width
        if gpu.pcie_gen is None and gpu.pcie_width is None:
            return None, {}
        return (2 if gen_low or width_low else 0), {"gen": gpu.pcie_gen, "width": gpu.pcie_width, "util": gpu.util_gpu}

    def describe(self, f, ctx):
        info = ctx.gpu_info.get(f.gpu)
        gens, widths = f.series("gen"), f.series("width")
        gen = int(min(gens)) if gens else None
        width = int(min(widths)) if widths else None
        max_gen, max_width = (info.pcie_max_gen, info.pcie_max_width) if info else (None, None)
        evidence = _clean({
            "gpu": f.gpu, "pcie_gen": gen, "pcie_max_gen": max_gen, "pcie_width": width, "pcie_max_width": max_width,
            "link_bps": rnd(link_bps(gen, width), 0), "max_link_bps": rnd(link_bps(max_gen, max_width), 0),
            "gpu_util_pct": rnd(med(f.series("util"))),
            "duration_s": rnd(f.until - f.since),
        })
        title = f"GPU{f.gpu} PCIe link at Gen{gen} x{width} under load, below its Gen{max_gen} x{max_width}"
        advice = [
            "GPUs lower the link at idle to save power; this one stayed low while busy.",
            "Reseat the card or try another slot; check riser cables (an older-generation riser holds a newer card back) and the BIOS PCIe setting.",
            "Compare `nvidia-smi -q -d PCIE` (or `lspci -vv`: LnkSta against LnkCap). On a rented machine, report it.",
        ]
        return title, evidence, advice


class PcieTraffic(Rule):
    kind = "pcie_traffic"

    def observe(self, ctx, gpu):
        if gpu.pcie_rx_bps is None:
            return None, {}
        s = ctx.s
        info = ctx.gpu_info.get(gpu.index)
        gen = gpu.pcie_gen or (info.pcie_max_gen if info else None)
        width = gpu.pcie_width or (info.pcie_max_width if info else None)
        link = link_bps(gen, width)
        if link is None:
            return None, {}
        if gpu.sm_active is not None:
            under = gpu.sm_active < s.input_sm_active_pct
        elif gpu.util_gpu is not None:
            under = gpu.util_gpu < s.input_util_pct
        else:
            return None, {}
        heavy = gpu.pcie_rx_bps >= link * s.pcie_heavy_pct / 100.0
        return (2 if heavy and under else 0), {"rx": gpu.pcie_rx_bps, "tx": gpu.pcie_tx_bps, "link": link,
                                               "gen": gen, "width": width, "sm": gpu.sm_active, "util": gpu.util_gpu}

    def describe(self, f, ctx):
        rx, link = med(f.series("rx")), med(f.series("link"))
        gens, widths = f.series("gen"), f.series("width")
        sm = med(f.series("sm"))
        evidence = _clean({
            "gpu": f.gpu,
            "pcie_rx_bps": rnd(rx, 0), "pcie_tx_bps": rnd(med(f.series("tx")), 0),
            "link_bps": rnd(link, 0), "rx_link_pct": rnd(_pct(rx, link)),
            "sm_active_pct": rnd(sm), "gpu_util_pct": rnd(med(f.series("util"))),
            **_throughput(f),
            "duration_s": rnd(f.until - f.since),
        })
        busy = f"SM activity {sm:.0f}%" if sm is not None else f"utilization {evidence.get('gpu_util_pct', 0):.0f}%"
        link_name = f"Gen{gens[-1]:.0f} x{widths[-1]:.0f}" if gens and widths else "PCIe"
        title = (f"GPU{f.gpu} waits on host-to-GPU copies: {(rx or 0) / 1e9:.1f} GB/s in "
                 f"({evidence.get('rx_link_pct', 0):.0f}% of the {link_name} link) while {busy}")
        advice = [
            "Pin host memory and copy asynchronously: DataLoader(pin_memory=True) with .to('cuda', non_blocking=True), and prefetch the next batch to the GPU.",
            "Send fewer bytes: uint8 images normalised on the GPU (4x fewer than float32); keep a dataset that fits in GPU memory on the GPU.",
            "If the link runs below its generation or width, see the PCIe link finding.",
        ]
        return title, evidence, advice


def make_rules() -> list[Rule]:
    return [InputBound(), Thermal(), PowerCap(), HwSlowdown(), VramFull(), HostMemory(), OutOfMemory(),
            LaunchBound(), Idle(), PcieLink(), PcieTraffic()]

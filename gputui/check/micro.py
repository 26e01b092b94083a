"""The micro-benchmark child of ``gputui check``: what each GPU delivers on its own.

Run as ``python -m gputui.check.micro [--gpus 0,1] [--quick] [--device cuda|cpu]``.
It prints gputui protocol lines, flushed, one per measurement::

    @gputui {"event":"micro_env","torch":"2.9.0","cuda":"12.8","device_count":1,"devices":["NVIDIA H200"]}
    @gputui {"event":"micro","metric":"matmul_bf16","gpu":0,"value":781.2,"unit":"TFLOP/s","shape":[16384,16384,16384],"sweep":[...]}
    @gputui {"event":"micro_skipped","metric":"p2p","reason":"needs two or more GPUs (1 under test)"}

Without PyTorch or CUDA it prints one ``micro_unavailable`` line and exits 0; a
measurement that fails prints ``micro_skipped`` and the next one runs.  ``gpu`` is
always the NVML index (what ``--gpus`` takes): torch's order differs wherever
CUDA_VISIBLE_DEVICES reorders, so devices are matched by UUID or PCI address.

``--device cpu`` measures an fp32 matmul and a memory copy with small sizes: it lets
CI test this protocol path without a GPU; the check never uses it.

This child imports nothing of gputui beyond the protocol, the NVML wrapper and its lines'
shapes (:mod:`gputui.check.micro_lines`).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gputui.check.micro_lines import AllreduceFields, CopyFields, HostCopyFields, MicroFields, PeerCopyFields
from gputui.check.micro_matmul import SWEEP_FULL, SWEEP_QUICK, MatmulFields, fitting_shapes, sweep
from gputui.protocol import Emitter
from gputui.telemetry.nvml import GpuLost, Nvml

MIB = 1024**2
GIB = 1024**3

SECONDS_FULL = 1.5  # per measurement
SECONDS_QUICK = 0.3
P2P_SECONDS_MAX = 0.5  # per ordered pair: n(n-1) pairs add up on an 8-GPU box
WARMUP_ITERATIONS = 3
MAX_ITERATIONS = 100_000

# The matmul sweep (gputui.check.micro_matmul): seconds per shape and the warm-up
MATMUL_SHAPE_SECONDS = {False: 0.6, True: 0.2}  # keyed by --quick
MATMUL_WARMUP_SECONDS = {False: 1.0, True: 0.3}
MATMUL_DTYPES = {"matmul_bf16": "bfloat16", "matmul_fp16": "float16", "matmul_tf32": "float32"}
AMPERE = 8  # compute capability major of the first bf16/TF32 tensor cores
DEVICE_COPY_BYTES = GIB  # far past any L2 cache (an H100's is 50 MB)
PINNED_BYTES = 256 * MIB
P2P_BYTES = 256 * MIB
ALLREDUCE_BYTES = 256 * MIB
ALLREDUCE_TIMEOUT_S = 300.0  # spawning n processes and NCCL's init take tens of seconds

CPU_MATMUL_SHAPES = ((512, 512, 512), (256, 1024, 512))  # the sweep's path, at CPU sizes
CPU_COPY_BYTES = 64 * MIB

PER_GPU_METRICS = ("matmul_bf16", "matmul_fp16", "matmul_tf32", "memory_bandwidth", "h2d", "d2h")


@dataclass
class Target:
    """One GPU under test: torch's index for it and NVML's."""

    torch_index: int
    gpu: int  # the NVML index, what results are keyed by
    name: str
    capability: tuple[int, int]
    nvml_handle: Any = None


# --- timing ---------------------------------------------------------------------------


class WallTimer:
    """Wall-clock timing, for the CPU and for work that spans two GPUs (events belong to one)."""

    def __init__(self, sync: Callable[[], None] = lambda: None) -> None:
        self._sync = sync

    def elapsed(self, run_once: Callable[[], None], iterations: int, while_running: Callable[[], None] | None = None) -> float:
        self._sync()
        start = time.perf_counter()
        for _ in range(iterations):
            run_once()
        self._sync()
        return time.perf_counter() - start


class CudaTimer:
    """Times work on the current CUDA stream with events, so host overhead is left out."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def elapsed(self, run_once: Callable[[], None], iterations: int, while_running: Callable[[], None] | None = None) -> float:
        """``while_running`` is called, from the host, while the queued work is in flight."""
        start = self._torch.cuda.Event(enable_timing=True)
        end = self._torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            run_once()
        end.record()
        if while_running is not None:
            while_running()  # at least once: the work was just queued, so it is in flight
            while not end.query():
                time.sleep(0.005)
                while_running()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0


def measure(
    timer: Any, run_once: Callable[[], None], seconds: float, sync: Callable[[], None], while_running: Callable[[], None] | None = None
) -> tuple[int, float]:
    """Warm up, size a batch to last about ``seconds``, time it: (iterations, seconds)."""
    for _ in range(WARMUP_ITERATIONS):
        run_once()
    sync()
    one = timer.elapsed(run_once, 1)
    iterations = max(3, min(MAX_ITERATIONS, int(seconds / max(one, 1e-7))))
    return iterations, timer.elapsed(run_once, iterations, while_running)


# --- NVML: which torch device is which NVML GPU, and its link while loaded -------------


def _norm_uuid(value: Any) -> str | None:
    if value is None:
        return None
    text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    text = text.strip().lower()
    return text[4:] if text.startswith("gpu-") else text


@dataclass(frozen=True)
class DeviceIdentity:
    """One GPU as torch or NVML numbers it: its index there, UUID (lower case, no
    ``GPU-``) and PCI (domain, bus, device); NVML's also its handle."""

    index: int
    uuid: str | None
    pci: tuple[int, int, int] | None
    handle: Any = None


def nvml_identities(nvml: Nvml) -> list[DeviceIdentity]:
    """index, handle, uuid and PCI (domain, bus, device) of every GPU NVML sees."""
    out = []
    for index in range(nvml.call("nvmlDeviceGetCount") or 0):
        handle = nvml.call("nvmlDeviceGetHandleByIndex", index)
        if handle is None:
            continue
        pci = nvml.call("nvmlDeviceGetPciInfo", handle)
        out.append(
            DeviceIdentity(
                index=index,
                handle=handle,
                uuid=_norm_uuid(nvml.call("nvmlDeviceGetUUID", handle)),
                pci=None if pci is None else (pci.domain, pci.bus, pci.device),
            )
        )
    return out


def match_devices(torch_ids: list[DeviceIdentity], nvml_ids: list[DeviceIdentity]) -> dict[int, DeviceIdentity]:
    """torch index -> its NVML identity, matched by UUID, else by PCI address."""
    matched = {}
    for tid in torch_ids:
        for nid in nvml_ids:
            if (tid.uuid and tid.uuid == nid.uuid) or (tid.pci and tid.pci == nid.pci):
                matched[tid.index] = nid
                break
    return matched


class LinkWatcher:
    """Reads the PCIe link generation and width, keeping the highest seen.  A link
    trains down at idle, so only reads taken while copies are in flight count."""

    def __init__(self, nvml: Nvml | None, handle: Any) -> None:
        self._nvml = nvml
        self._handle = handle
        self.gen: int | None = None
        self.width: int | None = None

    def read(self) -> None:
        if self._nvml is None or self._handle is None:
            return
        try:
            gen = self._nvml.call("nvmlDeviceGetCurrPcieLinkGeneration", self._handle)
            width = self._nvml.call("nvmlDeviceGetCurrPcieLinkWidth", self._handle)
        except GpuLost:
            return
        if gen is not None:
            self.gen = max(gen, self.gen or 0)
        if width is not None:
            self.width = max(width, self.width or 0)


# --- measurements -----------------------------------------------------------------------


def copy_gbs(torch: Any, device: Any, nbytes: int, seconds: float, timer: Any, sync: Callable[[], None]) -> float:
    """Device memory bandwidth: a copy reads and writes every byte."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    iterations, elapsed = measure(timer, lambda: dst.copy_(src), seconds, sync)
    return 2.0 * nbytes * iterations / elapsed / 1e9


def host_copy_gbs(torch: Any, device: Any, to_device: bool, seconds: float, timer: Any, sync: Callable[[], None], link: LinkWatcher) -> float:
    host = torch.empty(PINNED_BYTES, dtype=torch.uint8, pin_memory=True).fill_(1)
    gpu = torch.empty(PINNED_BYTES, dtype=torch.uint8, device=device)
    dst, src = (gpu, host) if to_device else (host, gpu)
    iterations, elapsed = measure(timer, lambda: dst.copy_(src, non_blocking=True), seconds, sync, while_running=link.read)
    return PINNED_BYTES * iterations / elapsed / 1e9


def p2p_gbs(torch: Any, a: int, b: int, seconds: float) -> float:
    """One direction, a -> b.  Wall-clock timed: events belong to one device."""
    src = torch.empty(P2P_BYTES, dtype=torch.uint8, device=f"cuda:{a}").fill_(1)
    dst = torch.empty(P2P_BYTES, dtype=torch.uint8, device=f"cuda:{b}")

    def sync() -> None:
        torch.cuda.synchronize(a)
        torch.cuda.synchronize(b)

    iterations, elapsed = measure(WallTimer(sync), lambda: dst.copy_(src, non_blocking=True), seconds, sync)
    return P2P_BYTES * iterations / elapsed / 1e9


# --- the run ----------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"[:300] if first else type(exc).__name__


class Micro:
    def __init__(self, torch: Any, emitter: Emitter, seconds: float, quick: bool = False) -> None:
        self.torch = torch
        self.out = emitter
        self.seconds = seconds
        self.quick = quick

    def attempt(self, metric: str, fn: Callable[[], MicroFields], *, gpu: int | None = None, peer: int | None = None, device: str | None = None) -> None:
        """Run one measurement; any failure is reported and the run goes on.  The line
        names the GPU (and the ``peer`` of a copy between two) or the ``device``."""
        try:
            fields = fn()
        except Exception as exc:  # noqa: BLE001 - OOM, unsupported dtype, a CUDA error: skip it
            self.out.emit("micro_skipped", metric=metric, gpu=gpu, peer=peer, device=device, reason=_reason(exc))
            self._release()
            return
        self.out.emit("micro", metric=metric, gpu=gpu, peer=peer, device=device, **fields)
        self._release()

    def _release(self) -> None:
        if self.torch.cuda.is_available():
            self.torch.cuda.empty_cache()

    # --- CPU: the protocol path without a GPU
    def run_cpu(self) -> None:
        torch, timer, sync = self.torch, WallTimer(), lambda: None
        self.out.emit("micro_env", torch=torch.__version__, cuda=None, device="cpu", device_count=1, devices=["cpu"])
        self.attempt(
            "matmul_fp32",
            lambda: sweep(torch, "cpu", torch.float32, CPU_MATMUL_SHAPES, seconds_per_shape=self.seconds / 2, warmup_s=0.0, timer=timer, sync=sync).fields(4),
            device="cpu",
        )
        self.attempt(
            "memory_bandwidth",
            lambda: CopyFields(value=round(copy_gbs(torch, "cpu", CPU_COPY_BYTES, self.seconds, timer, sync), 2), unit="GB/s", bytes=CPU_COPY_BYTES),
            device="cpu",
        )

    # --- CUDA
    def run_gpu(self, target: Target, nvml: Nvml | None) -> None:
        torch = self.torch
        device = torch.device("cuda", target.torch_index)
        torch.cuda.set_device(device)
        timer = CudaTimer(torch)
        sync = lambda: torch.cuda.synchronize(device)  # noqa: E731
        for metric, dtype_name in MATMUL_DTYPES.items():
            self.attempt(metric, functools.partial(self._matmul, target, device, metric, dtype_name, timer, sync), gpu=target.gpu)
        self.attempt("memory_bandwidth", lambda: self._device_copy(device, timer, sync), gpu=target.gpu)
        for metric, to_device in (("h2d", True), ("d2h", False)):
            self.attempt(metric, functools.partial(self._host_copy, target, device, to_device, timer, sync, nvml), gpu=target.gpu)

    def _matmul(self, target: Target, device: Any, metric: str, dtype_name: str, timer: Any, sync: Callable[[], None]) -> MatmulFields:
        torch = self.torch
        if metric != "matmul_fp16" and target.capability[0] < AMPERE:
            kind = "TF32" if metric == "matmul_tf32" else "bf16"
            raise RuntimeError(f"{kind} tensor cores need compute capability 8.0 (Ampere) or newer; this card is {target.capability[0]}.{target.capability[1]}")
        dtype = getattr(torch, dtype_name)
        free, _total = torch.cuda.mem_get_info(device)
        element = torch.empty((), dtype=dtype).element_size()
        shapes = fitting_shapes(SWEEP_QUICK if self.quick else SWEEP_FULL, element, free)
        if not shapes:
            raise RuntimeError(f"only {free / GIB:.1f} GiB free on the GPU")
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = metric == "matmul_tf32"
        try:
            result = sweep(
                torch,
                device,
                dtype,
                shapes,
                seconds_per_shape=MATMUL_SHAPE_SECONDS[self.quick],
                warmup_s=MATMUL_WARMUP_SECONDS[self.quick],
                timer=timer,
                sync=sync,
            )
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
        return result.fields()

    def _device_copy(self, device: Any, timer: Any, sync: Callable[[], None]) -> CopyFields:
        free, _total = self.torch.cuda.mem_get_info(device)
        nbytes = min(DEVICE_COPY_BYTES, free // 8)
        return CopyFields(value=round(copy_gbs(self.torch, device, nbytes, self.seconds, timer, sync), 1), unit="GB/s", bytes=nbytes)

    def _host_copy(self, target: Target, device: Any, to_device: bool, timer: Any, sync: Callable[[], None], nvml: Nvml | None) -> HostCopyFields:
        link = LinkWatcher(nvml, target.nvml_handle)
        value = host_copy_gbs(self.torch, device, to_device, self.seconds, timer, sync, link)
        return HostCopyFields(value=round(value, 2), unit="GB/s", bytes=PINNED_BYTES, pcie_gen_loaded=link.gen, pcie_width_loaded=link.width)

    def _p2p(self, a: Target, b: Target, access: bool, seconds: float) -> PeerCopyFields:
        return PeerCopyFields(value=round(p2p_gbs(self.torch, a.torch_index, b.torch_index, seconds), 1), unit="GB/s", access=access, bytes=P2P_BYTES)

    def run_pairs(self, targets: list[Target]) -> None:
        if len(targets) < 2:
            reason = f"needs two or more GPUs ({len(targets)} under test)"
            self.out.emit("micro_skipped", metric="p2p", reason=reason)
            self.out.emit("micro_skipped", metric="allreduce", reason=reason)
            return
        torch = self.torch
        seconds = min(self.seconds, P2P_SECONDS_MAX)
        for a in targets:
            for b in targets:
                if a is b:
                    continue
                access = bool(torch.cuda.can_device_access_peer(a.torch_index, b.torch_index))
                self.attempt("p2p", functools.partial(self._p2p, a, b, access, seconds), gpu=a.gpu, peer=b.gpu)
        from gputui.check.micro_allreduce import allreduce_busbw

        self.attempt(
            "allreduce",
            lambda: AllreduceFields(
                value=round(allreduce_busbw([t.torch_index for t in targets], ALLREDUCE_BYTES, self.seconds, ALLREDUCE_TIMEOUT_S), 1),
                unit="GB/s",
                gpus=len(targets),
                bytes=ALLREDUCE_BYTES,
            ),
        )


def find_targets(torch: Any, nvml: Nvml | None, wanted: list[int] | None) -> tuple[list[Target], list[int]]:
    """The GPUs to test, keyed by NVML index, and the wanted ones torch cannot see."""
    count = torch.cuda.device_count()
    torch_ids = []
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        torch_ids.append(
            DeviceIdentity(
                index=index,
                uuid=_norm_uuid(getattr(props, "uuid", None)),
                pci=(props.pci_domain_id, props.pci_bus_id, props.pci_device_id) if hasattr(props, "pci_bus_id") else None,
            )
        )
    matched = match_devices(torch_ids, nvml_identities(nvml)) if nvml is not None else {}
    targets = []
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        nid = matched.get(index)
        # Without NVML the torch index is all there is (and no link reading).
        gpu = nid.index if nid else (index if not matched else None)
        if gpu is None or (wanted is not None and gpu not in wanted):
            continue
        targets.append(Target(torch_index=index, gpu=gpu, name=props.name, capability=(props.major, props.minor), nvml_handle=nid.handle if nid else None))
    seen = {t.gpu for t in targets}
    return sorted(targets, key=lambda t: t.gpu), [gpu for gpu in wanted or [] if gpu not in seen]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gputui.check.micro", description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", help="NVML indices to test, e.g. 0,1 (default: every GPU)")
    parser.add_argument("--quick", action="store_true", help=f"{SECONDS_QUICK} s per measurement instead of {SECONDS_FULL}")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args(argv)
    try:
        args.gpus = None if args.gpus is None else [int(p) for p in args.gpus.split(",") if p.strip()]
    except ValueError:
        parser.error(f"--gpus: expected indices such as 0,1, got {args.gpus!r}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Emitter()
    try:
        import torch
    except ImportError as exc:
        out.emit("micro_unavailable", reason=f"PyTorch is not installed ({exc})")
        return 0
    micro = Micro(torch, out, SECONDS_QUICK if args.quick else SECONDS_FULL, quick=args.quick)
    if args.device == "cpu":
        micro.run_cpu()
        return 0
    if not torch.cuda.is_available():
        why = "this PyTorch is a CPU-only build" if torch.version.cuda is None else f"PyTorch (CUDA {torch.version.cuda}) finds no usable GPU"
        out.emit("micro_unavailable", reason=why)
        return 0
    opened = Nvml()
    nvml: Nvml | None = opened if opened.init() is None else None
    try:
        targets, unseen = find_targets(torch, nvml, args.gpus)
        out.emit(
            "micro_env",
            torch=torch.__version__,
            cuda=torch.version.cuda,
            device_count=len(targets),
            devices=[t.name for t in targets],
            gpus=[t.gpu for t in targets],
        )
        for gpu in unseen:
            for metric in PER_GPU_METRICS:
                out.emit("micro_skipped", metric=metric, gpu=gpu, reason=f"PyTorch does not see NVML GPU {gpu} (CUDA_VISIBLE_DEVICES?)")
        for target in targets:
            micro.run_gpu(target, nvml)
        micro.run_pairs(targets)
    finally:
        if nvml is not None:
            nvml.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

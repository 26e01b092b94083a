"""The micro-benchmark stage of ``gputui check``: runs :mod:`gputui.check.micro` as a
child and grades each measurement as it arrives.

:func:`grade_micro` (and :class:`MicroGrader`, its incremental form) is pure: payloads
and the GPUs under test in, :class:`CheckResult` values out.  :func:`run_micro_stage`
is the stage the orchestrator calls.
"""

from __future__ import annotations

import statistics
import sys
from collections import deque
from collections.abc import Callable, Mapping

from gputui import fmt
from gputui.check.micro_lines import Measured, read_line
from gputui.check.result import AT_LEAST, FAIL, INFO, MICRO, OK, WARN, CheckResult, skipped
from gputui.check.result_data import AllreduceData, DatasheetData, HostCopyData, LinkData, PeerCopyData
from gputui.check.stage_context import GpuUnderTest, StageContext
from gputui.check.thresholds import PEER_OUTLIER_BELOW, grade_ratio, pcie_gbs, ratio_bands
from gputui.gpus.models import ACHIEVABLE, Expectation, datasheet_peak, expect
from gputui.run.output_stream import OutputLine

MIB = 1024**2

NAMES = {
    "matmul_bf16": "bf16 matmul",
    "matmul_fp16": "fp16 matmul",
    "matmul_tf32": "TF32 matmul",
    "matmul_fp32": "fp32 matmul",
    "memory_bandwidth": "memory bandwidth",
    "h2d": "host-to-device copy",
    "d2h": "device-to-host copy",
    "p2p": "peer-to-peer copy",
    "allreduce": "NCCL all-reduce",
}
DATASHEET_METRICS = ("matmul_bf16", "matmul_fp16", "matmul_tf32", "memory_bandwidth")
HOST_COPY_METRICS = ("h2d", "d2h")
STAGE_ID = "micro"
STAGE_NAME = "micro-benchmarks"

_LOW_CAUSE = {
    "matmul": "the GPU runs below its clocks (a power cap or lowered power limit, heat)",
    "memory_bandwidth": "memory clocks below their maximum, or memory errors (row remapping)",
}
PEER_METRICS = ("matmul_bf16", "matmul_fp16", "matmul_tf32", "memory_bandwidth", "h2d", "d2h")
# Who else used a GPU while it was measured: "pid 4242 alice python3 hog.py 20.0 GiB", "" for
# nobody, None when not known (no process list)
CoRunners = Callable[[int], "str | None"]
_LOW_ADVICE = {
    "matmul": "See the under-load checks for throttle reasons and the preflight power limit; "
    "look for other processes with nvidia-smi; if it persists, ask the provider.",
    "memory_bandwidth": "Compare the memory clock with its maximum (nvidia-smi -q -d CLOCK), check "
    "nvidia-smi -q -d ROW_REMAPPER, and look for other processes.",
}


def result_id(metric: str, gpu: int | None = None, peer: int | None = None, device: str | None = None) -> str:
    if metric == "p2p":
        return f"micro.p2p.gpu{gpu}-gpu{peer}" if gpu is not None and peer is not None else "micro.p2p"
    if metric == "allreduce":
        return "micro.allreduce"
    if gpu is not None:
        return f"micro.gpu{gpu}.{metric}"
    return f"micro.{device or 'host'}.{metric}"


def link_text(gen: int | None, width: int | None) -> str:
    return f"Gen{gen if gen else '?'} x{width if width else '?'}"


def card_link(gut: GpuUnderTest | None) -> tuple[int | None, int | None, str]:
    """The PCIe generation and width the card is built for, and where that comes from."""
    if gut is None:
        return None, None, ""
    model = gut.model
    if model is not None and model.spec("pcie_gen") and model.spec("pcie_width"):
        return int(model.spec("pcie_gen")), int(model.spec("pcie_width")), f"datasheet ({model.source})"
    return gut.info.pcie_max_gen, gut.info.pcie_max_width, "the card's maximum link as NVML reports it"


class MicroGrader:
    """Grades micro-benchmark payloads one at a time (as the child prints them)."""

    def __init__(self, gpus: list[GpuUnderTest], co_runners: CoRunners = lambda gpu: None) -> None:
        self._gpus = {g.index: g for g in gpus}
        self._co_runners = co_runners
        self._links_graded: set[int] = set()
        self.graded_ids: list[str] = []
        self.values: dict[str, dict[int, tuple[float, str]]] = {}  # metric -> gpu -> (value, unit), for the peers

    def grade(self, payload: Mapping[str, object]) -> list[CheckResult]:
        """The results of one decoded protocol payload of the child (gputui.check.micro_lines)."""
        line = read_line(payload)
        if line is None:  # anything newer: nothing to grade
            results = []
        elif line["event"] == "micro":
            results = self._measured(line)
        elif line["event"] == "micro_skipped":
            metric = str(line.get("metric", "?"))
            gpu = line.get("gpu")
            results = [
                skipped(
                    result_id(metric, gpu, line.get("peer"), line.get("device")),
                    MICRO,
                    self._name(metric, gpu, line.get("peer")),
                    str(line.get("reason") or "not measured"),
                    gpu=gpu,
                )
            ]
        elif line["event"] == "micro_unavailable":
            results = [skipped(STAGE_ID, MICRO, STAGE_NAME, str(line.get("reason") or "PyTorch cannot use a GPU"))]
        else:  # micro_env: nothing to grade
            results = []
        self.graded_ids.extend(r.id for r in results)
        return results

    def _name(self, metric: str, gpu: int | None, peer: int | None = None) -> str:
        label = NAMES.get(metric, metric)
        if metric == "p2p" and gpu is not None and peer is not None:
            return f"{label} GPU {gpu} to GPU {peer}"
        return label  # the table's "where" column names the GPU

    def _gpu_name(self, gpu: int | None) -> str:
        gut = self._gpus.get(gpu) if gpu is not None else None
        return gut.info.name if gut is not None else f"GPU {gpu}"

    def _measured(self, p: Measured) -> list[CheckResult]:
        metric = str(p.get("metric", "?"))
        value = p.get("value")
        if not isinstance(value, (int, float)):
            return []
        gpu, peer = p.get("gpu"), p.get("peer")
        result = CheckResult(
            id=result_id(metric, gpu, peer, p.get("device")),
            group=MICRO,
            name=self._name(metric, gpu, peer),
            status=INFO,
            value=value,
            unit=str(p.get("unit", "")),
            gpu=gpu,
        )
        if metric == "p2p":
            return [self._p2p(result, p)]
        if metric == "allreduce":
            n = p.get("gpus")
            result.detail = f"bus bandwidth of an all-reduce over {n} GPUs"
            result.data = AllreduceData(gpus=n, bytes=p.get("bytes"))
            return [result]
        if gpu is None:  # --device cpu: a protocol check, not a verdict
            result.detail = f"measured on the {p.get('device', 'host')}"
            return [result]
        if metric in PEER_METRICS:
            self.values.setdefault(metric, {})[gpu] = (float(value), result.unit)
        gut = self._gpus.get(gpu)
        if metric in DATASHEET_METRICS:
            return [self._against_datasheet(result, p, gut)]
        if metric in HOST_COPY_METRICS:
            return [self._host_copy(result, p, gut)] + self._link(p, gut)
        return [result]

    def _no_reference(self, result: CheckResult, why: str = "") -> CheckResult:
        result.status = INFO
        result.detail = f"no reference for {self._gpu_name(result.gpu)}" + (f" ({why})" if why else "")
        return result

    def _grade(self, result: CheckResult, expectation: Expectation, metric: str) -> None:
        result.expected = round(expectation.value, 2)
        result.expected_source = expectation.source
        result.status = grade_ratio(result.ratio, ratio_bands(metric, expectation.from_baseline)) or INFO

    def _against_datasheet(self, result: CheckResult, p: Measured, gut: GpuUnderTest | None) -> CheckResult:
        metric = str(p["metric"])
        model = gut.model if gut else None
        expectation = expect(model, metric)
        is_matmul = metric.startswith("matmul")
        data = result.data = _datasheet_data(p, is_matmul)
        details = [_sweep_text(p)] if is_matmul and p.get("sweep") else []
        if expectation is None:
            return self._no_reference(result)
        self._grade(result, expectation, metric)
        peak = datasheet_peak(model, metric)
        if peak:
            share = float(result.value) / peak  # type: ignore[arg-type]
            data["datasheet_peak"] = peak
            data["datasheet_share"] = round(share, 4)
            details.insert(0, f"{share:.0%} of the datasheet's {peak:g} {result.unit}")
        result.detail = "; ".join(details) or None
        if result.status != OK:
            kind = "matmul" if is_matmul else "memory_bandwidth"
            result.cause = (
                f"{result.name} reached {fmt.rate(float(result.value))} {result.unit}, "  # type: ignore[arg-type]
                f"{result.ratio:.0%} of the expected {fmt.rate(expectation.value)}: {self._low_cause(kind, result.gpu)}"
            )
            result.advice = _LOW_ADVICE[kind]
        return result

    def _low_cause(self, kind: str, gpu: int | None) -> str:
        """Another process on the GPU, by name, when NVML saw one; else the card itself."""
        others = self._co_runners(gpu) if gpu is not None else None
        if others:
            return f"another process used this GPU during the test ({others})"
        if others == "":
            return f"{_LOW_CAUSE[kind]}; NVML saw no other process on it"
        return f"{_LOW_CAUSE[kind]}, or another process shares it"

    def peer_results(self) -> list[CheckResult]:
        """On a box of two or more GPUs: each GPU against the median of the others, per
        micro-benchmark; one more than ``PEER_OUTLIER_BELOW`` under it is named."""
        gpus = sorted({gpu for by_gpu in self.values.values() for gpu in by_gpu})
        if len(gpus) < 2:
            return []
        results = []
        for gpu in gpus:
            worst: float | None = None
            below = []
            for metric, by_gpu in self.values.items():
                if gpu not in by_gpu or len(by_gpu) < 2:
                    continue
                value, unit = by_gpu[gpu]
                median = statistics.median(v for g, (v, _) in by_gpu.items() if g != gpu)
                if median <= 0:
                    continue
                ratio = value / median
                worst = ratio if worst is None else min(worst, ratio)
                if ratio < 1.0 - PEER_OUTLIER_BELOW:
                    below.append(f"{NAMES.get(metric, metric)} {fmt.rate(value)} {unit} against {fmt.rate(median)} ({ratio:.0%})")
            if worst is None:
                continue
            others = ", ".join(str(g) for g in gpus if g != gpu)
            result = CheckResult(
                id=f"micro.gpu{gpu}.peers",
                group=MICRO,
                name="Against the other GPUs",
                status=WARN if below else OK,
                value=round(worst, 4),
                unit="share",
                expected=round(1.0 - PEER_OUTLIER_BELOW, 4),
                bound=AT_LEAST,
                expected_source=f"the median of GPU {others} on each micro-benchmark",
                gpu=gpu,
                detail=f"slowest against the median of GPU {others}: {worst:.0%}",
            )
            if below:
                result.cause = f"GPU {gpu} ({self._gpu_name(gpu)}) is an outlier in this box: " + "; ".join(below)
                result.advice = "A card slower than identical cards beside it is the one to report: ask the provider to look at it or swap it."
            results.append(result)
        return results

    def _host_copy(self, result: CheckResult, p: Measured, gut: GpuUnderTest | None) -> CheckResult:
        metric = str(p["metric"])
        gen, width, link_source = card_link(gut)
        result.data = HostCopyData(bytes=p.get("bytes"), pcie_gen_loaded=p.get("pcie_gen_loaded"), pcie_width_loaded=p.get("pcie_width_loaded"))
        expectation = expect(gut.model if gut else None, metric)  # a measured baseline wins
        link_gbs = pcie_gbs(gen, width)
        if expectation is None and link_gbs is not None:
            share = ACHIEVABLE["pcie"]
            expectation = Expectation(link_gbs * share, f"{share:.0%} of a {link_text(gen, width)} link's {link_gbs:.1f} GB/s ({link_source})")
        if expectation is None:
            return self._no_reference(result, "its PCIe generation and width are unknown")
        self._grade(result, expectation, metric)
        result.detail = f"pinned {p.get('bytes', 0) // MIB} MiB copies"
        if result.status != OK:
            loaded_gen, loaded_width = p.get("pcie_gen_loaded"), p.get("pcie_width_loaded")
            if _below(loaded_gen, gen) or _below(loaded_width, width):
                why = f"the link runs at {link_text(loaded_gen, loaded_width)} under load (see gpu{result.gpu}.pcie_link_loaded)"
                advice = "Fix the PCIe link first (see the link check's advice)."
            else:
                why = (
                    "the link is at full speed, so the host side limits the copies: the GPU on the other "
                    "CPU socket (NUMA), an IOMMU or hypervisor in the path, or a PCIe switch shared with other GPUs"
                )
                advice = (
                    "Check the GPU's CPU affinity with nvidia-smi topo -m and bind the process to that NUMA "
                    "node (numactl); ask the provider about the PCIe topology."
                )
            result.cause = (
                f"{result.name} reached {fmt.rate(float(result.value))} GB/s, "  # type: ignore[arg-type]
                f"{result.ratio:.0%} of the expected {fmt.rate(expectation.value)}: {why}"
            )
            result.advice = advice
        return result

    def _link(self, p: Measured, gut: GpuUnderTest | None) -> list[CheckResult]:
        """``gpu{i}.pcie_link_loaded`` from the first copy that read the link."""
        gpu = int(p["gpu"])
        loaded_gen, loaded_width = p.get("pcie_gen_loaded"), p.get("pcie_width_loaded")
        if gpu in self._links_graded or (loaded_gen is None and loaded_width is None):
            return []
        self._links_graded.add(gpu)
        gen, width, source = card_link(gut)
        result = CheckResult(
            id=f"gpu{gpu}.pcie_link_loaded",
            group=MICRO,
            name="PCIe link under load",
            status=OK,
            value=link_text(loaded_gen, loaded_width),
            gpu=gpu,
            detail=f"{link_text(loaded_gen, loaded_width)} during the {NAMES[str(p['metric'])]} test",
            data=LinkData(gen=loaded_gen, width=loaded_width, card_gen=gen, card_width=width),
        )
        if not gen and not width:
            return [self._no_reference(result, "its PCIe generation and width are unknown")]
        result.expected = link_text(gen, width)
        result.expected_source = source
        if _below(loaded_gen, gen) or _below(loaded_width, width):
            result.status = FAIL
            slow, full = pcie_gbs(loaded_gen, loaded_width), pcie_gbs(gen, width)
            capped = f": host-device copies are capped at {slow:.1f} GB/s instead of {full:.1f}" if slow and full else ""
            result.cause = f"the link trained at {link_text(loaded_gen, loaded_width)} while the card supports {link_text(gen, width)}{capped}"
            result.advice = (
                "Ask the provider to check the slot, riser and BIOS PCIe settings, or take another "
                "machine; if the host's slot is of an older generation, that is this machine's ceiling."
            )
        return [result]

    def _p2p(self, result: CheckResult, p: Measured) -> CheckResult:
        gpu, peer, access = p.get("gpu"), p.get("peer"), p.get("access")
        result.data = PeerCopyData(access=access, peer=peer, bytes=p.get("bytes"))
        if access is False:
            result.status = WARN
            result.detail = "no direct peer access"
            result.cause = (
                f"GPU {gpu} cannot reach GPU {peer}'s memory directly: copies and NCCL traffic between "
                f"them go through host memory, which slows multi-GPU training"
            )
            result.advice = (
                "Check nvidia-smi topo -m; in VMs and containers P2P is often off (IOMMU/ACS "
                "settings): ask the provider for P2P, or expect lower multi-GPU scaling."
            )
        elif access is True:
            result.status = OK
            result.detail = "direct peer access"
        return result


def _datasheet_data(p: Measured, is_matmul: bool) -> DatasheetData:
    """What a matmul (its sweep) or a memory copy (its bytes) keeps beside the figure,
    each key only where the child wrote it."""
    data = DatasheetData()
    if not is_matmul:
        if (nbytes := p.get("bytes")) is not None:
            data["bytes"] = nbytes
        return data
    if (size := p.get("size")) is not None:
        data["size"] = size
    if (shape := p.get("shape")) is not None:
        data["shape"] = shape
    if (best_window := p.get("best_window")) is not None:
        data["best_window"] = best_window
    if (windows := p.get("windows")) is not None:
        data["windows"] = windows
    if (shapes := p.get("sweep")) is not None:
        data["sweep"] = shapes
    return data


def _sweep_text(p: Measured) -> str:
    """ "best of 6 shapes: 16384×16384×16384" (the sweep, gputui.check.micro_matmul)."""
    shape = p.get("shape") or []
    return f"best of {len(p.get('sweep') or [])} shapes: {'×'.join(str(d) for d in shape)}"


def _below(measured: int | None, expected: int | None) -> bool:
    return measured is not None and expected is not None and measured < expected


def grade_micro(payloads: list[Mapping[str, object]], gpus: list[GpuUnderTest], co_runners: CoRunners = lambda gpu: None) -> list[CheckResult]:
    """Every result the micro-benchmark payloads give, in payload order, then the peers."""
    grader = MicroGrader(gpus, co_runners)
    return [result for payload in payloads for result in grader.grade(payload)] + grader.peer_results()


def child_timeout(n_gpus: int, quick: bool) -> float:
    """Generous: importing torch and CUDA's init take seconds, NCCL's init tens of them."""
    per_gpu = 15.0 if quick else 40.0
    pairs = n_gpus * (n_gpus - 1) * 3.0
    allreduce = 300.0 if n_gpus > 1 else 0.0  # the child's own all-reduce limit
    return 120.0 + n_gpus * per_gpu + pairs + allreduce


def micro_argv(ctx: StageContext) -> list[str]:
    argv = [sys.executable, "-m", "gputui.check.micro", "--gpus", ",".join(str(g.index) for g in ctx.gpus)]
    return argv + (["--quick"] if ctx.options.quick else [])


def outcome_result(kind: str, message: str | None, last_lines: list[str], graded: bool) -> CheckResult:
    """What a child that did not end well means for the check."""
    said = message or kind
    if last_lines:
        said += f" (last output: {last_lines[-1]})"
    if kind in ("stopped", "failed_to_start"):
        return skipped(STAGE_ID, MICRO, STAGE_NAME, said)
    what = "timed out" if kind == "timeout" else "crashed"
    partial = " after the results above" if graded else " before measuring anything"
    return CheckResult(
        id=STAGE_ID,
        group=MICRO,
        name=STAGE_NAME,
        status=FAIL,
        cause=f"the micro-benchmark process {what}{partial}: {said}",
        advice="A GPU that hangs or crashes simple benchmarks is faulty or misconfigured: look for Xid errors in dmesg and at nvidia-smi; ask the provider.",
    )


def run_micro_stage(ctx: StageContext) -> None:
    if not ctx.gpus:
        ctx.report(skipped(STAGE_ID, MICRO, STAGE_NAME, ctx.gpu_unavailable_reason or "no GPU"))
        return
    grader = MicroGrader(ctx.gpus, ctx.co_runners)
    last_lines: deque[str] = deque(maxlen=3)  # a crash's last words (a traceback's last line)

    def on_payload(payload: Mapping[str, object]) -> None:
        for result in grader.grade(payload):
            ctx.report(result)

    def on_line(line: OutputLine) -> None:
        if line.text.strip():
            last_lines.append(line.text.strip()[:300])

    outcome = ctx.run_child(micro_argv(ctx), on_payload, timeout=child_timeout(len(ctx.gpus), ctx.options.quick), on_line=on_line)
    for result in grader.peer_results():
        ctx.report(result)
    if not outcome.ok:
        ctx.report(outcome_result(outcome.kind, outcome.message, list(last_lines), bool(grader.graded_ids)))

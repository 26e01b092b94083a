"""The standard workloads, short: the tuned ResNet-50 and BERT-large presets on the first
GPU under test, and the host image pipeline on every core we may use.

Together they answer seed 004's question for this box: can its CPU feed its GPU?
"The CPU decodes and augments N images/s; the GPU trains M images/s."
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import cast

from gputui.check.result import FAIL, INFO, OK, SKIPPED, WARN, WORKLOAD, CheckResult, Status, skipped
from gputui.check.result_data import PipelineData, WorkloadData
from gputui.check.stage_context import GpuUnderTest, StageContext
from gputui.check.thresholds import OK_RATIO, grade_ratio
from gputui.gpus.models import datasheet_peak, expect
from gputui.presets.preset import Preset, load_presets
from gputui.protocol import PipelineLine, ResultLine, StartLine
from gputui.telemetry.host import host_info

# (preset, check metric, unit, warm-up steps, measured steps): enough warm-up for
# torch.compile and cuDNN autotuning, enough measured steps for a stable median.
WORKLOADS = (
    ("torch-resnet50-tuned", "resnet50_tuned", "images/s", 30, 120),
    ("torch-bert-large-tuned", "bert_large_tuned", "sequences/s", 20, 40),
)
WORKLOAD_TIMEOUT_S = 420.0  # compile included; a hung run must not hold the check forever
OOM_RETRIES = 2  # halve the batch this many times on a card with less memory
PIPELINE_SECONDS = 10.0


class RunLines:
    """The last line of each event one workload child wrote: its start, its result, an oom
    (gputui.protocol declares their keys; they are taken as the child wrote them)."""

    def __init__(self) -> None:
        self._last: dict[str, Mapping[str, object]] = {}

    def add(self, payload: Mapping[str, object]) -> None:
        self._last[str(payload.get("event"))] = payload

    @property
    def oom(self) -> bool:
        return "oom" in self._last

    @property
    def start(self) -> StartLine:
        return cast(StartLine, self._last.get("start", {}))

    @property
    def result(self) -> ResultLine | None:
        result = self._last.get("result")
        return None if result is None else cast(ResultLine, result)


def run_workload_stage(ctx: StageContext) -> None:
    if not ctx.gpus:
        for _, metric, *_ in WORKLOADS:
            ctx.report(skipped(f"workload.{metric}", WORKLOAD, _title(metric), ctx.gpu_unavailable_reason or "no GPU to train on"))
    trained = None
    if ctx.gpus:
        gpu = ctx.gpus[0]  # one GPU: the check is about what one card delivers
        config = ctx.options.config
        presets = config.presets if config is not None else load_presets(extra=ctx.options.presets_file)
        for name, metric, unit, warmup, steps in WORKLOADS:
            if ctx.stopped.is_set():
                return
            result = _run_workload(ctx, gpu, presets.get(name), metric, unit, warmup, steps)
            ctx.report(result)
            if metric == "resnet50_tuned" and isinstance(result.value, float):
                trained = result.value
    if not ctx.stopped.is_set():
        ctx.report(_host_pipeline(ctx, trained))


def _title(metric: str) -> str:
    return {"resnet50_tuned": "ResNet-50 training (tuned preset)", "bert_large_tuned": "BERT-large training (tuned preset)"}.get(metric, metric)


def _run_workload(ctx: StageContext, gpu: GpuUnderTest, preset: Preset | None, metric: str, unit: str, warmup: int, steps: int) -> CheckResult:
    check_id = f"workload.gpu{gpu.index}.{metric}"
    if preset is None:
        return skipped(check_id, WORKLOAD, _title(metric), "its preset is missing from the presets files", gpu=gpu.index)
    batch = preset.batch_size
    for attempt in range(OOM_RETRIES + 1):
        run = dataclasses.replace(preset, steps=steps, warmup_steps=warmup, batch_size=batch, gpus=str(gpu.index), timeout=WORKLOAD_TIMEOUT_S)
        lines = RunLines()
        env = {**run.child_env(), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}  # CUDA numbers GPUs as NVML does
        # run_child returns when the child ends, so this attempt's lines are the ones filled
        outcome = ctx.run_child(run.argv(), lines.add, env=env, timeout=run.timeout)
        if lines.oom and batch and batch > 1 and attempt < OOM_RETRIES:
            batch //= 2
            continue
        break
    result = lines.result
    if result is None or not result.get("samples_per_sec"):
        why = outcome.message or outcome.kind
        if outcome.kind == "stopped":
            return skipped(check_id, WORKLOAD, _title(metric), "the check was stopped", gpu=gpu.index)
        missing_stack = outcome.kind == "exited" and outcome.exit_code == 2
        return CheckResult(
            id=check_id,
            group=WORKLOAD,
            name=_title(metric),
            gpu=gpu.index,
            status=INFO if missing_stack else FAIL,
            cause=f"the run ended without a result: {why}",
            advice=(
                "install the PyTorch stack: pip install torch torchvision transformers (or pip install -e '.[torch]' in gputui's source folder)"
                if missing_stack
                else "run the preset alone (gputui --preset " + preset.name + ") to see its output"
            ),
        )
    return _grade_workload(check_id, metric, unit, gpu, result, lines.start, preset, batch)


def _grade_workload(
    check_id: str, metric: str, unit: str, gpu: GpuUnderTest, result: ResultLine, start: StartLine, preset: Preset, batch: int | None
) -> CheckResult:
    rate = float(result["samples_per_sec"])
    detail = f"batch {batch}, {start.get('precision', preset.precision)}, median of the measured windows"
    data = WorkloadData(batch_size=batch, preset=preset.name)
    flops = start.get("flops_per_sample") or result.get("flops_per_sample")
    if flops:
        achieved = rate * float(flops) / 1e12
        data["achieved_tflops"] = round(achieved, 1)
        peak = datasheet_peak(gpu.model, "matmul_bf16")
        if peak:
            data["share_of_bf16_peak"] = round(achieved / peak, 3)
    expectation = expect(gpu.model, metric) if batch == preset.batch_size else None
    status = grade_ratio(rate / expectation.value) if expectation else None
    out = CheckResult(
        id=check_id, group=WORKLOAD, name=_title(metric), gpu=gpu.index, status=status or INFO, value=round(rate, 1), unit=unit, detail=detail, data=data
    )
    if expectation:
        out.expected, out.expected_source = round(expectation.value, 1), expectation.source
    else:
        out.detail = (out.detail or "") + f"; no reference for {gpu.info.name}" + ("" if batch == preset.batch_size else " at this batch")
    if status not in (None, "ok"):
        out.cause = "slower than this GPU model trains it elsewhere: see the micro-benchmarks and throttling above"
        out.advice = "if the micro-benchmarks are fine, look at the CPU (steal, cgroup throttling) and other GPU tenants"
    return out


def _host_pipeline(ctx: StageContext, trained: float | None) -> CheckResult:
    cores = host_info().cpu_available or 1.0
    workers = max(1, int(cores))
    check_id, name = "workload.host_pipeline", "Host image pipeline (decode + augment)"
    payloads: list[Mapping[str, object]] = []
    seconds = PIPELINE_SECONDS / 2 if ctx.options.quick else PIPELINE_SECONDS
    outcome = ctx.run_child(
        [sys.executable, "-m", "gputui.workloads.pipeline_rate", "--workers", str(workers), "--seconds", str(seconds)], payloads.append, timeout=seconds + 120
    )
    measured = next((cast(PipelineLine, p) for p in payloads if p.get("event") == "pipeline"), None)
    if measured is None:
        return CheckResult(
            id=check_id,
            group=WORKLOAD,
            name=name,
            status=SKIPPED if outcome.kind == "stopped" else FAIL,
            cause=f"the pipeline run ended without a result: {outcome.message or outcome.kind}",
        )
    rate = float(measured["images_per_sec"])
    per_core = rate / workers
    data = PipelineData(workers=workers, cores_available=cores, per_core_images_per_sec=round(per_core, 1))
    detail = f"{workers} worker processes, 224 px crop + flip from 300x200 PNGs"
    if trained is None:
        return CheckResult(
            id=check_id,
            group=WORKLOAD,
            name=name,
            status=INFO,
            value=round(rate, 1),
            unit="images/s",
            detail=detail + "; no GPU training rate to set it against",
            data=data,
        )
    data["gpu_images_per_sec"] = trained
    data["cores_to_feed_gpu"] = round(trained / per_core, 1) if per_core else None
    # A CPU that cannot feed the GPU is a limit of this instance, not a fault: warn, never fail.
    status: Status = OK if rate >= OK_RATIO * trained else WARN
    result = CheckResult(
        id=check_id,
        group=WORKLOAD,
        name=name,
        status=status,
        value=round(rate, 1),
        unit="images/s",
        expected=round(trained, 1),
        expected_source="what this GPU trains ResNet-50 at (the tuned run above)",
        detail=f"the CPU decodes and augments {rate:,.0f} images/s; the GPU trains {trained:,.0f} images/s",
        data=data,
    )
    if result.status != "ok":
        result.cause = f"{workers} cores cannot feed this GPU: it would need about {data['cores_to_feed_gpu']:g} cores at {per_core:,.0f} images/s each"
        result.advice = (
            "pre-process the data set offline, decode on the GPU (NVIDIA DALI), use lighter "
            "augmentation, or rent an instance with more CPU cores per GPU (4-8 per GPU, seed 004)"
        )
    return result

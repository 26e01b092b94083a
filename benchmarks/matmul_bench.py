"""A steady bf16 matmul workload that reports its own throughput three ways, for the
perturbation and fidelity benchmarks (benchmarks/perturb.py):

    python benchmarks/matmul_bench.py [--seconds 15] [--warmup 3] [--size 8192] [--per-step 20]

It speaks gputui's protocol: ``step`` lines (warm-up, then measured windows of
--per-step matmuls, each timed with the host clock after a synchronize), then one
``result`` whose ``samples_per_sec`` is its own number for the whole measured phase
(matmuls over host seconds) and ``cuda_event_samples_per_sec`` the same phase timed
independently by CUDA events on the stream.  A "sample" is one matmul.
"""

from __future__ import annotations

import argparse
import time

import torch

from gputui.protocol import MEASURE, WARMUP, Emitter


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=15.0, help="measured phase (default 15)")
    parser.add_argument("--warmup", type=float, default=3.0, help="warm-up seconds (default 3)")
    parser.add_argument("--size", type=int, default=8192, help="square matrix size (default 8192)")
    parser.add_argument("--per-step", type=int, default=20, help="matmuls per reported window (default 20)")
    parser.add_argument("--cpu", action="store_true", help="a smoke test without a GPU: CPU matmuls, whole-phase host time stands in for CUDA events")
    args = parser.parse_args()
    device = "cpu" if args.cpu else "cuda"
    a = torch.randn(args.size, args.size, device=device, dtype=torch.bfloat16)
    b = torch.randn(args.size, args.size, device=device, dtype=torch.bfloat16)
    out = torch.empty_like(a)
    sync = (lambda: None) if args.cpu else torch.cuda.synchronize
    emit = Emitter()
    emit.start(model=f"matmul{args.size}", framework="torch", batch_size=1, dtype="bfloat16")

    def window() -> float:
        began = time.perf_counter()
        for _ in range(args.per_step):
            torch.matmul(a, b, out=out)
        sync()
        return time.perf_counter() - began

    step, phase_end = 0, time.perf_counter() + args.warmup
    while time.perf_counter() < phase_end:
        step += 1
        emit.step(WARMUP, step, args.per_step, window())
    events = None if args.cpu else (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    matmuls, host_seconds = 0, 0.0
    sync()
    phase_began = time.perf_counter()
    if events:
        events[0].record()
    phase_end = time.perf_counter() + args.seconds
    while time.perf_counter() < phase_end:
        step += 1
        seconds = window()
        matmuls, host_seconds = matmuls + args.per_step, host_seconds + seconds
        emit.step(MEASURE, step, args.per_step, seconds)
    if events:
        events[1].record()
        events[1].synchronize()
        event_seconds = events[0].elapsed_time(events[1]) / 1000.0
    else:
        event_seconds = time.perf_counter() - phase_began
    tflops = 2 * args.size**3 * matmuls / host_seconds / 1e12
    emit.result(
        samples_per_sec=matmuls / host_seconds,
        cuda_event_samples_per_sec=matmuls / event_seconds,
        matmuls=matmuls,
        host_seconds=round(host_seconds, 4),
        event_seconds=round(event_seconds, 4),
        tflops=round(tflops, 1),
    )


if __name__ == "__main__":
    main()

"""The smoke workload: a few seconds of pure-Python CPU work that speaks the protocol.

It needs no ML framework, so the whole path from preset to recording can be tested
on any machine.  One "sample" is a fixed amount of integer arithmetic.
"""

from __future__ import annotations

import time

from gputui.protocol import MEASURE, WARMUP, Emitter, ResultLine
from gputui.stats import spread

WORK_PER_SAMPLE = 2_000  # loop iterations: a fraction of a millisecond of CPython per sample


def _one_sample(seed: int) -> int:
    acc = seed
    for i in range(WORK_PER_SAMPLE):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    return acc


def run(batch_size: int, steps: int, warmup_steps: int, emitter: Emitter) -> ResultLine:
    emitter.start(framework="smoke", model="spin", batch_size=batch_size, steps=steps, warmup_steps=warmup_steps)
    rates = []
    checksum = 0
    for step in range(1, warmup_steps + steps + 1):
        phase = WARMUP if step <= warmup_steps else MEASURE
        began = time.perf_counter()
        for sample in range(batch_size):
            checksum ^= _one_sample(step * batch_size + sample)
        seconds = time.perf_counter() - began
        emitter.step(phase, step, batch_size, seconds)
        if phase == MEASURE:
            rates.append(batch_size / seconds)
    stats = spread(rates)
    result: ResultLine = {
        "samples_per_sec": stats["median"],
        "p5": stats["p5"],
        "p95": stats["p95"],
        "mean": stats["mean"],
        "steps": steps,
        "windows": len(rates),  # one window a measured step: the median's count
        "batch_size": batch_size,
        "checksum": checksum,
    }
    emitter.result(**result)
    return result

"""Writes the data-parallel traces the straggler tests replay.

    python tests/data/traces/scaling/make_scaling_traces.py            # rewrites ddp_*.jsonl next to this file
    python tests/data/traces/scaling/make_scaling_traces.py --out DIR  # somewhere else

Each is a gputui recording of a 2-rank DDP ResNet-50 run on two H200s (torchrun, one
process per GPU): 1-Hz samples of both GPUs, the workload line with its world size,
each rank's readings (``rank_throughput``) and their totals (``throughput``), as a
session writes them, with the summary from gputui's own SummaryBuilder.  Seeded
noise: the files are the same byte for byte on every run.

* ``ddp_balanced``: both ranks ~1,500 samples/s, both GPUs free: no straggler.
* ``ddp_straggler_rank``: rank 1 ~20% slower than rank 0 (its input cannot keep up).
* ``ddp_throttled_gpu``: GPU1 thermally throttled at 1,500 MHz while GPU0 runs at
  1,980; the ranks measure alike (each waits for the other in the all-reduce).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))  # the repository, when run as a script
sys.path.insert(0, str(HERE.parent))  # make_traces: the H200's facts

from make_traces import BIT, GIB, H200, H200_MEMORY

from gputui.model import (
    GpuSample,
    Sample,
    Throughput,
    to_dict,
)
from gputui.record import events as ev
from gputui.record.events import make_event
from gputui.record.recorder import Recorder
from gputui.record.schema import Header
from gputui.session.summary import SummaryBuilder
from gputui.telemetry.gpu import THROTTLE_REASONS

SECONDS = 60
WARMUP_UNTIL = 8
BATCH = 256


def header(name: str) -> dict[str, Any]:
    gpus = [{**H200, "index": i, "uuid": f"GPU-6f3b1c2e-8d4a-4b6e-9f1a-2c3d4e5f6a7{i}"} for i in range(2)]
    return {
        "schema": 1,
        "gputui": "0.1.0",
        "started_at": "2026-11-23T12:00:00+00:00",
        "interval": 1.0,
        "host": {
            "hostname": "h200x2",
            "os": "Ubuntu 22.04.5 LTS (Linux 5.15.0-126-generic, x86_64)",
            "cpu_model": "Intel(R) Xeon(R) Platinum 8468",
            "cpu_logical": 32,
            "cpu_physical": 32,
            "memory_total": 256 * GIB,
            "python": "CPython 3.11.10",
        },
        "driver_version": "580.95.05",
        "cuda_version": "13.0",
        "gpus": gpus,
        "preset": {
            "name": name,
            "source": "/opt/gputui/presets.toml",
            "framework": "torch",
            "model": "resnet50",
            "batch_size": BATCH,
            "precision": "bf16",
            "data_parallel": 2,
        },
        "command": [
            "/usr/bin/python3",
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node=2",
            "-m",
            "gputui.workloads",
            "--framework",
            "torch",
            "--model",
            "resnet50",
        ],
        "env": {},
        "cwd": "/workspace",
        "python": "3.11.10",
    }


def gpu(rng: random.Random, index: int, t: float, *, clock: int = 1980, reasons: tuple[str, ...] = ()) -> GpuSample:
    mask = 0
    for reason in reasons:
        mask |= BIT[reason]
    return GpuSample(
        index=index,
        util_gpu=99.0,
        memory_used=38 * GIB,
        memory_total=H200_MEMORY,
        temp_c=float(88 if reasons else 66),
        power_w=round(rng.gauss(600, 10), 1),
        power_limit_w=700.0,
        energy_mj=41_000_000_000 + int(600_000 * t),
        sm_clock_mhz=clock,
        mem_clock_mhz=3201,
        throttle_mask=mask,
        throttle_reasons=[THROTTLE_REASONS[b] for b in sorted(THROTTLE_REASONS) if mask & b],
        pstate=0,
        pcie_gen=5,
        pcie_width=16,
        processes=[],
        sm_active=round(rng.gauss(85, 2), 1) if t > 0 else None,
    )


def build(name: str, rates: tuple[float, float], throttled_gpu: int | None, seed: int) -> list[tuple[float, int, Any]]:
    rng = random.Random(seed)
    items: list[tuple[float, int, Any]] = [
        (0.05, 0, make_event(0.05, ev.STARTED, {"pid": 4242, "command": header(name)["command"]})),
        (
            3.2,
            0,
            make_event(
                3.2,
                ev.WORKLOAD,
                {
                    "v": 1,
                    "framework": "torch",
                    "model": "resnet50",
                    "batch_size": BATCH,
                    "precision": "bf16",
                    "pipeline": "synthetic",
                    "rank": 0,
                    "world_size": 2,
                },
            ),
        ),
        (5.3, 0, make_event(5.3, ev.PHASE, {"phase": "warmup"})),
        (WARMUP_UNTIL + 0.3, 0, make_event(WARMUP_UNTIL + 0.3, ev.PHASE, {"phase": "measure"})),
    ]
    for k in range(SECONDS + 1):
        t = float(k)
        gpus = [gpu(rng, i, t, clock=1500 if i == throttled_gpu else 1980, reasons=("SwThermalSlowdown",) if i == throttled_gpu else ()) for i in range(2)]
        items.append((t, 1, Sample(t=t, gpus=gpus)))
        if t < 5.5:
            continue
        phase = "warmup" if t < WARMUP_UNTIL else "measure"
        readings = []
        for rank, mean in enumerate(rates):
            rate = round(rng.gauss(mean, mean * 0.01), 2)
            readings.append(
                Throughput(samples_per_sec=rate, source="gputui", phase=phase, samples=float(BATCH * 4), seconds=round(BATCH * 4 / rate, 4), rank=rank, ranks=2)
            )
            items.append((t + 0.4 + 0.01 * rank, 0, make_event(t + 0.4 + 0.01 * rank, ev.RANK_THROUGHPUT, to_dict(readings[-1]))))
        total = sum(r.samples_per_sec for r in readings)
        items.append(
            (
                t + 0.42,
                0,
                make_event(
                    t + 0.42,
                    ev.THROUGHPUT,
                    to_dict(
                        Throughput(
                            samples_per_sec=round(total, 2),
                            source="gputui",
                            phase=phase,
                            samples=float(BATCH * 8),
                            seconds=round(BATCH * 8 / total, 4),
                            ranks=2,
                        )
                    ),
                ),
            )
        )
    end = SECONDS + 0.7
    items.append(
        (
            end,
            0,
            make_event(end, ev.OUTCOME, {"kind": "exited", "ok": True, "exit_code": 0, "signal": None, "message": "exited with code 0", "duration_s": end}),
        )
    )
    return items


SCENARIOS = {
    "ddp_balanced": ((1500.0, 1500.0), None, 1),
    "ddp_straggler_rank": ((1500.0, 1200.0), None, 2),
    "ddp_throttled_gpu": ((1350.0, 1350.0), 1, 3),
}


def write(directory: Path, name: str) -> Path:
    path = directory / f"{name}.jsonl"
    recorder, summary = Recorder(path), SummaryBuilder()
    recorder.on_header(Header.from_dict(header(name)))
    for _t, which, item in sorted(build(name, *SCENARIOS[name]), key=lambda x: (x[0], x[1])):
        for observer in (summary, recorder):
            if which == 1:
                observer.on_sample(item)
            else:
                observer.on_event(item)
    recorder.on_summary(summary.build())
    recorder.close()
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in SCENARIOS:
        print(write(args.out, name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

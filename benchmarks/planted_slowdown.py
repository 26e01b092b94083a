"""A co-running GPU job with a fixed duty cycle: the planted slowdown that `gputui check`
must catch (issue 23).

    python benchmarks/planted_slowdown.py --duty 0.10 [--period-ms 50] [--hold-gib 4] [--seconds 600]

Every period it queues bf16 matmuls worth ``duty`` of the period on an idle GPU, waits
for them, and sleeps out the rest.  Alone it keeps the GPU busy ``duty`` of the time; beside
another job, the GPU's time-slicing gives that job about ``1 - duty`` of the GPU.  It
holds ``--hold-gib`` of GPU memory so that NVML lists it as a process worth naming.
Stop it with SIGTERM or Ctrl-C; it prints one line when it has calibrated and one when
it ends (with the duty it kept).
"""

from __future__ import annotations

import argparse
import os
import signal
import time

import torch

SIZE = 8192  # ~1.4 ms per bf16 matmul on an H100/H200: fine steps within a 50 ms period


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duty", type=float, required=True, help="share of each period the GPU is kept busy (0-1)")
    parser.add_argument("--period-ms", type=float, default=50.0)
    parser.add_argument("--hold-gib", type=float, default=4.0, help="GPU memory to hold (GiB)")
    parser.add_argument("--seconds", type=float, default=600.0, help="stop after this long")
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args()
    if not 0 < args.duty < 1:
        parser.error("--duty: expected a share between 0 and 1, e.g. 0.10")
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    device = torch.device("cuda", args.device)
    torch.cuda.set_device(device)
    held = torch.empty(int(args.hold_gib * 1024**3), dtype=torch.uint8, device=device)
    a = torch.randn(SIZE, SIZE, device=device, dtype=torch.bfloat16)
    b = torch.randn(SIZE, SIZE, device=device, dtype=torch.bfloat16)
    c = torch.empty_like(a)
    for _ in range(20):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(50):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    one = (time.perf_counter() - began) / 50
    period = args.period_ms / 1000
    per_period = max(1, round(args.duty * period / one))
    print(
        f"planted: pid {os.getpid()} duty {args.duty:.2f} period {args.period_ms:g} ms: {per_period} matmuls of {one * 1000:.2f} ms; holding {held.numel() / 1024**3:.1f} GiB",
        flush=True,
    )
    busy = 0.0
    started = time.perf_counter()
    try:
        while not stop and time.perf_counter() - started < args.seconds:
            tick = time.perf_counter()
            for _ in range(per_period):
                torch.matmul(a, b, out=c)
            torch.cuda.synchronize()
            busy += per_period * one  # GPU time it asked for, as measured alone
            rest = period - (time.perf_counter() - tick)
            if rest > 0:
                time.sleep(rest)
    except KeyboardInterrupt:
        pass
    elapsed = time.perf_counter() - started
    print(f"planted: ended after {elapsed:.1f} s, GPU time asked {busy / max(elapsed, 1e-9):.1%} of it", flush=True)


if __name__ == "__main__":
    main()

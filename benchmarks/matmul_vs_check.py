"""Does `gputui check` report what the card can really do?  A plain `torch.mm` size sweep
beside the check's own micro-benchmark child, in one process tree on one GPU (issue 23).

    python benchmarks/matmul_vs_check.py [--gpu 0] [--out DIR]

1. Plain: for bf16, fp16 and TF32, square 4096, 8192 and 16384 matmuls and the check's
   rectangles; each warmed up (20 runs), then timed 3 times over 50 runs with CUDA events;
   the best of all is the reference, as a hand measurement would take it ("burst": 50
   runs last 9-600 ms).  Then each shape again, sustained: 2 s of warm-up and 2 s timed,
   with the SM clock, power and clock-event reasons NVML reads halfway through.
2. The check: ``python -m gputui.check.micro --gpus N`` (the full child, as `gputui check` runs it).
3. The ratio check / plain per dtype.  Writes ``matmul_vs_check.json`` and ``.md`` to --out
   (default: the current folder) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from gputui.check.micro_matmul import SWEEP_FULL
from gputui.protocol import decode

DTYPES = {"matmul_bf16": torch.bfloat16, "matmul_fp16": torch.float16, "matmul_tf32": torch.float32}
SQUARES = ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 16384))
WARMUP, RUNS, REPEATS = 20, 50, 3
SUSTAINED_S = 2.0


def plain(device: torch.device, dtype: torch.dtype, shape: tuple[int, int, int], tf32: bool) -> float:
    m, n, k = shape
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    for _ in range(WARMUP):
        torch.mm(a, b)
    best = 0.0
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(RUNS):
            torch.mm(a, b)
        end.record()
        end.synchronize()
        best = max(best, 2.0 * m * n * k * RUNS / (start.elapsed_time(end) / 1000) / 1e12)
    del a, b
    torch.cuda.empty_cache()
    return best


def plain_sustained(device: torch.device, dtype: torch.dtype, shape: tuple[int, int, int], tf32: bool, handle) -> dict:
    import pynvml

    m, n, k = shape
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    torch.mm(a, b)
    torch.cuda.synchronize(device)
    began = time.perf_counter()
    torch.mm(a, b)
    torch.cuda.synchronize(device)
    runs = max(3, int(SUSTAINED_S / max(time.perf_counter() - began, 1e-6)))
    for _ in range(runs):  # warm-up: the power controller settles
        torch.mm(a, b)
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(runs):
        torch.mm(a, b)
    end.record()
    time.sleep(SUSTAINED_S / 2)  # the runs are queued: read the card while they execute
    clock = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
    power = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000
    reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
    end.synchronize()
    tflops = 2.0 * m * n * k * runs / (start.elapsed_time(end) / 1000) / 1e12
    del a, b
    torch.cuda.empty_cache()
    return {"tflops": round(tflops, 1), "sm_clock_mhz": clock, "power_w": round(power), "clock_event_reasons": hex(reasons)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0, help="NVML and torch index (no CUDA_VISIBLE_DEVICES reordering)")
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    device = torch.device("cuda", args.gpu)
    shapes = list(dict.fromkeys(SQUARES + SWEEP_FULL))
    reference: dict[str, dict] = {}
    for metric, dtype in DTYPES.items():
        figures = {"x".join(map(str, s)): round(plain(device, dtype, s, metric == "matmul_tf32"), 1) for s in shapes}
        best = max(figures, key=lambda s: figures[s])
        reference[metric] = {"best": figures[best], "best_shape": best, "shapes": figures}
        print(f"plain {metric}: best {figures[best]} TFLOP/s at {best}", flush=True)
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(args.gpu)
    sustained: dict[str, dict] = {}
    for metric, dtype in DTYPES.items():
        sustained[metric] = {"x".join(map(str, s)): plain_sustained(device, dtype, s, metric == "matmul_tf32", handle) for s in shapes}
        best = max(sustained[metric], key=lambda s: sustained[metric][s]["tflops"])
        print(f"plain sustained {metric}: best {sustained[metric][best]} at {best}", flush=True)
    torch.cuda.empty_cache()
    child = subprocess.run([sys.executable, "-m", "gputui.check.micro", "--gpus", str(args.gpu)], capture_output=True, text=True, timeout=600)
    check = {}
    for line in child.stdout.splitlines():
        payload = decode(line)
        if payload and payload.get("event") == "micro" and payload.get("metric") in DTYPES:
            check[payload["metric"]] = payload
    rows = []
    for metric in DTYPES:
        ours = check.get(metric, {}).get("value")
        ref = reference[metric]["best"]
        held_shape = max(sustained[metric], key=lambda s: sustained[metric][s]["tflops"])
        held = sustained[metric][held_shape]
        rows.append(
            {
                "metric": metric,
                "check": ours,
                "check_shape": check.get(metric, {}).get("shape"),
                "plain_best": ref,
                "plain_shape": reference[metric]["best_shape"],
                "ratio": round(ours / ref, 4) if ours else None,
                "plain_sustained": held["tflops"],
                "plain_sustained_shape": held_shape,
                "sustained_clock_mhz": held["sm_clock_mhz"],
                "sustained_power_w": held["power_w"],
                "ratio_sustained": round(ours / held["tflops"], 4) if ours else None,
            }
        )
    result = {
        "gpu": torch.cuda.get_device_name(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "rows": rows,
        "plain": reference,
        "plain_sustained": sustained,
        "check": check,
        "child_stderr_tail": child.stderr[-2000:],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "matmul_vs_check.json").write_text(json.dumps(result, indent=2))
    lines = [
        f"# gputui check's matmul against a plain torch.mm sweep ({result['gpu']}, torch {result['torch']})",
        "",
        "| dtype | gputui check TFLOP/s (shape) | plain burst best (shape) | check / burst | plain sustained 2 s best (shape; SM clock, power) | check / sustained |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        shape = "x".join(map(str, r["check_shape"])) if r["check_shape"] else "-"
        lines.append(
            f"| {r['metric']} | {r['check']} ({shape}) | {r['plain_best']} ({r['plain_shape']}) | {r['ratio']} "
            f"| {r['plain_sustained']} ({r['plain_sustained_shape']}; {r['sustained_clock_mhz']} MHz, {r['sustained_power_w']} W) | {r['ratio_sustained']} |"
        )
    (args.out / "matmul_vs_check.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["ratio"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

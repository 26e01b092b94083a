"""NCCL all-reduce bus bandwidth over several GPUs: one spawned process per GPU,
meeting on a loopback rendezvous.  Part of the micro-benchmark child
(:mod:`gputui.check.micro`); imports nothing of gputui.

Bus bandwidth is NCCL-tests' figure: ``bytes / time * 2(n-1)/n``, what each GPU's
links carry in a ring all-reduce, so it compares across GPU counts.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

WARMUP_ITERATIONS = 5
MAX_ITERATIONS = 10_000
# NVLink SHARP (NVLS) needs multicast objects that rented and virtualised machines
# often lack; NCCL then fails at init instead of falling back.
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0"}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker(rank: int, devices: list[int], port: int, nbytes: int, seconds: float, results: Any) -> None:
    os.environ.update(NCCL_ENV)
    import torch
    import torch.distributed as dist

    world = len(devices)
    device = torch.device("cuda", devices[rank])
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        data = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)  # zeros stay finite when summed
        for _ in range(WARMUP_ITERATIONS):
            dist.all_reduce(data)
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        dist.all_reduce(data)
        torch.cuda.synchronize(device)
        one = time.perf_counter() - start
        # Every rank must run the same count, or the collective hangs: rank 0 decides.
        count = torch.tensor([max(3, min(MAX_ITERATIONS, int(seconds / max(one, 1e-6))))], device=device)
        dist.broadcast(count, 0)
        iterations = int(count.item())
        dist.barrier(device_ids=[devices[rank]])
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(iterations):
            dist.all_reduce(data)
        torch.cuda.synchronize(device)
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64, device=device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
        if rank == 0:
            algbw = nbytes * iterations / elapsed.item()
            results.put(algbw * 2 * (world - 1) / world / 1e9)
    finally:
        dist.destroy_process_group()


def allreduce_busbw(devices: list[int], nbytes: int, seconds: float, timeout: float) -> float:
    """Bus bandwidth, GB/s, of an all-reduce of ``nbytes`` over the torch ``devices``."""
    import torch.multiprocessing as mp

    os.environ.update(NCCL_ENV)  # spawned processes inherit it before NCCL loads
    results = mp.get_context("spawn").SimpleQueue()
    procs = mp.start_processes(_worker, args=(devices, _free_port(), nbytes, seconds, results), nprocs=len(devices), join=False, start_method="spawn")
    deadline = time.monotonic() + timeout
    while not procs.join(timeout=1.0):  # raises when a worker failed
        if time.monotonic() > deadline:
            for proc in procs.processes:  # a hung collective never returns: end our workers
                proc.kill()
                proc.join(5)
            raise TimeoutError(f"the all-reduce over {len(devices)} GPUs did not finish within {timeout:.0f} s")
    if results.empty():
        raise RuntimeError("the all-reduce workers ended without a result")
    return results.get()

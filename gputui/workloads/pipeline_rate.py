"""The host image pipeline alone, on every core we may use: how many images per second
this machine's CPU can decode and augment, to set beside what its GPU trains.

Run by ``gputui check`` (stage ``workload.host_pipeline``) as a child,
``python -m gputui.workloads.pipeline_rate --workers N --seconds S``; prints one protocol
line ``{"event": "pipeline", "images_per_sec": ..., "workers": N, ...}``.  It lives with
the benchmark children because it runs their image pipeline; the core never imports it.
The per-image work is the workloads' own (:func:`gputui.workloads.images.augment`: PNG
decode, random resized crop to 224 px, flip, normalise), so the figure is the ceiling of
the ``pipeline = "host"`` presets' data loading.  Needs numpy and Pillow, not a framework.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time

from gputui import protocol

CHUNK = 16  # images per task: large enough that the pool's messaging is noise


def _augment_chunk(task: tuple[list[str], int, str, int]) -> int:
    import numpy as np

    from gputui.workloads.images import augment

    paths, size, level, seed = task
    rng = np.random.default_rng(seed)
    for path in paths:
        augment(path, size, level, rng)
    return len(paths)


def measure(workers: int, seconds: float, size: int = 224, level: str = "light") -> dict:
    from gputui.workloads.images import ensure_image_dataset

    paths = [path for path, _ in ensure_image_dataset()]
    chunks = [paths[i : i + CHUNK] for i in range(0, len(paths), CHUNK)]

    def tasks():
        seed = 0
        while True:
            for chunk in chunks:
                seed += 1
                yield (chunk, size, level, seed)

    done = 0
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        # Warm-up: every worker imports numpy and Pillow and touches the files once.
        list(pool.imap_unordered(_augment_chunk, [next(iter(tasks()))] * workers))
        start = time.perf_counter()
        for n in pool.imap_unordered(_augment_chunk, tasks(), chunksize=1):
            done += n
            if time.perf_counter() - start >= seconds:
                break
        elapsed = time.perf_counter() - start
        pool.terminate()
    return {"images_per_sec": done / elapsed, "images": done, "seconds": round(elapsed, 3), "workers": workers, "image_size": size, "augment": level}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gputui.workloads.pipeline_rate", description=__doc__)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--augment", choices=("light", "heavy"), default="light")
    args = parser.parse_args(argv)
    result = measure(max(1, args.workers), max(0.5, args.seconds), args.size, args.augment)
    print(protocol.encode("pipeline", **result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

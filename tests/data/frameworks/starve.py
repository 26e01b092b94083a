"""Run a framework's example script unchanged, its training data made slow: the starved
variant of tests/frameworks (gputui must call it input-bound).

    python starve.py [--sample-ms MS] [--spin] SCRIPT [ARGS...]

runs SCRIPT as ``python SCRIPT ARGS...`` would (``__main__``, its folder first on
sys.path, ``sys.argv`` as given), with MS milliseconds added to each *training* sample
the script loads, as a costly per-sample augmentation would add them:

- a DataLoader that shuffles (a ``RandomSampler``: the training loaders of Lightning's
  transformer.py, timm, accelerate and the Trainer; their evaluation loaders do not
  shuffle and stay as they are) takes MS longer per index it draws;
- nanoGPT's ``get_batch()`` takes MS longer per sample it slices from ``train.bin``
  (its ``np.memmap``; ``val.bin`` stays as it is).

The time is slept, so a loaded machine stretches the training step, not the wait
(``--spin``: spent computing instead, as a real augmentation would, for a GPU machine
where the wait must also show from outside as a busy CPU).  Nothing of the script is
edited; only these two library calls are wrapped, in this process.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import time


def delay(seconds: float, spin: bool) -> None:
    if not spin:
        time.sleep(seconds)
        return
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1  # a stand-in for decoding and augmenting a sample on the CPU


def slow_shuffled_loaders(seconds: float, spin: bool) -> None:
    """Each index a RandomSampler yields (so each sample of a shuffling DataLoader) costs
    ``seconds``; subclasses that call its ``__iter__`` (accelerate's
    SeedableRandomSampler) too."""
    from torch.utils.data import RandomSampler

    drawn = RandomSampler.__iter__

    def __iter__(self):
        for index in drawn(self):
            delay(seconds, spin)
            yield index

    RandomSampler.__iter__ = __iter__


def slow_train_memmap(seconds: float, spin: bool) -> None:
    """``np.memmap(".../train.bin")`` gives an array each slice of which costs ``seconds``
    (nanoGPT's get_batch slices one sample per row of its batch)."""
    import numpy as np

    memmap = np.memmap

    class SlowMemmap(memmap):
        def __getitem__(self, key):
            if isinstance(key, slice):
                delay(seconds, spin)
            return super().__getitem__(key)

    def slow(filename, *args, **kwargs):
        kind = SlowMemmap if os.path.basename(str(filename)) == "train.bin" else memmap
        return kind(filename, *args, **kwargs)

    np.memmap = slow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample-ms", type=float, default=10.0, help="milliseconds added to each training sample")
    parser.add_argument("--spin", action="store_true", help="compute for that time instead of sleeping")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    seconds = options.sample_ms / 1000.0
    slow_shuffled_loaders(seconds, options.spin)
    slow_train_memmap(seconds, options.spin)
    script = os.path.abspath(options.script)
    sys.argv = [options.script, *options.args]
    sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()

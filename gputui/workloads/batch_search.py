"""``--find-max-batch``: the largest batch size that fits, and the throughput curve.

Framework-agnostic.  The search starts at ``--batch-size`` and doubles it until a
trial runs out of memory, then bisects between the last batch that fit and the first
that did not (if the first trial already does not fit, it halves instead until one
fits, then bisects).  The answer is exact: batch ``b`` fits and ``b + 1`` does not
(as far as the trials show: memory use is not perfectly monotonic in the batch size).

Every trial is a fresh ``python -m gputui.workloads`` child with the same flags, the
trial's ``--batch-size`` and a few steps, so a framework that cannot give memory back
after an out-of-memory error (TensorFlow) never poisons later trials.  The child's
protocol ``result`` line means "fits", its ``oom`` line (exit code 3) "does not fit";
anything else ends the search with an error.

Protocol: one ``trial`` line per trial (batch_size, fits, samples_per_sec,
peak_memory_bytes, message) and a final ``result`` line: ``batch_size`` and
``max_batch_size`` = the largest batch that fits, ``samples_per_sec`` = its
throughput, ``best_batch_size``/``best_samples_per_sec`` = the fastest batch tried,
and ``curve`` = every trial sorted by batch size.
"""

from __future__ import annotations

import subprocess
import sys
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from gputui.protocol import Emitter, ResultLine, RunInfo, TrialLine, decode
from gputui.workloads.measure import WorkloadOutOfMemory

TRIAL_STEPS = 10  # measured steps per trial, at most
TRIAL_WARMUP_STEPS = 5  # warm-up steps per trial, at most (compile, cuDNN autotuning)
MAX_BATCH = 1 << 20  # stop doubling here even if everything fits


@dataclass
class Trial:
    batch_size: int
    fits: bool
    samples_per_sec: float | None = None
    peak_memory_bytes: int | None = None
    message: str | None = None

    def line(self) -> TrialLine:
        """The trial as its ``trial`` line and a result's ``curve`` give it."""
        return TrialLine(
            batch_size=self.batch_size, fits=self.fits, samples_per_sec=self.samples_per_sec, peak_memory_bytes=self.peak_memory_bytes, message=self.message
        )


class TrialFailed(Exception):
    """A trial ended neither with a result nor with an out-of-memory error."""


def search(trial: Callable[[int], Trial], start: int, *, limit: int = MAX_BATCH) -> tuple[int | None, list[Trial]]:
    """The largest batch size for which ``trial`` fits (None if not even 1 fits) and the
    trials in the order they ran."""
    if start < 1:
        raise ValueError("the start batch size must be 1 or more")
    start = min(start, limit)
    trials: list[Trial] = []
    known: dict[int, bool] = {}

    def fits(b: int) -> bool:
        if b not in known:
            t = trial(b)
            trials.append(t)
            known[b] = t.fits
        return known[b]

    lo: int | None
    hi: int | None
    if fits(start):
        lo, hi = start, None
        while lo < limit:
            b = min(lo * 2, limit)
            if fits(b):
                lo = b
            else:
                hi = b
                break
        if hi is None:
            return lo, trials
    else:
        hi, lo = start, None
        while hi > 1:
            b = hi // 2
            if fits(b):
                lo = b
                break
            hi = b
        if lo is None:
            return None, trials
    assert lo is not None and hi is not None  # each branch returned where one was missing
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo, trials


def run_child(argv: Sequence[str], batch_size: int, *, forward: Callable[[str], Any] | None = None) -> Trial:
    """Run one trial child (``argv`` + ``--batch-size N``) and read its protocol lines.
    Its other output lines (stdout and stderr, merged) go to ``forward`` (our stderr)."""
    command = [*argv, "--batch-size", str(batch_size)]
    forward = forward or (lambda line: print(line, file=sys.stderr, flush=True))
    tail: deque[str] = deque(maxlen=20)
    result = oom = None
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            payload = decode(line)
            if payload is None:
                forward(line)
                if line.strip():
                    tail.append(line.strip())
            elif payload["event"] == "result":
                result = payload
            elif payload["event"] == "oom":
                oom = payload
        code = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if oom is not None:
        return Trial(batch_size, False, peak_memory_bytes=oom.get("peak_memory_bytes"), message=oom.get("message"))
    if result is not None and code == 0:
        return Trial(batch_size, True, samples_per_sec=result.get("samples_per_sec"),
                     peak_memory_bytes=result.get("peak_memory_bytes"))  # fmt: skip
    why = f"exit code {code}" if code >= 0 else f"signal {-code}"
    last = f": {tail[-1]}" if tail else ""
    raise TrialFailed(f"the trial at batch size {batch_size} failed ({why}){last}")


def trial_argv(argv: Sequence[str], *, steps: int, warmup_steps: int) -> list[str]:
    """The child's command line: this worker's flags with fewer steps, no search.
    argparse keeps the last value of a repeated flag, so appending overrides."""
    return [sys.executable, "-m", "gputui.workloads", *argv, "--no-find-max-batch",
            "--steps", str(steps), "--warmup-steps", str(warmup_steps)]  # fmt: skip


def run(
    argv: Sequence[str],
    *,
    start: int,
    steps: int,
    warmup_steps: int,
    emitter: Emitter,
    info: RunInfo,
    trial: Callable[[int], Trial] | None = None,
    limit: int = MAX_BATCH,
) -> ResultLine:
    """Search (trial children built from ``argv``, this worker's own arguments) and
    speak the protocol.  Raises TrialFailed, or WorkloadOutOfMemory when not even batch 1 fits."""
    steps = max(1, min(steps, TRIAL_STEPS))
    warmup_steps = max(0, min(warmup_steps, TRIAL_WARMUP_STEPS))
    child = trial_argv(argv, steps=steps, warmup_steps=warmup_steps)
    emitter.start(**info, mode="find-max-batch", batch_size=start, steps=steps, warmup_steps=warmup_steps)

    def one(batch_size: int) -> Trial:
        t = (trial or (lambda b: run_child(child, b)))(batch_size)
        emitter.emit("trial", **t.line())
        return t

    best, trials = search(one, start, limit=limit)
    curve = [t.line() for t in sorted(trials, key=lambda t: t.batch_size)]
    if best is None:
        first = min(trials, key=lambda t: t.batch_size)
        raise WorkloadOutOfMemory(first.message or "out of memory at batch size 1", batch_size=first.batch_size,
                          peak_memory_bytes=first.peak_memory_bytes, **info)  # fmt: skip
    at_best = next(t for t in trials if t.batch_size == best)
    fastest = max((t for t in trials if t.fits and t.samples_per_sec is not None),
                  key=lambda t: t.samples_per_sec or 0.0, default=at_best)  # fmt: skip
    fields: dict[str, object] = {
        **info,
        "mode": "find-max-batch",
        "batch_size": best,
        "max_batch_size": best,
        "samples_per_sec": at_best.samples_per_sec,
        "peak_memory_bytes": at_best.peak_memory_bytes,
        "best_batch_size": fastest.batch_size,
        "best_samples_per_sec": fastest.samples_per_sec,
        "trials": len(trials),
        "steps": steps,
        "curve": curve,
    }
    result = cast(ResultLine, {key: value for key, value in fields.items() if value is not None})  # None: unknown, never written
    emitter.result(**result)
    return result

"""The measurement loop every framework workload shares, and the worker's exit codes.

Framework-agnostic: no ML framework is imported here.  A workload hands over

* ``step()``: enqueue one training step (forward, backward, optimizer) on the device;
  it may return before the device has finished (CUDA is asynchronous);
* ``sync()``: wait until the device has finished everything enqueued so far
  (``torch.cuda.synchronize``; a no-op on the CPU);

and :func:`measure` times the steps and speaks the protocol (see gputui/protocol.py).

Method ``"steps"`` (gputui's own):
    ``warmup_steps`` untimed steps, then ``steps`` timed steps.  Steps are grouped into
    *windows*: after each step the host clock is read, and once ``window_s`` (0.1 s)
    has passed since the window began, the device is synchronized, the clock read again
    and one protocol ``step`` line is written with the window's samples and seconds.
    Windows are back to back (a window begins at the clock reading that ended the
    previous one, taken right after its sync), so the measured windows add up exactly
    to the measured wall time, with one sync per window (at most ~10 lines/s; a step
    slower than ``window_s`` is a window of its own).  The result's

    - ``samples_per_sec`` is the **median of the measured window rates**
      (samples / seconds of each window), ``p5``/``p95`` their 5th/95th percentiles;
    - ``mean`` is total measured samples / total measured seconds.

Method ``"tf-metal"`` reproduces tf-metal-experiments' ``train_benchmark.py``: one
untimed warm-up epoch of ``steps`` batches (``model.fit(..., epochs=1)``), then
``epochs`` (3) epochs of ``steps`` batches timed as one span, with wall-clock time
read before and after (``st = time.time(); model.fit(..., epochs=3); et = time.time()``)
and ``samples_per_sec = batch_size * steps * epochs / (et - st)``.  Keras synchronizes
at every epoch end (it logs the epoch's loss), so does this: one ``step`` line per
epoch; ``p5``/``p95`` are over the epoch rates, ``mean`` equals ``samples_per_sec``.
``warmup_steps`` is not used by this method.

Both methods add ``flops_per_sample`` (training FLOPs of one sample, forward +
backward, as the workload counted them), ``achieved_tflops`` (= flops_per_sample x
mean rate / 1e12) and ``peak_memory_bytes`` (the framework's own peak counter).
"""

from __future__ import annotations

import math
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from gputui.protocol import MEASURE, WARMUP, Emitter, ResultLine, RunInfo, json_safe
from gputui.stats import spread

WINDOW_S = 0.1  # at most ~10 protocol step lines per second
TF_METAL_EPOCHS = 3  # train_benchmark.py's --epochs default

# Exit codes of ``python -m gputui.workloads``.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_MISSING_FRAMEWORK = 2
EXIT_OOM = 3


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


class MissingFramework(Exception):
    """A package the workload needs cannot be imported."""

    def __init__(self, package: str, extra: str, error: BaseException | None = None) -> None:
        self.package = package
        self.extra = extra
        if error is None or (isinstance(error, ModuleNotFoundError) and (error.name or "").split(".")[0] == package):
            problem = f"the package {package!r} is not installed"
        else:
            problem = f"the package {package!r} cannot be imported ({_describe(error)}"
            root = error
            while root.__cause__ is not None and root.__cause__ is not root:
                root = root.__cause__
            if root is not error:
                problem += f"; caused by {_describe(root)}"
            problem += ")"
        advice = f"install it with: {pip_install(package, extra)} (or all of the {extra} stack: pip install -e '.[{extra}]' in gputui's source folder)"
        super().__init__(f"{problem}; {advice}")


def pip_install(package: str, extra: str) -> str:
    """``pip install 'transformers<5,>=4.40'``: the package as gputui's ``extra`` pins it
    (a lone ``pip install transformers`` could fetch a version the extra rules out);
    the bare name where gputui's metadata is not installed."""
    import importlib.metadata
    import shlex

    try:
        requirements = importlib.metadata.requires("gputui") or []
    except importlib.metadata.PackageNotFoundError:
        requirements = []
    in_extra = re.compile(rf"extra\s*==\s*['\"]{re.escape(extra)}['\"]")
    for requirement in requirements:
        spec, _, marker = (part.strip() for part in requirement.partition(";"))
        name = re.split(r"[\s\[<>=!~]", spec, maxsplit=1)[0]
        if _canonical(name) == _canonical(package) and in_extra.search(marker):
            return f"pip install {shlex.quote(spec)}"
    return f"pip install {package}"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class WorkloadOutOfMemory(Exception):
    """The framework ran out of device memory.  ``fields`` are the protocol ``oom`` line."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = {"message": message, **fields}


@dataclass
class Window:
    phase: str
    step: int  # index (1-based, warm-up included) of the window's last step
    steps: int  # steps in the window
    samples: float
    seconds: float

    @property
    def rate(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else math.inf


def emit_window(emitter: Emitter, window: Window, **extra: Any) -> None:
    emitter.emit(
        "step",
        phase=window.phase,
        step=window.step,
        samples=window.samples,
        seconds=window.seconds,
        steps=window.steps,
        **extra,
    )


def run_windows(
    step: Callable[[], Any],
    sync: Callable[[], Any],
    *,
    batch_size: int,
    warmup_steps: int,
    steps: int,
    emitter: Emitter,
    window_s: float = WINDOW_S,
    clock: Callable[[], float] = time.perf_counter,
    mark: Callable[[], Any] | None = None,
) -> list[Window]:
    """Run warm-up then measured steps in windows (see the module docstring); return
    the measured windows.  ``mark()``, when given, is called right after the device
    sync at every measured boundary (the start of measurement, then the end of each
    measured window), e.g. to record a CUDA event there."""
    measured: list[Window] = []
    index = 0

    def phase_windows(phase: str, count: int, began: float) -> float:
        nonlocal index
        done = 0
        while done < count:
            n = 0
            while True:
                step()
                n += 1
                if done + n >= count or clock() - began >= window_s:
                    break
            sync()
            now = clock()
            done += n
            index += n
            window = Window(phase, index, n, float(n * batch_size), now - began)
            if phase == MEASURE:
                measured.append(window)
                if mark is not None:
                    mark()
            emit_window(emitter, window)
            began = now
        return began

    if warmup_steps > 0:
        sync()
        phase_windows(WARMUP, warmup_steps, clock())
    sync()  # measurement starts with an idle device (a no-op wait after warm-up)
    began = clock()
    if mark is not None:
        mark()
    phase_windows(MEASURE, steps, began)
    return measured


def run_tf_metal(
    step: Callable[[], Any],
    sync: Callable[[], Any],
    *,
    batch_size: int,
    steps: int,
    epochs: int,
    emitter: Emitter,
    clock: Callable[[], float] = time.perf_counter,
    mark: Callable[[], Any] | None = None,
) -> tuple[list[Window], float]:
    """train_benchmark.py's timing: one warm-up epoch, then ``epochs`` epochs of
    ``steps`` batches timed as one span.  Returns the epoch windows and the span."""
    sync()
    began = clock()
    for _ in range(steps):
        step()
    sync()
    now = clock()
    emit_window(emitter, Window(WARMUP, steps, steps, float(steps * batch_size), now - began), epoch=0)
    if mark is not None:
        mark()
    st = clock()  # st = time.time()
    epoch_began = st
    windows = []
    for epoch in range(1, epochs + 1):
        for _ in range(steps):
            step()
        sync()  # Keras reads the epoch's logs: the device is idle at every epoch end
        now = clock()
        window = Window(MEASURE, steps * (epoch + 1), steps, float(steps * batch_size), now - epoch_began)
        windows.append(window)
        if mark is not None:
            mark()
        emit_window(emitter, window, epoch=epoch)
        epoch_began = now
    et = epoch_began  # et = time.time(), after the last epoch
    return windows, et - st


class Summary(TypedDict, total=False):
    """The result's numbers before :func:`emit_result` adds the run's info and leaves out
    what is unknown (None) or not finite."""

    samples_per_sec: float | None
    p5: float | None
    p95: float | None
    mean: float | None
    steps: int
    batch_size: int
    windows: int
    samples: float
    seconds: float
    flops_per_sample: float
    achieved_tflops: float
    epochs: int
    statistic: str


def summarize(
    windows: list[Window],
    *,
    batch_size: int,
    steps: int,
    flops_per_sample: float | None = None,
    headline: float | None = None,
) -> Summary:
    """The result's numbers from the measured windows.  ``headline`` replaces the
    median window rate as ``samples_per_sec`` (the tf-metal method)."""
    rates = [w.rate for w in windows]
    stats = spread(rates)
    total_samples = sum(w.samples for w in windows)
    total_seconds = sum(w.seconds for w in windows)
    mean = total_samples / total_seconds if total_seconds > 0 else None
    result: Summary = {
        "samples_per_sec": headline if headline is not None else stats.get("median"),
        "p5": stats.get("p5"),
        "p95": stats.get("p95"),
        "mean": mean,
        "steps": steps,
        "batch_size": batch_size,
        "windows": len(windows),
        "samples": total_samples,
        "seconds": total_seconds,
    }
    if flops_per_sample is not None:
        result["flops_per_sample"] = flops_per_sample
        if mean is not None:
            result["achieved_tflops"] = flops_per_sample * mean / 1e12
    return result


def tf_metal_summary(windows: list[Window], elapsed: float, *, batch_size: int, steps: int, epochs: int, flops_per_sample: float | None = None) -> Summary:
    """The tf-metal method's numbers: ``summarize`` with train_benchmark.py's headline,
    samples over the whole timed span of ``epochs`` epochs of ``steps`` batches."""
    headline = batch_size * steps * epochs / elapsed if elapsed > 0 else math.inf
    result = summarize(windows, batch_size=batch_size, steps=steps * epochs, flops_per_sample=flops_per_sample, headline=headline)
    result["epochs"] = epochs
    result["statistic"] = "batch_size*steps*epochs/elapsed (tf-metal-experiments train_benchmark.py)"
    return result


def emit_result(
    emitter: Emitter, result: Summary, *, method: str, info: RunInfo | None = None, peak_memory: Callable[[], int | None] | None = None
) -> ResultLine:
    """Finish a workload: add the method, the memory peak and ``info`` (framework,
    model, ...), leave out what is unknown or not finite (JSON has neither), write the
    protocol ``result`` line and return its fields.  Every method and framework ends here,
    so all result lines carry the same keys."""
    merged: dict[str, object] = {**(info or {}), **result, "method": method}
    if peak_memory is not None:
        merged["peak_memory_bytes"] = peak_memory()
    line = cast(ResultLine, {k: v for k, v in json_safe(merged).items() if v is not None})
    emitter.result(**line)
    return line


def measure(
    step: Callable[[], Any],
    sync: Callable[[], Any],
    *,
    batch_size: int,
    warmup_steps: int,
    steps: int,
    emitter: Emitter,
    method: str = "steps",
    epochs: int = TF_METAL_EPOCHS,
    flops_per_sample: float | None = None,
    peak_memory: Callable[[], int | None] | None = None,
    info: RunInfo | None = None,
    window_s: float = WINDOW_S,
    clock: Callable[[], float] = time.perf_counter,
    mark: Callable[[], Any] | None = None,
) -> ResultLine:
    """Time ``step`` and write the protocol ``step`` lines and the final ``result`` line
    (see the module docstring); return the result's fields.  ``info`` (framework,
    model, precision, ...) is copied into the result."""
    if steps < 1:
        raise ValueError("steps must be 1 or more")
    if method == "steps":
        windows = run_windows(
            step, sync, batch_size=batch_size, warmup_steps=warmup_steps, steps=steps,
            emitter=emitter, window_s=window_s, clock=clock, mark=mark,
        )  # fmt: skip
        result = summarize(windows, batch_size=batch_size, steps=steps, flops_per_sample=flops_per_sample)
        result["statistic"] = "median of window rates"
    elif method == "tf-metal":
        if epochs < 1:
            raise ValueError("epochs must be 1 or more")
        windows, elapsed = run_tf_metal(step, sync, batch_size=batch_size, steps=steps, epochs=epochs, emitter=emitter, clock=clock, mark=mark)
        result = tf_metal_summary(windows, elapsed, batch_size=batch_size, steps=steps, epochs=epochs, flops_per_sample=flops_per_sample)
    else:
        raise ValueError(f"unknown method {method!r}")
    return emit_result(emitter, result, method=method, info=info, peak_memory=peak_memory)


def peak_rss_bytes() -> int | None:
    """This process's peak resident memory: the CPU-side stand-in for a framework's
    device-memory peak (``ru_maxrss`` is KiB on Linux, bytes on macOS)."""
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        return None
    return int(peak * (1 if sys.platform == "darwin" else 1024))


def exception_chain(exc: BaseException | None):
    """``exc`` and every exception it was raised from or during, each once: frameworks
    wrap their out-of-memory errors, and the telling message may sit deeper."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__

"""Throughput readings parsed from a run's output, one line at a time.

:class:`ThroughputParser` is fed every line a child process prints (already split on
``\\n`` and ``\\r``, ANSI codes already stripped) and returns the throughput readings it
finds, each in the job's own unit: samples, tokens or steps (:data:`gputui.model.UNITS`).
It understands gputui's own protocol and probe and the output of common tools:
tf-metal-experiments, tqdm (Lightning's and accelerate's bars too, and Rich's), Keras,
the Hugging Face Trainer, timm's ``benchmark.py`` and ``train.py``, nanoGPT, torchtitan,
Megatron-LM, DeepSpeed, NVIDIA DLLogger, MLPerf logging, and generic ``123 img/s`` and
``4,096 tok/s`` text.  Where each format comes from: tests/data/progress/SOURCES.md.

Every format is one small function in :data:`FORMATS`, tried in that order (specific
tools before the generic fallback).  A function is only called when the line contains
one of its trigger substrings, so the common line (a loss, a warning) costs a few
substring checks and no regex.  A function returns ``None`` when the line is not in its
format, so the next one is tried, and a list (possibly empty) when the line is its own:
an empty list then means "recognised, but nothing to report" (an ``Infer`` line of timm,
a validation line of DLLogger, a protocol ``start`` event) and stops the search, so that
a later, looser parser does not misread the line.

Rules shared by all formats: a reading's rate is finite and > 0 or the reading is
dropped; iteration and step rates (tqdm ``it/s``, Keras ``ms/step``) count steps unless
a batch size is known (the preset's, ``--batch-size``, or the probe's samples per step),
which turns them into samples; tokens stay tokens; frames and items are not reported.
Progress bars that are not training (validation, test and predict loops, sanity checks,
the Trainer's evaluation bar, datasets' generation, ``Map`` and ``Filter``, tokenizing,
downloads, checkpoint loading) are skipped.  :meth:`ThroughputParser.feed` never raises.

A reading's rate is what the tool shows; where the tool also shows how much it did in
how long, the reading carries that window too (``samples`` and ``seconds``), so that the
summary's figure is the tool's own count over its own time: a tqdm bar's counter over
its elapsed clock (not its smoothed rate), timm's epoch meters (its first update, the
run's start, left out: see :data:`COUNTED_FROM_START`), the Trainer's tokens over its
runtime, nanoGPT's tokens per iteration over its time.  Where a line carries both a
step time and the script's own rate, the rate is the reading, in the script's unit
(timm's running average, a nanoGPT fork's ``tok/s``).  Evaluation is no part of a
window: the time of another bar drawn while the training bar's clock runs on (its
evaluation bar) is left out of that clock (:func:`_aside`), and nanoGPT's iteration that
holds an evaluation is no reading.  :func:`evaluation_seen` tells the summary's phases
which lines show an evaluation.

One run, one unit: the unit is settled by the first reading shown and never changes.
While the probe is armed and has not reported, step readings wait for it (up to
UNIT_SETTLE_S of the session's clock): its first window may tell the batch size.
Readings in another unit after that are converted where they can be (a step rate once
a batch size is known, a bar's samples back into steps) and otherwise never shown
live.  Within the unit, the first source that gives a live reading owns it, unless the
probe takes over (its windows are exact; a progress bar's rate is smoothed).  Live
readings of other sources become the run's "reported" figures; a progress bar's and
the probe's are dropped.  A reported figure is in the run's unit too: of a line's
figures in several units (the Trainer's closing dict) the one in the run's unit, else
one converted by the batch size, else none.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gputui import protocol
from gputui.model import SAMPLES, STEPS, TOKENS, WORKLOAD_SOURCE, Throughput, Unit
from gputui.protocol import JsonObject
from gputui.stats import spread

# A plain number (ASCII digits), optionally in exponent form; and one that may have
# thousands commas.
# Every pattern that starts with a number is preceded by a look-behind that forbids a
# word character before it: besides rejecting "resnet50 img/s", that keeps regex
# searches linear on long runs of digits.
_NUM = r"([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
_NUM_COMMAS = r"([0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"

# SI prefixes of tqdm's format_sizeof (unit_scale=True): "1.23kit/s"; old tqdm used "K".
_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_SI |= {"P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24}


@dataclass
class ParseState:
    """What a format learns from earlier lines and the parser tells every format."""

    hint: float | None = None  # samples per step: the preset's, --batch-size, or the probe's
    tokens_per_step: float | None = None  # nanoGPT's "tokens per iteration will be: N"
    nanogpt_evaluated: int | None = None  # the iteration nanoGPT last evaluated in
    now: float | None = None  # when this line arrived (seconds, the session's clock), where known
    keras_last: tuple[float, int, int] | None = None  # (when, steps done, of how many) at the Keras bar's last counted line
    bar_total: float | None = None  # the training bar's total (see _training_bar)
    bar_counted: bool = False  # whether the training bar gave a reading yet
    bar_last: tuple[float, float, float] | None = None  # (count, elapsed, aside_s) where its last window ended
    bar_n: float | None = None  # the training bar's count on its latest line
    bar_idle_from: tuple[float, float] | None = None  # (now, aside_s) at its latest new count or window, whichever came last
    bar_smoothed: bool = False  # its rate was seen not to be its count over its clock (see _to_the_hundredth)
    bar_pending: tuple[float, float] = (0.0, 0.0)  # (count, seconds) past its windows, held until it ends (see _bar_window)
    bar_rate: float | None = None  # its latest rate, in steps a second
    aside_s: float = 0.0  # seconds of evaluation (other bars) while the training bar's clock ran (see _aside)
    aside_open: tuple[float, float, float | None] | None = None  # (first, last, training count) of the other bar drawn now
    aside_last: float = 0.0  # the span last added to aside_s, until the tool's own time of it replaces it
    timm_last: tuple[int, int, float, float] | None = None  # (epoch, updates, samples, seconds) at timm's last line
    trainer_last: tuple[float, float] | None = None  # (runtime, tokens) at the Trainer's last live tokens figure


Parser = Callable[[str, ParseState], list[Throughput] | None]


def _number(value: Any) -> float | None:
    """A finite float > 0 from a JSON number (not a bool, not a string), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an int beyond float range
        return None
    return value if math.isfinite(value) and value > 0 else None


def _matched(text: str) -> float | None:
    """A finite float > 0 from a number matched in the text ("1,234.5"), else None."""
    try:
        return _number(float(text.replace(",", "")))
    except ValueError:
        return None


def _reading(rate: float | None, source: str, **fields: Any) -> list[Throughput]:
    """``[Throughput]`` when ``rate`` is finite and > 0, else ``[]``."""
    if rate is None or not math.isfinite(rate) or rate <= 0:
        return []
    return [Throughput(samples_per_sec=rate, source=source, **fields)]


def _steps(steps_per_sec: float | None, source: str, state: ParseState, **fields: Any) -> list[Throughput]:
    """A step rate: samples with a known batch size (``state.hint``), else steps."""
    if steps_per_sec is not None and state.hint is not None:
        return _reading(steps_per_sec * state.hint, source, **fields)
    return _reading(steps_per_sec, source, unit=STEPS, **fields)


# --- gputui protocol ------------------------------------------------------------------


def parse_gputui(line: str, state: ParseState) -> list[Throughput] | None:
    """``@gputui {"event": "step", ...}`` and ``{"event": "result", ...}``: well-formed
    protocol lines only (protocol.read_line); any other line with the marker is left to
    the other formats, as ordinary output."""
    payload = protocol.read_line(line)
    if payload is None:
        return None
    event = payload["event"]
    if event == "step":
        samples, seconds = _number(payload.get("samples")), _number(payload.get("seconds"))
        if samples is None or seconds is None:
            return []
        phase = payload.get("phase")
        return _reading(
            samples / seconds,
            WORKLOAD_SOURCE,
            phase=phase if phase in protocol.PHASES else None,
            samples=samples,
            seconds=seconds,
            **_rank_fields(payload),
        )
    if event == "result":
        return _reading(_number(payload.get("samples_per_sec")), WORKLOAD_SOURCE, final=True, **_rank_fields(payload))
    return []


PROBE = "probe"  # the zero-code probe's window report (gputui.probe)
#: The source of a user's script's own protocol ``result`` line: its claim of its rate,
#: which gputui did not measure (gputui's own workloads keep WORKLOAD_SOURCE).
CLAIM_SOURCE = "script"


def _probe_reading(payload: JsonObject, state: ParseState) -> list[Throughput]:
    """The probe's window: optimizer steps over seconds, in samples when it saw the
    batches (their leading dimension) or a batch size is known, else in steps.  A window
    without steps (evaluation, a pause) is no reading, nor is one the probe marked as
    evaluation."""
    if payload.get("phase") == "evaluation":
        return []
    steps, seconds = _number(payload.get("steps")), _number(payload.get("seconds"))
    if steps is None or seconds is None:
        return []
    samples = _number(payload.get("samples"))
    if samples is not None and state.hint is None:
        return _reading(samples / seconds, "probe", samples=samples, seconds=seconds, **_rank_fields(payload))
    counted = steps * state.hint if state.hint is not None else None  # in samples, as the reading is
    return _steps(steps / seconds, "probe", state, seconds=seconds, samples=counted, **_rank_fields(payload))


def _rank_fields(payload: JsonObject) -> dict[str, int]:
    """``rank`` and ``ranks`` (the world size) of a data-parallel rank's line; {} otherwise."""
    rank, world = payload.get("rank"), payload.get("world_size")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (rank, world)):
        return {}
    assert isinstance(rank, int) and isinstance(world, int)
    return {"rank": rank, "ranks": world} if 0 <= rank < world else {}


class RankTotals:
    """Adds the ranks of a data-parallel run into one reading.

    Ranks of a DDP run step together (each step waits for the gradients' all-reduce), so
    the run's rate is the sum of its ranks' latest rates.  A total is made once every
    rank has reported since the last one, in the phase of the rank that completed it;
    a final total once every rank has given its result.
    """

    def __init__(self) -> None:
        self._latest: dict[int, Throughput] = {}
        self._finals: dict[int, Throughput] = {}

    def add(self, reading: Throughput) -> Throughput | None:
        assert reading.rank is not None and reading.ranks is not None
        pending = self._finals if reading.final else self._latest
        pending[reading.rank] = reading
        if len(pending) < reading.ranks:
            return None
        rate = sum(r.samples_per_sec for r in pending.values())
        samples = sum(r.samples or 0.0 for r in pending.values()) if not reading.final else None
        pending.clear()
        return Throughput(
            samples_per_sec=rate,
            source=reading.source,
            phase=reading.phase,
            final=reading.final,
            samples=samples or None,
            seconds=samples / rate if samples else None,
            ranks=reading.ranks,
            unit=reading.unit,
        )


# --- MLPerf logging -------------------------------------------------------------------

_MLLOG = ":::MLLOG"


def parse_mlperf(line: str, state: ParseState) -> list[Throughput] | None:
    """``:::MLLOG {"key": "throughput", "value": 1234.5, ...}`` and ``"tracked_stats"``
    with ``"value": {"throughput": ...}`` (often behind a rank prefix such as ``0: ``)."""
    start = line.find(_MLLOG)
    try:
        payload = json.loads(line[start + len(_MLLOG) :])
    except (ValueError, RecursionError):
        return []
    if not isinstance(payload, dict) or payload.get("key") not in ("throughput", "tracked_stats"):
        return []
    value = payload.get("value")
    if isinstance(value, dict):
        rate = _number(value.get("throughput"))
    elif payload["key"] == "throughput":
        rate = _number(value)
    else:
        rate = None  # a bare number under tracked_stats says nothing about what it is
    return _reading(rate, "mlperf")


# --- NVIDIA DLLogger ------------------------------------------------------------------

# "DLL 2020-09-15 14:29:13.473765 - Epoch: 0 Iteration: 1  train.loss : 7.09304  ..."
_DLL = re.compile(r"(?:^|\s)DLL \d{4}-\d\d-\d\d[ T][\d:.]+ - (.*)")
_DLL_METRIC = re.compile(r"(?<![\w.])([A-Za-z][\w.]*) : " + _NUM + r"(?: ([A-Za-z]+/s(?:ec)?)\b)?")
_DLL_NOT_TRAINING = {"val", "valid", "validation", "eval", "test", "infer", "inference", "calib"}
_DLL_NOT_SAMPLES = {"token", "tokens", "tok", "frames", "items", "item", "words", "wps"}
_SAMPLE_UNITS = re.compile(r"(?:samples?|images?|imgs?|examples?|seqs?|sequences?)/s(?:ec(?:ond)?)?$", re.IGNORECASE)


def _dll_rank(key: str) -> int | None:
    """How good a DLLogger metric is as training throughput (lower is better), or None."""
    parts = re.split(r"[._]", key.lower())
    if _DLL_NOT_TRAINING.intersection(parts) or _DLL_NOT_SAMPLES.intersection(parts):
        return None
    if parts[-2:] == ["total", "ips"]:
        return 0
    if "throughput" in parts:
        return 1
    if key.lower().endswith(("samples_per_sec", "samples_per_second")):
        return 2
    if parts[-1] == "ips":
        return 3
    return None


def parse_dllogger(line: str, state: ParseState) -> list[Throughput] | None:
    """DLLogger's StdOutBackend: ``train.total_ips : 1234.5 img/s``,
    ``throughput_train : 145.221 seq/s``; the run summary (step ``()``, or ``Summary:``
    in DeepLearningExamples' ConvNets) is final.  Validation metrics are skipped."""
    match = _DLL.search(line)
    if match is None:
        return None
    body = match.group(1)
    best: tuple[int, float] | None = None
    for metric in _DLL_METRIC.finditer(body):
        key, value, unit = metric.groups()
        rank = _dll_rank(key)
        if rank is None or (unit is not None and not _SAMPLE_UNITS.match(unit)):
            continue
        rate = _matched(value)
        if rate is not None and (best is None or rank < best[0]):
            best = (rank, rate)
    if best is None:
        return []
    step = body.lstrip()
    final = step.startswith("()") or step.startswith("Summary")
    return _reading(best[1], "dllogger", final=final)


# --- Hugging Face Trainer -------------------------------------------------------------

# {'train_runtime': 10.2, 'train_samples_per_second': 12.34, ...}  (newer: '12.34' quoted)
#   train_samples_per_second =     12.34                             (trainer.log_metrics)
# 'train_tokens_per_second' joins them with include_tokens_per_second=True, and with
# include_num_input_tokens_seen every logging dict carries the job's running tokens/s:
# a live reading (the end-of-training dict is the one with the samples rate and 'train_loss').
_HF = {unit: re.compile(r"""\btrain_""" + unit + r"""_per_second['"]?\s*[:=]\s*['"]?""" + _NUM) for unit in (SAMPLES, TOKENS, STEPS)}
# speed_metrics' 'train_runtime': seconds since training began, on every dict that has a rate.
_HF_RUNTIME = re.compile(r"""\btrain_runtime['"]?\s*[:=]\s*['"]?""" + _NUM)


def parse_hf_trainer(line: str, state: ParseState) -> list[Throughput] | None:
    """The Trainer's metrics dicts: one reading per unit it gives, final at the end.  A
    live tokens figure is the Trainer's tokens so far over its runtime so far: each
    carries the window since the last one, so that the summary counts as the Trainer does."""
    final = "train_samples_per_second" in line or "train_loss" in line
    readings: list[Throughput] = []
    for unit, pattern in _HF.items():
        match = pattern.search(line)
        if match is not None:
            rate = _matched(match.group(1))
            window = _trainer_window(line, rate, state) if unit == TOKENS and not final else {}
            readings += _reading(rate, "hf-trainer", final=final, unit=unit, **window)
    return readings or None


# {'eval_loss': 1.61, 'eval_runtime': 0.975, 'eval_samples_per_second': 1025.677, ...}: the
# Trainer's evaluation during training, timed by itself ('0.975' quoted in newer releases).
_HF_EVAL_RUNTIME = re.compile(r"""['"]eval_runtime['"]\s*:\s*['"]?""" + _NUM)


def parse_hf_eval(line: str, state: ParseState) -> list[Throughput] | None:
    """The Trainer's evaluation metrics: no reading (evaluation is not training), but its
    eval_runtime is time aside from the training bar's clock (:func:`_aside_timed`)."""
    match = _HF_EVAL_RUNTIME.search(line)
    if match is None:
        return None
    seconds = _matched(match.group(1))
    if seconds is not None and state.bar_last is not None:
        _aside_timed(seconds, state)
    return []


def _trainer_window(line: str, rate: float | None, state: ParseState) -> dict[str, float]:
    """``samples`` (tokens) and ``seconds`` since the Trainer's last live tokens figure,
    from its cumulative rate times its runtime (the first one's since training began)."""
    match = _HF_RUNTIME.search(line)
    runtime = _matched(match.group(1)) if match else None
    if runtime is None or rate is None:
        return {}
    last, state.trainer_last = state.trainer_last, (runtime, rate * runtime)
    if last is None or runtime < last[0]:
        return {"samples": rate * runtime, "seconds": runtime}  # from the start of training, as the Trainer counts
    tokens, seconds = rate * runtime - last[1], runtime - last[0]
    return {"samples": tokens, "seconds": seconds} if tokens > 0 and seconds > 0 else {}


# --- timm benchmark.py ----------------------------------------------------------------

# f"Train [{num_steps}/{self.num_bench_iter}]. {rate:0.2f} samples/sec. {ms:0.3f} ms/step."
_TIMM_STEP = re.compile(r"\b(Train|Infer) \[\d+/\d+\]\. " + _NUM + r" samples/sec\.")
# f"Train benchmark of {model_name} done. {rate:.2f} samples/sec, {ms:.2f} ms/sample"
_TIMM_DONE = re.compile(r"\b(Train|Inference) benchmark of \S+ done\. " + _NUM + r" samples/sec")
# print(f'--result\n{json.dumps(results, indent=4)}'):   "train_samples_per_sec": 1234.56,
_TIMM_RESULT = re.compile(r"""['"](train|infer)_samples_per_sec['"]\s*:\s*""" + _NUM)


def parse_timm(line: str, state: ParseState) -> list[Throughput] | None:
    """timm's benchmark.py.  Only the train benchmark is reported: with ``--bench both``
    the inference benchmark runs first, and its rate is not a training throughput (its
    lines are claimed and dropped so the generic parser does not pick them up)."""
    for pattern, final in ((_TIMM_STEP, False), (_TIMM_DONE, True), (_TIMM_RESULT, True)):
        match = pattern.search(line)
        if match is not None:
            if match.group(1).lower() != "train":
                return []
            return _reading(_matched(match.group(2)), "timm", final=final)
    return None


# --- tf-metal-experiments train_benchmark.py ------------------------------------------

# print("Sample/sec:", fps)
_TF_METAL = re.compile(r"\bSample/sec: " + _NUM)


def parse_tf_metal(line: str, state: ParseState) -> list[Throughput] | None:
    match = _TF_METAL.search(line)
    if match is None:
        return None
    return _reading(_matched(match.group(1)), "tf-metal", final=True)


# --- Keras progress bar ---------------------------------------------------------------

# "100/100 [====] - 5s 50ms/step - loss: ..."   "1500/1500 ━━━━ 8s 3ms/step - ..."
# "60000/60000 [====] - 3s 49us/sample - loss: ..."   verbose=2: "... - 15s/epoch - 500ms/step"
_KERAS = re.compile(r"(?<![\w.])([0-9]+(?:\.[0-9]+)?)(s|ms|us|µs|μs)/(step|sample)\b")
_KERAS_TARGET = re.compile(r"^\s*([0-9]+)/([0-9]+)\b")
_KERAS_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6}
# keras.utils.get_file shows its download as a step progress bar over bytes:
# "71639040/170498071 ━━━━ 6s 0us/step".  No epoch has that many steps.
_KERAS_MAX_STEPS = 1_000_000


def parse_keras(line: str, state: ParseState) -> list[Throughput] | None:
    match = _KERAS.search(line)
    if match is None:
        return None
    value, unit, per = match.groups()
    seconds = _matched(value)
    if seconds is None:
        return []  # "0s/step": Keras 3 before the first step finished
    seconds *= _KERAS_SECONDS[unit]
    if per == "sample":
        return _reading(1.0 / seconds, "keras")
    target = _KERAS_TARGET.match(line)
    if target is not None:
        steps = target.group(2).lstrip("0")
        if len(steps) > len(str(_KERAS_MAX_STEPS)) or int(steps or "0") > _KERAS_MAX_STEPS:
            return []
        done, total = int(target.group(1)), int(target.group(2))
        if state.now is not None and state.keras_last is not None:
            return _keras_clocked(done, total, state.keras_last, state)
        if state.now is not None:
            state.keras_last = (state.now, done, total)
    return _steps(1.0 / seconds, "keras", state)


KERAS_WINDOW_S = 0.5  # the Keras bar redraws often on a terminal: windows at least this long


def _keras_clocked(done: int, total: int, last: tuple[float, int, int], state: ParseState) -> list[Throughput]:
    """Steps per second since the Keras bar's last counted line, on gputui's clock:
    Keras prints its step time in whole milliseconds (``16ms/step`` may be 15.5 or 16.5)
    and leaves out the time between steps; the steps its counter moved over the time
    between two of its lines say both.  A count that went down is a new epoch: the rest
    of the last one, then this one's."""
    assert state.now is not None
    seconds = state.now - last[0]
    if seconds < KERAS_WINDOW_S:
        return []  # a redraw within the window: counted with the next one
    state.keras_last = (state.now, done, total)
    last_done, last_total = last[1], last[2]
    steps = done - last_done if done >= last_done else max(0, last_total - last_done) + done
    if steps <= 0:
        return []
    samples = steps * state.hint if state.hint is not None else None  # the summary's mean: samples over seconds
    return _steps(steps / seconds, "keras", state, seconds=seconds, samples=samples)


# --- tqdm (and Rich's bar, as Lightning draws it) -------------------------------------

# " 45%|████▌     | 45/100 [00:05<00:06,  8.91it/s]", "2.35s/it", unit_scale: "1.23kit/s"
_TQDM = re.compile(r"(?<![\w.])([0-9]+(?:\.[0-9]+)?)([kKMGTPEZY]?)(it/s|s/it)\b")
_COUNT = r"([0-9]+(?:\.[0-9]+)?)([kKMGTPEZY]?)"  # n_fmt: unit_scale gives "1.00k"
_CLOCK = r"(?:([0-9]+):)?([0-9]{2}):([0-9]{2})"  # tqdm's format_interval: [H:]MM:SS
# The bar's count and elapsed clock.  tqdm's r_bar: "| {n_fmt}/{total_fmt} [{elapsed}<"
# (total "?" when unknown); its bar without a total: "{n_fmt}{unit} [{elapsed}, ";
# Rich's, as Lightning's RichProgressBar draws it: "{completed}/{total} {H:MM:SS} • ".
_TQDM_SIZED = re.compile(r"(?:\|\s*|\s|^)" + _COUNT + r"/(?:" + _COUNT + r"|\?) \[" + _CLOCK + "<")
_TQDM_UNSIZED = re.compile(r"(?<![\w.])" + _COUNT + r"[A-Za-z ]* \[" + _CLOCK + ", ")
_RICH_COUNT = re.compile(r"\s([0-9]+)/(?:([0-9]+)|--)\s+([0-9]+):([0-9]{2}):([0-9]{2}) •")


@dataclass(frozen=True)
class _Bar:
    n: float  # the count
    total: float | None  # None: not known (an unsized bar, Rich's "--")
    elapsed: float  # the bar's own clock: whole seconds as printed, finer once read from its rate


def _bar_of(line: str) -> _Bar | None:
    """The count, total and elapsed clock of a tqdm or Rich bar line, else None."""
    match = _TQDM_SIZED.search(line)
    if match is not None:
        n, n_si, total, total_si, h, m, sec = match.groups()
        return _Bar(float(n) * _SI[n_si], float(total) * _SI[total_si] if total else None, _seconds(h, m, sec))
    match = _RICH_COUNT.search(line)
    if match is not None:
        n, total, h, m, sec = match.groups()
        return _Bar(float(n), float(total) if total else None, _seconds(h, m, sec))
    match = _TQDM_UNSIZED.search(line)
    if match is not None:
        n, n_si, h, m, sec = match.groups()
        return _Bar(float(n) * _SI[n_si], None, _seconds(h, m, sec))
    return None


def _seconds(hours: str | None, minutes: str, seconds: str) -> float:
    return 3600.0 * int(hours or 0) + 60.0 * int(minutes) + int(seconds)


def _training_bar(bar: _Bar, state: ParseState) -> bool:
    """Whether this bar is the training bar.  The Trainer's evaluation bar has no
    description, only another total (the eval set's batches, against the run's steps,
    smaller or larger), and is drawn during training or once its count is full (the
    last evaluation): once the training bar has given a reading, a bar of another total
    is not training.  Before that reading the larger total wins: an epochs bar
    (``trange(epochs)``) is drawn before the batches bar inside it."""
    if bar.total is None:
        return True  # an unsized bar ("45it [00:05, 8.91it/s]"): nothing to compare
    main = state.bar_total
    if main is not None and bar.total != main and (state.bar_counted or bar.total < main):
        return False
    if bar.total != main:
        state.bar_total, state.bar_counted, state.bar_last, state.bar_smoothed = bar.total, False, None, False
    return True


def _to_the_hundredth(bar: _Bar, rate: float, state: ParseState) -> _Bar:
    """The bar with its elapsed time read from its rate where the rate is its count over
    its elapsed time (a bar's closing line, Lightning's ``smoothing=0``): the count over
    the rate then falls within the second its clock shows (give or take the rate's
    rounding), and is finer than it.  A count over the rate outside that second shows a
    smoothed rate (tqdm's default): the bar is marked so (:func:`_bar_window`)."""
    elapsed = bar.n / rate
    if not bar.elapsed - _ROUNDING_S <= elapsed < bar.elapsed + 1.0 + _ROUNDING_S:
        state.bar_smoothed = state.bar_smoothed or bar.n > 0
        return bar
    return dataclasses.replace(bar, elapsed=min(max(elapsed, bar.elapsed), bar.elapsed + 0.999))


_ROUNDING_S = 0.05  # how far the count over a printed rate may stray out of its clock's second


def _bar_window(bar: _Bar, state: ParseState, exact: float | None = None) -> tuple[float, float] | None:
    """(count, seconds) since the training bar's last window: its own counter over its
    own clock less the time aside (:func:`_aside`) and a full bar's idle time
    (:func:`_idle_since_full`), so that the windows add up to its count over its elapsed
    time of training, whatever its shown rate smooths.  None until that clock has moved
    on (it counts whole seconds); a count or clock that went back is a new bar (the next
    epoch's reset), whose first line starts the next window.

    ``exact``: the line's elapsed time read to the hundredth from its rate
    (:func:`_to_the_hundredth`).  A smoothed bar's rate gives a wrong one on any line but
    its closing one (tqdm's close shows the average), and only a later line tells which
    was its last: its windows end on its whole seconds, and what the latest line's
    finer time adds, with any count no window has taken yet, is held (``bar_pending``)
    until the bar ends, where :meth:`ThroughputParser.finish` or the next bar's first line
    counts it."""
    _aside_ends(bar, state)
    last, aside = state.bar_last, _aside_s(state)
    exact = bar.elapsed if exact is None else exact
    if last is None or bar.n < last[0] or bar.elapsed + 1.0 <= last[1]:
        held, state.bar_pending = state.bar_pending, (0.0, 0.0)
        state.bar_last = (bar.n, bar.elapsed if state.bar_smoothed else exact, aside)
        return held if held[1] > 0 else None
    shown = bar.elapsed if state.bar_smoothed else exact
    seconds = (shown - aside) - (last[1] - last[2]) - _idle_since_full(bar, state)
    if state.bar_smoothed:
        state.bar_pending = (0.0, exact - shown) if seconds > 0 else (bar.n - last[0], max(0.0, seconds + exact - shown))
    if seconds <= 0:
        return None
    state.bar_last = (bar.n, shown, aside)
    if state.now is not None:
        state.bar_idle_from = (state.now, aside)
    return bar.n - last[0], seconds


def _idle_since_full(bar: _Bar, state: ParseState) -> float:
    """How long a full bar has stood since its last step (or its last window, which
    counted the time before), on gputui's clock less the time aside meanwhile: no step
    can come in it (the Trainer keeps its bar open while it writes its last checkpoint,
    and its closing line's clock holds that).  Its closing line still gives the exact
    time of the steps before it, which the whole seconds of the line that filled it cut
    short.  Without gputui's clock there is nothing to time it by."""
    since = state.bar_idle_from
    if bar.total is None or bar.n != bar.total or since is None or state.now is None:
        return 0.0
    return max(0.0, (state.now - since[0]) - (_aside_s(state) - since[1]))


def _aside_s(state: ParseState) -> float:
    """The time aside so far, the other bar drawn now included."""
    opened = state.aside_open
    return state.aside_s + (opened[1] - opened[0] if opened is not None else 0.0)


def _aside(state: ParseState) -> None:
    """A line of a bar that is not training (an evaluation's), drawn while the training
    bar's clock runs: the time from the first such line to the last before the training
    bar counts on, on gputui's clock, is not training.  Redraws of the training bar
    without progress come between (tqdm.write and Rich redraw every bar) and do not end
    it.  Without gputui's clock there is nothing to time it by."""
    if state.bar_last is None or state.now is None:
        return
    first = state.aside_open[0] if state.aside_open is not None else state.now
    state.aside_open = (first, state.now, state.bar_n)


def _aside_ends(bar: _Bar, state: ParseState) -> None:
    """At a training bar line that counted on (or a new bar): the other bar's time is aside."""
    opened = state.aside_open
    if opened is not None and bar.n != opened[2]:
        state.aside_last = opened[1] - opened[0]
        state.aside_s += state.aside_last
        state.aside_open = None
    if bar.n != state.bar_n and state.now is not None:
        state.bar_idle_from = (state.now, _aside_s(state))
    state.bar_n = bar.n


def _aside_timed(seconds: float, state: ParseState) -> None:
    """The tool's own time of the evaluation its other bar showed (the Trainer's
    eval_runtime holds its loop's start and its metrics, which the bar does not): it
    replaces gputui's time of that bar."""
    if state.aside_open is not None:
        state.aside_open = None
    else:
        state.aside_s -= state.aside_last
    state.aside_last = 0.0
    state.aside_s += seconds


def parse_tqdm(line: str, state: ParseState) -> list[Throughput] | None:
    """Iterations per second (steps, or samples with a batch size), with the window its
    counter and clock moved over since the last one."""
    match = _TQDM.search(line)
    bar = _bar_of(line)
    if match is None and bar is None:
        return None
    if bar is not None and not _training_bar(bar, state):
        _aside(state)
        return []
    number = _matched(match.group(1)) if match is not None else None
    if match is None or number is None:
        # "?it/s", "0.00it/s": no rate yet; the count and clock start the first window, and
        # the time the last bar held (see _bar_window) is counted at its last rate
        window = _bar_window(bar, state) if bar is not None else None
        return _steps(state.bar_rate, "tqdm", state, samples=window[0] * (state.hint or 1.0), seconds=window[1]) if window else []
    number *= _SI[match.group(2)]
    state.bar_counted = True
    rate = state.bar_rate = number if match.group(3) == "it/s" else 1.0 / number
    window = _bar_window(bar, state, _to_the_hundredth(bar, rate, state).elapsed) if bar is not None else None
    if window is None:
        return _steps(rate, "tqdm", state)
    steps, seconds = window
    return _steps(rate, "tqdm", state, samples=steps * (state.hint or 1.0), seconds=seconds)


# Bars that are not training: evaluation, validation, test and predict loops (Lightning's
# "Validation DataLoader 0", "Validating", "Sanity Checking", "Testing", "Predicting"),
# and the start-up bars of datasets (builder.py "Generating {split} split",
# arrow_dataset.py "Map", "Map (num_proc=N)", "Filter", "Casting the dataset", "Saving
# the dataset", "Flattening the indices", "Batching examples", download_manager.py
# "Downloading data files", "Extracting data files", "Computing checksums"), the
# Trainer examples' map descriptions ("Running tokenizer on dataset", "Grouping texts in
# chunks of N"), hub downloads ("Fetching N files", "Downloading ...") and
# transformers' "Loading checkpoint shards".  torchrun --tee puts "[rank0]:" before them.
_RANK_PREFIX = r"^\s*(?:\[[a-z]*[0-9]+\]:\s*)?"
_EVALUATION_BARS = r"Validation|Validating|Sanity Checking|Testing|Predicting|Evaluat|Eval\b|eval\b"
_NOT_TRAINING_BAR = re.compile(
    _RANK_PREFIX + r"(?:" + _EVALUATION_BARS + r"|Map\b|Map \(|Filter\b|Generating \S+ split"
    r"|Download|Loading|Tokeniz|Running tokenizer|Grouping texts|Casting|Saving|Flattening|Batching examples|Computing checksums"
    r"|Counting rows|Stringifying|Resolving data files|Fetching \d+ files|Extracting)"
)
_BAR_MARKS = ("|", "━", "╸", "╺")
# tqdm's bar without a total has no bar at all: "{desc}: {n_fmt}{unit} [{elapsed}, {rate}]"
_UNSIZED_STATS = re.compile(r" \[" + _CLOCK + ", ")


def not_training_bar(line: str) -> bool:
    """A progress bar of something other than training (see _NOT_TRAINING_BAR)."""
    if _NOT_TRAINING_BAR.match(line) is None:
        return False
    return any(mark in line for mark in _BAR_MARKS) or _UNSIZED_STATS.search(line) is not None


# --- Evaluation in the output, for the phases ----------------------------------------------

_EVALUATION_BAR = re.compile(_RANK_PREFIX + r"(?:" + _EVALUATION_BARS + r")")
# timm's validate(): f'Test: [{batch_idx:>4d}/{last_idx}]  Time: ...', the last at last_idx.
_TIMM_TEST = re.compile(r"\bTest: \[ *([0-9]+)/([0-9]+)\]")


@dataclass(frozen=True)
class EvaluationSeen:
    """An output line that shows an evaluation: how long it ran up to the line (None:
    since the run's last progress), and whether it goes on."""

    seconds: float | None
    ongoing: bool


def evaluation_seen(line: str) -> EvaluationSeen | None:
    """What ``line`` says of an evaluation, for the phases of a run the probe does not
    watch: the Trainer's evaluation metrics (over, after its eval_runtime), nanoGPT's
    evaluation line (over, begun after its last iteration), timm's ``Test:`` lines and
    the bars of validation, evaluation, testing and prediction (going on until the last
    ``Test:`` line, or until training goes on).  None for any other line."""
    if "eval_runtime" in line:
        match = _HF_EVAL_RUNTIME.search(line)
        seconds = _matched(match.group(1)) if match else None
        return EvaluationSeen(seconds, False) if seconds is not None else None
    if ", val loss " in line and _NANOGPT_EVAL.search(line) is not None:
        return EvaluationSeen(None, False)
    if "Test: [" in line:
        match = _TIMM_TEST.search(line)
        return EvaluationSeen(None, match.group(1) != match.group(2)) if match else None
    if _EVALUATION_BAR.match(line) is not None and not_training_bar(line):
        return EvaluationSeen(None, True)
    return None


# --- nanoGPT ----------------------------------------------------------------------------

# print(f"tokens per iteration will be: {tokens_per_iter:,}")
_NANOGPT_TOKENS = re.compile(r"\btokens per iteration will be: " + _NUM_COMMAS)
# print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu {running_mfu*100:.2f}%")
_NANOGPT_ITER = re.compile(r"\biter ([0-9]+): loss \S+, time " + _NUM + r" ?ms\b")
# print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
_NANOGPT_EVAL = re.compile(r"\bstep ([0-9]+): train loss \S+, val loss \S+")


def parse_nanogpt(line: str, state: ParseState) -> list[Throughput] | None:
    """nanoGPT's train.py: iteration times, each a window of the tokens an iteration
    holds once it said how many (it prints that first), else of one step.  Forks that
    print their own rate on the same line (``... time {dt*1000:.2f}ms, tok/s
    {rate:,.0f}``) are read by that rate: the script's own figure, in its own unit.
    nanoGPT evaluates at the top of iteration N (``step N: train loss ..., val loss ...``)
    and times each iteration from the end of the last one: iteration N is left out."""
    match = _NANOGPT_TOKENS.search(line)
    if match is not None:
        state.tokens_per_step = _matched(match.group(1))
        return []
    match = _NANOGPT_EVAL.search(line)
    if match is not None:
        state.nanogpt_evaluated = int(match.group(1))
        return []
    match = _NANOGPT_ITER.search(line)
    if match is None:
        return None
    if int(match.group(1)) == state.nanogpt_evaluated:
        return []
    own = _free_text(_GENERIC_TOKENS, line, TOKENS)
    if own is None:
        own = _free_text(_GENERIC, line, SAMPLES)
    if own is not None:
        return [dataclasses.replace(reading, source="nanogpt") for reading in own]
    ms = _matched(match.group(2))
    if ms is None:
        return []
    # One iteration's time, measured: a window of known length (not a smoothed redraw).
    if state.tokens_per_step is not None:
        return _reading(state.tokens_per_step * 1000.0 / ms, "nanogpt", unit=TOKENS, samples=state.tokens_per_step, seconds=ms / 1000.0)
    return _steps(1000.0 / ms, "nanogpt", state, samples=state.hint or 1.0, seconds=ms / 1000.0)


# --- torchtitan -------------------------------------------------------------------------

# "step:  10  loss:  7.8  memory: 30.1GiB(32%)  tps: 6,543  tflops: 300  mfu: 30%": tps is
# tokens per second of one GPU (torchtitan's metrics.py divides by the parallel degree).
_TITAN = re.compile(r"(?<!validate )\bstep:\s*[0-9]+\s.*\btps: " + _NUM_COMMAS)  # not its "validate step:"


def parse_torchtitan(line: str, state: ParseState) -> list[Throughput] | None:
    match = _TITAN.search(line)
    if match is None:
        return None
    return _reading(_matched(match.group(1)), "torchtitan", unit=TOKENS)


# --- Megatron-LM ------------------------------------------------------------------------

# " iteration 10/ 500 | consumed samples: 320 | elapsed time per iteration (ms): 1234.5 |
#   ... | global batch size:    32 | lm loss: ..."
_MEGATRON_MS = re.compile(r"elapsed time per iteration \(ms\): " + _NUM)
_MEGATRON_BATCH = re.compile(r"global batch size:\s*([0-9]+)\b")


def parse_megatron(line: str, state: ParseState) -> list[Throughput] | None:
    """Iteration time times the global batch size it prints on the same line."""
    match = _MEGATRON_MS.search(line)
    if match is None:
        return None
    ms = _matched(match.group(1))
    if ms is None:
        return []
    batch = _MEGATRON_BATCH.search(line)
    global_batch = _matched(batch.group(1)) if batch else None
    if global_batch is not None:
        return _reading(global_batch * 1000.0 / ms, "megatron", seconds=ms / 1000.0)
    return _steps(1000.0 / ms, "megatron", state, seconds=ms / 1000.0)


# --- DeepSpeed --------------------------------------------------------------------------

# ThroughputTimer: "epoch=0/micro_step=10/global_step=10, RunningAvgSamplesPerSec=123.4,
# CurrSamplesPerSec=120.0, MemAllocated=1.2GB, MaxMemAllocated=3.4GB"
_DEEPSPEED = re.compile(r"\bCurrSamplesPerSec=" + _NUM)
_DEEPSPEED_AVG = re.compile(r"\bRunningAvgSamplesPerSec=" + _NUM)


def parse_deepspeed(line: str, state: ParseState) -> list[Throughput] | None:
    match = _DEEPSPEED.search(line) or _DEEPSPEED_AVG.search(line)
    if match is None:
        return None
    return _reading(_matched(match.group(1)), "deepspeed")


# --- timm train.py ----------------------------------------------------------------------

# f'Train: {epoch} [{update_idx:>4d}/{updates_per_epoch} ({...:>3.0f}%)]  Loss: ... '
# f'Time: {update_time_m.val:.3f}s, {update_sample_count / update_time_m.val:>7.2f}/s  '
# f'({update_time_m.avg:.3f}s, {update_sample_count / update_time_m.avg:>7.2f}/s)  LR: ...'
# (older releases: batch_time.val, rate, batch_time.avg, rate_avg): samples/s of every
# rank together.  The parenthesised pair is the epoch's running average, timm's own figure.
_TIMM_TRAIN = re.compile(r"\bTrain: ([0-9]+) \[ *([0-9]+)/[0-9]+\b.*\bTime: " + _NUM + r"s, +" + _NUM + r"/s +\( *" + _NUM + r"s, +" + _NUM + r"/s\)")


def parse_timm_train(line: str, state: ParseState) -> list[Throughput] | None:
    """timm's running average rate, with the window since its last counted line: its
    meters count the epoch's updates (``update_idx + 1``) and their average time, so the
    updates times the average is the epoch's time so far."""
    match = _TIMM_TRAIN.search(line)
    if match is None:
        return None
    epoch, index = int(match.group(1)), int(match.group(2))
    time_now, rate_now = _matched(match.group(3)), _matched(match.group(4))
    average, rate = _matched(match.group(5)), _matched(match.group(6))
    if average is None or rate is None:
        return []
    updates = index + 1
    # The samples of one update (an integer: the batch of every rank together), read off
    # this update's own pair; without it, off the average's pair.
    per_update = round(time_now * rate_now) if time_now and rate_now and time_now * rate_now >= 0.5 else rate * average
    # The average time is printed with 3 decimals and the rate with 2: times the updates,
    # the less rounded of the two (by its relative rounding) is the epoch's time so far.
    if 0.0005 / average <= 0.005 / rate:
        per_update_s = average
    else:
        per_update_s = per_update / rate
    samples, seconds = per_update * updates, per_update_s * updates
    last = state.timm_last
    if last is None or last[0] != epoch:  # the run's first line, or a new epoch's meters, which start at 0
        state.timm_last = (epoch, updates, samples, seconds)
        return _reading(rate, "timm", samples=samples, seconds=seconds)
    window = samples - last[2], seconds - last[3]
    if updates <= last[1] or window[0] <= 0 or window[1] <= 0:
        # The same or an earlier update, or a window that rounding left empty: the next
        # line's window starts where the last counted one ended, so none of it is lost.
        return _reading(rate, "timm")
    state.timm_last = (epoch, updates, samples, seconds)
    return _reading(rate, "timm", samples=window[0], seconds=window[1])


# --- Generic "123.4 img/s" ------------------------------------------------------------

_UNIT = r"(?:samples?|images?|imgs?|examples?|seqs?|sequences?)/s(?:ec(?:ond)?)?\b"
# The last letter of every unit before "/s": sampleS, imagE, imG, seQ (any case).
_GENERIC_TRIGGERS = tuple(a + "/" + b for a in "segqSEGQ" for b in "sS")
# Tried in this order: "img/s: 123.4" / "images/sec=123.4"; "123.4 img/s" / "1,234.5
# samples/s" / tqdm unit="img" "1.23kimg/s"; "Speed (samples/sec) 43672.9658".
_GENERIC = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"(?<![\w/])" + _UNIT + r"\)?\s*[:=]\s*" + _NUM_COMMAS + r"(?![\w.])",
        r"(?<![\w.,])" + _NUM_COMMAS + r" ?((?-i:[kKMG])?)" + _UNIT,  # the prefix keeps its case
        r"(?<![\w/])" + _UNIT + r"\)?[ \t]+" + _NUM_COMMAS + r"(?![\w.])",
    )
)


def _free_text(patterns: tuple[re.Pattern[str], ...], line: str, unit: str) -> list[Throughput] | None:
    """The first of ``patterns`` that matches: its number (times an SI prefix where the
    pattern caught one) as a reading in ``unit``."""
    for pattern in patterns:
        match = pattern.search(line)
        if match is not None:
            rate = _matched(match.group(1))
            if rate is not None and match.lastindex == 2:
                rate *= _SI[match.group(2)]
            return _reading(rate, "generic", unit=unit)
    return None


def parse_generic(line: str, state: ParseState) -> list[Throughput] | None:
    """Samples, images and sequences per second in free text; tokens are not samples."""
    return _free_text(_GENERIC, line, SAMPLES)


# --- Generic "4,096 tok/s" -------------------------------------------------------------

_TOKEN_UNIT = r"(?:tokens?|toks?)(?:/s(?:ec(?:ond)?)?\b|/second\b| per second\b)"
_TOKEN_TRIGGERS = ("tok/s", "toks/s", "token/s", "tokens/s", "tokens per second", "tok/sec", "tokens/sec", "Tok/s", "Tokens/s")
# "tok/sec: 123456.78" (build-nanogpt, llm.c), "4,096 tok/s", "1.23ktok/s" (tqdm unit="tok"),
# "tokens per second 5678".
_GENERIC_TOKENS = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"(?<![\w/])" + _TOKEN_UNIT + r"\)?\s*[:=]\s*" + _NUM_COMMAS + r"(?![\w.])",
        r"(?<![\w.,])" + _NUM_COMMAS + r" ?((?-i:[kKMG])?)" + _TOKEN_UNIT,
        r"(?<![\w/])" + _TOKEN_UNIT + r"\)?[ \t]+" + _NUM_COMMAS + r"(?![\w.])",
    )
)


def parse_generic_tokens(line: str, state: ParseState) -> list[Throughput] | None:
    return _free_text(_GENERIC_TOKENS, line, TOKENS)


# --- The table ------------------------------------------------------------------------

#: (trigger substrings, parser), tried in order; a parser runs only when one of its
#: triggers is in the line.  Specific formats come before the generic fallback.
FORMATS: tuple[tuple[tuple[str, ...], Parser], ...] = (
    ((protocol.MARKER,), parse_gputui),
    ((_MLLOG,), parse_mlperf),
    (("DLL ",), parse_dllogger),
    (("train_samples_per_second", "train_tokens_per_second", "train_steps_per_second"), parse_hf_trainer),
    (("eval_runtime",), parse_hf_eval),
    (("samples/sec", "samples_per_sec"), parse_timm),
    (("Sample/sec:",), parse_tf_metal),
    (("tokens per iteration", ", time ", ", val loss "), parse_nanogpt),
    (("tps: ",), parse_torchtitan),
    (("elapsed time per iteration",), parse_megatron),
    (("SamplesPerSec=",), parse_deepspeed),
    (("Time: ",), parse_timm_train),
    (("s/step", "s/sample"), parse_keras),
    (("it/s", "s/it"), parse_tqdm),
    (_GENERIC_TRIGGERS, parse_generic),  # a line with both ("512 samples/sec 14000 tokens/sec"): samples
    (_TOKEN_TRIGGERS, parse_generic_tokens),
)


#: A line's figures in several units (the Trainer's closing dict): the one shown before
#: the run's unit is settled, in this order.
_FIGURE_UNITS: tuple[Unit, ...] = (SAMPLES, TOKENS, STEPS)
PROBE_RATIOS = 30  # the probe's latest samples-per-step ratios the hint is the median of
_PROGRESS_BARS = ("tqdm", "keras")
# While the probe is armed in the job and has not reported yet, step readings wait this
# long (the session's clock) for its first window, which tells the batch size: it comes
# with the first optimizer step a second or more after the first batch.
UNIT_SETTLE_S = 3.0
#: Sources whose windows continue one counter of the tool's from its start (a tqdm bar's
#: count over its elapsed clock, the Trainer's tokens over its runtime): their first
#: window is part of the figure the tool gives itself.  timm is not one: its meters
#: restart each epoch, so its later epochs' averages, free of the start (a GPU's lazy
#: start and cuDNN's autotuning, seconds in a first update), are the figure it gives.
COUNTED_FROM_START = frozenset({"tqdm", "hf-trainer"})


def _as_steps(reading: Throughput, hint: float) -> Throughput:
    """A bar's step rate that ``hint`` turned into samples, back in steps."""
    samples = reading.samples / hint if reading.samples else None
    return dataclasses.replace(reading, samples_per_sec=reading.samples_per_sec / hint, samples=samples, unit=STEPS)


@dataclass
class _Held:
    """The windows of a source's readings held back while the run's unit settled."""

    unit: Unit
    samples: float = 0.0
    seconds: float = 0.0


class ThroughputParser:
    """Turns output lines (and the probe's reports) into :class:`Throughput` readings.

    ``batch_size_hint`` (samples per step: the preset's, or ``--batch-size``) turns step
    rates into samples; it may be changed between lines.  Without it, the probe's
    samples per optimizer step serve (the median of its latest windows: a window across
    an evaluation fetches batches without steps).
    """

    def __init__(self, batch_size_hint: int | None = None):
        self.batch_size_hint = batch_size_hint
        self._state = ParseState()
        self._ranks = RankTotals()
        self._probe_ratios: deque[float] = deque(maxlen=PROBE_RATIOS)
        self.primary: str | None = None  # the source that owns the run's live throughput
        self.unit: Unit | None = None  # the run's unit, once settled (see the module docstring)
        self._waiting_since: float | None = None  # when the first step reading was held back
        self._probe_waited = False  # the probe is armed in the job and has sent no window yet
        self._held: dict[str, _Held] = {}
        self._challengers: dict[str, int] = {}  # live readings of the probe while another source owns the run

    @property
    def _hint(self) -> float | None:
        given = _number(self.batch_size_hint)
        if given is not None or not self._probe_ratios:
            return given
        return spread(self._probe_ratios).get("median")

    def feed(self, line: str, now: float | None = None) -> list[Throughput]:
        """The readings in one output line (often none); ``now``: when it arrived (the
        session's clock), for formats timed by gputui itself and for settling the
        run's unit (without it, the first reading settles it).  Never raises."""
        try:
            if not isinstance(line, str):
                return []
            self._state.hint = self._hint
            self._state.now = now
            if not_training_bar(line):
                _aside(self._state)
                return []
            for triggers, parse in FORMATS:
                for trigger in triggers:
                    if trigger in line:
                        readings = parse(line, self._state)
                        if readings is not None:
                            return self._owned(self._with_totals(readings), now)
                        break  # not this format: on to the next one
            return []
        except Exception:  # a parser bug must never take the session down
            return []

    def finish(self, now: float | None = None) -> list[Throughput]:
        """The run has ended: what its progress bar's last lines added to its count and
        time and no window has counted yet (a smoothed bar's closing line,
        :func:`_bar_window`), as one more window.  Never raises."""
        try:
            (count, held), self._state.bar_pending = self._state.bar_pending, (0.0, 0.0)
            if held <= 0:
                return []
            self._state.now = now
            samples = count * (self._state.hint or 1.0)
            readings = _steps(self._state.bar_rate, "tqdm", self._state, samples=samples, seconds=held)
            return self._owned(self._with_totals(readings), now)
        except Exception:
            return []

    def probe_status(self, payload: JsonObject) -> None:
        """The probe's ``probe_status`` line: armed, its first window is worth waiting for."""
        state = payload.get("state")
        if state == "off" or (state == "armed" and not self._probe_ratios):
            self._probe_waited = state == "armed"

    def feed_probe(self, payload: JsonObject, now: float | None = None) -> list[Throughput]:
        """A probe window report (its decoded protocol payload), ``now`` as for
        :meth:`feed`.  Never raises."""
        self._probe_waited = False
        try:
            steps, samples = _number(payload.get("steps")), _number(payload.get("samples"))
            if steps is not None and samples is not None:
                self._probe_ratios.append(samples / steps)
                self._state.hint = _number(self.batch_size_hint)  # the probe's own samples count, not its median
            else:
                self._state.hint = self._hint  # a window without batches (an epoch's end): the usual batch
            return self._owned(self._with_totals(_probe_reading(payload, self._state)), now)
        except Exception:
            return []

    def _with_totals(self, readings: list[Throughput]) -> list[Throughput]:
        """A rank's reading, then the run's total when this reading completes one."""
        out = []
        for reading in readings:
            out.append(reading)
            if reading.rank is not None:
                total = self._ranks.add(reading)
                if total is not None:
                    out.append(total)
        return out

    def _owned(self, readings: list[Throughput], now: float | None) -> list[Throughput]:
        """The primary source's live readings stay live, in the run's one unit (see the
        module docstring); another source's become the run's reported figures (final),
        except a progress bar's redraws and the probe's, which only repeat what the
        primary says, less exactly or in another unit."""
        out = []
        figures = []  # the tool's own figures of this line, of which the run shows one
        for reading in readings:
            if self.unit == STEPS and reading.unit == SAMPLES and reading.source in _PROGRESS_BARS and self._state.hint:
                reading = _as_steps(reading, self._state.hint)  # a batch size told after the run settled on steps
            if reading.final and reading.rank is None:
                figures.append(reading)
            elif reading.final:
                out.append(reading)
            elif reading.rank is not None:  # one rank's own: its total, in the run's unit, is the run's
                if reading.unit == self.unit or self.unit is None:
                    out.append(reading)
            elif self.unit is None and not self._settles(reading, now):
                self._hold(reading)
            elif reading.unit == self.unit and self._takes_over(reading):
                self.primary = reading.source
                out.append(self._with_held(reading))
            elif reading.source == PROBE and reading.unit == self.unit and self.primary in COUNTED_FROM_START:
                # The source it will take over from counts the run from its start: so must it.
                self._hold(reading)
            elif reading.source not in (PROBE, *_PROGRESS_BARS):
                figures.append(dataclasses.replace(reading, final=True))
        figure = self._figure_in_unit(figures)
        return out + [figure] if figure is not None else out

    def _figure_in_unit(self, figures: list[Throughput]) -> Throughput | None:
        """One of a line's reported figures, in the run's unit: the one it gives in that
        unit, else one converted by the batch size, else none (a run shows one unit).
        Before the unit is settled, samples are preferred, and settle it."""
        if not figures:
            return None
        if self.unit is None:
            figure = min(figures, key=lambda r: _FIGURE_UNITS.index(r.unit))
            self.unit = figure.unit
            return figure
        same = next((r for r in figures if r.unit == self.unit), None)
        if same is not None:
            return same
        hint = self._hint
        for figure in figures:
            if hint is not None and (figure.unit, self.unit) == (SAMPLES, STEPS):
                return dataclasses.replace(figure, samples_per_sec=figure.samples_per_sec / hint, samples=None, seconds=None, unit=STEPS)
            if hint is not None and (figure.unit, self.unit) == (STEPS, SAMPLES):
                return dataclasses.replace(figure, samples_per_sec=figure.samples_per_sec * hint, samples=None, seconds=None, unit=SAMPLES)
        return None

    def _settles(self, reading: Throughput, now: float | None) -> bool:
        """Whether ``reading`` settles the run's unit: any reading in samples or tokens; a
        step reading unless the armed probe's first window, which may tell the batch size,
        is still to come (for UNIT_SETTLE_S at most; at once where the time is not known)."""
        if reading.unit == STEPS and now is not None and self._probe_waited:
            if self._waiting_since is None:
                self._waiting_since = now
            if now - self._waiting_since < UNIT_SETTLE_S:
                return False
        self.unit = reading.unit
        return True

    def _hold(self, reading: Throughput) -> None:
        """Keep a held-back reading's window, for its source's first shown reading."""
        if reading.samples is None or not reading.seconds:
            return
        held = self._held.get(reading.source)
        if held is None or held.unit != reading.unit:
            held = self._held[reading.source] = _Held(reading.unit)
        held.samples += reading.samples
        held.seconds += reading.seconds

    def _with_held(self, reading: Throughput) -> Throughput:
        """``reading`` with the windows its source's held-back readings covered, converted
        into the run's unit where a batch size is known now: the summary then counts the
        whole run, as the tool does."""
        held = self._held.get(reading.source)
        if held is None or reading.samples is None or not reading.seconds:
            return reading
        del self._held[reading.source]
        samples = held.samples
        if held.unit != reading.unit:
            hint = self._hint
            if not (held.unit == STEPS and reading.unit == SAMPLES and hint is not None):
                return reading
            samples *= hint
        return dataclasses.replace(reading, samples=reading.samples + samples, seconds=reading.seconds + held.seconds)

    def _takes_over(self, reading: Throughput) -> bool:
        """Whether ``reading`` (in the run's unit) is the run's throughput from now on:
        its source owns it already, or none does, or it is the probe from its second
        reading (its windows count exact samples over exact seconds; a bar's rate is
        smoothed, and the probe's first window holds the start: held back meanwhile where
        the source it takes over from counts from its start, see :meth:`_owned`)."""
        if self.primary in (None, reading.source):
            return True
        if reading.source != PROBE:
            return False
        seen = self._challengers.get(reading.source, 0) + 1
        self._challengers[reading.source] = seen
        return seen >= 2

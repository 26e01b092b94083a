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
Progress bars that are not training (validation, sanity checks, datasets' ``Map``,
downloads) are skipped.  :meth:`ThroughputParser.feed` never raises.

One run, one throughput: the first source that gives a live reading owns it, until
one in a richer unit takes over (tokens over samples over steps: the unit the job
itself counts in), or the probe in the same unit (its windows are exact; a progress
bar's rate is smoothed).  Live readings of other sources become the run's "reported"
figures; a progress bar's are dropped.
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
    main_bar_total: float = 0.0  # the largest progress-bar total seen: the training bar
    now: float | None = None  # when this line arrived (seconds, the session's clock), where known
    keras_last: tuple[float, int, int] | None = None  # (when, steps done, of how many) at the Keras bar's last counted line


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
    """``@gputui {"event": "step", ...}`` and ``{"event": "result", ...}``."""
    payload = protocol.decode(line)
    if payload is None:
        return []  # the marker is there (the trigger): a malformed protocol line is ours
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
    if event == PROBE:
        return _probe_reading(payload, state)
    return []


PROBE = "probe"  # the zero-code probe's window report (gputui.probe)


def _probe_reading(payload: JsonObject, state: ParseState) -> list[Throughput]:
    """The probe's window: optimizer steps over seconds, in samples when it saw the
    batches (their leading dimension) or a batch size is known, else in steps.  A window
    without steps (evaluation, a pause) is no reading."""
    steps, seconds = _number(payload.get("steps")), _number(payload.get("seconds"))
    if steps is None or seconds is None:
        return []
    samples = _number(payload.get("samples"))
    if samples is not None and state.hint is None:
        return _reading(samples / seconds, "probe", samples=samples, seconds=seconds, **_rank_fields(payload))
    return _steps(steps / seconds, "probe", state, seconds=seconds, **_rank_fields(payload))


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


def parse_hf_trainer(line: str, state: ParseState) -> list[Throughput] | None:
    """The Trainer's metrics dicts: one reading per unit it gives, final at the end."""
    final = "train_samples_per_second" in line or "train_loss" in line
    readings: list[Throughput] = []
    for unit, pattern in _HF.items():
        match = pattern.search(line)
        if match is not None:
            readings += _reading(_matched(match.group(1)), "hf-trainer", final=final, unit=unit)
    return readings or None


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
# The bar's count "| 45/100 [" (tqdm) or "45/100 0:00:05 •" (Rich): its total names the bar.
_BAR_COUNT = re.compile(r"(?:\|\s*|\s)[0-9.]+[kKMGTPEZY]?/([0-9.]+)([kKMGTPEZY]?)(?:\s*\[|\s+[0-9:-]+\s+•)")


def _main_bar(line: str, state: ParseState) -> bool:
    """Whether this bar is the training bar: the one with the largest total so far.  The
    Trainer's evaluation bar has no description, only a smaller total (the eval set's
    batches, against the training run's steps)."""
    match = _BAR_COUNT.search(line)
    total = _matched(match.group(1)) if match else None
    if total is None:
        return True  # an unsized bar ("45it [00:05, 8.91it/s]"): nothing to compare
    total *= _SI[match.group(2)] if match else 1.0
    state.main_bar_total = max(state.main_bar_total, total)
    return total * 2 > state.main_bar_total


def parse_tqdm(line: str, state: ParseState) -> list[Throughput] | None:
    """Iterations per second: steps, or samples with a batch size."""
    match = _TQDM.search(line)
    if match is None:
        return None
    if not _main_bar(line, state):
        return []
    value, prefix, unit = match.groups()
    number = _matched(value)
    if number is None:
        return []
    number *= _SI[prefix]
    return _steps(number if unit == "it/s" else 1.0 / number, "tqdm", state)


# Bars that are not training: Lightning's validation and sanity-check bars, evaluation
# and test loops, and the start-up bars of datasets, hub downloads and checkpoint loading.
_NOT_TRAINING_BAR = re.compile(
    r"^\s*(?:Validation|Validating|Sanity Checking|Testing|Predicting|Evaluat|Eval\b|eval\b|Map\b|Map \(|Filter\b|Generating \w+ split"
    r"|Download|Loading|Tokeniz|Running tokenizer|Casting|Saving|Resolving data files|Fetching \d+ files|Extracting)"
)
_BAR_MARKS = ("|", "━", "╸", "╺")


def not_training_bar(line: str) -> bool:
    """A progress bar of something other than training (see _NOT_TRAINING_BAR)."""
    return any(mark in line for mark in _BAR_MARKS) and _NOT_TRAINING_BAR.match(line) is not None


# --- nanoGPT ----------------------------------------------------------------------------

# print(f"tokens per iteration will be: {tokens_per_iter:,}")
_NANOGPT_TOKENS = re.compile(r"\btokens per iteration will be: " + _NUM_COMMAS)
# print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu {running_mfu*100:.2f}%")
_NANOGPT_ITER = re.compile(r"\biter [0-9]+: loss \S+, time " + _NUM + r" ?ms\b")


def parse_nanogpt(line: str, state: ParseState) -> list[Throughput] | None:
    """nanoGPT's train.py: iteration times, in tokens once it said how many an iteration
    holds (it prints that first), else in steps."""
    match = _NANOGPT_TOKENS.search(line)
    if match is not None:
        state.tokens_per_step = _matched(match.group(1))
        return []
    match = _NANOGPT_ITER.search(line)
    if match is None:
        return None
    ms = _matched(match.group(1))
    if ms is None:
        return []
    # One iteration's time, measured: a window of known length (not a smoothed redraw).
    if state.tokens_per_step is not None:
        return _reading(state.tokens_per_step * 1000.0 / ms, "nanogpt", unit=TOKENS, seconds=ms / 1000.0)
    return _steps(1000.0 / ms, "nanogpt", state, seconds=ms / 1000.0)


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

# "Train: 0 [  50/1251 (  4%)]  Loss: 6.891 (6.91)  Time: 0.300s, 3413.33/s  (0.310s,
#  3303.23/s)  LR: 1.000e-05  Data: 0.010 (0.012)": samples/s of every rank together.
_TIMM_TRAIN = re.compile(r"\bTrain: [0-9]+ \[.*\bTime: " + _NUM + r"s, +" + _NUM + r"/s\b")


def parse_timm_train(line: str, state: ParseState) -> list[Throughput] | None:
    match = _TIMM_TRAIN.search(line)
    if match is None:
        return None
    return _reading(_matched(match.group(2)), "timm")


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
    (("samples/sec", "samples_per_sec"), parse_timm),
    (("Sample/sec:",), parse_tf_metal),
    (("tokens per iteration", ", time "), parse_nanogpt),
    (("tps: ",), parse_torchtitan),
    (("elapsed time per iteration",), parse_megatron),
    (("SamplesPerSec=",), parse_deepspeed),
    (("Time: ",), parse_timm_train),
    (("s/step", "s/sample"), parse_keras),
    (("it/s", "s/it"), parse_tqdm),
    (_GENERIC_TRIGGERS, parse_generic),  # a line with both ("512 samples/sec 14000 tokens/sec"): samples
    (_TOKEN_TRIGGERS, parse_generic_tokens),
)


PROBE_RATIOS = 30  # the probe's latest samples-per-step ratios the hint is the median of
_UNIT_RANK = {STEPS: 0, SAMPLES: 1, TOKENS: 2}
_PROGRESS_BARS = ("tqdm", "keras")


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
        self._primary_unit: Unit | None = None
        self._challengers: dict[str, int] = {}  # live readings of sources that may take over

    @property
    def _hint(self) -> float | None:
        given = _number(self.batch_size_hint)
        if given is not None or not self._probe_ratios:
            return given
        return spread(self._probe_ratios).get("median")

    def feed(self, line: str, now: float | None = None) -> list[Throughput]:
        """The readings in one output line (often none); ``now``: when it arrived (the
        session's clock), for formats timed by gputui itself.  Never raises."""
        try:
            if not isinstance(line, str) or not_training_bar(line):
                return []
            self._state.hint = self._hint
            self._state.now = now
            for triggers, parse in FORMATS:
                for trigger in triggers:
                    if trigger in line:
                        readings = parse(line, self._state)
                        if readings is not None:
                            return self._owned(self._with_totals(readings))
                        break  # not this format: on to the next one
            return []
        except Exception:  # a parser bug must never take the session down
            return []

    def feed_probe(self, payload: JsonObject) -> list[Throughput]:
        """A probe window report (its decoded protocol payload).  Never raises."""
        try:
            steps, samples = _number(payload.get("steps")), _number(payload.get("samples"))
            if steps is not None and samples is not None:
                self._probe_ratios.append(samples / steps)
            self._state.hint = _number(self.batch_size_hint)  # the probe's own samples count, not its median
            return self._owned(self._with_totals(_probe_reading(payload, self._state)))
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

    def _owned(self, readings: list[Throughput]) -> list[Throughput]:
        """The primary source's live readings stay live (see the module docstring);
        another source's become the run's reported figures (final), except a progress
        bar's redraws, which only repeat what the primary says, less exactly."""
        out = []
        for reading in readings:
            if reading.final or reading.rank is not None:
                out.append(reading)
            elif self._takes_over(reading):
                self.primary, self._primary_unit = reading.source, reading.unit
                out.append(reading)
            elif reading.source not in (PROBE, *_PROGRESS_BARS):
                out.append(dataclasses.replace(reading, final=True))
        return out

    def _takes_over(self, reading: Throughput) -> bool:
        """Whether ``reading`` is the run's throughput from now on: its source owns it
        already, or none does, or (from its second live reading: a script's closing line
        alone is its reported figure, not a series) it counts a richer unit (tokens >
        samples > steps: the unit the job itself counts in), or it is the probe in the
        owner's unit (its windows count exact samples over exact seconds; a bar's rate is
        smoothed)."""
        if self.primary in (None, reading.source):
            return True
        assert self._primary_unit is not None
        mine, theirs = _UNIT_RANK[reading.unit], _UNIT_RANK[self._primary_unit]
        if not (mine > theirs or (mine == theirs and reading.source == PROBE)):
            return False
        seen = self._challengers.get(reading.source, 0) + 1
        self._challengers[reading.source] = seen
        return seen >= 2

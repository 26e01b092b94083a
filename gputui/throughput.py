"""Throughput readings parsed from a benchmark's output, one line at a time.

:class:`ThroughputParser` is fed every line a child process prints (already split on
``\\n`` and ``\\r``, ANSI codes already stripped) and returns the throughput readings it
finds, in samples per second.  It understands gputui's own protocol and the output of
common tools: tf-metal-experiments, tqdm, Keras, the Hugging Face Trainer, timm's
``benchmark.py``, NVIDIA DLLogger, MLPerf logging, and generic ``123 img/s`` text.

Every format is one small function in :data:`FORMATS`, tried in that order (specific
tools before the generic fallback).  A function is only called when the line contains
one of its trigger substrings, so the common line (a loss, a warning) costs a few
substring checks and no regex.  A function returns ``None`` when the line is not in its
format, so the next one is tried, and a list (possibly empty) when the line is its own:
an empty list then means "recognised, but nothing to report" (an ``Infer`` line of timm,
a validation line of DLLogger, a protocol ``start`` event) and stops the search, so that
a later, looser parser does not misread the line.

Rules shared by all formats: a reading's ``samples_per_sec`` is finite and > 0 or the
reading is dropped; iteration and step rates (tqdm ``it/s``, Keras ``ms/step``) are only
converted to samples with a ``batch_size_hint``; tokens, frames and items are not
samples and are never reported.  :meth:`ThroughputParser.feed` never raises.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from gputui import protocol
from gputui.model import Throughput

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

Parser = Callable[[str, float | None], list[Throughput] | None]


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


# --- gputui protocol ------------------------------------------------------------------


def parse_gputui(line: str, hint: float | None) -> list[Throughput] | None:
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
            "gputui",
            phase=phase if phase in protocol.PHASES else None,
            samples=samples,
            seconds=seconds,
            **_rank_fields(payload),
        )
    if event == "result":
        return _reading(_number(payload.get("samples_per_sec")), "gputui", final=True, **_rank_fields(payload))
    return []


def _rank_fields(payload: dict[str, Any]) -> dict[str, int]:
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
        )


# --- MLPerf logging -------------------------------------------------------------------

_MLLOG = ":::MLLOG"


def parse_mlperf(line: str, hint: float | None) -> list[Throughput] | None:
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


def parse_dllogger(line: str, hint: float | None) -> list[Throughput] | None:
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
_HF = re.compile(r"""\btrain_samples_per_second['"]?\s*[:=]\s*['"]?""" + _NUM)


def parse_hf_trainer(line: str, hint: float | None) -> list[Throughput] | None:
    match = _HF.search(line)
    if match is None:
        return None
    return _reading(_matched(match.group(1)), "hf-trainer", final=True)


# --- timm benchmark.py ----------------------------------------------------------------

# f"Train [{num_steps}/{self.num_bench_iter}]. {rate:0.2f} samples/sec. {ms:0.3f} ms/step."
_TIMM_STEP = re.compile(r"\b(Train|Infer) \[\d+/\d+\]\. " + _NUM + r" samples/sec\.")
# f"Train benchmark of {model_name} done. {rate:.2f} samples/sec, {ms:.2f} ms/sample"
_TIMM_DONE = re.compile(r"\b(Train|Inference) benchmark of \S+ done\. " + _NUM + r" samples/sec")
# print(f'--result\n{json.dumps(results, indent=4)}'):   "train_samples_per_sec": 1234.56,
_TIMM_RESULT = re.compile(r"""['"](train|infer)_samples_per_sec['"]\s*:\s*""" + _NUM)


def parse_timm(line: str, hint: float | None) -> list[Throughput] | None:
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


def parse_tf_metal(line: str, hint: float | None) -> list[Throughput] | None:
    match = _TF_METAL.search(line)
    if match is None:
        return None
    return _reading(_matched(match.group(1)), "tf-metal", final=True)


# --- Keras progress bar ---------------------------------------------------------------

# "100/100 [====] - 5s 50ms/step - loss: ..."   "1500/1500 ━━━━ 8s 3ms/step - ..."
# "60000/60000 [====] - 3s 49us/sample - loss: ..."   verbose=2: "... - 15s/epoch - 500ms/step"
_KERAS = re.compile(r"(?<![\w.])([0-9]+(?:\.[0-9]+)?)(s|ms|us|µs|μs)/(step|sample)\b")
_KERAS_TARGET = re.compile(r"^\s*[0-9]+/([0-9]+)\b")
_KERAS_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6}
# keras.utils.get_file shows its download as a step progress bar over bytes:
# "71639040/170498071 ━━━━ 6s 0us/step".  No epoch has that many steps.
_KERAS_MAX_STEPS = 1_000_000


def parse_keras(line: str, hint: float | None) -> list[Throughput] | None:
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
        steps = target.group(1).lstrip("0")
        if len(steps) > len(str(_KERAS_MAX_STEPS)) or int(steps or "0") > _KERAS_MAX_STEPS:
            return []
    if hint is None:
        return None
    return _reading(hint / seconds, "keras")


# --- tqdm -----------------------------------------------------------------------------

# " 45%|████▌     | 45/100 [00:05<00:06,  8.91it/s]", "2.35s/it", unit_scale: "1.23kit/s"
_TQDM = re.compile(r"(?<![\w.])([0-9]+(?:\.[0-9]+)?)([kKMGTPEZY]?)(it/s|s/it)\b")


def parse_tqdm(line: str, hint: float | None) -> list[Throughput] | None:
    """An iteration is not a sample: without a batch size hint, nothing."""
    if hint is None:
        return None
    match = _TQDM.search(line)
    if match is None:
        return None
    value, prefix, unit = match.groups()
    number = _matched(value)
    if number is None:
        return []
    number *= _SI[prefix]
    iterations_per_sec = number if unit == "it/s" else 1.0 / number
    return _reading(iterations_per_sec * hint, "tqdm")


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


def parse_generic(line: str, hint: float | None) -> list[Throughput] | None:
    """Samples, images and sequences per second in free text; tokens are not samples."""
    for pattern in _GENERIC:
        match = pattern.search(line)
        if match is not None:
            rate = _matched(match.group(1))
            if rate is not None and match.lastindex == 2:
                rate *= _SI[match.group(2)]
            return _reading(rate, "generic")
    return None


# --- The table ------------------------------------------------------------------------

#: (trigger substrings, parser), tried in order; a parser runs only when one of its
#: triggers is in the line.  Specific formats come before the generic fallback.
FORMATS: tuple[tuple[tuple[str, ...], Parser], ...] = (
    ((protocol.MARKER,), parse_gputui),
    ((_MLLOG,), parse_mlperf),
    (("DLL ",), parse_dllogger),
    (("train_samples_per_second",), parse_hf_trainer),
    (("samples/sec", "samples_per_sec"), parse_timm),
    (("Sample/sec:",), parse_tf_metal),
    (("s/step", "s/sample"), parse_keras),
    (("it/s", "s/it"), parse_tqdm),
    (_GENERIC_TRIGGERS, parse_generic),
)


class ThroughputParser:
    """Turns output lines into :class:`Throughput` readings.

    ``batch_size_hint`` (samples per iteration) lets tqdm ``it/s`` and Keras ``ms/step``
    rates count as samples; it may be changed between lines.
    """

    def __init__(self, batch_size_hint: int | None = None):
        self.batch_size_hint = batch_size_hint
        self._ranks = RankTotals()

    @property
    def _hint(self) -> float | None:
        return _number(self.batch_size_hint)

    def feed(self, line: str) -> list[Throughput]:
        """The readings in one output line (often none).  Never raises."""
        try:
            if not isinstance(line, str):
                return []
            for triggers, parse in FORMATS:
                for trigger in triggers:
                    if trigger in line:
                        readings = parse(line, self._hint)
                        if readings is not None:
                            return self._with_totals(readings)
                        break  # not this format: on to the next one
            return []
        except Exception:  # a parser bug must never take the session down
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

"""Tests of gputui.run.throughput: real output lines of each tool, negatives, and fuzzing.

Where each real line comes from is said beside it.  "code index" means the stored copy
of public GitHub files searched while writing these tests (the line was found there, in
a README, notebook or log excerpt, verbatim unless noted).  Where no printed output was
found (timm), the line is rendered from the tool's own format string, quoted beside it.
"""

from __future__ import annotations

import json
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui import protocol
from gputui.model import UNITS, Throughput
from gputui.run.throughput import FORMATS, UNIT_SETTLE_S, ParseState, ThroughputParser
from tests.support.process import REPO

DATA = REPO / "tests" / "data" / "throughput"
SOURCES = {
    "gputui",
    "tf-metal",
    "generic",
    "tqdm",
    "keras",
    "hf-trainer",
    "timm",
    "dllogger",
    "mlperf",
    "nanogpt",
    "torchtitan",
    "megatron",
    "deepspeed",
    "probe",
}


def feed(line: str, hint: int | None = None) -> list[Throughput]:
    return ThroughputParser(batch_size_hint=hint).feed(line)


def check(readings: object) -> None:
    """The invariant of every feed() answer."""
    assert isinstance(readings, list)
    for reading in readings:
        assert isinstance(reading, Throughput)
        assert isinstance(reading.samples_per_sec, float)
        assert math.isfinite(reading.samples_per_sec) and reading.samples_per_sec > 0
        assert reading.source in SOURCES
        assert reading.phase in (None, "warmup", "measure")
        assert isinstance(reading.final, bool)
        assert reading.unit in UNITS


def one(line: str, hint: int | None = None) -> Throughput:
    """The line's one reading in samples (the Trainer's final line also gives steps)."""
    readings = [r for r in feed(line, hint) if r.unit == "samples"]
    check(readings)
    assert len(readings) == 1, readings
    return readings[0]


def fixture_lines(name: str) -> list[str]:
    text = (DATA / name).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if not line.startswith("#")]


# --- Positive cases: (line, batch_size_hint, samples_per_sec, source, final) -----------------

POSITIVE = [
    # 1. gputui protocol: the examples of gputui/protocol.py's docstring.
    ('@gputui {"event": "step", "phase": "measure", "step": 11, "samples": 32, "seconds": 0.018}', None, 32 / 0.018, "gputui", False),
    ('@gputui {"event": "step", "phase": "warmup", "step": 1, "samples": 32, "seconds": 0.41}', None, 32 / 0.41, "gputui", False),
    ('@gputui {"event": "result", "samples_per_sec": 1771.2, "p5": 1740.0, "p95": 1790.3}', None, 1771.2, "gputui", True),
    # 2. tlkh/tf-metal-experiments train_benchmark.py: print("Sample/sec:", fps), with the
    #    M1 Max ResNet50 / M1 Pro DistilBERT figures of its README.
    ("Sample/sec: 140.0", None, 140.0, "tf-metal", True),
    ("Sample/sec: 65.9", 64, 65.9, "tf-metal", True),
    # 3. Generic.
    #    SijingYu/GraphSAGE_MultiGPU loss.md (DGL GraphSAGE example output):
    ("Epoch 00000 | Step 00020 | Loss 2.6650 | Train Acc 0.3400 | Speed (samples/sec) 43672.9658 | GPU 401.2 MB", None, 43672.9658, "generic", False),
    #    tqdm with unit="img" (a README in the code index):
    ("Processing images: 100%|████████| 50/50 [00:45<00:00, 1.11img/s]", None, 1.11, "generic", False),
    #    tqdm-like bar with a space before the unit (a README in the code index):
    ("Analyzing: 100%|████████████████| 1240/1240 [04:12<00:00,  4.91 img/s]", None, 4.91, "generic", False),
    #    MXNet's Speedometer, rendered from its format string (code index):
    #    'Epoch[%d] Batch [%d]\tSpeed: %.2f samples/sec\t%s=%f'
    ("INFO:root:Epoch[0] Batch [20]\tSpeed: 1253.28 samples/sec\taccuracy=0.001116", None, 1253.28, "generic", False),
    #    and a translation toolkit's variant: 'Epoch[%d] Batch [%d]\tSpeed: %.2f samples/sec
    #    %.2f tokens/sec %.2f updates/sec' (samples, not tokens):
    ("Epoch[0] Batch [100]\tSpeed: 512.33 samples/sec 14000.50 tokens/sec 2.00 updates/sec", None, 512.33, "generic", False),
    #    The forms the brief lists:
    ("123.4 img/s", None, 123.4, "generic", False),
    ("img/s: 123.4", None, 123.4, "generic", False),
    ("images/sec=123.4", None, 123.4, "generic", False),
    ("throughput: 1,234.5 samples/s", None, 1234.5, "generic", False),
    ("seq/s: 88.5", None, 88.5, "generic", False),
    ("epoch 3 sequences/sec: 88.5", None, 88.5, "generic", False),  # not "3"
    ("train 512.0 imgs/s", None, 512.0, "generic", False),
    ("Throughput - 220.5 samples/s, 51200 tokens/s", None, 220.5, "generic", False),
    ("  6%|▌         | 6.00/100 [00:01<00:15, 1.23kimg/s]", None, 1230.0, "generic", False),  # unit_scale
    # 4. tqdm (needs a batch size).  Bar shapes from tqdm's format_meter
    #    (rate_noinv_fmt "{0:5.2f}{unit}/s", rate_inv_fmt "...s/{unit}" when > 1 s).
    (" 45%|████▌     | 45/100 [00:05<00:06,  8.91it/s]", 32, 8.91 * 32, "tqdm", False),
    #    Hugging Face Trainer bars in the code index:
    ("100%|██████████████████████| 4836/4836 [2:20:18<00:00,  1.74s/it]", 8, 8 / 1.74, "tqdm", False),
    (
        "100%|███████████████████████████████████████████████████████████████████████████████████████| 8250/8250 [5:31:35<00:00,  1.36it/s]",
        16,
        1.36 * 16,
        "tqdm",
        False,
    ),
    #    A tqdm note in the code index (desc in Chinese):
    ("加载中:  70%|███████   | 70/100 [01:10<00:30,  1.01s/it]", 4, 4 / 1.01, "tqdm", False),
    #    unit_scale=True, real bars in the code index (old tqdm printed "K"):
    (" 59%|█████▉    | 73.0k/123k [00:07<00:05, 10.1kit/s]", 2, 10100.0 * 2, "tqdm", False),
    ("Processing nodes -- finished: 100%|██████████| 14.3K/14.3K [00:00<00:00, 514Kit/s]", 1, 514000.0, "tqdm", False),
    # 5. Keras.  Keras 2 (tf.keras) bars from notebooks in the code index:
    (
        "96/96 [==============================] - 5s 50ms/step - loss: 0.5054 - accuracy: 0.7842 - val_loss: 0.4628 - val_accuracy: 0.7965",
        32,
        32 / 0.050,
        "keras",
        False,
    ),
    ("107/107 [==============================] - 0s 318us/step - loss: 0.0405 - acc: 0.0093 - val_loss: 0.0246", 512, 512 / 318e-6, "keras", False),
    #    Keras 3 (keras/src/utils/progbar.py: " {time_per_unit * 1000:.0f}ms/{unit_name}"):
    ("1500/1500 ━━━━━━━━━━━━━━━━━━━━ 8s 3ms/step - accuracy: 0.7370 - loss: 0.7853", 32, 32 / 0.003, "keras", False),
    (
        "24/24 ━━━━━━━━━━━━━━━━━━━━ 5s 141ms/step - accuracy: 0.2382 - loss: 2.2627 - val_accuracy: 0.6237 - val_loss: 1.7715",
        2000,
        2000 / 0.141,
        "keras",
        False,
    ),
    ("416/418 ━━━━━━━━━━━━━━━━━━━━ 0s 9ms/step - loss: 0.0415 - mae: 0.1430", 64, 64 / 0.009, "keras", False),
    #    verbose=2: the "358ms/epoch" is not a step time.
    ("313/313 - 0s - loss: 0.0778 - accuracy: 0.9777 - 358ms/epoch - 1ms/step", 32, 32 / 0.001, "keras", False),
    #    Older Keras, per sample (no batch size needed):
    ("15740/15740 [==============================] - 1s 58us/sample - loss: 0.3133", None, 1 / 58e-6, "keras", False),
    ("37800/37800 [==============================] - 39s 1ms/sample - loss: 0.1540 - accuracy: 0.9514", None, 1000.0, "keras", False),
    # 6. Hugging Face Trainer, all from the code index.
    (
        "{'train_runtime': 8418.1136, 'train_samples_per_second': 2.298, 'train_steps_per_second': 0.574, 'train_loss': 0.05433076250654198, 'epoch': 2.0}",
        None,
        2.298,
        "hf-trainer",
        True,
    ),
    (
        "  {'train_runtime': 19895.0898, 'train_samples_per_second': 13.27, 'train_steps_per_second': 0.415, 'train_loss': 0.027081513957543806, 'epoch': 3.0}",
        None,
        13.27,
        "hf-trainer",
        True,
    ),
    #    Newer transformers print the values as strings (the doc wrapped this line in two):
    (
        "{'train_runtime': '211', 'train_samples_per_second': '0.948', 'train_steps_per_second': '0.237', 'train_loss': '2.425', 'epoch': '8.364'}",
        None,
        0.948,
        "hf-trainer",
        True,
    ),
    (
        "TrainOutput(global_step=2675, training_loss=0.27181456521292713, metrics={'train_runtime': 169.649, 'train_samples_per_second': 252.02, 'train_steps_per_second': 15.768, 'total_flos': 229537542078168.0, 'train_loss': 0.27181456521292713, 'epoch': 5.0})",
        None,
        252.02,
        "hf-trainer",
        True,
    ),
    #    trainer.log_metrics("train", ...) table:
    ("  train_samples_per_second =     41.094", None, 41.094, "hf-trainer", True),
    ("[worker :0]   train_samples_per_second =          3.65", None, 3.65, "hf-trainer", True),
    # 7. timm benchmark.py (huggingface/pytorch-image-models).  No printed output was found,
    #    so these are its format strings rendered with example values:
    #    f"Train [{num_steps}/{self.num_bench_iter}]. {num_samples / total_step:0.2f} samples/sec. {1000 * total_step / num_steps:0.3f} ms/step."
    ("Train [8/40]. 1234.56 samples/sec. 207.357 ms/step.", None, 1234.56, "timm", False),
    #    --detail: f" ... samples/sec. {...:0.3f} ms/step fwd, ... ms/step bwd, ... ms/step opt."
    ("Train [16/40]. 1230.11 samples/sec. 70.100 ms/step fwd, 120.020 ms/step bwd, 18.000 ms/step opt.", None, 1230.11, "timm", False),
    #    f"Train benchmark of {self.model_name} done. {results['samples_per_sec']:.2f} samples/sec, {results['step_time']:.2f} ms/sample"
    ("Train benchmark of resnet50 done. 1234.56 samples/sec, 207.36 ms/sample", None, 1234.56, "timm", True),
    #    print(f'--result\n{json.dumps(results, indent=4)}'), one key per line:
    ('    "train_samples_per_sec": 1234.56,', None, 1234.56, "timm", True),
    ("'train_samples_per_sec': 1234.56", None, 1234.56, "timm", True),
    # 8. DLLogger.  DeepLearningExamples PyTorch ConvNets, as published in Oneflow-Inc/DLPerf
    #    NVIDIADeepLearningExamples/PyTorch/resnet50v1.5/README.md:
    ("DLL 2020-09-15 14:29:13.473765 - Epoch: 0 Iteration: 1  train.loss : 7.09304  train.total_ips : 267.44 img/s", None, 267.44, "dllogger", False),
    #    DeepLearningExamples TensorFlow BERT (a DLPerf-style README in the code index):
    (
        "DLL 2020-12-07 20:04:34.092791 - Iteration: 16  throughput_train : 145.221 seq/s mlm_loss : 10.4521  nsp_loss : 0.6735  total_loss : 11.1256  avg_loss_step : 11.1381  learning_rate : 5.25e-06",
        None,
        145.221,
        "dllogger",
        False,
    ),
    #    The run summary, rendered (no printed one was found): ConvNets' format_step()
    #    prints "Summary:" for step=tuple() (NVIDIA/DeepLearningExamples PyTorch/
    #    Classification/ConvNets/image_classification/logger.py, whose meters are
    #    train.compute_ips and train.total_ips in "img/s"); total_ips wins.
    (
        "DLL 2021-03-11 12:05:41.123456 - Summary: train.loss : 6.10010  train.compute_ips : 2610.44 img/s  train.total_ips : 2470.12 img/s  train.lr : 0.25600",
        None,
        2470.12,
        "dllogger",
        True,
    ),
    #    NVIDIA/dllogger's default StdOutBackend: "DLL {timestamp} - " + str(step) + " " +
    #    "{metric} : {value} {unit}", so "()" for the summary (rendered).
    ("DLL 2021-03-11 12:05:41.123456 - () train.total_ips : 2470.12 img/s", None, 2470.12, "dllogger", True),
    #    With a rank prefix (multi-process launchers):
    ("0: DLL 2020-12-08 10:21:53.954734 - Iteration: 41  throughput_train : 142.395 seq/s mlm_loss : 10.3715", None, 142.395, "dllogger", False),
    # 9. MLPerf logging (mlperf_logging's ":::MLLOG " prefix), from MLPerf Training submission
    #    READMEs and logs in the code index:
    (
        ' 0: :::MLLOG {"namespace": "", "time_ms": 1719843792116, "event_type": "POINT_IN_TIME", "key": "tracked_stats", "value": {"throughput": 14214.65962521748}, "metadata": {"file": "/workspace/bert/run_pretraining.py", "lineno": 1850, "epoch_num": 799502}}',
        None,
        14214.65962521748,
        "mlperf",
        False,
    ),
    (
        '0: :::MLLOG {"namespace": "", "time_ms": 1721026805975, "event_type": "POINT_IN_TIME", "key": "tracked_stats", "value": {"throughput": 1.9257918929116467}, "metadata": {"file": "/workspace/ft-llm/custom_callbacks.py", "lineno": 129, "samples_count": 2688}}',
        None,
        1.9257918929116467,
        "mlperf",
        False,
    ),
    #    "key": "throughput" with a bare number (MXNet ResNet50 MLPerf logs, the form
    #    PerfKitBenchmarker's regex '"key": "throughput", "value": ([0-9.]+)' reads):
    (
        ':::MLLOG {"namespace": "", "time_ms": 1600000000000, "event_type": "POINT_IN_TIME", "key": "throughput", "value": 2783.6, "metadata": {"file": "train.py", "lineno": 200}}',
        None,
        2783.6,
        "mlperf",
        False,
    ),
    (
        ':::MLLOG {"namespace": "", "time_ms": 1600000000000, "event_type": "POINT_IN_TIME", "key": "throughput", "value": {"throughput": 1234.5}, "metadata": {}}',
        None,
        1234.5,
        "mlperf",
        False,
    ),
]


@pytest.mark.parametrize(("line", "hint", "rate", "source", "final"), POSITIVE, ids=[f"{case[3]}-{i}" for i, case in enumerate(POSITIVE)])
def test_real_lines(line, hint, rate, source, final):
    reading = one(line, hint)
    assert reading.source == source
    assert reading.samples_per_sec == pytest.approx(rate)
    assert reading.final is final


# --- Negative cases: nothing to report -----------------------------------------------------

# An iteration or a step is not a sample: without a batch size, these count steps.
STEPS_ONLY = [
    (" 45%|████▌     | 45/100 [00:05<00:06,  8.91it/s]", 8.91, "tqdm"),
    ("100%|██████████████████████| 4836/4836 [2:20:18<00:00,  1.74s/it]", 1 / 1.74, "tqdm"),
    ("96/96 [==============================] - 5s 50ms/step - loss: 0.5054 - accuracy: 0.7842", 20.0, "keras"),
    ("1500/1500 ━━━━━━━━━━━━━━━━━━━━ 8s 3ms/step - accuracy: 0.7370 - loss: 0.7853", 1 / 0.003, "keras"),
]


@pytest.mark.parametrize(("line", "rate", "source"), STEPS_ONLY)
def test_step_rates_without_a_batch_size_count_steps(line, rate, source):
    (reading,) = feed(line)
    assert (reading.unit, reading.source) == ("steps", source)
    assert reading.samples_per_sec == pytest.approx(rate)


# Tokens are tokens, whatever the batch size.
TOKENS_ONLY = [
    ("throughput: 51200.5 tokens/s", 51200.5),
    ("tokens/s: 51200.5", 51200.5),
]


@pytest.mark.parametrize(("line", "rate"), TOKENS_ONLY)
def test_token_rates_stay_tokens(line, rate):
    (reading,) = feed(line, 32)
    assert (reading.unit, reading.samples_per_sec) == ("tokens", rate)


NEGATIVE = [
    # tqdm before the first rate is known (code index: a U-Net training log):
    ("Epoch 1/2:   0%|                                                                              | 0/210 [00:00<?, ?img/s]", 8),
    ("  0%|          | 0/100 [00:00<?, ?it/s]", 8),
    # A loss, an accuracy, a percentage, a learning rate are not throughput.
    ("{'loss': 0.0275, 'grad_norm': 0.2421131432056427, 'learning_rate': 3.515301902398677e-07, 'epoch': 1.99}", 32),
    ("Epoch 10 loss 12.3880 | train 2.1s | Acc 9.32% | infer 4.4s", 32),
    ("accuracy: 95.5%", 32),
    ("Epoch 1/10", 32),
    (" 45%|████▌     | 45/100 [00:05<00:06]", 32),
    ("lr: 0.1 momentum: 0.9 weight_decay: 0.0001", 32),
    # Frames and items are not samples.
    (
        "DLL 2021-06-14 23:08:53.659718 - epoch    1 | iter   1/48 | loss 40.97 | mel loss 35.04 | kl loss 0.02240 | kl weight 0.01000 |    5730.98 frames/s | took 24.54 s | lrate 3.16e-06",
        32,
    ),
    ("DLL 2020-05-28 03:32:56.502714 - (6001, 129) train_items_per_sec : 17340.741383876426", 32),
    # A unit glued to a name is not a number of samples.
    ("resnet50 img/s", 32),
    # Keras' per-epoch time, alone, is not a step time.
    ("313/313 - 0s - loss: 0.0778 - accuracy: 0.9777 - 358ms/epoch", 32),
    # Keras 3 before the first step is timed prints 0s/step.
    ("   1/1500 ━━━━━━━━━━━━━━━━━━━━ 0s/step - loss: 2.3", 32),
    # keras.utils.get_file's download bar counts bytes (code index, CIFAR-10 download);
    # the tf.keras 2 form is rendered here with 1us so the guard, not the 0, rejects it.
    ("71639040/170498071 ━━━━━━━━━━━━━━━━━━━━ 6s 0us/step", 32),
    ("170500096/170498071 [==============================] - 6s 1us/step", 32),
    # DLLogger: parameters, validation and non-throughput metrics.
    ("DLL 2020-09-15 14:28:53.498443 - PARAMETER data : /data/image  data_backend : dali-cpu  arch : resnet50  batch_size : 128  lr : 1.024", 32),
    ("DLL 2021-03-11 12:05:41.123456 - Epoch: 0 Iteration: 10 Validation Iteration: 5  val.loss : 1.0  val.top1 : 75.0 %  val.total_ips : 8000.0 img/s", 32),
    (
        "DLL 2020-07-03 10:58:43.371321 - (26,) train_time : 9.889576196670532  eval_time : 0.674187183380127  hr@10 : 0.9526329850606168  ndcg : 0.7448715819572108",
        32,
    ),
    # timm's inference benchmark is not training throughput (and is not left to the
    # generic parser either).
    ("Infer [8/40]. 3210.00 samples/sec. 79.750 ms/step.", 32),
    ("Inference benchmark of resnet50 done. 3210.00 samples/sec, 79.75 ms/step", 32),
    ('    "infer_samples_per_sec": 3210.0,', 32),
    # Hugging Face evaluation metrics.
    ("{'eval_loss': 0.26411548256874084, 'eval_runtime': 147.7693, 'eval_samples_per_second': 2.551, 'eval_steps_per_second': 2.551, 'epoch': 3.0}", 32),
    ("  eval_samples_per_second =     12.6", 32),
    # MLPerf events that are not throughput (code index).
    (
        ':::MLLOG {"namespace": "", "time_ms": 1744839123410, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", "value": 0.719775378704071, "metadata": {"file": "/workspace/code/training/run_pretraining.py", "lineno": 1706}}',
        32,
    ),
    (
        ':::MLLOG {"namespace": "", "time_ms": 1696565401886, "event_type": "POINT_IN_TIME", "key": "tracked_stats", "value": {"train_epoch_timing": 234.93810319900513}, "metadata": {"file": "/workspace/llm/custom_callbacks.py", "lineno": 277, "step": 1211105280}}',
        32,
    ),
    (
        ':::MLLOG {"namespace": "", "time_ms": 1744838717800, "event_type": "INTERVAL_START", "key": "run_start", "value": null, "metadata": {"file": "/workspace/code/training/run_pretraining.py", "lineno": 1706}}',
        32,
    ),
    (':::MLLOG {"key": "tracked_stats", "value": 1234.5}', 32),
    (":::MLLOG {not json", 32),
    # The DGL example's first step (code index): a "nan" rate.
    ("Epoch 00000 | Step 00000 | Loss 6.1411 | Train Acc 0.0160 | Speed (samples/sec) nan | GPU 296.2 MB", 32),
    # gputui protocol lines that are not rates, even with a unit in the text.
    ('@gputui {"event": "start", "v": 1, "model": "resnet50", "batch_size": 32}', 32),
    ('@gputui {"event": "oom", "batch_size": 512, "message": "CUDA out of memory at 1234 img/s"}', 32),
    # Nothing at all.
    ("", 32),
    ("\n", 32),
    ("libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0", 32),
]


@pytest.mark.parametrize(("line", "hint"), NEGATIVE, ids=[f"negative-{i}" for i in range(len(NEGATIVE))])
def test_nothing_to_report(line, hint):
    assert feed(line, hint) == []


# --- The gputui protocol, field by field ----------------------------------------------------


def test_protocol_step_keeps_window_and_phase():
    line = protocol.encode("step", phase="measure", step=11, samples=32, seconds=0.018)
    reading = one(line)
    assert reading == Throughput(samples_per_sec=32 / 0.018, source="gputui", phase="measure", samples=32.0, seconds=0.018)


def test_protocol_emitter_lines_round_trip(capsys):
    emitter = protocol.Emitter()
    emitter.start(model="resnet50", batch_size=32)
    emitter.step("warmup", 1, 32, 0.41)
    emitter.step("measure", 11, 32, 0.02)
    emitter.result(samples_per_sec=1600.0)
    parser = ThroughputParser()
    readings = [r for line in capsys.readouterr().out.splitlines() for r in parser.feed(line)]
    assert [(r.phase, r.final) for r in readings] == [("warmup", False), ("measure", False), (None, True)]
    assert readings[1].samples_per_sec == pytest.approx(1600.0)


@pytest.mark.parametrize(
    "payload",
    [
        {"event": "step", "phase": "measure", "samples": 32, "seconds": 0},
        {"event": "step", "phase": "measure", "samples": 32, "seconds": -0.1},
        {"event": "step", "phase": "measure", "samples": -32, "seconds": 0.1},
        {"event": "step", "phase": "measure", "samples": 0, "seconds": 0.1},
        {"event": "step", "phase": "measure", "samples": "32", "seconds": 0.1},
        {"event": "step", "phase": "measure", "samples": True, "seconds": 0.1},
        {"event": "step", "phase": "measure", "samples": [32], "seconds": 0.1},
        {"event": "step", "phase": "measure", "samples": 1e308, "seconds": 1e-308},  # overflows
        {"event": "step", "phase": "measure", "samples": 10**400, "seconds": 1.0},
        {"event": "step", "phase": "measure", "seconds": 0.1},
        {"event": "result", "samples_per_sec": "NaN"},
        {"event": "result", "samples_per_sec": None},
        {"event": "result", "samples_per_sec": -5},
        {"event": "result", "samples_per_sec": {"value": 5}},
        {"event": "result"},
        {"event": "unknown", "samples_per_sec": 5},
    ],
)
def test_protocol_bad_values_are_dropped(payload):
    assert feed(protocol.MARKER + json.dumps(payload)) == []


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_protocol_non_finite_json_literals_are_dropped(literal):
    assert feed(f'@gputui {{"event": "result", "samples_per_sec": {literal}}}') == []
    assert feed(f'@gputui {{"event": "step", "samples": 32, "seconds": {literal}}}') == []


def test_protocol_unknown_phase_is_not_passed_on():
    reading = one('@gputui {"event": "step", "phase": "cooldown", "samples": 8, "seconds": 1}')
    assert reading.phase is None and reading.samples_per_sec == 8.0


# --- Hints ----------------------------------------------------------------------------------


@pytest.mark.parametrize("hint", [0, -32, float("nan"), float("inf"), "32", True])
def test_unusable_hint_is_no_hint(hint):
    (reading,) = ThroughputParser(batch_size_hint=hint).feed(" 45%|████▌     | 45/100 [00:05<00:06,  8.91it/s]")
    assert (reading.unit, reading.samples_per_sec) == ("steps", 8.91)


def test_hint_can_be_set_later():
    parser = ThroughputParser()
    parser.batch_size_hint = 64
    line = "96/96 [==============================] - 5s 50ms/step - loss: 0.5054"
    reading = parser.feed(line)[0]
    assert reading.unit == "samples" and reading.samples_per_sec == pytest.approx(64 / 0.05)


def test_a_hint_set_after_the_run_settled_on_steps_keeps_steps():
    """No run shows two units: a bar that already read in steps stays in steps."""
    parser = ThroughputParser()
    line = "96/96 [==============================] - 5s 50ms/step - loss: 0.5054"
    assert parser.feed(line)[0].unit == "steps"
    parser.batch_size_hint = 64
    (reading,) = parser.feed(line)
    assert reading.unit == "steps" and reading.samples_per_sec == pytest.approx(1 / 0.05)


def test_tqdm_inverse_rate_with_unit_scale():
    # format_sizeof(inv_rate) + "s/" + unit: kiloseconds per iteration.
    assert one(" 10%|█         | 1/10 [20:00<3:00:00, 1.20ks/it]", 10).samples_per_sec == pytest.approx(10 / 1200)


# --- Whole real logs ---------------------------------------------------------------------------


def test_dllogger_run_log():
    parser = ThroughputParser(batch_size_hint=128)
    readings = [r for line in fixture_lines("dlperf_rn50_dllogger.log") for r in parser.feed(line)]
    check(readings)
    assert [r.samples_per_sec for r in readings][:3] == [267.44, 4294.91, 6928.79]
    assert len(readings) == 12 and {r.source for r in readings} == {"dllogger"}


def test_keras3_fit_log():
    parser = ThroughputParser(batch_size_hint=32)
    readings = [r for line in fixture_lines("keras3_fit.log") for r in parser.feed(line)]
    check(readings)
    assert [r.samples_per_sec for r in readings] == pytest.approx([32 / 0.003] * 3)


def test_formats_table_has_one_entry_per_parser():
    assert len({parse for _, parse in FORMATS}) == len(FORMATS)
    for triggers, parse in FORMATS:
        assert triggers and all(isinstance(t, str) and t for t in triggers) and callable(parse)


# --- Bars that are not training ---------------------------------------------------------------

# Each drawn by tqdm's own code with the tool's arguments (tests/data/progress/
# make_reading_fixtures.py, datasets_then_trainer.log and lightning_slow_start.log; the
# sources of each description are named there), or cut from those files.
NOT_TRAINING = [
    # huggingface/datasets builder.py: hf_tqdm(unit=" examples", total=split_info.num_examples,
    # desc=f"Generating {split} split"), a dataset never prepared: no total, no bar.
    "Generating train split: 3668 examples [00:00, 26041.70 examples/s]",
    "Generating validation split: 100%|██████████████████████████████████████████| 408/408 [00:00<00:00, 26041.70 examples/s]",
    # arrow_dataset.py Dataset.map: desc (desc or "Map") + " (num_proc=N)"; filter: "Filter".
    "Map: 100%|███████████████████████████████████████████████████████████████| 3668/3668 [00:00<00:00, 13100.01 examples/s]",
    "Map (num_proc=4):  50%|█████████████████████████                         | 1834/3668 [00:00<00:00, 13100.01 examples/s]",
    "Filter: 100%|████████████████████████████████████████████████████████████| 3668/3668 [00:00<00:00, 13100.01 examples/s]",
    # transformers examples' map descriptions (run_glue.py, run_clm.py).
    "Running tokenizer on dataset: 100%|██████████████████████████████████████| 3668/3668 [00:00<00:00, 13100.01 examples/s]",
    "Grouping texts in chunks of 1024: 100%|██████████████████████████████████| 3668/3668 [00:00<00:00, 13100.01 examples/s]",
    # download_manager.py: "Downloading data files" (map_nested, it/s), "Extracting data files".
    "Downloading data files: 100%|████████████████████████████████████████████████████████████| 3/3 [00:01<00:00,  2.00it/s]",
    "Extracting data files: 100%|███████████████████████████████████████████████████████████| 3/3 [00:00<00:00, 1000.07it/s]",
    # huggingface_hub _snapshot_download.py, transformers modeling_utils.py.
    "Fetching 4 files: 100%|██████████████████████████████████████████████████████████████████| 4/4 [00:01<00:00,  2.50it/s]",
    "Loading checkpoint shards: 100%|█████████████████████████████████████████████████████████| 2/2 [00:01<00:00,  1.52it/s]",
    # Lightning's test and predict bars (tqdm_progress.py: f"{desc} DataLoader {i}").
    "Testing DataLoader 0: 100%|███████████████████████████████████████████████████████████| 40/40 [00:00<00:00, 100.00it/s]",
    "Predicting DataLoader 0: 100%|████████████████████████████████████████████████████████| 40/40 [00:00<00:00, 100.00it/s]",
    # torchrun --tee puts the rank before a line (as in tests/data/progress/torchtitan.log).
    "[rank0]: Map: 100%|██████████| 3668/3668 [00:00<00:00, 13100.01 examples/s]",
]


@pytest.mark.parametrize("line", NOT_TRAINING)
def test_bars_that_are_not_training_give_nothing(line):
    assert feed(line) == [] and feed(line, 32) == []


# --- The script's own figure ----------------------------------------------------------------


def test_timm_train_is_read_by_its_running_average():
    """timm's train.py (huggingface/pytorch-image-models@aa4b585):
    f'Time: {update_time_m.val:.3f}s, {update_sample_count / update_time_m.val:>7.2f}/s  '
    f'({update_time_m.avg:.3f}s, {update_sample_count / update_time_m.avg:>7.2f}/s)'."""
    line = "Train: 0 [ 100/1251 (  8%)]  Loss: 6.70 (6.80)  Time: 0.306s, 3346.41/s  (0.319s, 3207.74/s)  LR: 8.086e-05  Data: 0.010 (0.025)"
    (reading,) = feed(line)
    assert (reading.source, reading.samples_per_sec) == ("timm", 3207.74)
    # 1024 samples an update (0.306 s x 3346.41/s); the average time is the samples over
    # the average rate (0.31923 s), less rounded than the printed 0.319 s.
    assert reading.samples == 1024 * 101 and reading.seconds == pytest.approx(1024 / 3207.74 * 101)


# nanoGPT forks that print their own token rate after the iteration time, each a format
# string in the code index (the stored file's id named):
NANOGPT_OWN_RATE = [
    # 32179877100: f"iter {iter_num}: loss {loss:.4f}, time {dt*1000:.2f}ms, tok/s {running_tok_per_s:,.0f}"
    ("iter 10: loss 4.2000, time 50.10ms, tok/s 245,760", 245_760.0),
    # 66513460447: f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, tok/sec {tokens_per_sec:.2f}"
    ("iter 10: loss 4.2000, time 50.10ms, tok/sec 245760.00", 245_760.0),
    # 48987856019: f"... time {dt*1000:.2f}ms, tokens per second {tokens_per_second:.2f}"
    ("iter 10: loss 4.2000, time 50.10ms, tokens per second 245760.00", 245_760.0),
    # 21474117565: f"... time {dt*1000:.2f}ms, tokens/sec {tokens_per_sec:.0f}, lr {lr:.2e}"
    ("iter 10: loss 4.2000, time 50.10ms, tokens/sec 245760, lr 6.00e-04", 245_760.0),
]


@pytest.mark.parametrize(("line", "rate"), NANOGPT_OWN_RATE)
def test_a_step_time_beside_a_token_rate_gives_the_rate(line, rate):
    (reading,) = feed(line)
    assert (reading.unit, reading.samples_per_sec, reading.source) == ("tokens", rate, "nanogpt")
    parser = ThroughputParser()
    parser.feed("tokens per iteration will be: 393,216")  # the header does not override the script's own rate
    (reading,) = parser.feed(line)
    assert (reading.unit, reading.samples_per_sec) == ("tokens", rate)


def test_a_nanogpt_iteration_is_its_tokens_over_its_time():
    """With the header's tokens per iteration, each iteration is a window of that many
    tokens over its printed time, so that the summary's figure is tokens over seconds."""
    parser = ThroughputParser()
    assert parser.feed("tokens per iteration will be: 512") == []
    (reading,) = parser.feed("iter 7: loss 3.6512, time 48.20ms, mfu 0.01%")
    assert (reading.unit, reading.samples, reading.seconds) == ("tokens", 512.0, pytest.approx(0.0482))
    assert reading.samples_per_sec == pytest.approx(512 / 0.0482)


def test_the_nanogpt_iteration_that_holds_an_evaluation_is_left_out():
    """nanoGPT evaluates (and prints "step N: train loss ..., val loss ...") at the top of
    iteration N, whose time then holds the evaluation and the checkpoint: not training."""
    parser = ThroughputParser()
    parser.feed("tokens per iteration will be: 512")
    assert parser.feed("step 50: train loss 3.3104, val loss 3.3182") == []
    assert parser.feed("iter 50: loss 3.3008, time 912.40ms, mfu 0.01%") == []
    (reading,) = parser.feed("iter 51: loss 3.2987, time 47.90ms, mfu 0.01%")
    assert reading.seconds == pytest.approx(0.0479)
    fork = ThroughputParser()  # a fork's own rate of that iteration holds the evaluation too
    fork.feed("step 50: train loss 3.3104, val loss 3.3182")
    assert fork.feed("iter 50: loss 4.2000, time 950.10ms, tok/s 245,760") == []


def test_a_tqdm_reading_carries_the_window_of_its_counter_and_clock():
    """The rate shown is tqdm's smoothed one; the window is its count and elapsed clock
    since the last window.  This bar's rate is smoothed (45 over 9.50 is not in 00:05), so
    only its closing line's is its count over its clock, and no line says it is the
    last: its windows end on the clock's whole seconds, and what the closing line's finer
    time adds comes once the run has ended."""
    parser = ThroughputParser()
    assert parser.feed("  0%|          | 0/100 [00:00<?, ?it/s]") == []
    (first,) = parser.feed(" 45%|████▌     | 45/100 [00:05<00:06,  9.50it/s]")  # 45 / 9.50 is not in 00:05
    assert (first.samples_per_sec, first.samples, first.seconds) == (9.5, 45.0, 5.0)
    (again,) = parser.feed(" 50%|█████     | 50/100 [00:05<00:05, 11.00it/s]")
    assert again.seconds is None  # the same second of its clock: no window
    (closing,) = parser.feed("100%|██████████| 100/100 [00:12<00:00,  8.20it/s]")  # 100 / 8.20 = 12.2 s: in 00:12
    assert closing.samples == 55.0 and closing.seconds == 7.0
    (rest,) = parser.finish()
    assert rest.samples == 0.0 and rest.seconds == pytest.approx(100 / 8.20 - 12.0)


def test_an_unsmoothed_bars_windows_are_read_to_the_hundredth_at_once():
    """Lightning's bar (smoothing=0) shows its count over its clock on every line: each
    window ends on that finer time, and nothing is left for the run's end."""
    parser = ThroughputParser()
    parser.feed("Epoch 0:   0%|          | 0/100 [00:00<?, ?it/s]")
    (first,) = parser.feed("Epoch 0:  45%|████▌     | 45/100 [00:05<00:06,  8.49it/s]")  # 45 / 8.49 = 5.30 s
    (closing,) = parser.feed("Epoch 0: 100%|██████████| 100/100 [00:12<00:00,  8.20it/s]")  # 12.20 s
    assert first.seconds == pytest.approx(45 / 8.49) and closing.seconds == pytest.approx(100 / 8.20 - 45 / 8.49)
    assert parser.finish() == []


def windows(readings: list[Throughput]) -> tuple[float, float]:
    """The count and seconds the readings' windows add up to."""
    counted = [r for r in readings if r.seconds is not None and not r.final]
    return sum(r.samples or 0.0 for r in counted), sum(r.seconds or 0.0 for r in counted)


def test_an_evaluation_bar_inside_the_training_bars_clock_is_not_training_time():
    """The Trainer's evaluation bar (another total, no description) runs while its
    training bar's clock runs on: the time from its first line to its last, on gputui's
    clock, is left out of the training bar's windows.  A redraw of the training bar
    without progress (tqdm.write redraws every bar) does not end it."""
    parser = ThroughputParser()
    out = parser.feed("  0%|          | 0/100 [00:00<?, ?it/s]", now=0.0)
    out += parser.feed(" 50%|█████     | 50/100 [00:05<00:05, 10.00it/s]", now=5.0)
    assert parser.feed("  0%|          | 0/20 [00:00<?, ?it/s]", now=5.2) == []  # the evaluation bar
    assert parser.feed(" 50%|█████     | 10/20 [00:01<00:01, 10.00it/s]", now=6.2) == []
    out += parser.feed(" 50%|█████     | 50/100 [00:07<00:05, 10.00it/s]", now=7.1)  # redrawn, no progress
    assert parser.feed("100%|██████████| 20/20 [00:02<00:00, 10.00it/s]", now=7.2) == []
    out += parser.feed(" 60%|██████    | 60/100 [00:08<00:04, 7.50it/s]", now=8.2)
    out += parser.feed("100%|██████████| 100/100 [00:12<00:00,  8.20it/s]", now=12.2)  # 100 / 8.20: 12.195 s
    out += parser.finish()  # the closing line's finer time, held until the run ends
    assert windows(out) == (100.0, pytest.approx(100 / 8.20 - 2.0))


def test_a_described_bar_that_is_not_training_is_not_training_time():
    """Lightning's validation bar, drawn between redraws of the epoch bar (Rich redraws
    every bar; here halfway through the epoch, val_check_interval=0.5), is time aside
    too, from its first line to its last."""
    parser = ThroughputParser()
    out = parser.feed("Epoch 0:   0%|          | 0/120 [00:00<?, ?it/s]", now=0.0)
    out += parser.feed("Epoch 0:  50%|█████     | 60/120 [00:10<00:10, 6.00it/s]", now=10.0)
    for i, t in enumerate((10.5, 11.0, 11.5, 12.0)):
        assert parser.feed(f"Validation DataLoader 0:  {25 * i:>2}%|██        | {i}/4 [00:0{i}<00:01, 2.00it/s]", now=t) == []
        out += parser.feed(f"Epoch 0:  50%|█████     | 60/120 [00:{int(t + 0.1)}<00:10, 6.00it/s]", now=t + 0.1)
    out += parser.feed("Epoch 0: 100%|██████████| 120/120 [00:22<00:00, 5.45it/s]", now=22.02)  # 120 / 5.45: 22.02 s
    out += parser.finish()  # the closing line's finer time, held until the run ends
    assert windows(out) == (120.0, pytest.approx(120 / 5.45 - 1.5))


def test_a_bar_closed_after_its_last_step_adds_no_time():
    """The Trainer's bar stays open after its last step while it writes its last
    checkpoint (the model's shards, then the optimizer's state: seconds for a large
    model), and its closing line's clock holds that time: no step was taken in it."""
    parser = ThroughputParser()
    out = parser.feed("  0%|          | 0/100 [00:00<?, ?it/s]", now=0.0)
    out += parser.feed(" 50%|█████     | 50/100 [00:05<00:05, 10.00it/s]", now=5.0)
    out += parser.feed("100%|██████████| 100/100 [00:10<00:00, 10.00it/s]", now=10.0)
    assert parser.feed("Writing model shards: 100%|██████████| 1/1 [00:01<00:00,  1.37s/it]", now=11.4) == []
    out += parser.feed("100%|██████████| 100/100 [00:14<00:00,  7.14it/s]", now=14.0)  # closed: 100 / 7.14 = 14.0 s
    assert windows(out) == (100.0, pytest.approx(10.0, abs=0.01))  # give or take the printed rate's rounding


def test_a_bar_closed_at_once_still_gives_its_exact_time():
    """The line that fills a bar shows whole seconds ("00:10" for 10.8 s); its closing
    line, drawn at once, gives the exact time (its rate is the count over it)."""
    parser = ThroughputParser()
    out = parser.feed("  0%|          | 0/100 [00:00<?, ?it/s]", now=0.0)
    out += parser.feed(" 50%|█████     | 50/100 [00:05<00:05, 10.00it/s]", now=5.0)
    out += parser.feed("100%|██████████| 100/100 [00:10<00:00, 10.00it/s]", now=10.8)
    out += parser.feed("100%|██████████| 100/100 [00:10<00:00,  9.26it/s]", now=10.8)  # closed: 100 / 9.26 = 10.8 s
    assert windows(out) == (100.0, pytest.approx(100 / 9.26))


def test_the_trainers_own_evaluation_time_replaces_gputuis_clock():
    """The Trainer logs each evaluation's eval_runtime (its loop, first batch and metrics
    included, which its bar does not show): that time is left out, not the bar's."""
    parser = ThroughputParser()
    out = parser.feed("  0%|          | 0/100 [00:00<?, ?it/s]", now=0.0)
    out += parser.feed(" 50%|█████     | 50/100 [00:05<00:05, 10.00it/s]", now=5.0)
    parser.feed("  0%|          | 0/20 [00:00<?, ?it/s]", now=5.4)
    parser.feed("100%|██████████| 20/20 [00:01<00:00, 15.00it/s]", now=6.7)
    assert parser.feed("{'eval_loss': 1.6094, 'eval_accuracy': 0.208, 'eval_runtime': 1.75, 'eval_samples_per_second': 91.4, 'epoch': 1.0}", now=6.8) == []
    out += parser.feed(" 50%|█████     | 50/100 [00:06<00:05, 10.00it/s]", now=6.8)
    parser.feed("100%|██████████| 20/20 [00:01<00:00, 15.00it/s]", now=6.8)
    out += parser.feed("100%|██████████| 100/100 [00:12<00:00,  8.20it/s]", now=12.2)
    out += parser.finish()  # the closing line's finer time, held until the run ends
    assert windows(out) == (100.0, pytest.approx(100 / 8.20 - 1.75))


# --- One run, one unit ----------------------------------------------------------------------

BAR = " 45%|████▌     | 45/100 [00:05<00:06,  8.91it/s]"


def probe_window(steps=10, samples=320, seconds=1.0):
    return {"event": "probe", "v": 1, "steps": steps, "seconds": seconds, "batches": steps if samples else 0, "samples": samples}


ARMED = {"event": "probe_status", "state": "armed", "pid": 4242, "torch": "2.5.1", "hooks": ["optimizer_step", "dataloader"]}


def test_steps_wait_for_the_probe_and_are_never_shown_beside_samples():
    """A tqdm bar's steps come first, the armed probe's samples a second later: the run
    shows samples from its first reading on, never "steps/s" first."""
    parser = ThroughputParser()
    parser.probe_status(ARMED)
    assert parser.feed(BAR, now=10.0) == [] and parser.unit is None  # held back while the unit settles
    (reading,) = parser.feed_probe(probe_window(), now=11.0)
    assert reading.unit == "samples" and parser.unit == "samples"
    for t in (12.0, 13.5, 20.0):
        shown = [r for r in parser.feed(BAR, now=t) + parser.feed_probe(probe_window(), now=t) if not r.final]
        assert {r.unit for r in shown} <= {"samples"}


def test_steps_settle_at_once_without_the_probe():
    (reading,) = ThroughputParser().feed(BAR, now=0.0)
    assert reading.unit == "steps"


def test_steps_settle_when_the_armed_probe_says_nothing():
    parser = ThroughputParser()
    parser.probe_status(ARMED)
    assert parser.feed(BAR, now=0.0) == []
    assert parser.feed(BAR, now=0.0 + UNIT_SETTLE_S / 2) == []
    (reading,) = parser.feed(BAR, now=UNIT_SETTLE_S)
    assert reading.unit == "steps" and parser.unit == "steps"


def test_held_back_windows_are_counted_in_the_first_shown_reading():
    """The summary counts a bar's whole count over its whole clock: the windows of the
    readings held back while the unit settled go with the first one shown."""
    parser = ThroughputParser()
    parser.probe_status(ARMED)
    parser.feed("  0%|          | 0/100 [00:00<?, ?it/s]", now=0.0)
    assert parser.feed(" 10%|█         | 10/100 [00:01<00:09, 10.00it/s]", now=1.0) == []
    assert parser.feed(" 20%|██        | 20/100 [00:02<00:08, 10.00it/s]", now=2.0) == []
    (reading,) = parser.feed(" 40%|████      | 40/100 [00:04<00:06, 10.00it/s]", now=4.0)
    assert (reading.unit, reading.samples, reading.seconds) == ("steps", 40.0, 4.0)


def test_an_epoch_end_probe_window_without_batches_stays_in_samples():
    """At timm's epoch end the probe may see optimizer steps and no batch (the next
    epoch's loader not started): its window is converted with the batch size it has seen,
    not shown in steps."""
    parser = ThroughputParser()
    for t in range(1, 4):
        parser.feed_probe(probe_window(steps=10, samples=320), now=float(t))
    readings = parser.feed_probe(probe_window(steps=8, samples=None), now=4.0)
    assert [(r.unit, r.samples_per_sec) for r in readings] == [("samples", 8 * 32.0)]


def test_a_samples_run_never_shows_a_steps_reading():
    parser = ThroughputParser()
    parser.feed("Train: 0 [  50/1251 (  4%)]  Loss: 6.82 (6.86)  Time: 0.302s, 3390.73/s  (0.332s, 3082.52/s)  LR: 4.093e-05  Data: 0.011 (0.040)", now=1.0)
    assert [r for r in parser.feed(BAR, now=2.0) if not r.final] == []
    assert [r.unit for r in parser.feed_probe(probe_window(samples=None), now=3.0)] == []  # no batch size known: held out


TIMM_LINE = "Train: 0 [  {i}/40 ( 50%)]  Loss: 1.39 (1.39)  Time: 0.064s,  125.00/s  (0.064s,  125.00/s)  LR: 1.000e-05  Data: 0.001 (0.001)"


def test_the_probe_taking_over_from_a_count_from_the_start_keeps_its_first_window():
    """A tqdm bar counts every step from the first; the probe, taking over at its second
    window, carries its first (held back meanwhile) with it, so that the figure still
    counts the run from its start, as the script does."""
    parser = ThroughputParser(batch_size_hint=32)
    for i in range(1, 4):
        parser.feed(f" {10 * i}%|█         | {10 * i}/100 [00:0{i}<00:09, 10.00it/s]", now=10.0 + i)
    assert [r for r in parser.feed_probe(probe_window(steps=15, samples=480, seconds=1.04), now=14.0) if not r.final] == []
    (reading,) = [r for r in parser.feed_probe(probe_window(steps=16, samples=512, seconds=1.05), now=15.0) if not r.final]
    assert (reading.source, reading.samples, reading.seconds) == ("probe", 992.0, pytest.approx(2.09))
    assert reading.samples_per_sec == pytest.approx(512 / 1.05)  # the rate shown is the window's own


def test_the_probe_taking_over_from_timm_leaves_its_first_window_out():
    """timm's meters restart each epoch, so no count of its own holds the run's start:
    the probe's first window (the start) is not carried into its first shown reading."""
    parser = ThroughputParser()
    for i in range(3):
        parser.feed(TIMM_LINE.format(i=i), now=10.0 + 0.1 * i)
    assert [r for r in parser.feed_probe(probe_window(steps=15, samples=112, seconds=1.04), now=11.0) if not r.final] == []
    (reading,) = [r for r in parser.feed_probe(probe_window(steps=16, samples=128, seconds=1.05), now=12.0) if not r.final]
    assert (reading.source, reading.samples, reading.seconds) == ("probe", 128.0, pytest.approx(1.05))


# The Trainer's closing dict, as the framework test's run printed it.
TRAINER_FINAL = (
    "{'train_runtime': 24.7702, 'train_samples_per_second': 121.113, 'train_steps_per_second': 15.139, 'train_loss': 1.6093723958333332, 'epoch': 3.0}"
)
TRAINER_TOKENS = "{'loss': 2.948, 'epoch': 0.5, 'num_input_tokens_seen': 319910, 'train_runtime': 4.893, 'train_tokens_per_second': 65381.181}"


def test_the_trainers_closing_dict_gives_one_figure_in_the_runs_unit():
    """Its samples and steps rates are one figure in two units: the run shows the one in
    its own unit, never both."""
    steps = ThroughputParser()
    steps.feed(BAR, now=1.0)
    assert [(r.unit, r.samples_per_sec, r.final) for r in steps.feed(TRAINER_FINAL, now=2.0)] == [("steps", 15.139, True)]
    samples = ThroughputParser()
    samples.feed_probe(probe_window(), now=1.0)
    assert [(r.unit, r.samples_per_sec, r.final) for r in samples.feed(TRAINER_FINAL, now=2.0)] == [("samples", 121.113, True)]
    alone = ThroughputParser()  # nothing before it: the samples figure, which settles the run's unit
    assert [(r.unit, r.samples_per_sec) for r in alone.feed(TRAINER_FINAL)] == [("samples", 121.113)] and alone.unit == "samples"


def test_another_sources_figures_in_another_unit_are_not_shown():
    """The Trainer's running tokens/s beside a bar in steps cannot be put in steps: it is
    left out, not reported in a second unit.  A samples figure is put in steps where the
    batch size is known."""
    parser = ThroughputParser()
    parser.feed(BAR, now=1.0)
    assert parser.feed(TRAINER_TOKENS, now=2.0) == []
    hinted = ThroughputParser()
    hinted.feed(BAR, now=1.0)
    hinted.batch_size_hint = 8  # told after the run settled on steps
    assert [(r.unit, r.samples_per_sec) for r in hinted.feed("  train_samples_per_second =     41.094", now=2.0)] == [("steps", pytest.approx(41.094 / 8))]


# --- The protocol, only when well-formed ------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "ask @gputui x",
        "@gputui this is not json, 123 img/s",
        '@gputui {"event": "step", "samples": 32}',
        '@gputui {"event": "chat", "text": "hello"}',
        '@gputui {"event": "result", "samples_per_sec": "fast"}',
        '@gputui {"event": "step", "samples": 32, "seconds": 0.1, "rank": -1, "world_size": 2}',
        "@gputui [1, 2, 3]",
    ],
)
def test_a_line_that_is_not_well_formed_is_not_the_protocol(line):
    assert protocol.read_line(line) is None


def test_every_line_the_workloads_write_is_well_formed(capsys):
    emitter = protocol.Emitter(rank=1, world_size=2)
    emitter.start(model="resnet50", batch_size=32)
    emitter.step("measure", 11, 32, 0.02)
    emitter.result(samples_per_sec=1600.0, p5=1500.0)
    emitter.oom(batch_size=512, message="CUDA out of memory")
    emitter.emit("trial", batch_size=64, fits=True, samples_per_sec=900.0, peak_memory_bytes=None, message=None)
    print(protocol.encode("pipeline", images_per_sec=812.5, images=4000, seconds=4.92, workers=2))
    lines = capsys.readouterr().out.splitlines()
    assert [protocol.read_line(line)["event"] for line in lines] == ["start", "step", "result", "oom", "trial", "pipeline"]


def test_a_line_naming_gputui_is_ordinary_output():
    """A chat log's "@gputui" is no protocol line: the run's own rates are read around it."""
    parser = ThroughputParser()
    assert parser.feed("ask @gputui x") == []
    (reading,) = parser.feed("@gputui this is not json, 123 img/s")
    assert (reading.source, reading.samples_per_sec) == ("generic", 123.0)
    assert parser.feed("Epoch[0] Batch [20]\tSpeed: 250.00 samples/sec\taccuracy=0.1")[0].samples_per_sec == 250.0


# --- Cost ---------------------------------------------------------------------------------------


def test_ordinary_lines_are_cheap():
    lines = [
        "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0",
        "{'loss': 0.0275, 'grad_norm': 0.2421131432056427, 'learning_rate': 3.515301902398677e-07, 'epoch': 1.99}",
        "Epoch 00001 | Step 00020 | Loss 1.6148 | Train Acc 0.6040 | GPU 401.5 MB",
        "WARNING:tensorflow:From train.py:12: The name tf.Session is deprecated.",
    ] * 2500
    parser = ThroughputParser(batch_size_hint=32)
    start = time.perf_counter()
    for line in lines:
        parser.feed(line)
    per_line = (time.perf_counter() - start) / len(lines)
    # A bound that tells a linear pass from a pathological one (a regex that backtracks)
    # with room for a loaded CI worker: fresh-clone CI once took 65 us a line under load.
    assert per_line < 500e-6, f"{per_line * 1e6:.1f} us per line"


HUGE_LINES = {
    "digits": "1" * 1_000_000,
    "digits-unit": "1" * 1_000_000 + " img/s",
    "unit-spaces": "img/s" + " " * 1_000_000 + "x",
    "unit-colon-spaces": "img/s:" + " " * 1_000_000 + "x",
    "dll-word": "DLL 2020-09-15 14:29:13.473765 - " + "a" * 1_000_000,
    "dll-metrics": "DLL 2020-09-15 14:29:13.473765 - " + "a.b : 1 " * 100_000,
    "tqdm-digits": "1" * 500_000 + "it/s " + "2" * 500_000 + "s/it",
    "keras-target": "9" * 1_000_000 + "/" + "9" * 1_000_000 + " 5s 50ms/step",
    "protocol-nesting": "@gputui " + "[" * 1_000_000,
    "mllog-nesting": ":::MLLOG " + '{"a":' * 200_000,
    "hf-repeated": "train_samples_per_second" * 50_000,
    "timm-repeated": ("Train [1/2]. " * 100_000) + "samples/sec.",
}


# Each line takes under 0.5 s alone on a 2-core VM, and took 2.1 s once under CI's
# parallel load there; a pass quadratic in a line of over a million characters would
# take some 10^12 steps, so the bound tells the two apart with room for a loaded machine.
LINEAR_BOUND_S = 10.0


@pytest.mark.parametrize("line", HUGE_LINES.values(), ids=HUGE_LINES.keys())
def test_huge_lines_are_linear(line):
    start = time.perf_counter()
    check(ThroughputParser(batch_size_hint=32).feed(line))
    assert time.perf_counter() - start < LINEAR_BOUND_S


def test_huge_numbers_are_dropped_not_raised():
    assert feed("9" * 5000 + " img/s") == []  # float() gives inf
    assert feed("Sample/sec: " + "9" * 400) == []
    assert feed("12" + "0" * 400 + ".5 samples/sec") == []


# --- Fuzzing -------------------------------------------------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HINTS = st.sampled_from([None, 1, 32, 0, -1, 10**30])

REAL_LINES = [line for line, *_ in POSITIVE] + [line for line, _ in NEGATIVE]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["NaN", "Infinity", "-1", "0", "1e999", "step", "result", "measure", "warmup"]),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(
            st.sampled_from(["event", "samples", "seconds", "samples_per_sec", "phase", "step", "key", "value", "throughput"]) | st.text(max_size=8),
            children,
            max_size=6,
        ),
    ),
    max_leaves=30,
)
protocol_payloads = st.fixed_dictionaries(
    {"event": st.sampled_from(["step", "result", "start", "oom"]) | st.text(max_size=5)},
    optional={
        "phase": json_scalars,
        "samples": json_scalars | json_values,
        "seconds": json_scalars | json_values,
        "samples_per_sec": json_scalars | json_values,
    },
)


def _dumps(value: object) -> str:
    return json.dumps(value, allow_nan=True)


@FUZZ
@given(st.text(), HINTS)
def test_fuzz_any_text(line, hint):
    check(ThroughputParser(batch_size_hint=hint).feed(line))


@FUZZ
@given(st.text(alphabet=st.characters(codec=None, categories=None), max_size=300), HINTS)
def test_fuzz_any_code_point_including_surrogates(line, hint):
    check(ThroughputParser(batch_size_hint=hint).feed(line))


@FUZZ
@given(st.text(max_size=50), st.integers(min_value=1, max_value=2000), HINTS)
def test_fuzz_long_repetitive_text(chunk, times, hint):
    check(ThroughputParser(batch_size_hint=hint).feed(chunk * times))


@FUZZ
@given(json_values | protocol_payloads, st.sampled_from(["@gputui ", "x @gputui ", ":::MLLOG ", "0: :::MLLOG "]))
def test_fuzz_json_after_markers(payload, marker):
    check(feed(marker + _dumps(payload), 32))


@FUZZ
@given(protocol_payloads)
def test_fuzz_protocol_rates_are_consistent(payload):
    readings = feed(protocol.MARKER + _dumps(payload))
    check(readings)
    for reading in readings:
        if payload["event"] == "step":
            assert reading.samples_per_sec == pytest.approx(reading.samples / reading.seconds)
        else:
            assert payload["event"] == "result" and reading.final


@FUZZ
@given(
    st.sampled_from(REAL_LINES),
    st.lists(
        st.tuples(
            st.sampled_from(["insert", "delete", "replace", "number", "duplicate"]),
            st.integers(min_value=0, max_value=10_000),
            st.text(max_size=6) | st.sampled_from(["nan", "inf", "-1", "0", "0.0", "9" * 400, "1e999", ",", ".", ":", " : ", "/s", "it/s", "ms/step"]),
        ),
        max_size=6,
    ),
    HINTS,
)
def test_fuzz_mutated_real_lines(line, mutations, hint):
    for kind, position, text in mutations:
        if len(line) > 100_000:  # "number" twice with 400 nines grows a line 160,000-fold (gigabytes):
            break  # huge lines have their own test above
        at = position % (len(line) + 1)
        if kind == "insert":
            line = line[:at] + text + line[at:]
        elif kind == "delete":
            line = line[:at] + line[at + len(text) + 1 :]
        elif kind == "replace":
            line = line[:at] + text + line[at + len(text) :]
        elif kind == "number":
            line = "".join(text if ch.isdigit() and i >= at else ch for i, ch in enumerate(line))
        else:
            line = line[:at] + line[at : at + 40] * 3 + line[at:]
    check(ThroughputParser(batch_size_hint=hint).feed(line))


# feed() swallows any exception as a last resort; the parsers themselves must not need it.
any_line = (
    st.text()
    | st.sampled_from(REAL_LINES)
    | st.builds(lambda m, p: m + _dumps(p), st.sampled_from(["@gputui ", ":::MLLOG "]), json_values | protocol_payloads)
    | st.builds(lambda a, b: a + b, st.sampled_from(REAL_LINES), st.text(max_size=30))
)


@FUZZ
@given(any_line, st.sampled_from([None, 1.0, 32.0, 1e30]))
def test_fuzz_parsers_do_not_raise_on_their_own(line, hint):
    for _, parse in FORMATS:
        readings = parse(line, ParseState(hint=hint))
        if readings is not None:
            check(readings)


# --- Evaluation in the output ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "seconds", "ongoing"),
    [
        ("{'eval_loss': 1.6094, 'eval_accuracy': 0.208, 'eval_runtime': 0.975, 'eval_samples_per_second': 1025.677, 'epoch': 1.0}", 0.975, False),
        ("{'eval_loss': '1.609', 'eval_runtime': '1.997', 'epoch': '3'}", 1.997, False),
        ("step 50: train loss 3.3104, val loss 3.3182", None, False),
        ("Test: [   0/127]  Time: 0.101 (0.101)  Loss:  1.3906 (1.3906)  Acc@1: 50.0000 (50.0000)  Acc@5: 100.0000 (100.0000)", None, True),
        ("Test: [ 127/127]  Time: 0.008 (0.012)  Loss:  1.3862 (1.3863)  Acc@1: 50.0000 (25.0000)  Acc@5: 100.0000 (100.0000)", None, False),
        ("Validation DataLoader 0:  40%|████      | 4/10 [00:01<00:01,  3.50it/s]", None, True),
        ("Validation ━━━━━━━━━━━━━╺━━━━━━━━━━━━━━━━━━━━━━━━━━ 2/6   0:00:00 • 0:00:01 6.44it/s", None, True),
    ],
)
def test_an_evaluation_is_seen_in_the_output(line, seconds, ongoing):
    from gputui.run.throughput import EvaluationSeen, evaluation_seen

    assert evaluation_seen(line) == EvaluationSeen(seconds, ongoing)


@pytest.mark.parametrize(
    "line",
    [
        " 45%|████▌     | 45/100 [00:05<00:06,  8.91it/s]",
        "Map: 100%|██████████| 1000/1000 [00:00<00:00, 3480.46 examples/s]",
        "iter 50: loss 3.3008, time 912.40ms, mfu 0.01%",
        "Train: 0 [   0/40 (  2%)]  Loss: 1.39 (1.39)  Time: 0.177s,   45.20/s  (0.177s,   45.20/s)  LR: 1.000e-05  Data: 0.021 (0.021)",
        "Validation accuracy went up",
        "{'loss': 2.948, 'grad_norm': 2.35, 'learning_rate': 4.1e-05, 'epoch': 0.5}",
    ],
)
def test_other_lines_show_no_evaluation(line):
    from gputui.run.throughput import evaluation_seen

    assert evaluation_seen(line) is None

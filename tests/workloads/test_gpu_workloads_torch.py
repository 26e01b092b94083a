"""The PyTorch workloads on a real NVIDIA GPU (skipped where NVML finds none).

* every model trains a few steps on CUDA and reports sane numbers;
* the throughput the workload reports agrees within 1% with an independent timing of
  the same measured steps by CUDA events (recorded through measure.py's ``mark``
  hook, right after the device sync at every window boundary);
* an impossible batch ends with a protocol ``oom`` line and exit code 3;
* the host pipeline with one worker and heavy augmentation is input-bound.
"""

from __future__ import annotations

import io
import os
import statistics
import subprocess
import sys
import threading

import psutil
import pytest

from gputui import protocol
from gputui.catalog import FRAMEWORKS
from tests.support.process import REPO

pytestmark = pytest.mark.gpu

TORCH_MODELS = FRAMEWORKS["torch"]["models"]
# A few steps each: (batch size, extra flags)
SMALL = {
    "resnet50": (64, ["--channels-last"]),
    "mobilenetv2": (64, ["--channels-last"]),
    "efficientnet_b0": (64, ["--channels-last"]),
    "efficientnet_b3": (32, ["--channels-last"]),
    "efficientnet_b7": (4, ["--channels-last"]),
    "distilbert": (32, []),
    "bert_large": (16, []),
}


def env(tmp_path) -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    e["GPUTUI_CACHE_DIR"] = str(tmp_path / "cache")
    return e


def worker(args: list[str], tmp_path, timeout: float = 600) -> tuple[int, list[dict], str]:
    proc = subprocess.run([sys.executable, "-m", "gputui.workloads", "--framework", "torch", *args], cwd=REPO,
                          env=env(tmp_path), capture_output=True, text=True, timeout=timeout)  # fmt: skip
    payloads = [p for p in (protocol.decode(line) for line in proc.stdout.splitlines()) if p is not None]
    return proc.returncode, payloads, proc.stderr


@pytest.mark.parametrize("model", TORCH_MODELS)
def test_every_model_trains_on_cuda(model, tmp_path):
    batch, extra = SMALL[model]
    code, payloads, stderr = worker(["--model", model, "--precision", "bf16", "--batch-size", str(batch),
                                     "--steps", "5", "--warmup-steps", "3", *extra], tmp_path)  # fmt: skip
    assert code == 0, stderr[-3000:]
    start, result = payloads[0], payloads[-1]
    assert start["event"] == "start" and start["device"] == "cuda" and start["device_name"]
    assert start["optimizer"].endswith("(fused)")
    if model in ("distilbert", "bert_large"):
        assert start["attention"] == "sdpa"
    assert result["event"] == "result" and result["device"] == "cuda"
    for key in ("samples_per_sec", "p5", "p95", "mean", "flops_per_sample", "achieved_tflops"):
        assert result[key] > 0, key
    import torch

    total = torch.cuda.get_device_properties(0).total_memory
    assert 0 < result["peak_memory_bytes"] < total
    assert result["achieved_tflops"] < 1000  # below any GPU's peak: the FLOPs are sane


def _args(argv: list[str]):
    from gputui.workloads.__main__ import parse_args

    return parse_args(["--framework", "torch", *argv])


@pytest.mark.parametrize(
    "argv",
    [
        ["--model", "resnet50", "--precision", "bf16", "--channels-last", "--batch-size", "128", "--steps", "60"],
        ["--model", "bert_large", "--precision", "bf16", "--batch-size", "32", "--steps", "40"],
        ["--model", "mobilenetv2", "--precision", "fp32", "--batch-size", "32", "--steps", "200"],  # short steps
    ],
    ids=["resnet50-bf16", "bert_large-bf16", "mobilenetv2-fp32-short-steps"],
)
def test_reported_throughput_agrees_with_cuda_event_timing(argv, tmp_path, monkeypatch):
    import torch

    from gputui.protocol import Emitter
    from gputui.workloads import torch_workload

    monkeypatch.setenv("GPUTUI_CACHE_DIR", str(tmp_path / "cache"))
    events: list = []

    def mark() -> None:  # right after the sync that ends a measured window
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        events.append(event)

    stream = io.StringIO()
    result = torch_workload.run(_args([*argv, "--warmup-steps", "10"]), Emitter(stream), mark=mark)
    torch.cuda.synchronize()
    windows = [p for p in map(protocol.decode, stream.getvalue().splitlines())
               if p and p["event"] == "step" and p["phase"] == protocol.MEASURE]  # fmt: skip
    assert len(events) == len(windows) + 1
    event_seconds = [a.elapsed_time(b) / 1000.0 for a, b in zip(events, events[1:])]
    event_rates = [w["samples"] / s for w, s in zip(windows, event_seconds)]
    event_mean = sum(w["samples"] for w in windows) / sum(event_seconds)
    assert result["mean"] == pytest.approx(event_mean, rel=0.01)
    assert result["samples_per_sec"] == pytest.approx(statistics.median(event_rates), rel=0.01)


def test_an_impossible_batch_is_an_oom_line_and_exit_code_3(tmp_path):
    code, payloads, stderr = worker(["--model", "bert_large", "--precision", "bf16", "--batch-size", "200000",
                                     "--steps", "2", "--warmup-steps", "1"], tmp_path)  # fmt: skip
    assert code == 3, stderr[-3000:]
    oom = payloads[-1]
    assert oom["event"] == "oom" and oom["batch_size"] == 200000
    assert "out of memory" in oom["message"].lower() and "\n" not in oom["message"]
    assert oom["peak_memory_bytes"] > 0
    assert "Traceback" not in stderr


def test_host_pipeline_with_one_worker_and_heavy_augmentation_is_input_bound(tmp_path):
    common = ["--model", "resnet50", "--precision", "bf16", "--channels-last", "--batch-size", "128",
              "--steps", "20", "--warmup-steps", "3"]  # fmt: skip
    code, synthetic, stderr = worker(common, tmp_path)
    assert code == 0, stderr[-3000:]

    argv = [sys.executable, "-m", "gputui.workloads", "--framework", "torch", *common,
            "--pipeline", "host", "--workers", "1", "--augment", "heavy"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=REPO, env=env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)
    reader.start()
    payloads, children = [], None
    for line in proc.stdout:
        p = protocol.decode(line)
        if p is None:
            continue
        payloads.append(p)
        if p["event"] == "step" and p["phase"] == protocol.MEASURE and children is None:
            children = [c.name() for c in psutil.Process(proc.pid).children(recursive=True)]
    assert proc.wait() == 0, "".join(err)[-3000:]
    assert children is not None and children.count("pt_data_worker") == 1, children
    host_rate, gpu_rate = payloads[-1]["samples_per_sec"], synthetic[-1]["samples_per_sec"]
    assert host_rate < 0.25 * gpu_rate, (host_rate, gpu_rate)

"""The PyTorch workloads on the CPU: every model through the real worker process.

Models are tiny-input versions (64 px images, 16-token sequences) so that the whole
file runs in a few minutes on two cores.  CNN tests need an importable torchvision,
transformer tests an importable transformers; where one is missing or broken, those
tests are skipped with the import error as the reason.
"""

from __future__ import annotations

import io
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from gputui import protocol
from gputui.catalog import FRAMEWORKS, MODELS
from gputui.run.runner import Runner
from tests.support.process import REPO
from tests.support.workloads import needs

torch = pytest.importorskip("torch")

CNNS = [m for m in FRAMEWORKS["torch"]["models"] if MODELS[m].kind == "cnn"]
TRANSFORMERS = [m for m in FRAMEWORKS["torch"]["models"] if MODELS[m].kind == "transformer"]


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gputui-cache")


def worker_env(cache_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["GPUTUI_CACHE_DIR"] = str(cache_dir)
    env["CUDA_VISIBLE_DEVICES"] = ""  # these tests are about the CPU path
    # The opposite of what the worker needs: it sets USE_TF=0 itself.  A USE_TF=1 left in
    # a shell turned PyTorch off in transformers 4.x (placeholders of its models only).
    env["USE_TF"] = "1"
    # One intra-op thread: on a small shared machine, OpenMP threads spinning against
    # other processes make tiny steps many times slower.
    env["OMP_NUM_THREADS"] = "1"
    return env


class Run:
    """One worker run through gputui's Runner, with its protocol lines."""

    def __init__(self, args: list[str], cache_dir: Path, on_payload=None, timeout: float = 240) -> None:
        self.payloads: list[dict] = []
        self.other: list[str] = []
        self._lock = threading.Lock()
        self._on_payload = on_payload
        self.runner = Runner([sys.executable, "-m", "gputui.workloads", *args], env=worker_env(cache_dir),
                             cwd=str(REPO), timeout=timeout, on_line=self._line)  # fmt: skip

    def _line(self, line) -> None:
        payload = protocol.decode(line.text)
        with self._lock:
            if payload is None:
                self.other.append(f"{line.stream}: {line.text}")
            else:
                self.payloads.append(payload)
        if payload is not None and self._on_payload is not None:
            self._on_payload(self, payload)

    def __call__(self):
        self.runner.start()
        try:
            self.outcome = self.runner.wait()
        finally:
            self.runner.close()
        return self

    def events(self, kind: str) -> list[dict]:
        return [p for p in self.payloads if p["event"] == kind]

    def explain(self) -> str:
        return f"outcome={self.outcome}\n" + "\n".join(self.other[-40:])


def tiny(model: str, *extra: str, batch: int = 2, steps: int = 2, warmup: int = 1) -> list[str]:
    size = ["--image-size", "64"] if MODELS[model].kind == "cnn" else ["--seq-len", "16"]
    return ["--framework", "torch", "--model", model, "--batch-size", str(batch), "--steps", str(steps),
            "--warmup-steps", str(warmup), *size, *extra]  # fmt: skip


def positive_finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def check_complete_run(run: Run, model: str, *, batch: int, steps: int, precision: str = "fp32", warmup: int = 1) -> dict:
    assert run.outcome.ok, run.explain()
    (start,) = run.events("start")
    assert start["framework"] == "torch" and start["model"] == model and start["precision"] == precision
    assert start["device"] == "cpu" and start["batch_size"] == batch
    measured = [p for p in run.events("step") if p["phase"] == protocol.MEASURE]
    warm = [p for p in run.events("step") if p["phase"] == protocol.WARMUP]
    assert sum(p["steps"] for p in measured) == steps and sum(p["steps"] for p in warm) == warmup
    assert all(p["samples"] == p["steps"] * batch and p["seconds"] > 0 for p in measured)
    (result,) = run.events("result")
    assert run.payloads[-1] is result
    for key in ("samples_per_sec", "p5", "p95", "mean", "flops_per_sample", "achieved_tflops", "peak_memory_bytes"):
        assert positive_finite(result[key]), (key, result.get(key))
    assert result["steps"] == steps and result["batch_size"] == batch
    assert (result["framework"], result["model"], result["precision"]) == ("torch", model, precision)
    assert result["p5"] <= result["samples_per_sec"] <= result["p95"]
    total = sum(p["samples"] for p in measured) / sum(p["seconds"] for p in measured)
    assert result["mean"] == pytest.approx(total, rel=1e-6)
    assert result["achieved_tflops"] == pytest.approx(result["flops_per_sample"] * result["mean"] / 1e12, rel=1e-6)
    assert result["flops_per_sample"] == start["flops_per_sample"]
    return result


# --- every model ---------------------------------------------------------------------


# The two largest train through the same code as their siblings, at seconds a step on a
# CPU: here they are built alone, by the FLOP counter's test below.
LARGEST = ("bert_large", "efficientnet_b7")


@pytest.mark.parametrize("model", [m for m in CNNS + TRANSFORMERS if m not in LARGEST])
def test_every_model_trains_through_the_worker(model, cache_dir):
    needs(model)
    run = Run(tiny(model, batch=2, steps=2, warmup=1), cache_dir)()
    check_complete_run(run, model, batch=2, steps=2, warmup=1)


@pytest.mark.parametrize(
    ("model", "precision", "extra"),
    [
        ("resnet50", "bf16", ["--channels-last"]),
        ("mobilenetv2", "fp16", []),
        ("distilbert", "bf16", []),
        ("distilbert", "fp16", []),  # GradScaler on the CPU
    ],
)
def test_precisions(model, precision, extra, cache_dir):
    needs(model)
    run = Run(tiny(model, "--precision", precision, *extra, batch=2, steps=2), cache_dir)()
    check_complete_run(run, model, batch=2, steps=2, precision=precision)
    (start,) = run.events("start")
    assert start["tf32"] is (precision != "fp32")
    if "--channels-last" in extra:
        assert start["channels_last"] is True


def test_tf_metal_method_through_the_worker(cache_dir):
    needs("distilbert")
    args = tiny("distilbert", "--method", "tf-metal", "--epochs", "2", "--precision", "tf32", batch=2, steps=2)
    run = Run(args, cache_dir)()
    assert run.outcome.ok, run.explain()
    steps = run.events("step")
    assert [(p["phase"], p.get("epoch")) for p in steps] == [("warmup", 0), ("measure", 1), ("measure", 2)]
    assert all(p["steps"] == 2 and p["samples"] == 4 for p in steps)
    (result,) = run.events("result")
    elapsed = sum(p["seconds"] for p in steps[1:])
    assert result["samples_per_sec"] == pytest.approx(2 * 2 * 2 / elapsed, rel=1e-6)
    assert result["method"] == "tf-metal" and result["epochs"] == 2 and result["precision"] == "tf32"
    assert run.events("start")[0]["tf32"] is True


# --- the host pipeline -----------------------------------------------------------------


def _watch_workers(seen: list):
    """on_payload: at the first measured step line, record the worker's children."""

    def on_payload(run: Run, payload: dict) -> None:
        if payload["event"] == "step" and payload["phase"] == protocol.MEASURE and not seen:
            proc = psutil.Process(run.runner.pid)
            children = proc.children(recursive=True)
            seen.append([(c.pid, c.ppid(), c.name()) for c in children])

    return on_payload


@pytest.mark.parametrize(("model", "extra"), [("mobilenetv2", ["--augment", "heavy"]), ("distilbert", [])])
def test_host_pipeline_runs_in_exactly_the_requested_worker_processes(model, extra, cache_dir):
    needs(model)
    seen: list = []
    args = tiny(model, "--pipeline", "host", "--workers", "2", *extra, batch=2, steps=6)
    run = Run(args, cache_dir, on_payload=_watch_workers(seen))()
    check_complete_run(run, model, batch=2, steps=6)
    assert seen, "no measured step line was seen"
    children = seen[0]
    assert len(children) == 2, children
    worker_pid = run.events("start")[0]["pid"]
    assert worker_pid == run.runner.pid
    assert all(ppid == worker_pid for _, ppid, _ in children)
    assert all(name == "pt_data_worker" for _, _, name in children), children  # PyTorch names its workers
    (start,) = run.events("start")
    assert start["pipeline"] == "host" and start["workers"] == 2


def test_generated_image_and_text_sets_are_cached(tmp_path):
    from gputui.workloads import images

    files = images.ensure_image_dataset(tmp_path, per_class=4)
    assert len(files) == 12 and sorted({label for _, label in files}) == [0, 1, 2]
    from PIL import Image

    with Image.open(files[0][0]) as img:
        assert img.size == (300, 200) and img.format == "PNG"
    stamp = os.stat(files[0][0]).st_mtime_ns
    assert images.ensure_image_dataset(tmp_path, per_class=4) == files
    assert os.stat(files[0][0]).st_mtime_ns == stamp  # not regenerated
    import numpy as np

    for level in ("light", "heavy"):
        arr = images.augment(files[0][0], 48, level, np.random.default_rng(1))
        assert arr.shape == (3, 48, 48) and arr.dtype == np.float32 and np.isfinite(arr).all()
    pytest.importorskip("tokenizers")
    texts, labels, tok_path = images.ensure_text_dataset(tmp_path, n=60)
    assert len(texts) == 60 and set(labels) == {0, 1, 2}
    tok = images.load_tokenizer(tok_path, 24)
    ids, mask = images.encode(tok, texts[0])
    assert ids.shape == mask.shape == (24,)
    assert ids[0] == tok.token_to_id("[CLS]") and 0 < ids.max() < 30522
    assert images.ensure_text_dataset(tmp_path, n=60)[0] == texts


# --- FLOPs -----------------------------------------------------------------------------


def test_conv_backward_flops_count_groups():
    from torch.utils.flop_counter import FlopCounterMode

    from gputui.workloads.torch_workload import _conv_backward_flop

    for groups in (1, 32):
        conv = torch.nn.Conv2d(32, 32, 3, padding=1, groups=groups)
        x = torch.randn(2, 32, 16, 16, requires_grad=True)
        counter = FlopCounterMode(display=False, custom_mapping={torch.ops.aten.convolution_backward: _conv_backward_flop})
        with counter:
            conv(x)
        forward = counter.get_total_flops()
        assert forward == 2 * 2 * 16 * 16 * 32 * (32 // groups) * 9
        with counter:
            conv(x).sum().backward()
        assert counter.get_total_flops() == 3 * forward  # grad input + grad weight


@pytest.mark.parametrize("model", CNNS + TRANSFORMERS)
def test_catalog_flops_match_the_counter(model, monkeypatch):
    needs(model)
    from gputui.workloads import torch_workload

    # import_frameworks sets USE_TF=0 for transformers; undone after the test, or every
    # later subprocess of this pytest worker inherits it (a TF workload among them).
    monkeypatch.setenv("USE_TF", "0")
    spec = MODELS[model]
    mods = torch_workload.import_frameworks(spec.kind)
    counted = torch_workload.count_train_flops(mods, model, image_size=spec.image_size, seq_len=spec.seq_len)
    assert counted == pytest.approx(spec.train_flops, rel=1e-5)


# --- errors ----------------------------------------------------------------------------


def test_a_missing_package_is_one_clear_line_and_exit_code_2(tmp_path, cache_dir):
    for package in ("torchvision", "transformers"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(f"raise ModuleNotFoundError(\"No module named '{package}'\", name='{package}')\n")
    env = worker_env(cache_dir)
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    for model, package in (("resnet50", "torchvision"), ("distilbert", "transformers")):
        proc = subprocess.run([sys.executable, "-m", "gputui.workloads", *tiny(model)], env=env, cwd=REPO,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert f"'{package}' is not installed" in lines[0] and f"pip install '{package}>=" in lines[0] and "pip install -e '.[torch]'" in lines[0]
        assert proc.stdout == ""


def test_oom_exceptions_are_recognized():
    from gputui.workloads.torch_workload import as_oom, is_oom

    cuda = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has ...\nSee documentation")
    oom = as_oom(cuda, batch_size=4096, peak_memory_bytes=10)
    assert oom.fields == {"message": "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has ...",
                          "batch_size": 4096, "peak_memory_bytes": 10}  # fmt: skip
    assert is_oom(RuntimeError("CUDA error: out of memory\nCUDA kernel errors might be ..."))
    assert is_oom(RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"))
    try:
        try:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
        except torch.OutOfMemoryError as inner:
            raise RuntimeError("backend compiler failed") from inner
    except RuntimeError as wrapped:
        assert as_oom(wrapped, batch_size=1).message == "CUDA out of memory. Tried to allocate 1 GiB"
    assert not is_oom(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert as_oom(ValueError("nope"), batch_size=1) is None


def test_an_oom_during_training_ends_with_an_oom_line_and_exit_code_3(monkeypatch, cache_dir, capsys):
    """The real worker path, in-process: the third training step raises the framework's
    OutOfMemoryError; main() answers with a protocol oom line and exit code 3."""
    needs("distilbert")
    from gputui.workloads import __main__ as worker
    from gputui.workloads import torch_workload

    monkeypatch.setenv("GPUTUI_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("USE_TF", "0")  # what main() sets for transformers: undone after the test
    real_measure = torch_workload.measure
    calls = []

    def failing_measure(step, *args, **kwargs):
        def step_then_fail():
            calls.append(1)
            if len(calls) == 3:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.00 GiB\nmore detail")
            step()

        return real_measure(step_then_fail, *args, **kwargs)

    monkeypatch.setattr(torch_workload, "measure", failing_measure)
    code = worker.main(["--device", "cpu", *tiny("distilbert", batch=3, steps=4)])
    out, err = capsys.readouterr()
    assert code == 3
    payloads = [protocol.decode(line) for line in out.splitlines()]
    assert all(payloads) and payloads[0]["event"] == "start" and payloads[-1]["event"] == "oom"
    oom = payloads[-1]
    assert oom["message"] == "CUDA out of memory. Tried to allocate 3.00 GiB"
    assert oom["batch_size"] == 3 and oom["model"] == "distilbert" and positive_finite(oom["peak_memory_bytes"])
    assert "Traceback" not in err and "out of memory" in err


def test_argument_errors():
    from gputui.workloads.__main__ import parse_args

    args = parse_args(["--framework", "torch", "--model", "bert_large", "--augment", "heavy", "--compile",
                       "--compile-mode", "max-autotune", "--device", "cpu", "--epochs", "5"])  # fmt: skip
    assert (args.augment, args.compile, args.compile_mode, args.device, args.epochs) == ("heavy", True, "max-autotune", "cpu", 5)
    for bad in (["--xla"], ["--batch-size", "0"], ["--precision", "mixed_float16"], ["--compile-mode", "fast"]):
        with pytest.raises(SystemExit):
            parse_args(["--framework", "torch", *bad])


def test_the_smoke_workload_still_works():
    proc = subprocess.run([sys.executable, "-m", "gputui.workloads", "--framework", "smoke", "--batch-size", "2",
                           "--steps", "3", "--warmup-steps", "1"], cwd=REPO, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert [protocol.decode(ln)["event"] for ln in proc.stdout.splitlines()][-1] == "result"


# --- find-max-batch --------------------------------------------------------------------


def test_search_doubles_then_bisects():
    from gputui.workloads.batch_search import Trial, search

    tried = []

    def trial(b):
        tried.append(b)
        return Trial(b, b <= 37, samples_per_sec=float(b) if b <= 37 else None)

    best, trials = search(trial, 1)
    assert best == 37
    assert tried == [1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37]
    assert [t.batch_size for t in trials] == tried

    tried.clear()
    assert search(trial, 100)[0] == 37  # the first trial does not fit: halve, then bisect
    assert tried == [100, 50, 25, 37, 43, 40, 38]

    tried.clear()
    assert search(trial, 37)[0] == 37 and tried == [37, 74, 55, 46, 41, 39, 38]
    assert search(lambda b: Trial(b, False), 8)[0] is None
    assert search(lambda b: Trial(b, True), 3, limit=20) == (20, [Trial(3, True), Trial(6, True), Trial(12, True), Trial(20, True)])


def test_search_run_speaks_the_protocol():
    from gputui.protocol import Emitter
    from gputui.workloads.batch_search import Trial, run

    stream = io.StringIO()
    result = run(["--framework", "x"], start=16, steps=50, warmup_steps=50, emitter=Emitter(stream), info={"model": "m"},
                 trial=lambda b: Trial(b, b <= 40, samples_per_sec=1000.0 - (b - 32) ** 2 if b <= 40 else None,
                                       peak_memory_bytes=b * 100, message=None if b <= 40 else "CUDA out of memory"))  # fmt: skip
    lines = [protocol.decode(ln) for ln in stream.getvalue().splitlines()]
    assert lines[0]["event"] == "start" and lines[0]["mode"] == "find-max-batch"
    assert lines[0]["steps"] == 10 and lines[0]["warmup_steps"] == 5  # trials are short
    trial_lines = [ln for ln in lines if ln["event"] == "trial"]
    assert [t["batch_size"] for t in trial_lines] == [16, 32, 64, 48, 40, 44, 42, 41]
    assert lines[-1] == {"event": "result", **result}
    assert result["max_batch_size"] == result["batch_size"] == 40
    assert result["samples_per_sec"] == 1000.0 - 64 and result["peak_memory_bytes"] == 4000
    assert result["best_batch_size"] == 32 and result["best_samples_per_sec"] == 1000.0
    assert [c["batch_size"] for c in result["curve"]] == sorted(t["batch_size"] for t in trial_lines)
    assert [c["fits"] for c in result["curve"]] == [b <= 40 for b in sorted(t["batch_size"] for t in trial_lines)]


FAKE_CHILD = r"""
import sys
from gputui.protocol import Emitter
b = int(sys.argv[sys.argv.index("--batch-size") + 1])
print("some library chatter")
e = Emitter()
if b > 6:
    e.oom(batch_size=b, message="CUDA out of memory. Tried to allocate 1 GiB", peak_memory_bytes=b)
    sys.exit(3)
if b == 5:
    print("Segmentation fault", file=sys.stderr)
    sys.exit(139)
e.result(samples_per_sec=10.0 * b, peak_memory_bytes=b * 1000)
"""


def test_trials_run_as_child_processes(monkeypatch):
    from gputui.workloads.batch_search import TrialFailed, run_child

    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the children inherit the environment
    argv = [sys.executable, "-c", FAKE_CHILD]
    forwarded = []
    fits = run_child(argv, 4, forward=forwarded.append)
    assert (fits.fits, fits.samples_per_sec, fits.peak_memory_bytes) == (True, 40.0, 4000)
    too_big = run_child(argv, 8, forward=forwarded.append)
    assert (too_big.fits, too_big.message, too_big.peak_memory_bytes) == (False, "CUDA out of memory. Tried to allocate 1 GiB", 8)
    with pytest.raises(TrialFailed, match="batch size 5 failed .*Segmentation fault"):
        run_child(argv, 5, forward=forwarded.append)
    assert "some library chatter" in forwarded


def test_trial_argv_overrides_flags_argparse_style():
    from gputui.workloads.__main__ import parse_args
    from gputui.workloads.batch_search import trial_argv

    own = ["--framework", "torch", "--model", "resnet50", "--batch-size", "64", "--steps", "100", "--find-max-batch"]
    child = trial_argv(own, steps=10, warmup_steps=3) + ["--batch-size", "96"]
    assert child[:3] == [sys.executable, "-m", "gputui.workloads"]
    args = parse_args(child[3:])
    assert (args.batch_size, args.steps, args.warmup_steps, args.find_max_batch, args.model) == (96, 10, 3, False, "resnet50")

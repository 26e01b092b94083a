"""The TensorFlow workload (``--framework tf``) through the real worker subprocess.

Every model but the two largest runs for a few steps at tiny sizes on the CPU (those two
are built, and their size checked), through gputui's Runner as
a preset would run it, and the protocol lines are checked.  Between them the cases
cover fp32, mixed_float16 (loss scaling), mixed_bfloat16, XLA, both methods (steps,
tf-metal) and both pipelines (synthetic, host images with heavy augmentation, host
text), out of memory, and a missing or mismatched stack.

The model runs are started together by one fixture, two at a time (tracing a big
Keras graph is mostly single-threaded Python, so two runs share two cores well),
longest first; each test then checks its own run.  Only the selected tests' runs are
started (``-k`` works as usual).

Each model run also counts how often every ``tf.function`` it calls is traced
(TensorFlow's own ``experimental_get_tracing_count()``; see COUNT_TRACES): once each.
A train step traced twice (its first call created the optimizer's variables, say)
doubles the slowest part of a run.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from gputui.catalog import FRAMEWORKS, MODELS
from gputui.protocol import decode
from gputui.run.outcome import Outcome
from gputui.run.output_stream import OutputLine
from gputui.run.runner import Runner
from gputui.workloads.tf_models import NUM_LABELS
from tests.support.process import REPO

_MISSING = [name for name in ("tensorflow", "tf_keras") if importlib.util.find_spec(name) is None]
pytestmark = [
    pytest.mark.skipif(bool(_MISSING), reason=f"TensorFlow stack not installed ({', '.join(_MISSING)} missing): pip install -e '.[tf]'"),  # fmt: skip
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Runner's process groups are tested on Linux"),
]

RUN_TIMEOUT = 280.0  # seconds, one model run on a loaded 2-core machine
PARALLEL = 2


@dataclass
class Case:
    model: str
    args: list[str]
    cost: float  # rough seconds on 2 cores, to start the longest first
    kind: str = "ok"  # "ok" or "oom"


CASES: dict[str, Case] = {
    # Every model but the two largest (built alone below: their code paths are their
    # siblings', and tracing them is most of this file's time), each covering a variant.
    "resnet50-fp32-224": Case("resnet50", ["--image-size", "224", "--batch-size", "1"], 25),
    "mobilenetv2-tf_metal": Case("mobilenetv2", ["--image-size", "64", "--method", "tf-metal", "--epochs", "2"], 12),
    "efficientnet_b0-host-heavy": Case("efficientnet_b0", ["--image-size", "64", "--pipeline", "host", "--workers", "2", "--augment", "heavy"], 30),
    "efficientnet_b3-bf16": Case("efficientnet_b3", ["--image-size", "64", "--precision", "mixed_bfloat16"], 25),
    "distilbert-host-fp16": Case("distilbert", ["--seq-len", "16", "--pipeline", "host", "--workers", "2", "--precision", "mixed_float16"], 25),
    # More variants.
    "distilbert-tf_metal-bf16": Case("distilbert", ["--seq-len", "16", "--method", "tf-metal", "--epochs", "2", "--precision", "mixed_bfloat16"], 25),
    "mobilenetv2-xla": Case("mobilenetv2", ["--image-size", "32", "--xla"], 30),
    # 4096 images of 4096x4096x3 float32 = 768 GiB: TensorFlow's CPU allocator refuses
    # it (it is capped at the physical memory), before anything is touched.
    "mobilenetv2-oom": Case("mobilenetv2", ["--image-size", "4096", "--batch-size", "4096", "--warmup-steps", "0"], 15, kind="oom"),  # fmt: skip
}
DEFAULTS = {"--batch-size": "2", "--steps": "2", "--warmup-steps": "1"}


def worker_argv(model: str, args: list[str]) -> list[str]:
    argv = [sys.executable, "-m", "gputui.workloads", "--framework", "tf", "--model", model, "--device", "cpu"]
    for flag, value in DEFAULTS.items():
        if flag not in args:
            argv += [flag, value]
    return argv + args


# The worker as ``python -m gputui.workloads`` runs it, with every tf.function call
# followed by a look at that function's trace count; the counts go to stderr at exit.
TRACES = "test: tf.function traces: "
COUNT_TRACES = textwrap.dedent(f"""
    import atexit, json, runpy, sys
    from gputui.workloads import tf_workload

    counts = {{}}
    imported = tf_workload.import_frameworks

    def import_frameworks(kind):
        mods = imported(kind)
        cls = type(mods["tf"].function(lambda: None))
        call = cls.__call__

        def counted(self, *args, **kwargs):
            try:
                return call(self, *args, **kwargs)
            finally:
                counts[id(self)] = [self.__name__, self.experimental_get_tracing_count()]

        cls.__call__ = counted
        return mods

    tf_workload.import_frameworks = import_frameworks
    atexit.register(lambda: print({TRACES!r} + json.dumps(sorted(counts.values())), file=sys.stderr))
    runpy.run_module("gputui.workloads", run_name="__main__", alter_sys=True)
""")


def counting_traces(argv: list[str]) -> list[str]:
    assert argv[1:3] == ["-m", "gputui.workloads"]
    return [argv[0], "-c", COUNT_TRACES, *argv[3:]]


def flag(args: list[str], name: str, default: str | None = None) -> str | None:
    return args[args.index(name) + 1] if name in args else DEFAULTS.get(name, default)


@dataclass
class Run:
    outcome: Outcome | None = None
    lines: list[OutputLine] = field(default_factory=list)

    def events(self, event: str) -> list[dict]:
        out = []
        for line in self.lines:
            payload = decode(line.text) if line.stream == "stdout" else None
            if payload is not None and payload["event"] == event:
                out.append(payload)
        return out

    def one(self, event: str) -> dict:
        found = self.events(event)
        assert len(found) == 1, f"expected one {event!r} line, got {len(found)}\n{self.log()}"
        return found[0]

    def stderr(self) -> list[str]:
        return [line.text for line in self.lines if line.stream == "stderr" and line.text.strip()]

    def traces(self) -> list[list]:
        """[name, times traced] of every tf.function the run called (COUNT_TRACES)."""
        found = [json.loads(text[len(TRACES) :]) for text in self.stderr() if text.startswith(TRACES)]
        assert len(found) == 1, self.log()
        return found[0]

    def log(self) -> str:
        return "\n".join(f"[{line.stream}] {line.text}" for line in self.lines[-60:]) + f"\n-> {self.outcome}"


def run_worker(argv: list[str], env: dict[str, str], timeout: float = RUN_TIMEOUT) -> Run:
    run = Run()
    lock = threading.Lock()

    def on_line(line: OutputLine) -> None:
        with lock:
            run.lines.append(line)

    runner = Runner(argv, env=env, timeout=timeout, grace=2.0, on_line=on_line, cwd=str(REPO))
    runner.start()
    try:
        run.outcome = runner.wait(timeout + 30)
    finally:
        runner.close()
    return run


@pytest.fixture(scope="session")
def worker_env(tmp_path_factory) -> dict[str, str]:
    env = {
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "GPUTUI_CACHE_DIR": str(tmp_path_factory.mktemp("gputui-cache")),  # generated data sets, shared by the runs
        "CUDA_VISIBLE_DEVICES": "",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        # The opposite of what the worker needs: it sets USE_TF=1, USE_TORCH=0 itself.  A
        # USE_TF=0 inherited (a shell, or a torch workload in the same process tree) left
        # transformers with placeholders of its TF models: exit 1 (CI, once).
        "USE_TF": "0",
        "USE_TORCH": "1",
    }
    return env


class Runs:
    """Model runs, PARALLEL at a time; a case not started in advance starts when asked for."""

    def __init__(self, env: dict[str, str], names: list[str]) -> None:
        self.env = env
        self.pool = ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="tf-case")
        self.futures: dict[str, Future] = {}
        for name in names:
            self._submit(name)

    def _submit(self, name: str) -> Future:
        if name not in self.futures:
            case = CASES[name]
            argv = worker_argv(case.model, case.args)
            self.futures[name] = self.pool.submit(run_worker, counting_traces(argv) if case.kind == "ok" else argv, self.env)
        return self.futures[name]

    def __getitem__(self, name: str) -> Run:
        return self._submit(name).result()


@pytest.fixture(scope="module")
def runs(request, worker_env):
    """The selected cases' runs, started in advance, longest first (under pytest-xdist,
    where this process runs only some of them, each starts when its test asks)."""
    selected = []
    if not hasattr(request.config, "workerinput"):
        for item in request.session.items:
            callspec = getattr(item, "callspec", None)
            if callspec is not None and item.module is request.module and "case" in callspec.params:
                selected.append(callspec.params["case"])
    pool = Runs(worker_env, sorted(set(selected), key=lambda n: -CASES[n].cost))
    yield pool
    pool.pool.shutdown(wait=True, cancel_futures=True)


# --- every model, for a few steps --------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_worker_run(case: str, runs) -> None:
    spec = CASES[case]
    run: Run = runs[case]
    if spec.kind == "oom":
        check_oom(run, spec)
        return
    assert run.outcome is not None and run.outcome.ok, run.log()
    args = spec.args
    bs, steps = int(flag(args, "--batch-size")), int(flag(args, "--steps"))
    method = flag(args, "--method", "steps")
    precision = flag(args, "--precision", "fp32")
    pipeline = flag(args, "--pipeline", "synthetic")
    epochs = int(flag(args, "--epochs", "3"))

    start = run.one("start")
    assert start["v"] == 1
    assert (start["framework"], start["model"], start["precision"]) == ("tf", spec.model, precision)
    assert (start["batch_size"], start["steps"], start["method"], start["pipeline"]) == (bs, steps, method, pipeline)
    assert start["device"] == "cpu" and start["peak_memory_source"] == "ru_maxrss"
    assert start["tf_version"].split(".")[:2] == start["keras_version"].split(".")[:2]
    assert start["xla"] is ("--xla" in args)
    assert start["flops_per_sample"] > 0
    if precision == "mixed_float16":
        assert start["loss_scale"] == "dynamic" and "LossScaleOptimizer" in start["optimizer"]
    else:
        assert "loss_scale" not in start
    kind_optimizer = "Adam" if spec.model in ("distilbert", "bert_large") else "SGD"
    assert start["optimizer"].startswith(kind_optimizer)
    if pipeline == "host":
        assert start["workers"] == int(flag(args, "--workers")) and start["workers_are"] == "tf.data threads"

    step_lines = run.events("step")
    warm = [s for s in step_lines if s["phase"] == "warmup"]
    measured = [s for s in step_lines if s["phase"] == "measure"]
    assert warm and measured, run.log()
    for s in step_lines:
        assert s["samples"] == s["steps"] * bs and s["seconds"] > 0
    if method == "tf-metal":  # one line per epoch: the warm-up epoch 0, then the timed epochs
        assert [s["epoch"] for s in step_lines] == list(range(epochs + 1))
        assert all(s["steps"] == steps for s in step_lines)
    else:
        assert sum(s["steps"] for s in warm) == int(flag(args, "--warmup-steps"))
        assert sum(s["steps"] for s in measured) == steps
        assert measured[-1]["step"] == steps + int(flag(args, "--warmup-steps"))

    result = run.one("result")
    assert (result["framework"], result["model"]) == ("tf", spec.model)
    assert (result["precision"], result["method"]) == (precision, method)
    assert result["batch_size"] == bs and result["device"] == "cpu"
    for key in ("samples_per_sec", "mean", "p5", "p95", "achieved_tflops"):
        assert isinstance(result[key], float) and math.isfinite(result[key]) and result[key] > 0, key
    assert result["flops_per_sample"] == start["flops_per_sample"]
    assert result["peak_memory_bytes"] > 50 * 2**20  # TensorFlow alone is more than that
    assert result["samples"] == sum(s["samples"] for s in measured)
    if method == "tf-metal":
        assert result["steps"] == steps * epochs and result["epochs"] == epochs and result["windows"] == epochs
        assert "train_benchmark.py" in result["statistic"]
        # The headline spans fit() as a whole, the epochs inside it: never faster.
        assert result["samples_per_sec"] <= result["mean"] * (1 + 1e-9)
    else:
        assert result["steps"] == steps and result["statistic"] == "median of window rates"
        assert result["p5"] <= result["samples_per_sec"] <= result["p95"]
    assert any(line.startswith(f"{spec.model}: ") for line in run.stderr()), run.log()  # the human summary
    assert not any("Traceback" in line for line in run.stderr()), run.log()
    # Every tf.function traced once: the train step (ours, or model.fit's) included.
    traces = run.traces()
    assert ("train_function" if method == "tf-metal" else "train_step") in {name for name, _ in traces}, traces
    assert all(count == 1 for _, count in traces), f"a tf.function was traced more than once: {traces}"

    if case == "resnet50-fp32-224":
        # Keras' ResNet-50 (v1) is 3.86 GMACs forward at 224 px; training = 3 x 2 x that,
        # less the stem convolution's input gradient (118 MMACs): about 22.9 GFLOPs.
        assert 22.5e9 < start["flops_per_sample"] < 23.3e9
    if spec.model == "distilbert":
        # 6 layers x [2*16*(4*768^2 + 2*768*3072) + 2*2*16^2*768] + 2*(768^2 + 768*8), x 3
        assert start["flops_per_sample"] == 4094595072.0


# The two largest models, built from their configurations in a child as the worker builds
# them: their size and the FLOPs the worker reports, at the catalog's input size.
BUILD = textwrap.dedent("""
    import json, sys
    from gputui.workloads import tf_models, tf_workload

    name, kind, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    mods = tf_workload.import_frameworks(kind)
    if kind == "cnn":
        model = tf_models.build_cnn(mods["keras"], name, size)
        flops = tf_models.cnn_train_flops(mods["keras"], model)
    else:
        model = tf_models.build_transformer(mods["transformers"], name)
        model(mods["tf"].zeros((1, size), mods["tf"].int32), training=False)  # its weights are made on the first call
        flops = tf_models.transformer_train_flops(model.config, size)
    print(json.dumps({"params": model.count_params(), "flops": flops}))
""")


def bert_large_parameters(labels: int) -> int:
    """BERT-large's parameters from its shape (24 layers, hidden 1024, 16 heads, feed-forward
    4096, WordPiece vocabulary 30522, 512 positions, 2 token types), with a pooler and a
    classifier of ``labels`` outputs."""
    vocab, positions, types, hidden, layers, ff = 30522, 512, 2, 1024, 24, 4096
    embeddings = (vocab + positions + types) * hidden + 2 * hidden  # and their LayerNorm
    layer = 4 * (hidden * hidden + hidden) + 2 * hidden + (hidden * ff + ff) + (ff * hidden + hidden) + 2 * hidden
    return embeddings + layers * layer + (hidden * hidden + hidden) + (hidden * labels + labels)


# Keras' EfficientNetB7 with its 1000-class top has 66,658,687 parameters (keras.io's
# applications table: 66.7M); the worker's model drops that top for its own 8-class head.
EFFICIENTNET_B7_TOP, EFFICIENTNET_B7 = 2560 * 1000 + 1000, 66_658_687


BUILT_ALONE = ("bert_large", "efficientnet_b7")


def test_every_model_is_run_or_built() -> None:
    assert set(FRAMEWORKS["tf"]["models"]) == {case.model for case in CASES.values()} | set(BUILT_ALONE)


@pytest.mark.parametrize(
    ("model", "expected_params"),
    [("bert_large", bert_large_parameters(NUM_LABELS)), ("efficientnet_b7", EFFICIENTNET_B7 - EFFICIENTNET_B7_TOP + 2560 * NUM_LABELS + NUM_LABELS)],
)
def test_the_largest_models_build_with_their_published_size(model, expected_params, worker_env) -> None:
    spec = MODELS[model]
    size = spec.image_size if spec.kind == "cnn" else spec.seq_len
    done = subprocess.run([sys.executable, "-c", BUILD, model, spec.kind, str(size)], env={**os.environ, **worker_env},
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    built = json.loads(done.stdout.strip().splitlines()[-1])
    assert built["params"] == expected_params
    # the TF count against the catalog's, which PyTorch's FLOP counter made
    assert built["flops"] == pytest.approx(spec.train_flops, rel=1e-3)


def check_oom(run: Run, spec: Case) -> None:
    if psutil.virtual_memory().total > 700 * 2**30:
        pytest.skip("this machine has enough memory for the 'out of memory' case")
    assert run.outcome is not None, run.log()
    assert run.outcome.kind == "oom" and run.outcome.exit_code == 3, run.log()
    oom = run.one("oom")
    assert oom["batch_size"] == int(flag(spec.args, "--batch-size"))
    assert oom["framework"] == "tf" and oom["model"] == spec.model
    assert "OOM when allocating" in oom["message"] and "{{function_node" not in oom["message"]
    assert not run.events("result")
    assert not any("Traceback" in line for line in run.stderr()), run.log()
    assert any("out of memory" in line for line in run.stderr())


# --- a missing or mismatched stack: one line, exit code 2 ----------------------------------


def _stub(root: Path, package: str, body: str) -> None:
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text(textwrap.dedent(body))


@pytest.mark.parametrize(
    "package, body, model, expected",
    [
        ("tensorflow", "raise ModuleNotFoundError(\"No module named 'tensorflow'\", name='tensorflow')\n",
         "resnet50", ["the package 'tensorflow' is not installed", "pip install -e '.[tf]' in gputui's source folder"]),
        ("transformers", "__version__ = '5.0.0'\n",
         "distilbert", ["'transformers'", "transformers 5.0.0 has no TensorFlow models", "pip install 'transformers<5'",
          "pip install -e '.[tf]' in gputui's source folder"]),
        ("tf_keras", "__version__ = '2.15.0'\n",
         "mobilenetv2", ["'tf-keras'", "tf-keras 2.15.0 does not match tensorflow", "pip install 'tf-keras=="]),
    ],
    ids=["no-tensorflow", "transformers-5", "tf-keras-mismatch"],
)  # fmt: skip
def test_missing_stack_is_one_line_and_exit_code_2(tmp_path, worker_env, package, body, model, expected) -> None:
    # A package of that name first on PYTHONPATH shadows the installed one.
    stubs = tmp_path / "stubs"
    _stub(stubs, package, body)
    env = {**worker_env, "PYTHONPATH": str(stubs) + os.pathsep + worker_env["PYTHONPATH"]}
    run = run_worker(worker_argv(model, ["--steps", "1"]), env, timeout=120)
    assert run.outcome is not None and run.outcome.kind == "exited" and run.outcome.exit_code == 2, run.log()
    assert len(run.stderr()) == 1, run.log()
    line = run.stderr()[0]
    for text in expected:
        assert text in line, line
    assert not [line for line in run.lines if line.stream == "stdout" and line.text.strip()], run.log()


# --- cheap checks, no TensorFlow in this process ------------------------------------------


def test_module_imports_without_tensorflow() -> None:
    code = (
        "import json, sys, gputui.workloads.tf_workload\nprint(json.dumps(sorted(m for m in ('tensorflow', 'tf_keras', 'transformers') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_oom_message_is_the_informative_line() -> None:
    from gputui.workloads.tf_frameworks import _oom_message

    graph = Exception("Graph execution error:\n\nDetected at node foo defined at ...\n"
                      "OOM when allocating tensor with shape[64,112,112,64] and type float on /job:localhost/"
                      "replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n\t [[{{node bar}}]]")  # fmt: skip
    assert _oom_message(graph).startswith("OOM when allocating tensor with shape[64,112,112,64]")
    eager = Exception("{{function_node __wrapped__RandomUniform_device_/job:localhost/replica:0/task:0/device:CPU:0}} "
                      "OOM when allocating tensor with shape[8] and type float [Op:RandomUniform] name: ")  # fmt: skip
    assert _oom_message(eager) == "OOM when allocating tensor with shape[8] and type float [Op:RandomUniform]"
    xla = Exception("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 123 bytes.")
    assert _oom_message(xla) == "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 123 bytes."


def test_transformer_flops_match_the_pytorch_convention() -> None:
    """Same hand formula as the PyTorch workload's FlopCounterMode count (3 x forward)."""
    from types import SimpleNamespace

    from gputui.workloads.tf_models import transformer_train_flops

    bert = SimpleNamespace(num_hidden_layers=24, hidden_size=1024, intermediate_size=4096, num_labels=8)
    per_layer = 2 * 128 * (4 * 1024**2 + 2 * 1024 * 4096) + 4 * 128 * 128 * 1024
    assert transformer_train_flops(bert, 128) == 3 * (24 * per_layer + 2 * (1024**2 + 1024 * 8))

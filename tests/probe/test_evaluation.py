"""Evaluation is not training: the probe tells a loop's validation batches from its
training batches (a pass over a DataLoader with no backward or optimizer step between
its batches is evaluation), counts training alone in its windows, gives a long
evaluation windows of its own, and gputui shows it as a phase and leaves it out of the
run's figure, its GPU statistics and its findings (the phases themselves:
tests/session/test_phases.py).

Two kinds of test: the probe's bookkeeping driven in this process on a made-up clock
(every loop shape, exact figures, fast), and real CPU torch loops shaped as accelerate's
and timm's examples evaluate, probed, alone and under gputui."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from gputui.diagnosis.context import Context
from gputui.diagnosis_settings import Settings
from gputui.protocol import decode
from gputui.record import events as ev
from gputui.record.events import Event, ProbeReport
from gputui.run.throughput import ThroughputParser
from tests.probe.test_probe import load_probe_module, reports, run_probed
from tests.support.process import run_gputui

# --- the probe's bookkeeping, on a made-up clock --------------------------------------------


class Iterator:
    """What the probe reads of a DataLoader iterator: how many batches it yielded this pass
    (0 again when a persistent one is reset) and its worker count."""

    def __init__(self) -> None:
        self._num_yielded = 0
        self._num_workers = 0


class Loop:
    """A training loop as the probe sees it: fetches, backward passes, optimizer steps,
    and the time between them."""

    def __init__(self) -> None:
        self.probe = load_probe_module()
        self.probe._on = True
        self.sent: list[dict] = []
        self.probe._send = lambda line: self.sent.append(decode(line))
        self.t = 100.0

    def fetch(self, it: Iterator, size: int = 16, wait: float = 0.001) -> None:
        first = it._num_yielded == 0
        self.probe._count_batch(it, SimpleNamespace(shape=(size, 8)), self.t, wait, first, False)
        it._num_yielded += 1
        self.t += wait

    def stop(self, it: Iterator) -> None:
        """The pass ran out: the fetch that raised StopIteration."""
        self.probe._count_batch(it, None, self.t, 0.0, it._num_yielded == 0, True)

    def backward(self, seconds: float = 0.004) -> None:
        self.t += seconds
        self.probe._trained(self.t)

    def step(self, seconds: float = 0.005) -> None:
        self.t += seconds
        self.probe._stepped(self.t)

    def train(self, it: Iterator, steps: int, accumulate: int = 1) -> None:
        for _ in range(steps):
            for _ in range(accumulate):
                self.fetch(it)
                self.backward()
            self.step()

    def validate(self, batches: int, seconds: float = 0.03, size: int = 64) -> None:
        """timm's validate(): a fresh iterator over the eval loader, run to its end."""
        it = Iterator()
        for _ in range(batches):
            self.fetch(it, size=size)
            self.t += seconds
        self.stop(it)

    def mode(self, training: bool, model: int = 1, grad: bool = False) -> None:
        """``model.train()`` or ``model.eval()`` (the outermost call: the probe sees no
        other) of the model of that id, with gradients on or off (nanoGPT's
        estimate_loss() switches back under its ``@torch.no_grad()``)."""
        self.probe._mode_switched(model, training, self.t, grad)

    def step_alone(self, seconds: float = 0.03) -> None:
        """A step of a loop without a DataLoader (nanoGPT's get_batch): backward, step."""
        self.backward(seconds / 2)
        self.step(seconds / 2)

    def windows(self, phase: str | None = None) -> list[dict]:
        return [w for w in self.sent if w["event"] == "probe" and phase in (None, w.get("phase", "training"))]


def test_a_long_evaluation_gets_windows_of_its_own_and_the_training_counts_alone():
    loop = Loop()
    train = Iterator()
    loop.train(train, 100)  # 1 s of training: 10 ms a step
    loop.validate(50)  # 1.55 s of evaluation
    loop.train(train, 100)
    training, evaluation = loop.windows("training"), loop.windows("evaluation")
    assert all(w["batches"] == w["steps"] and w["samples"] == 16 * w["batches"] for w in training)
    assert [w["batches"] for w in training] == [100, 100]
    assert [w["seconds"] for w in training] == pytest.approx([1.0, 1.0], abs=0.002)  # the evaluation's time left out
    assert [w.get("ongoing") for w in evaluation] == [True, None]  # one a second, the last one said so
    assert all(w["steps"] == 0 and w["samples"] == 64 * w["batches"] for w in evaluation)
    assert sum(w["batches"] for w in evaluation) == 50
    assert sum(w["seconds"] for w in evaluation) == pytest.approx(50 * 0.031, abs=0.01)


def test_a_short_evaluation_is_left_out_of_the_training_window_that_holds_it():
    loop = Loop()
    train = Iterator()
    loop.train(train, 50)
    loop.validate(5, seconds=0.02)  # 0.1 s: no window of its own
    loop.train(train, 45)
    (window,) = loop.windows()  # reported at the first step 1 s after the window began
    assert window["phase"] == "training" and window["steps"] == window["batches"] == 90 and window["samples"] == 90 * 16
    assert window["eval_batches"] == 5 and window["eval_samples"] == 5 * 64
    assert window["eval_seconds"] == pytest.approx(5 * 0.021, abs=0.002)
    assert window["seconds"] == pytest.approx(0.9, abs=0.002)


def test_gradient_accumulation_and_a_loader_fetching_one_batch_ahead_are_training():
    """accelerate's and Lightning's loaders fetch one batch ahead: a training pass begins
    with two batches back to back, then a backward between every two, a step every four."""
    loop = Loop()
    train = Iterator()
    loop.fetch(train)
    for _ in range(120):
        for _ in range(4):
            loop.fetch(train)  # the next one, before this one is used
            loop.backward()
        loop.step()
    assert loop.windows("evaluation") == [] and all("eval_batches" not in w for w in loop.windows())
    assert sum(w["batches"] for w in loop.windows()) in (4 * 120 - 3, 4 * 120 + 1)


def test_two_loaders_zipped_are_both_training():
    loop = Loop()
    a, b = Iterator(), Iterator()
    for _ in range(150):
        loop.fetch(a, size=8)
        loop.fetch(b, size=16)
        loop.backward()
        loop.step()
    windows = loop.windows()
    assert windows and all(w["phase"] == "training" and w["batches"] == 2 * w["steps"] and w["samples"] == 24 * w["steps"] for w in windows)


def test_a_single_validation_batch_between_steps_is_left_out():
    """A look at one validation batch now and then (``next(iter(val_loader))``): a pass
    that never fetches again, without training after it."""
    loop = Loop()
    train = Iterator()
    for step in range(300):
        loop.train(train, 1)
        if step % 10 == 9:
            loop.fetch(Iterator(), size=64)
            loop.t += 0.02
    windows = loop.windows()
    assert windows and all(w["batches"] == w["steps"] and w["samples"] == 16 * w["steps"] for w in windows)
    assert sum(w.get("eval_batches", 0) for w in windows) >= 25 and all(w.get("eval_samples", 0) % 64 == 0 for w in windows)


def test_a_persistent_eval_iterator_is_evaluation_from_its_first_batch_again():
    loop = Loop()
    train, val = Iterator(), Iterator()
    for _ in range(2):
        loop.train(train, 110)
        for _ in range(40):
            loop.fetch(val, size=64)
            loop.t += 0.03
        loop.stop(val)
        val._num_yielded = 0  # persistent_workers: the same iterator, reset
    loop.train(train, 110)
    assert sum(w["batches"] for w in loop.windows("evaluation")) == 80
    assert all(w["batches"] == w["steps"] for w in loop.windows("training"))


def test_an_inference_loop_is_evaluation_throughout():
    loop = Loop()
    it = Iterator()
    for _ in range(120):
        loop.fetch(it, size=32)
        loop.t += 0.02
    windows = loop.windows()
    assert len(windows) == 2 and all(w["phase"] == "evaluation" and w["steps"] == 0 and w["ongoing"] for w in windows)
    loop.probe._at_exit()  # the script ends: the evaluation's last window
    assert loop.windows()[-1]["phase"] == "evaluation" and "ongoing" not in loop.windows()[-1]


def test_a_closing_validation_shorter_than_a_window_leaves_the_training_before_it_whole():
    """timm's last epoch: its training, then a validation pass that ends with the script.
    The training since the last window is a window of its own, ending where the validation
    began, not a partial one dropped at exit."""
    loop = Loop()
    train = Iterator()
    loop.train(train, 150)  # 1.5 s: one window, and half a window since
    loop.validate(20)  # 0.6 s, under a report interval
    loop.probe._at_exit()
    training = loop.windows("training")
    assert sum(w["steps"] for w in training) == 150 and sum(w["batches"] for w in training) == 150
    assert training[-1]["seconds"] == pytest.approx(0.5, abs=0.02) and not training[-1].get("eval_batches")
    assert loop.windows()[-1]["phase"] == "evaluation" and loop.windows()[-1]["batches"] == 20


def test_without_a_dataloader_a_span_from_model_eval_to_model_train_is_evaluation():
    """nanoGPT's estimate_loss(): model.eval(), forward passes on get_batch() (no
    DataLoader), model.train(); no backward and no step between.  The span is evaluation:
    a window of its own when it lasts a report interval, and out of the training window."""
    loop = Loop()
    for _ in range(60):
        loop.step_alone()  # 1.8 s of training
    loop.mode(False)
    loop.t += 1.5  # 80 forward passes under torch.no_grad()
    loop.mode(True)
    for _ in range(60):
        loop.step_alone()
    training, evaluation = loop.windows("training"), loop.windows("evaluation")
    assert [w["seconds"] for w in evaluation] == [pytest.approx(1.5)] and evaluation[0]["steps"] == 0 and not evaluation[0].get("ongoing")
    assert len(training) >= 3 and all(w["seconds"] == pytest.approx(w["steps"] * 0.03) for w in training)


def test_a_short_span_in_eval_mode_is_left_out_of_the_training_window():
    loop = Loop()
    for _ in range(20):
        loop.step_alone()
    loop.mode(False)
    loop.t += 0.3
    loop.mode(True)
    for _ in range(30):
        loop.step_alone()
    (window,) = loop.windows()
    assert window["phase"] == "training" and window["eval_seconds"] == pytest.approx(0.3)
    assert window["seconds"] == pytest.approx(window["steps"] * 0.03)


def test_eval_mode_with_training_in_it_is_no_evaluation():
    """A teacher model put in eval mode while the student trains (distillation), a frozen
    part put back in eval mode each step: backward passes and steps in the span make it
    no evaluation; and a span whose batches the DataLoader told apart is not counted twice."""
    loop = Loop()
    teacher, student = 2, 1
    loop.mode(False, teacher)  # once
    for _ in range(80):
        loop.mode(True, student)
        loop.mode(False, teacher)  # every step
        loop.t += 0.01  # the teacher's forward pass
        loop.mode(True, student)  # back in training mode
        loop.t += 0.01
        loop.step_alone()
    for _ in range(10):  # a rollout, then an update: back in training mode with gradients on
        loop.mode(False)
        loop.t += 0.2
        loop.mode(True, grad=True)
        loop.step_alone()
    assert loop.windows() and all(w["phase"] == "training" and "eval_seconds" not in w for w in loop.windows())
    timm = Loop()
    train = Iterator()
    timm.train(train, 100)
    timm.mode(False)
    timm.validate(50)  # timm's validate(): model.eval(), the eval loader, model.train()
    timm.mode(True)
    timm.train(train, 100)
    assert sum(w["seconds"] for w in timm.windows("evaluation")) == pytest.approx(50 * 0.031, abs=0.01)
    assert [w["seconds"] for w in timm.windows("training")] == pytest.approx([1.0, 1.0], abs=0.002)


def test_a_model_loaded_in_eval_mode_and_then_trained_is_no_evaluation():
    """transformers' from_pretrained() leaves the model in eval mode; the loop puts it in
    training mode (gradients on) before its first batch: start-up, not evaluation."""
    loop = Loop()
    loop.mode(False)
    loop.t += 1.5  # accelerator.prepare() and the rest of the start-up
    loop.mode(True, grad=True)
    for _ in range(70):
        loop.step_alone()
    assert loop.windows() and all(w["phase"] == "training" for w in loop.windows())


def test_an_evaluation_before_the_first_step_is_its_own_window():
    """nanoGPT evaluates at iteration 0, before any step: an evaluation window, and the
    first training window begins at the first step, as it would without it."""
    loop = Loop()
    loop.mode(False)
    loop.t += 1.2
    loop.mode(True)
    for _ in range(70):
        loop.step_alone()
    first, *rest = loop.windows()
    assert first["phase"] == "evaluation" and first["seconds"] == pytest.approx(1.2)
    assert rest and rest[0]["phase"] == "training" and rest[0]["steps"] == 34  # from the first step (which opened it) a second on


# --- gputui reads them ---------------------------------------------------------------------


def training_window(t: float) -> Event:
    return Event(t, ev.PROBE, ProbeReport({"v": 2, "phase": "training", "steps": 60, "seconds": 1.0, "batches": 60, "samples": 960, "data_wait_s": 0.05}))


def test_evaluation_windows_are_no_reading_and_no_data_wait():
    parser = ThroughputParser()
    window = {"event": "probe", "v": 2, "phase": "evaluation", "steps": 3, "seconds": 1.0, "batches": 40, "samples": 2560, "data_wait_s": 0.9}
    assert parser.feed_probe(window) == []
    ctx = Context(Settings())
    ctx.now = 10.0
    ctx.add_probe(9.0, ProbeReport({k: v for k, v in window.items() if k != "event"} | {"ongoing": True}))
    assert ctx.data_wait_share() is None and ctx.evaluating
    ctx.add_probe(10.0, training_window(10.0).payload)
    assert ctx.data_wait_share() == pytest.approx(0.05) and not ctx.evaluating


def test_the_report_names_only_the_phases_the_run_went_through():
    from gputui.lookback.report import _training_window

    def facts(*phases: str) -> SimpleNamespace:
        return SimpleNamespace(phases=[SimpleNamespace(phase=p) for p in phases])

    assert _training_window(facts("startup", "training", "tail")) == "training phase: start-up and the idle tail left out"
    assert _training_window(facts("startup", "training", "evaluation", "training")) == "training phase: start-up and evaluation left out"
    assert _training_window(facts()) == "training phase"


# --- real loops ----------------------------------------------------------------------------

# The loop's shape: huggingface/accelerate's examples/nlp_example.py (model.train(), a pass
# over the training DataLoader: forward, backward, optimizer.step(); then model.eval() and a
# pass over the eval DataLoader, each batch's forward under torch.no_grad()) and timm's
# train.py validate() (model.eval(); with torch.no_grad(): for input, target in loader),
# evaluating every N optimizer steps as Lightning's val_check_interval does.  Sleeps, not
# compute, set its pace: a busy CI machine shifts both clocks alike.
LOOP = textwrap.dedent(
    """
    import argparse, json, time
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    p = argparse.ArgumentParser()
    p.add_argument("--style", choices=["timm", "accelerate"], default="timm")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--evals", type=int, default=2)
    a = p.parse_args()
    EVERY, STEP_S, EVAL_BATCHES, EVAL_BATCH_S = 80, 0.012, 48, 0.025

    g = torch.Generator().manual_seed(0)
    n = 160_000
    train_loader = DataLoader(TensorDataset(torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g)), batch_size=16, shuffle=True, num_workers=a.workers)
    m = 64 * EVAL_BATCHES
    eval_loader = DataLoader(TensorDataset(torch.randn(m, 8, generator=g), torch.randn(m, 1, generator=g)), batch_size=64, num_workers=a.workers)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)


    def ahead(loader):  # accelerate's DataLoaderShard.__iter__: the next batch fetched before this one is used
        it = iter(loader)
        current = next(it)
        for following in it:
            yield current
            current = following
        yield current


    def batches(loader):
        return ahead(loader) if a.style == "accelerate" else loader


    def validate():
        model.eval()
        seen = 0
        if a.style == "timm":
            with torch.no_grad():
                for x, y in batches(eval_loader):
                    torch.nn.functional.mse_loss(model(x), y)
                    time.sleep(EVAL_BATCH_S)
                    seen += 1
        else:
            for x, y in batches(eval_loader):
                with torch.no_grad():
                    torch.nn.functional.mse_loss(model(x), y)
                time.sleep(EVAL_BATCH_S)
                seen += 1
        model.train()
        return seen


    # The loop's own training figure: its samples over its time less the evaluations', its
    # clock started once the training iterator (and its workers) is made, as the probe's is;
    # and the same from its first step a second in (the probe's first window, which gputui's
    # figure leaves out).
    samples = steps = evaluated = micro = 0
    evaluating = 0.0
    steady = None  # (time, samples, evaluating) at the first step a second in
    model.train()
    train = iter(train_loader)
    began = time.monotonic()
    for x, y in batches(train):
        torch.nn.functional.mse_loss(model(x), y).backward()
        time.sleep(STEP_S / a.accumulate)
        samples += len(x)
        micro += 1
        if micro % a.accumulate:
            continue
        opt.step()
        opt.zero_grad()
        steps += 1
        if steady is None and time.monotonic() - began >= 1.0:
            steady = (time.monotonic(), samples, evaluating)
        if steps % EVERY == 0:
            t = time.monotonic()
            evaluated += validate()
            evaluating += time.monotonic() - t
            if steps // EVERY == a.evals:
                break
    end = time.monotonic()
    print(json.dumps({
        "samples": samples,
        "seconds": end - began - evaluating,
        "steady_per_sec": (samples - steady[1]) / (end - steady[0] - (evaluating - steady[2])),
        "eval_batches": evaluated,
    }))
    """
)


@pytest.fixture(scope="module")
def loop_script(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("evaluation") / "train.py"
    path.write_text(LOOP, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("style", "workers", "accumulate"),
    [("timm", 0, 1), ("accelerate", 2, 2)],
    ids=["timm-validate", "accelerate-prefetching-workers-accumulating"],
)
def test_a_loop_that_validates_every_n_steps_counts_its_training_alone(loop_script, style, workers, accumulate):
    pytest.importorskip("torch")
    result, payloads = run_probed([sys.executable, str(loop_script), "--style", style, "--workers", str(workers), "--accumulate", str(accumulate)])
    assert result.returncode == 0, result.stderr.decode()
    own = json.loads(result.stdout)
    windows = reports(payloads)
    training = [w for w in windows if w.get("phase", "training") == "training"]
    evaluation = [w for w in windows if w.get("phase") == "evaluation"]
    samples, seconds = sum(w["samples"] for w in training), sum(w["seconds"] for w in training)
    # Every training sample and no evaluation one (a loader fetching ahead leaves one batch fetched, never trained on).
    assert own["samples"] <= samples <= own["samples"] + 16, windows
    assert all(abs(w["batches"] - accumulate * w["steps"]) <= (1 if style == "accelerate" else 0) for w in training), training
    assert samples / seconds == pytest.approx(own["samples"] / own["seconds"], rel=0.02)
    assert evaluation and all(w["steps"] == 0 and w["samples"] == 64 * w["batches"] for w in evaluation)
    assert sum(w["batches"] for w in evaluation) + sum(w.get("eval_batches", 0) for w in training) == own["eval_batches"] == 96


# nanoGPT's shape (karpathy/nanoGPT train.py): batches from its own get_batch(), no
# DataLoader; every EVERY iterations estimate_loss(), decorated @torch.no_grad(), puts the
# model in eval mode, runs forward passes and puts it back in training mode.
NO_LOADER = textwrap.dedent(
    """
    import json, time
    import torch

    EVERY, STEP_S, EVAL_S = 60, 0.015, 1.2
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def get_batch():
        return torch.randn(16, 8), torch.randn(16, 1)

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        began = time.monotonic()
        while time.monotonic() - began < EVAL_S:
            x, y = get_batch()
            torch.nn.functional.mse_loss(model(x), y)
            time.sleep(0.01)
        model.train()

    evaluating = 0.0
    began = time.monotonic()
    for it in range(2 * EVERY + 1):
        if it % EVERY == 0:
            t = time.monotonic()
            estimate_loss()
            evaluating += time.monotonic() - t
        x, y = get_batch()
        torch.nn.functional.mse_loss(model(x), y).backward()
        time.sleep(STEP_S)
        opt.step()
        opt.zero_grad()
    print(json.dumps({"evaluating": evaluating}))
    """
)


def test_a_loop_without_a_dataloader_shows_its_evaluation_by_its_mode_switches(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text(NO_LOADER, encoding="utf-8")
    result, payloads = run_probed([sys.executable, str(script)])
    assert result.returncode == 0, result.stderr.decode()
    own = json.loads(result.stdout)
    windows = reports(payloads)
    evaluation = [w for w in windows if w.get("phase") == "evaluation"]
    training = [w for w in windows if w.get("phase") == "training"]
    assert len(evaluation) == 3 and all(w["steps"] == 0 and w["batches"] == 0 for w in evaluation), windows
    assert sum(w["seconds"] for w in evaluation) == pytest.approx(own["evaluating"], rel=0.05)
    assert training and all(w["seconds"] < 0.9 * 1.2 + w["steps"] * 0.05 for w in training)  # none holds an evaluation


def test_under_gputui_the_figure_is_the_training_rate_and_the_phases_show_the_evaluation(loop_script, tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "run.jsonl"
    done = run_gputui(["--headless", "--record", str(out), "--interval", "0.25", "--", sys.executable, str(loop_script)], tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    own = json.loads(next(line["text"] for line in lines if line.get("event") == "output" and '"steady_per_sec"' in line.get("text", "")))
    summary = lines[-1]
    assert summary["throughput"]["source"] == "probe" and summary["throughput"]["unit"] == "samples"
    assert summary["throughput"]["figure"] == pytest.approx(own["steady_per_sec"], rel=0.02)
    phases = [p["phase"] for p in summary["phases"]]
    assert phases.count("evaluation") == 2 and phases.index("evaluation") > phases.index("training"), phases
    assert not [f for f in summary.get("findings", []) if f["kind"] == "input_bound"]
    assert not [line for line in lines if line.get("event") == "probe_status" and line.get("state") == "dropped"]  # the run's own lines all heard

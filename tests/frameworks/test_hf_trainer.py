"""The Hugging Face Trainer, as the transformers docs' tutorial "Fine-tune a pretrained
model" runs it (tests/data/frameworks/hf_trainer/SOURCE.md): a tiny BERT (BERT-large's
shape on cuda, random weights) in the hub cache as "google-bert/bert-base-cased", 1000 rows of random "yelp_review_full" in the datasets cache;
3 epochs of 125 steps of 8, each followed by an evaluation of the 1000 test rows
(eval_strategy="epoch").

The Trainer's own train_samples_per_second divides by train_runtime, which holds the
evaluations it ran during training and the checkpoint it writes after its last step:
its training-only figure is the same samples over train_runtime less every
eval_runtime it logged and less that checkpoint's time, which it prints no figure for
but draws a bar of ("Writing model shards") and its optimizer's state after: from its
training bar's last line before that bar to its first line after (on gputui's clock of
its output).  The tiny BERT's checkpoint takes milliseconds; BERT-large's, with its Adam
state, some 4 s on an H200's machine.

The starved variant (tests/data/frameworks/starve.py): 10 ms more per training sample (the
Trainer's training sampler shuffles; its evaluation one does not).  The tutorial takes no
options, so it is the same 375 steps, some 30 s longer."""

from __future__ import annotations

import ast
import re

import pytest

from gputui.record import events as ev
from tests.frameworks.helpers import (
    DEVICE,
    STARVED_MODES,
    FrameworkRun,
    check_evaluation_phase,
    check_fed,
    check_figure,
    check_one_unit,
    check_starved,
    copy_scripts,
    make_data,
    need,
    run_framework,
    run_starved,
)

# Each test of a figure is serial, and alone: the tutorial's 375 steps take some 10 s on a
# CPU, and with the probe (whose figure leaves its first window out, where the Trainer's
# counts every step) a load changing beside it moved the two figures apart by up to 3.5 %.
# The starved runs are not serial: a finding holds under load, and their training mostly sleeps.
pytestmark = pytest.mark.frameworks

EPOCHS, ROWS, BATCH = 3, 1000, 8  # TrainingArguments' default per_device_train_batch_size
# The tutorial's 375 steps take milliseconds each with the tiny BERT on a GPU, too few
# seconds for a steady rate beside the start; BERT-large's shape (padded to 512) there.
FED_SHAPE = make_data().BERT_LARGE if DEVICE == "cuda" else None
STARVED_SAMPLE_MS = 10  # 80 ms a batch of 8, over a training step of about 35 ms here
METRICS = re.compile(r"(\{'(?:eval_loss|train_runtime)'.*\})\s*$")


def logged(run: FrameworkRun) -> list[dict]:
    """The Trainer's logged metrics dicts (printed by tqdm.write, maybe after a bar's cursor-up)."""
    return [ast.literal_eval(m.group(1)) for line in run.lines if (m := METRICS.search(line))]


TRAINING_BAR = re.compile(rf"\|\s*\d+/{EPOCHS * ROWS // BATCH} \[")  # "| 375/375 [01:33<00:00,  4.79it/s]"
SAVING = "Writing model shards"


def checkpoint_s(run: FrameworkRun) -> float:
    """The seconds from the training bar's last line before each checkpoint's bar to the
    first other line after that bar (the optimizer's state is written in between)."""
    lines = [(e.t, e.payload.text or "") for e in run.recording.events_of(ev.OUTPUT) if isinstance(e.payload, ev.Output)]
    total, began = 0.0, None
    for i, (t, text) in enumerate(lines):
        if SAVING in text and began is None:
            began = next((u for u, earlier in reversed(lines[:i]) if TRAINING_BAR.search(earlier)), None)
        elif SAVING not in text and began is not None:
            total, began = total + t - began, None
    return total


def own_figure(run: FrameworkRun) -> float | None:
    """The Trainer's samples over its training time.  With the probe, over the same
    steps as gputui's figure: less the samples and seconds of the probe's first training
    window, which gputui leaves out as the run's start.  The Trainer prints no time of
    its own for any stretch of steps, and on a shared CPU one second of steps ran at
    twice another's pace, so a first window apart from the rest moved the whole-run
    figures 3.5 % apart; the check is then that the probe's windows add up to the
    Trainer's training samples and time, evaluations and checkpoint left out."""
    dicts = logged(run)
    final = next((d for d in dicts if "train_runtime" in d), None)
    evals = [float(d["eval_runtime"]) for d in dicts if "eval_runtime" in d]
    if final is None:
        return None
    samples = float(final["train_samples_per_second"]) * float(final["train_runtime"])
    seconds = float(final["train_runtime"]) - sum(evals) - checkpoint_s(run)
    if run.throughput.source == "probe":
        first = next(w for w in run.probe_windows if w.fields.get("phase", "training") == "training")
        samples -= float(first.fields.get("samples") or 0)
        seconds -= first.seconds or 0.0
    return samples / seconds


@pytest.fixture(scope="module", params=[True, False], ids=["probe", "no-probe"])
def run(request, tmp_path_factory) -> FrameworkRun:
    need("torch", "transformers", "datasets", "accelerate")
    work = tmp_path_factory.mktemp("hf-trainer")
    copy_scripts("hf_trainer", work, ["train_trainer.py"])
    make_data().make_hf_trainer(work / "hf", train=ROWS, test=ROWS, shape=FED_SHAPE)
    done = run_framework("hf-trainer", work, ["train_trainer.py"], probe=request.param)
    done.own_figure = own_figure(done)
    if done.own_figure and done.throughput.unit == "steps":  # gputui knew no batch size: the same figure in steps
        done.own_figure /= BATCH
    final = next((d for d in logged(done) if "train_runtime" in d), {})
    done.own_note = (
        f"samples/s: train_samples_per_second {final.get('train_samples_per_second')} x train_runtime {final.get('train_runtime')}"
        f" over train_runtime less the eval_runtime of each evaluation and {checkpoint_s(done):.2f} s of checkpoint writing"
        + (", less the probe's first window" if done.throughput.source == "probe" else "")
        + (f" (in steps: over {BATCH} a step)" if done.throughput.unit == "steps" else "")
    )
    done.report()
    return done


@pytest.fixture(scope="module", params=STARVED_MODES)
def starved(request, tmp_path_factory) -> FrameworkRun:
    need("torch", "transformers", "datasets", "accelerate")
    work = tmp_path_factory.mktemp("hf-trainer-starved")
    copy_scripts("hf_trainer", work, ["train_trainer.py"])
    make_data().make_hf_trainer(work / "hf", train=ROWS, test=ROWS)
    done = run_starved("hf-trainer", work, ["train_trainer.py"], sample_ms=STARVED_SAMPLE_MS, probe=request.param)
    done.own_note = f"starved: {STARVED_SAMPLE_MS} ms more per training sample"
    done.report()
    return done


@pytest.mark.serial
@pytest.mark.alone
def test_the_scripts_output_is_passed_through_whole(run):
    assert run.returncode == 0, run.stderr[-2000:]
    dicts = logged(run)
    assert [float(d["epoch"]) for d in dicts if "eval_loss" in d] == [1.0, 2.0, 3.0]  # transformers 5 logs '1', 4.x 1.0
    assert any("train_samples_per_second" in d for d in dicts)
    assert any(f"{EPOCHS * ROWS // 8}/{EPOCHS * ROWS // 8} [" in line for line in run.lines)  # the training bar's last redraw


@pytest.mark.serial
@pytest.mark.alone
def test_its_readings_are_in_one_unit(run):
    check_one_unit(run)


@pytest.mark.serial
@pytest.mark.alone
def test_the_figure_is_the_scripts_own_training_figure(run):
    check_figure(run)


@pytest.mark.serial
@pytest.mark.alone
def test_evaluation_is_not_counted(run):
    if not run.probe:
        pytest.skip("without the probe only the output tells: the evaluation bar is not a training reading")
    check_evaluation_phase(run)


@pytest.mark.serial
@pytest.mark.alone
def test_fed_it_gets_no_finding(run):
    check_fed(run)


def test_starved_it_is_input_bound(starved):
    check_starved(starved)

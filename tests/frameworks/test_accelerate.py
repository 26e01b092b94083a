"""accelerate's examples/nlp_example.py (huggingface/accelerate,
tests/data/frameworks/accelerate/SOURCE.md) under gputui, unchanged: a 2-layer BERT of
width 32 in the hub cache as "bert-base-cased", 640 rows of random "GLUE MRPC" in the
datasets cache, a local ``evaluate``; 3 epochs of 40 steps (its own config), each followed
by an evaluation of 10 batches.  On a GPU the fed run is GPU-sized: BERT-large's shape
(random weights) and 6,000 rows, 375 steps an epoch, so that the GPU and not the loop is
the limit, and the training lasts long enough for the rules to judge it (with the tiny
model an H200 trained it in under 2 s).

The script prints no progress and no rate: without the probe gputui has nothing to read,
and with it the figure cannot be held to one of the script's own (c is left out).

The starved variant (tests/data/frameworks/starve.py): 5 ms more per training sample (its
training loader shuffles; the evaluation one does not), over 960 rows: 3 epochs of 60
steps."""

from __future__ import annotations

import re

import pytest

from tests.frameworks.helpers import (
    DEVICE,
    STARVED_MODES,
    FrameworkRun,
    check_evaluation_phase,
    check_fed,
    check_one_unit,
    check_starved,
    copy_scripts,
    make_data,
    need,
    run_framework,
    run_starved,
)

# Each test of a figure is serial (within 2 % of the script's own needs a core to itself: the
# serial pass runs two such modules at a time); the starved runs are not: a finding holds
# under load, and their training mostly sleeps.
pytestmark = pytest.mark.frameworks

EPOCHS, TRAIN_ROWS, VAL_ROWS = 3, 640 if DEVICE == "cpu" else 6000, 320
FED_SHAPE = make_data().BERT_LARGE if DEVICE == "cuda" else None
# 5 ms more per sample, 80 ms a batch of 16, over a training step of about 30 ms here.
# On cuda more rows: without the probe gputui sees this silent script only from outside,
# and its rules judge nothing in a run's first 30 s (start_grace_s).
STARVED_SAMPLE_MS, STARVED_TRAIN_ROWS, STARVED_VAL_ROWS = 5, 960 if DEVICE == "cpu" else 2400, 96


CPU = [] if DEVICE == "cuda" else ["--cpu"]  # the script trains on the GPU unless told


@pytest.fixture(scope="module", params=[True, False], ids=["probe", "no-probe"])
def run(request, tmp_path_factory) -> FrameworkRun:
    need("torch", "accelerate", "transformers", "datasets")
    work = tmp_path_factory.mktemp("accelerate")
    copy_scripts("accelerate", work, ["nlp_example.py"])
    make_data().make_hf(work / "hf", work, train=TRAIN_ROWS, validation=VAL_ROWS, shape=FED_SHAPE)
    done = run_framework("accelerate-nlp_example", work, ["nlp_example.py", *CPU], probe=request.param)
    done.own_note = "prints no figure"
    done.report()
    return done


@pytest.fixture(scope="module", params=STARVED_MODES)
def starved(request, tmp_path_factory) -> FrameworkRun:
    need("torch", "accelerate", "transformers", "datasets")
    work = tmp_path_factory.mktemp("accelerate-starved")
    copy_scripts("accelerate", work, ["nlp_example.py"])
    make_data().make_hf(work / "hf", work, train=STARVED_TRAIN_ROWS, validation=STARVED_VAL_ROWS)
    done = run_starved("accelerate-nlp_example", work, ["nlp_example.py", *CPU], sample_ms=STARVED_SAMPLE_MS, probe=request.param)
    done.own_note = f"starved: {STARVED_SAMPLE_MS} ms more per training sample"
    done.report()
    return done


@pytest.mark.serial
def test_the_scripts_output_is_passed_through_whole(run):
    assert run.returncode == 0, run.stderr[-2000:]
    epochs = [int(m.group(1)) for line in run.lines if (m := re.match(r"^epoch (\d+): \{'accuracy': ", line))]
    assert epochs == list(range(EPOCHS))
    assert sum(line.startswith("=====  tensor([") for line in run.lines) == EPOCHS * VAL_ROWS // 32
    assert [line for line in run.lines if line.strip()][-1].startswith(f"epoch {EPOCHS - 1}: ")


@pytest.mark.serial
def test_its_readings_are_in_one_unit(run):
    if not run.probe:
        assert not run.readings, "the script prints no rate: a reading without the probe was misread from its output"
        pytest.skip("the script prints no progress: without the probe there is nothing to read")
    check_one_unit(run)
    assert run.throughput.unit == "samples"


@pytest.mark.serial
def test_the_figure_is_the_scripts_own_training_figure(run):
    pytest.skip(f"nlp_example.py prints no figure of its own; gputui's: {run.figure} {run.throughput.unit}/s")


@pytest.mark.serial
def test_evaluation_is_not_counted(run):
    if not run.probe:
        pytest.skip("without the probe gputui sees nothing of the loop")
    check_evaluation_phase(run)


@pytest.mark.serial
def test_fed_it_gets_no_finding(run):
    check_fed(run)


def test_starved_it_is_input_bound(starved):
    check_starved(starved)

"""accelerate's examples/nlp_example.py (huggingface/accelerate,
tests/data/frameworks/accelerate/SOURCE.md) under gputui, unchanged: a 2-layer BERT of
width 32 in the hub cache as "bert-base-cased", 640 rows of random "GLUE MRPC" in the
datasets cache, a local ``evaluate``; 3 epochs of 40 steps (its own config), each followed
by an evaluation of 10 batches.

The script prints no progress and no rate: without the probe gputui has nothing to read,
and with it the figure cannot be held to one of the script's own (c is left out)."""

from __future__ import annotations

import re

import pytest

from tests.frameworks.helpers import FrameworkRun, check_evaluation_phase, check_one_unit, copy_scripts, make_data, need, run_framework

# serial: a figure within 2 % of the script's own needs the machine to itself
pytestmark = [pytest.mark.frameworks, pytest.mark.serial]

EPOCHS, TRAIN_ROWS, VAL_ROWS = 3, 640, 320


@pytest.fixture(scope="module", params=[True, False], ids=["probe", "no-probe"])
def run(request, tmp_path_factory) -> FrameworkRun:
    need("torch", "accelerate", "transformers", "datasets")
    work = tmp_path_factory.mktemp("accelerate")
    copy_scripts("accelerate", work, ["nlp_example.py"])
    make_data().make_hf(work / "hf", work, train=TRAIN_ROWS, validation=VAL_ROWS)
    done = run_framework("accelerate-nlp_example", work, ["nlp_example.py", "--cpu"], probe=request.param)
    done.own_note = "prints no figure"
    done.report()
    return done


def test_the_scripts_output_is_passed_through_whole(run):
    assert run.returncode == 0, run.stderr[-2000:]
    epochs = [int(m.group(1)) for line in run.lines if (m := re.match(r"^epoch (\d+): \{'accuracy': ", line))]
    assert epochs == list(range(EPOCHS))
    assert sum(line.startswith("=====  tensor([") for line in run.lines) == EPOCHS * VAL_ROWS // 32
    assert [line for line in run.lines if line.strip()][-1].startswith(f"epoch {EPOCHS - 1}: ")


def test_its_readings_are_in_one_unit(run):
    if not run.probe:
        assert not run.readings, "the script prints no rate: a reading without the probe was misread from its output"
        pytest.skip("the script prints no progress: without the probe there is nothing to read")
    check_one_unit(run)
    assert run.throughput.unit == "samples"


def test_the_figure_is_the_scripts_own_training_figure(run):
    pytest.skip(f"nlp_example.py prints no figure of its own; gputui's: {run.figure} {run.throughput.unit}/s")


def test_evaluation_is_not_counted(run):
    if not run.probe:
        pytest.skip("without the probe gputui sees nothing of the loop")
    check_evaluation_phase(run)

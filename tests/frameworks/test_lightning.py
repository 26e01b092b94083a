"""Lightning's own examples (Lightning-AI/pytorch-lightning examples/pytorch/basics,
tests/data/frameworks/lightning/SOURCE.md) under gputui:

- transformer.py: the WikiText2 demo Transformer (1.4 M parameters) on random words.  It
  takes no command-line flags; its Trainer is cut short with Lightning's own environment
  defaults (PL_TRAINER_MAX_STEPS and friends, read for every Trainer argument the script
  does not pass).
- autoencoder.py: LightningCLI, MNIST (random IDX files), cut short with --trainer.* flags.

Neither prints a throughput figure of its own: Rich's bar shows a smoothed it/s and whole
seconds.  So (c) is left out (see test_the_figure_is_the_scripts_own_training_figure).
"""

from __future__ import annotations

import re

import pytest

from tests.frameworks.helpers import DEVICE, FrameworkRun, check_evaluation_phase, check_one_unit, copy_scripts, make_data, need, run_framework

# serial: a figure within 2 % of the script's own needs the machine to itself
pytestmark = [pytest.mark.frameworks, pytest.mark.serial]

# transformer.py: n blocks of 35 words, split [n - 4000, 2000, 2000] and batched by 20: 12
# training batches an epoch; 24 steps are 2 epochs, each validated on 6 batches.
TRANSFORMER_BLOCKS, TRANSFORMER_STEPS = 4240, 24
ACCELERATOR = "gpu" if DEVICE == "cuda" else "cpu"  # Lightning's word for it
TRANSFORMER_ENV = {
    "PL_TRAINER_MAX_STEPS": str(TRANSFORMER_STEPS),
    "PL_TRAINER_LIMIT_VAL_BATCHES": "6",
    "PL_TRAINER_LIMIT_TEST_BATCHES": "4",
    "PL_TRAINER_ACCELERATOR": ACCELERATOR,
}
AUTOENCODER_FLAGS = [
    f"--trainer.accelerator={ACCELERATOR}",
    "--trainer.max_epochs=2",
    "--trainer.limit_train_batches=150",
    "--trainer.limit_val_batches=60",
    "--trainer.limit_test_batches=10",
    "--trainer.limit_predict_batches=2",
    "--data.batch_size=32",
]
RICH_RATE = re.compile(r"([0-9.]+)it/s")


def last_bar_rate(run: FrameworkRun, prefix: str) -> float | None:
    """The rate on the last redraw of the training bar (Rich's smoothed it/s): for the table only."""
    rates = [float(m.group(1)) for line in run.lines if line.lstrip().startswith(prefix) and (m := RICH_RATE.search(line))]
    return rates[-1] if rates else None


@pytest.fixture(scope="module", params=[True, False], ids=["probe", "no-probe"])
def transformer(request, tmp_path_factory) -> FrameworkRun:
    need("torch", "lightning")
    work = tmp_path_factory.mktemp("lightning-transformer")
    copy_scripts("lightning", work, ["transformer.py"])
    make_data().make_wikitext(work, blocks=TRANSFORMER_BLOCKS)
    done = run_framework("lightning-transformer", work, ["transformer.py"], probe=request.param, env=TRANSFORMER_ENV)
    done.own_note = f"prints no figure (Rich bar's last rate {last_bar_rate(done, 'Epoch')} it/s, smoothed)"
    done.report()
    return done


@pytest.fixture(scope="module", params=[True, False], ids=["probe", "no-probe"])
def autoencoder(request, tmp_path_factory) -> FrameworkRun:
    need("torch", "lightning", "torchvision", "jsonargparse")
    work = tmp_path_factory.mktemp("lightning-autoencoder")
    # DATASETS_PATH is the script's folder/../../Datasets; the demo's MNIST also calls
    # torchvision's MNIST("./data") first: one set of files serves both.
    copy_scripts("lightning", work, ["autoencoder.py"], into="examples/pytorch")
    make_data().make_mnist(work / "data")
    (work / "Datasets").symlink_to("data")
    done = run_framework("lightning-autoencoder", work, ["examples/pytorch/autoencoder.py", *AUTOENCODER_FLAGS], probe=request.param)
    done.own_note = f"prints no figure (Rich bar's last rate {last_bar_rate(done, 'Epoch')} it/s, smoothed)"
    done.report()
    return done


def test_transformer_output_is_passed_through_whole(transformer):
    assert transformer.returncode == 0, transformer.stderr[-2000:]
    assert f"`Trainer.fit` stopped: `max_steps={TRANSFORMER_STEPS}` reached." in transformer.stdout
    assert "test_loss" in transformer.stdout  # trainer.test's table, its last output
    assert any(line.lstrip().startswith("Testing") for line in transformer.lines)


def test_autoencoder_output_is_passed_through_whole(autoencoder):
    assert autoencoder.returncode == 0, autoencoder.stderr[-2000:]
    assert "`Trainer.fit` stopped: `max_epochs=2` reached." in autoencoder.stdout
    assert "test_loss" in autoencoder.stdout
    last = [line for line in autoencoder.lines if line.strip()][-1]
    assert last.rstrip().endswith("]])")  # print(predictions[0]): the script's last line


def test_transformer_readings_are_in_one_unit(transformer):
    check_one_unit(transformer)


def test_autoencoder_readings_are_in_one_unit(autoencoder):
    check_one_unit(autoencoder)


def no_figure(run: FrameworkRun) -> None:
    pytest.skip(f"{run.name} prints no training figure of its own: {run.own_note}; gputui's: {run.figure} {run.throughput.unit}/s")


def test_transformer_figure_is_the_scripts_own_training_figure(transformer):
    no_figure(transformer)


def test_autoencoder_figure_is_the_scripts_own_training_figure(autoencoder):
    no_figure(autoencoder)


def evaluation_not_counted(run: FrameworkRun) -> None:
    if not run.probe:
        pytest.skip("without the probe only the output tells: Lightning's validation bar is not a training reading")
    check_evaluation_phase(run)


def test_transformer_evaluation_is_not_counted(transformer):
    evaluation_not_counted(transformer)


def test_autoencoder_evaluation_is_not_counted(autoencoder):
    evaluation_not_counted(autoencoder)

"""Lightning's own examples (Lightning-AI/pytorch-lightning examples/pytorch/basics,
tests/data/frameworks/lightning/SOURCE.md) under gputui:

- transformer.py: the WikiText2 demo Transformer (1.4 M parameters) on random words.  It
  takes no command-line flags; its Trainer is cut short with Lightning's own environment
  defaults (PL_TRAINER_MAX_STEPS and friends, read for every Trainer argument the script
  does not pass).
- autoencoder.py: LightningCLI, MNIST (random IDX files), cut short with --trainer.* flags;
  run twice over: with Lightning's default bar (Rich, as gputui's own dependencies make it)
  and with its tqdm bar (``--trainer.callbacks+=TQDMProgressBar``, the CLI's own flag).

Rich's bar prints no throughput figure of its own (a smoothed it/s and whole seconds), so
(c) is checked on the tqdm bar only: its training bar's rate is the epoch's batches over
its elapsed clock (smoothing=0), and its last redraw before the epoch's validation is
the epoch's training alone.  Against the probe's figure, which leaves its first window out
as the run's start, the bar's redraws give the time of the same batches.

Fed and starved ((e), (f)): transformer.py, whose training loader shuffles (the starved
variant's wrapper slows those) and waits for no data as it is.  autoencoder.py is no
fed example on a CPU: its per-sample ToTensor, with no DataLoader workers, makes its
tiny model's loop wait for data 30-50 % of its time, at the input-bound rule's edge.
"""

from __future__ import annotations

import re

import pytest

from tests.frameworks.helpers import (
    DEVICE,
    STARVED_MODES,
    FrameworkRun,
    check_evaluation_phase,
    check_fed,
    check_figure,
    check_loop_bound,
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

# transformer.py: n blocks of 35 words, split [n - 4000, 2000, 2000] and batched by 20: 12
# training batches an epoch; 24 steps are 2 epochs, each validated on 6 batches.  On a GPU
# a step takes some 20 ms and a finding opens only after 8 s of 10 held, so a fed run
# there must train well over 10 s for its rules to judge it (its model, 2 layers 200 wide
# at batch 20, leaves an H200's SMs 95 % idle: the loop is its limit): 100
# batches an epoch and all 20 of its own epochs (max_epochs=20; the script takes no flags
# that would size its model), validated every 5th.
TRANSFORMER_BATCHES = 12 if DEVICE == "cpu" else 100
TRANSFORMER_BLOCKS = 4000 + 20 * TRANSFORMER_BATCHES
TRANSFORMER_STEPS, VALIDATE_EVERY = (2 * TRANSFORMER_BATCHES, 1) if DEVICE == "cpu" else (20 * TRANSFORMER_BATCHES, 5)
ACCELERATOR = "gpu" if DEVICE == "cuda" else "cpu"  # Lightning's word for it
TRANSFORMER_ENV = {
    "PL_TRAINER_MAX_STEPS": str(TRANSFORMER_STEPS),
    "PL_TRAINER_LIMIT_VAL_BATCHES": "6",
    "PL_TRAINER_LIMIT_TEST_BATCHES": "4",
    "PL_TRAINER_CHECK_VAL_EVERY_N_EPOCH": str(VALIDATE_EVERY),
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
AUTOENCODER_BATCH = 32
# The tqdm bar's run: more batches, so that the probe's first window (left out of its
# figure as the run's start, while the bar counts it) is a small part of the training;
# on cuda every batch of the training split (55,000 images), its steps being faster.
TQDM_BATCHES = 500 if DEVICE == "cpu" else 1718
AUTOENCODER_TQDM_FLAGS = [
    *(f"--trainer.limit_train_batches={TQDM_BATCHES}" if f.startswith("--trainer.limit_train_batches=") else f for f in AUTOENCODER_FLAGS),
    "--trainer.callbacks+=TQDMProgressBar",  # beside the script's own ImageSampler
]
# The starved transformer.py: 40 ms more per training sample (800 ms a batch of 20) over
# a training step of about 300 ms here; 16 steps (two epochs) hold more than the 10 s a
# finding takes to open.
STARVED_SAMPLE_MS = 40
STARVED_ENV = {
    **TRANSFORMER_ENV,
    "PL_TRAINER_MAX_STEPS": "16",
    "PL_TRAINER_LIMIT_VAL_BATCHES": "2",
    "PL_TRAINER_LIMIT_TEST_BATCHES": "1",
    "PL_TRAINER_CHECK_VAL_EVERY_N_EPOCH": "1",
}
RICH_RATE = re.compile(r"([0-9.]+)it/s")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Lightning's TQDMProgressBar: "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]"
TQDM_EPOCH = re.compile(r"^Epoch (\d+):\s+\d+%\|[^|]*\|\s*(\d+)/(\d+) \[[^,\]]*,\s*([0-9.]+)it/s")


def last_bar_rate(run: FrameworkRun, prefix: str) -> float | None:
    """The rate on the last redraw of the training bar (Rich's smoothed it/s): for the table only."""
    rates = [float(m.group(1)) for line in run.lines if line.lstrip().startswith(prefix) and (m := RICH_RATE.search(line))]
    return rates[-1] if rates else None


def tqdm_training_redraws(run: FrameworkRun) -> list[list[tuple[int, float]]]:
    """Each epoch's training bar redraws before that epoch's validation bar (the bar's
    clock runs on through validation): (batches, seconds since the epoch began), the
    seconds being the batches over the bar's rate (Lightning's bar does not smooth it)."""
    epochs: dict[int, list[tuple[int, float]]] = {}
    validated: set[int] = set()
    epoch = None
    for line in run.lines:
        text = ANSI.sub("", line).strip()
        if m := TQDM_EPOCH.match(text):
            epoch, n, rate = int(m.group(1)), int(m.group(2)), float(m.group(4))
            if epoch not in validated and rate > 0:
                epochs.setdefault(epoch, []).append((n, n / rate))
        elif text.startswith("Validation") and epoch is not None:
            validated.add(epoch)
    return [epochs[e] for e in sorted(epochs)]


def tqdm_training_figure(run: FrameworkRun, steps: range | None = None) -> float | None:
    """Batches per second over the training alone, by the bar: every epoch's batches over
    their time, or (``steps``: counted from the run's first, a batch a step) those
    batches' alone, from the redraws nearest inside their ends."""
    batches, seconds, offset = 0, 0.0, 0
    for redraws in tqdm_training_redraws(run):
        points = [(0, 0.0), *redraws]
        if steps is not None:
            first, last = steps.start - offset, steps.stop - offset
            points = [(n, t) for n, t in points if first <= n <= last]
        offset += redraws[-1][0]
        if len(points) >= 2:
            batches += points[-1][0] - points[0][0]
            seconds += points[-1][1] - points[0][1]
    return batches / seconds if seconds > 0 else None


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


@pytest.fixture(scope="module", params=[True, False], ids=["probe", "no-probe"])
def autoencoder_tqdm(request, tmp_path_factory) -> FrameworkRun:
    need("torch", "lightning", "torchvision", "jsonargparse")
    work = tmp_path_factory.mktemp("lightning-autoencoder-tqdm")
    copy_scripts("lightning", work, ["autoencoder.py"], into="examples/pytorch")
    make_data().make_mnist(work / "data")
    (work / "Datasets").symlink_to("data")
    done = run_framework("lightning-autoencoder-tqdm", work, ["examples/pytorch/autoencoder.py", *AUTOENCODER_TQDM_FLAGS], probe=request.param)
    # gputui's figure from the probe leaves its first window out: the bar's over the same batches
    counted = done.counted_steps() if done.readings and done.throughput.source == "probe" else None
    own = tqdm_training_figure(done, counted)
    in_samples = done.readings and done.throughput.unit == "samples"  # the probe told the batch size
    done.own_figure = own * AUTOENCODER_BATCH if own and in_samples else own
    done.own_note = (
        "the tqdm training bar's batches over its time, each epoch's last redraw before its validation"
        + (f", batches {counted.start}-{counted.stop - 1} (the probe's windows but the first)" if counted is not None else "")
        + (f" (x {AUTOENCODER_BATCH} a batch)" if in_samples else "")
    )
    done.report()
    return done


@pytest.fixture(scope="module", params=STARVED_MODES)
def transformer_starved(request, tmp_path_factory) -> FrameworkRun:
    need("torch", "lightning")
    work = tmp_path_factory.mktemp("lightning-transformer-starved")
    copy_scripts("lightning", work, ["transformer.py"])
    make_data().make_wikitext(work, blocks=TRANSFORMER_BLOCKS)
    done = run_starved("lightning-transformer", work, ["transformer.py"], sample_ms=STARVED_SAMPLE_MS, probe=request.param, env=STARVED_ENV)
    done.own_note = f"starved: {STARVED_SAMPLE_MS} ms more per training sample"
    done.report()
    return done


@pytest.mark.serial
def test_transformer_output_is_passed_through_whole(transformer):
    assert transformer.returncode == 0, transformer.stderr[-2000:]
    assert f"`Trainer.fit` stopped: `max_steps={TRANSFORMER_STEPS}` reached." in transformer.stdout
    assert "test_loss" in transformer.stdout  # trainer.test's table, its last output
    assert any(line.lstrip().startswith("Testing") for line in transformer.lines)


@pytest.mark.serial
def test_autoencoder_output_is_passed_through_whole(autoencoder):
    assert autoencoder.returncode == 0, autoencoder.stderr[-2000:]
    assert "`Trainer.fit` stopped: `max_epochs=2` reached." in autoencoder.stdout
    assert "test_loss" in autoencoder.stdout
    last = [line for line in autoencoder.lines if line.strip()][-1]
    assert last.rstrip().endswith("]])")  # print(predictions[0]): the script's last line


@pytest.mark.serial
def test_autoencoder_tqdm_output_is_passed_through_whole(autoencoder_tqdm):
    run = autoencoder_tqdm
    assert run.returncode == 0, run.stderr[-2000:]
    assert "`Trainer.fit` stopped: `max_epochs=2` reached." in run.stdout
    assert "test_loss" in run.stdout
    ends = {int(m.group(1)) for line in run.lines if (m := TQDM_EPOCH.match(ANSI.sub("", line).strip())) and m.group(2) == m.group(3) == str(TQDM_BATCHES)}
    assert ends == {0, 1}, "the training bar's last redraw of each epoch"
    assert any(ANSI.sub("", line).strip().startswith("Validation DataLoader 0: 100%") for line in run.lines)
    last = [line for line in run.lines if line.strip()][-1]
    assert last.rstrip().endswith("]])")


@pytest.mark.serial
def test_transformer_readings_are_in_one_unit(transformer):
    check_one_unit(transformer)


@pytest.mark.serial
def test_autoencoder_readings_are_in_one_unit(autoencoder):
    check_one_unit(autoencoder)


@pytest.mark.serial
def test_autoencoder_tqdm_readings_are_in_one_unit(autoencoder_tqdm):
    check_one_unit(autoencoder_tqdm)


def no_figure(run: FrameworkRun) -> None:
    pytest.skip(f"{run.name} prints no training figure of its own: {run.own_note}; gputui's: {run.figure} {run.throughput.unit}/s")


@pytest.mark.serial
def test_transformer_figure_is_the_scripts_own_training_figure(transformer):
    no_figure(transformer)


@pytest.mark.serial
def test_autoencoder_figure_is_the_scripts_own_training_figure(autoencoder):
    no_figure(autoencoder)


@pytest.mark.serial
def test_autoencoder_tqdm_figure_is_the_scripts_own_training_figure(autoencoder_tqdm):
    check_figure(autoencoder_tqdm)


def evaluation_not_counted(run: FrameworkRun) -> None:
    if not run.probe:
        pytest.skip("without the probe only the output tells: Lightning's validation bar is not a training reading")
    check_evaluation_phase(run)


@pytest.mark.serial
def test_transformer_evaluation_is_not_counted(transformer):
    evaluation_not_counted(transformer)


@pytest.mark.serial
def test_autoencoder_evaluation_is_not_counted(autoencoder):
    evaluation_not_counted(autoencoder)


@pytest.mark.serial
def test_autoencoder_tqdm_evaluation_is_not_counted(autoencoder_tqdm):
    evaluation_not_counted(autoencoder_tqdm)


@pytest.mark.serial
@pytest.mark.skipif(DEVICE == "cuda", reason="on a GPU the script's model is too small to keep it busy: the next test")
def test_transformer_fed_gets_no_finding(transformer):
    check_fed(transformer)


@pytest.mark.serial
@pytest.mark.skipif(DEVICE != "cuda", reason="on the CPU the loop is the device's own work: the test above")
def test_transformer_fed_on_a_gpu_is_held_back_by_its_loop(transformer):
    check_loop_bound(transformer)


def test_transformer_starved_is_input_bound(transformer_starved):
    check_starved(transformer_starved)

"""timm's train.py (huggingface/pytorch-image-models, tests/data/frameworks/timm/SOURCE.md)
under gputui: timm's test_resnet on a 4-class ImageFolder of random 32x32 PNGs, 2 epochs
of 100 updates, each followed by a validation pass of 128 batches.  On cuda the fed run is
sized for a GPU instead: resnet50 at 224 px, batch 64, 8 loader workers, 300 updates an
epoch.  The starved variant (tests/data/frameworks/starve.py): 10 ms more per training
sample, one epoch of 160 updates (320 on cuda) of test_resnet and a validation pass of 4
batches."""

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

EPOCHS, VAL_BATCHES = 2, 128
# The CPU's configuration: a tiny model the loop's own process feeds (no loader workers).
CPU_SIZED = {"model": "test_resnet", "img-size": 32, "batch-size": 8, "workers": 0}
# On a GPU that tiny model keeps the SM about 1 % busy while the main process works a whole
# core, which gputui rightly calls Python-bound: a fed run there needs a GPU-sized model
# and batch, and loader workers to keep up (the images stay small on disk; timm's crop
# brings them up to 224 px).  Its first update takes seconds (CUDA's start, cuDNN's
# autotuning): 300 updates an epoch keep the steady training most of the run.
GPU_SIZED = {"model": "resnet50", "img-size": 224, "batch-size": 64, "workers": 8}
SIZED = CPU_SIZED if DEVICE == "cpu" else GPU_SIZED
BATCH = int(SIZED["batch-size"])
UPDATES = 100 if DEVICE == "cpu" else 300
COMMON = [
    "--data-dir=imagefolder",
    "--num-classes=4",
    "--validation-batch-size=2",
    f"--device={DEVICE}",
    "--log-interval=1",
    "--output=out",
    "--seed=0",
]
FLAGS = [*COMMON, *(f"--{key}={value}" for key, value in SIZED.items()), f"--epochs={EPOCHS}"]
# 10 ms more per sample, 80 ms a batch of 8, over a training step of about 30 ms here:
# 160 updates hold more than the 10 s a finding takes to open (twice that on a GPU, where
# the first update alone takes seconds).  The tiny model on every
# device: its loop's own process loads the data, so the delay is the loop's wait.
STARVED_SAMPLE_MS, STARVED_BATCH = 10, int(CPU_SIZED["batch-size"])
STARVED_UPDATES = 160 if DEVICE == "cpu" else 320
STARVED_FLAGS = [*COMMON, *(f"--{key}={value}" for key, value in CPU_SIZED.items()), "--epochs=1"]
# f'Train: {epoch} [{update_idx:>4d}/{updates_per_epoch} ({pct:>3.0f}%)]  Loss: ...  Time: {val:.3f}s, {rate:>7.2f}/s  ({avg:.3f}s, {avg_rate:>7.2f}/s)  LR: ...'
TRAIN = re.compile(r"Train: (\d+) \[\s*(\d+)/(\d+) .*Time: [0-9.]+s,\s+([0-9.]+)/s\s+\([0-9.]+s,\s+([0-9.]+)/s\)")
TEST = re.compile(r"Test: \[\s*(\d+)/(\d+)\]")


def own_figure(lines: list[str]) -> float | None:
    """Samples per second over the updates of ``lines``: each line's batch over its update
    time (the batch over the rate it prints; the time itself is rounded to 1 ms).  timm
    times an update from the end of the last (its data loading included) and restarts
    the clock at each epoch, so validation is never in it."""
    rates = [float(m.group(4)) for line in lines if (m := TRAIN.search(line))]
    return BATCH * len(rates) / sum(BATCH / r for r in rates) if rates else None


def own_figure_of(run: FrameworkRun) -> tuple[float | None, str]:
    """The script's own figure over the updates gputui's figure counts, and what they are
    (a line per update: --log-interval=1).  From timm's lines: every update but the run's
    first (the start, which timm's later epochs' averages leave out too).  From the probe:
    the updates of its windows but the first, so that a CPU whose speed drifts during a
    short run (a shared one) moves both figures alike."""
    updates = [line for line in run.lines if TRAIN.search(line)]
    if run.throughput.source == "probe":
        counted = run.counted_steps()
        note = f"updates {counted.start}-{counted.stop - 1}, those of the probe's windows but the first"
        return own_figure(updates[counted.start : counted.stop]), f"samples/s: the batch over each update's time, {note}"
    return own_figure(updates[1:]), "samples/s: the batch over each update's time, every update of both epochs but the run's first"


@pytest.fixture(scope="module", params=[True, False], ids=["probe", "no-probe"])
def run(request, tmp_path_factory) -> FrameworkRun:
    need("torch", "timm", "PIL")
    work = tmp_path_factory.mktemp("timm")
    copy_scripts("timm", work, ["train.py"])
    make_data().make_image_folder(work, classes=4, train_per_class=UPDATES * BATCH // 4, val_per_class=VAL_BATCHES * 2 // 4)
    done = run_framework("timm", work, ["train.py", *FLAGS], probe=request.param)
    done.own_figure, done.own_note = own_figure_of(done)
    done.report()
    return done


@pytest.fixture(scope="module", params=STARVED_MODES)
def starved(request, tmp_path_factory) -> FrameworkRun:
    need("torch", "timm", "PIL")
    work = tmp_path_factory.mktemp("timm-starved")
    copy_scripts("timm", work, ["train.py"])
    make_data().make_image_folder(work, classes=4, train_per_class=STARVED_UPDATES * STARVED_BATCH // 4, val_per_class=2)
    done = run_starved("timm", work, ["train.py", *STARVED_FLAGS], sample_ms=STARVED_SAMPLE_MS, probe=request.param)
    done.own_note = f"starved: {STARVED_SAMPLE_MS} ms more per training sample"
    done.report()
    return done


@pytest.mark.serial
def test_the_scripts_output_is_passed_through_whole(run):
    assert run.returncode == 0, run.stderr[-2000:]
    updates = [(int(m.group(1)), int(m.group(2))) for line in run.lines if (m := TRAIN.search(line))]
    assert updates == [(e, i) for e in range(EPOCHS) for i in range(UPDATES)]
    tests = [int(m.group(1)) for line in run.lines if (m := TEST.search(line))]
    assert tests == list(range(VAL_BATCHES)) * EPOCHS
    assert "*** Best metric:" in run.stdout and "--result" in run.stdout
    assert [line for line in run.lines if line.strip()][-1] == "]"  # the end of its JSON result


@pytest.mark.serial
def test_its_readings_are_in_one_unit(run):
    check_one_unit(run)
    assert run.throughput.unit == "samples"


@pytest.mark.serial
def test_the_figure_is_the_scripts_own_training_figure(run):
    check_figure(run)


@pytest.mark.serial
def test_evaluation_is_not_counted(run):
    if not run.probe:
        pytest.skip("without the probe only the output tells: timm's Test: lines carry no rate gputui reads")
    check_evaluation_phase(run)


@pytest.mark.serial
def test_fed_it_gets_no_finding(run):
    check_fed(run)


def test_starved_it_is_input_bound(starved):
    check_starved(starved)

"""Every progress format gputui reads, on the real output of the tool that prints it.

The logs in tests/data/progress/ were made by each tool's own printing code (tqdm's
format_meter, the Trainer's ProgressCallback, Lightning's TQDMProgressBar, Keras'
Progbar, run with a fake clock) or filled from its exact format strings (timm, nanoGPT,
build-nanogpt, torchtitan, Megatron-LM, DeepSpeed); accelerate's is published output.
SOURCES.md names the file, version and format string of each; expected.json holds the
rates each tool printed, read back from the text.  The logs are cut into lines the
way the runner cuts a child's output (``\\r`` redraws, ANSI codes stripped).
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from gputui.model import Throughput
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.recording import read_recording
from gputui.record.schema import ThroughputSummary
from gputui.run.output_stream import LineSplitter, output_line
from gputui.run.throughput import FORMATS, ParseState, ThroughputParser
from gputui.session.summary import SummaryBuilder
from tests.support.process import REPO, run_gputui

DATA = REPO / "tests" / "data" / "progress"
EXPECTED = json.loads((DATA / "expected.json").read_text(encoding="utf-8"))


def output_lines(name: str) -> list[str]:
    """The file's text as the runner hands it on: one string per line or redraw."""
    lines: list[str] = []

    def emit(text: str, progress: bool, truncated: bool) -> None:
        line = output_line(text, "stderr", progress, truncated)
        if line is not None:
            lines.append(line.text)

    splitter = LineSplitter(emit)
    splitter.feed((DATA / name).read_text(encoding="utf-8"))
    splitter.close()
    return lines


def readings_of(name: str, hint: int | None = None) -> list[Throughput]:
    parser = ThroughputParser(batch_size_hint=hint)
    return [r for line in output_lines(name) for r in parser.feed(line)]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_live_rates_in_the_tools_own_unit(name):
    expected = EXPECTED[name]
    live = [r for r in readings_of(name) if not r.final]
    rates = [r.samples_per_sec for r in live]
    if name == "nanogpt.log":  # nanoGPT prints ms per iteration; its header says how many tokens one holds
        tokens = 491_520
        assert {r.unit for r in live} == {"tokens"}
        # iteration 0 holds the evaluation printed before it ("step 0: ..."): not training
        assert rates == pytest.approx([tokens * r for r in expected["live_rates"][1:]], rel=1e-3)
        return
    # One run, one unit: the first reading settles it.  The Trainer's bar (steps) comes
    # before its first logging dict with tokens, whose figures are then reported, not live.
    unit = "steps" if name == "hf_trainer_tokens.log" else expected["unit"]
    assert {r.unit for r in live} <= {unit}
    wanted = expected["other_units"]["steps"]["live_rates"] if unit != expected["unit"] else expected["live_rates"]
    assert rates == pytest.approx(wanted, rel=2e-3)


def test_the_armed_probe_settles_the_unit_before_the_bar_is_shown():
    """With the probe armed in the job, the Trainer's bar (steps) waits for its first window
    (samples, a second in): the run shows samples from its first reading, and nothing in
    a second unit: the Trainer's running tokens figures are left out, and its closing
    dict gives its samples figure."""
    parser = ThroughputParser()
    parser.probe_status({"event": "probe_status", "state": "armed"})
    shown = []
    for i, line in enumerate(output_lines("hf_trainer_tokens.log")):
        now = 0.25 * i
        shown += parser.feed(line, now=now)
        if i and i % 4 == 0:  # the probe's windows, about one a second
            shown += parser.feed_probe({"event": "probe", "v": 1, "steps": 4, "seconds": 1.0, "batches": 4, "samples": 128}, now=now)
    live = [r for r in shown if not r.final]
    assert live and {r.unit for r in shown} == {"samples"} and parser.unit == "samples"
    assert [r.samples_per_sec for r in shown if r.final] == [pytest.approx(EXPECTED["hf_trainer_tokens.log"]["other_units"]["samples"]["final"])]


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if EXPECTED[n].get("final") is not None or EXPECTED[n].get("other_units")))
def test_final_figures_keep_their_unit(name):
    """Each figure of a closing line is read in its own unit (the run then shows the one
    in its unit: test_the_run_shows_one_figure_in_its_unit)."""
    expected = EXPECTED[name]
    state = ParseState()
    finals = {}
    for line in output_lines(name):
        for triggers, parse in FORMATS:
            if any(trigger in line for trigger in triggers):
                readings = parse(line, state)
                if readings is not None:
                    finals |= {r.unit: r.samples_per_sec for r in readings if r.final}
                    break
    if expected.get("final") is not None:
        assert finals[expected["unit"]] == pytest.approx(expected["final"], rel=1e-3)
    for unit, other in (expected.get("other_units") or {}).items():
        if other.get("final") is not None:
            assert finals[unit] == pytest.approx(other["final"], rel=1e-3)


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if EXPECTED[n].get("final") is not None))
def test_the_run_shows_one_figure_in_its_unit(name):
    """One run, one unit: the Trainer's closing dict (samples and steps) gives the figure
    in the unit its bar settled."""
    readings = readings_of(name)
    unit = "steps" if name.startswith("hf_trainer") else EXPECTED[name]["unit"]
    assert {r.unit for r in readings} == {unit}
    finals = [r.samples_per_sec for r in readings if r.final]
    wanted = EXPECTED[name]["final"] if unit == EXPECTED[name]["unit"] else EXPECTED[name]["other_units"][unit]["final"]
    assert finals and finals[-1] == pytest.approx(wanted, rel=1e-3)


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if EXPECTED[n].get("ignored_lines")))
def test_lines_that_are_not_training_give_nothing(name):
    parser = ThroughputParser()
    for line in output_lines(name):
        readings = parser.feed(line)
        if any(marker in line for marker in EXPECTED[name]["ignored_lines"]):
            assert [r for r in readings if not r.final] == [], line


def test_a_batch_size_turns_steps_into_samples():
    live = [r for r in readings_of("tqdm_its.log", hint=32) if not r.final]
    assert {r.unit for r in live} == {"samples"}
    assert [r.samples_per_sec for r in live] == pytest.approx([32 * r for r in EXPECTED["tqdm_its.log"]["live_rates"]], rel=2e-3)


def test_the_keras_bar_is_timed_on_gputuis_clock_across_epochs():
    """Keras prints whole milliseconds per step; given when each line came, the steps its
    counter moved over the time between lines are the rate (an epoch's rest counted)."""
    parser = ThroughputParser(batch_size_hint=128)
    first = parser.feed(" 10/100 ━━━━━━━━━━━━━━━━━━━━ 0s 16ms/step - loss: 2.30", now=10.0)
    assert first[0].samples_per_sec == pytest.approx(128 / 0.016)  # nothing to time yet: the bar's own figure
    assert parser.feed(" 20/100 ━━━━━━━━━━━━━━━━━━━━ 0s 16ms/step - loss: 2.30", now=10.2) == []  # within the window
    (reading,) = parser.feed(" 60/100 ━━━━━━━━━━━━━━━━━━━━ 1s 16ms/step - loss: 2.29", now=11.0)
    assert reading.samples_per_sec == pytest.approx(50 * 128 / 1.0) and reading.seconds == pytest.approx(1.0)
    assert reading.samples == pytest.approx(50 * 128)  # so the summary's mean is samples over seconds
    (reading,) = parser.feed("  5/100 ━━━━━━━━━━━━━━━━━━━━ 0s 16ms/step - loss: 2.28", now=13.0)  # a new epoch
    assert reading.samples_per_sec == pytest.approx((40 + 5) * 128 / 2.0)


# --- The run's figure, as each script means it ----------------------------------------------
# Fixtures made by make_reading_fixtures.py (SOURCES.md, "Reading the run's figure").


def summary_of(name: str, hint: int | None = None) -> tuple[ThroughputSummary, list[tuple[str, Throughput]]]:
    """The summary's throughput after the file's readings, and each live reading with the
    line it came from."""
    lines = output_lines(name)
    return summarize(ThroughputParser(batch_size_hint=hint), [(float(t), line) for t, line in enumerate(lines)], end=float(len(lines)))


def summarize(
    parser: ThroughputParser, rows: list[tuple[float, str]], *, end: float, clocked: bool = False
) -> tuple[ThroughputSummary, list[tuple[str, Throughput]]]:
    """Feed ``rows`` ((time, line)) to ``parser`` and a summary, the run ending at ``end``;
    ``clocked``: the parser reads the rows' times as gputui's clock (else its own)."""
    builder = SummaryBuilder()
    live = []
    for t, line in rows:
        for reading in parser.feed(line, now=t if clocked else None):
            builder.on_event(Event(t, ev.THROUGHPUT, reading))
            if not reading.final:
                live.append((line, reading))
    for reading in parser.finish(now=end if clocked else None):  # the run has ended, as the session tells it
        builder.on_event(Event(end, ev.THROUGHPUT, reading))
    return builder.build().throughput, live


def test_start_up_bars_of_datasets_and_the_hub_are_not_training():
    """datasets' generation (a bar without a total: "Generating train split: 3668 examples
    [00:00, 26041.70 examples/s]"), Map, Filter and tokenizing bars, downloads, "Fetching 4
    files" and "Loading checkpoint shards" come before the Trainer's bar and give nothing:
    the run's figure is the Trainer's steps over its runtime, not examples/s of datasets."""
    tp, live = summary_of("datasets_then_trainer.log")
    assert live and {(r.source, r.unit) for _, r in live} == {("tqdm", "steps")}
    assert all(line.lstrip()[:1].isdigit() for line, _ in live), [line for line, _ in live if not line.lstrip()[:1].isdigit()]
    assert tp.figure == pytest.approx(trainer_training_figure("datasets_then_trainer.log"), rel=0.02)


def test_a_loop_that_speeds_up_reads_its_count_over_its_time():
    """tqdm's rate is smoothed (an EMA of recent redraws); the figure is its counter over
    its elapsed clock: 1200 iterations in 42.3 s, as the closing line says (28.37it/s)."""
    tp, live = summary_of("tqdm_speedup.log")
    assert tp.unit == "steps" and tp.figure == pytest.approx(1200 / 42.3, rel=0.02)
    assert live[-1][1].samples_per_sec == pytest.approx(28.37)  # the bar's closing line: its overall average


# The same loop for real: a PyTorch loop over a DataLoader in a tqdm bar, its step 40 ms,
# then 20 ms from the halfway step (slept: the load of a shared machine does not move it).
SPEEDUP_STEPS, SPEEDUP_BATCH = 450, 8
SPEEDUP_SCRIPT = f"""
import time, torch
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm
n = {SPEEDUP_STEPS} * {SPEEDUP_BATCH}
data = DataLoader(TensorDataset(torch.randn(n, 16), torch.randn(n, 1)), batch_size={SPEEDUP_BATCH})
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in enumerate(tqdm(data, desc="train")):
    opt.zero_grad(); torch.nn.functional.mse_loss(model(x), y).backward(); opt.step()
    time.sleep(0.04 if i < {SPEEDUP_STEPS // 2} else 0.02)
"""
CLOSING = re.compile(rf"train: 100%\|[^|]*\| {SPEEDUP_STEPS}/{SPEEDUP_STEPS} \[[^,\]]*, ([0-9.]+)it/s\]")


@pytest.mark.parametrize("probe", [True, False], ids=["probe", "no-probe"])
def test_a_real_loop_that_doubles_its_speed_reads_its_count_over_its_time(tmp_path, probe):
    """Run under gputui, with and without the probe: the figure is the bar's counter over
    its elapsed clock, which its closing line prints (tqdm's close shows the average,
    not its smoothed rate), in the run's unit (samples where the probe tells the batch)."""
    pytest.importorskip("torch")
    pytest.importorskip("tqdm")
    (tmp_path / "train.py").write_text(SPEEDUP_SCRIPT)
    out = tmp_path / "run.jsonl"
    args = ["--headless", "--record", str(out), *([] if probe else ["--no-probe"]), "--", sys.executable, "train.py"]
    done = run_gputui(args, tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    closing = [float(m.group(1)) for m in CLOSING.finditer(done.stdout)]
    assert closing, done.stdout[-1000:]  # the bar passed through to the end
    summary = read_recording(out).summary
    assert summary is not None and summary.throughput is not None
    tp = summary.throughput
    own = closing[-1] * (SPEEDUP_BATCH if tp.unit == "samples" else 1)
    assert tp.unit == ("samples" if probe else "steps") and tp.source == ("probe" if probe else "tqdm"), tp
    assert tp.run_figure == pytest.approx(own, rel=0.02), f"{tp.run_figure} {tp.unit}/s from {tp.source}: tqdm's own {own}"


def test_a_bar_that_slows_after_a_pause_reads_its_count_over_its_time():
    """The Trainer's bar runs on through its evaluations and slows (a load beside it): its
    smoothed rate on the last redraws (27.55it/s, 300 over it is 10.89 s, inside the
    "00:10" its clock shows) is not its time; the closing line's average (29.46it/s) is,
    which only the run's end shows to be the last line."""
    tp, live = summary_of("tqdm_full_bar_smoothed.log")
    assert live[-1][1].samples_per_sec == pytest.approx(29.46)
    assert tp.unit == "steps" and tp.figure == pytest.approx(29.46, rel=0.01)


def test_the_trainers_last_checkpoint_is_not_training_time():
    """The Trainer on an H200 (BERT-large's shape, hf_trainer_h200_checkpoint.jsonl: its
    output as gputui timed it): after its last step it writes its checkpoint with its bar
    still open ("Writing model shards", then the optimizer's state, 4.4 s), and the
    bar's closing line, after the last evaluation, holds those seconds with no step in
    them.  The figure is its 375 steps over train_runtime less its evaluations and that
    checkpoint (read off its lines as below), not over the checkpoint too (4.564 before)."""
    timed = [json.loads(line) for line in (DATA / "hf_trainer_h200_checkpoint.jsonl").read_text(encoding="utf-8").splitlines()]
    tp, _ = summarize(ThroughputParser(), [(row["t"], row["text"]) for row in timed], end=timed[-1]["t"], clocked=True)
    texts = [row["text"] for row in timed]
    runtime = float(re.findall(r"'train_runtime': '([0-9.]+)'", "\n".join(texts))[-1])
    evals = sum(float(v) for v in re.findall(r"'eval_runtime': '([0-9.]+)'", "\n".join(texts)))
    shards = next(i for i, text in enumerate(texts) if text.startswith("Writing model shards"))
    after = next(i for i in range(shards, len(texts)) if not texts[i].startswith("Writing model shards"))
    checkpoint = timed[after]["t"] - timed[shards - 1]["t"]  # from the training bar's last line
    assert tp.unit == "steps" and tp.figure == pytest.approx(375 / (runtime - evals - checkpoint), rel=0.01)


def test_lightnings_cumulative_average_is_not_under_read():
    """Lightning's training bar prints each epoch's average (smoothing=0), which a slow
    start holds down for the whole first epoch: no median of what it prints is its
    closing figure.  Its validation, test and predict bars give nothing.  The
    figure is the epochs' batches over the bar's clock, as its closing figures count them
    (its clock runs on through validation)."""
    tp, live = summary_of("lightning_slow_start.log")
    assert all(line.startswith("Epoch ") for line, _ in live)
    assert tp.figure == pytest.approx(7.595, rel=0.02)  # 120 batches over 15.8 s of the bar's clock


def test_an_evaluation_bar_longer_than_the_training_bar_is_not_training():
    """The Trainer's evaluation bar (no description, 150 batches) is drawn while its
    training bar (60 steps) is unfinished: it is not the training bar for being larger."""
    tp, live = summary_of("trainer_long_eval.log")
    assert live and all("/60 [" in line for line, _ in live)
    assert tp.figure == pytest.approx(trainer_training_figure("trainer_long_eval.log"), rel=0.02)


def trainer_training_figure(name: str) -> float:
    """The Trainer's steps over its training time alone: train_steps_per_second times
    train_runtime, over train_runtime less the eval_runtime of each evaluation it logged
    (its own train_steps_per_second holds them)."""
    text = (DATA / name).read_text(encoding="utf-8")
    runtime = float(re.findall(r"'train_runtime': ([0-9.]+)", text)[-1])
    steps = float(re.findall(r"'train_steps_per_second': ([0-9.]+)", text)[-1]) * runtime
    return steps / (runtime - sum(float(v) for v in re.findall(r"'eval_runtime': ([0-9.]+)", text)))


def test_timm_is_read_by_its_running_average_and_its_meters():
    """timm's train.py: the parenthesised rate (the epoch's running average) is the
    reading, and the figure is its samples over its update time across both epochs,
    less the run's first update (the start: timm's meters restart each epoch, so no
    count of its own holds it)."""
    tp, live = summary_of("timm_train_epochs.log")
    text = (DATA / "timm_train_epochs.log").read_text(encoding="utf-8")
    averages = [float(rate) for rate in re.findall(r"\(\s*[0-9.]+s,\s+([0-9.]+)/s\)", text)]
    assert [r.samples_per_sec for _, r in live] == pytest.approx(averages)
    # Each epoch's last line: 201 updates at 0.317 s and 3228.81/s on average; the run's
    # first update alone took 1.842 s at 555.92/s.
    epoch_samples, epoch_seconds, first = 3228.81 * 0.317 * 201, 0.317 * 201, (555.92 * 1.842, 1.842)
    figure = (2 * epoch_samples - first[0]) / (2 * epoch_seconds - first[1])
    assert tp.unit == "samples" and tp.figure == pytest.approx(figure, rel=0.001) and figure > 3228.81 * 1.01


def test_timm_on_a_gpu_is_read_by_its_meters_however_they_are_rounded():
    """timm's lines from a GPU (an H200, see SOURCES.md): 8 samples an update at some 15 ms,
    the average time printed to 1 ms.  Windows made from those rounded times alone came
    out negative and were dropped, which left the figure 36 % low.  The figure is the
    samples over the time of every update but the run's first (its 17 s start)."""
    tp, live = summary_of("timm_train_h200.log")
    text = (DATA / "timm_train_h200.log").read_text(encoding="utf-8")
    rates = [float(rate) for rate in re.findall(r"Time: [0-9.]+s,\s+([0-9.]+)/s", text)]
    own = 8 * len(rates[1:]) / sum(8 / rate for rate in rates[1:])
    assert len(live) == len(rates) and tp.unit == "samples"
    assert tp.figure == pytest.approx(own, rel=0.005)


def test_a_nanogpt_fork_is_read_by_its_own_tok_s():
    """A fork that prints its own tok/s beside the iteration time is read by that rate,
    in tokens, not by the time (which the header would turn into tokens too)."""
    tp, live = summary_of("nanogpt_toks.log")
    printed = [float(rate.replace(",", "")) for rate in re.findall(r"tok/s ([0-9,]+)", (DATA / "nanogpt_toks.log").read_text(encoding="utf-8"))]
    assert [r.samples_per_sec for _, r in live] == pytest.approx(printed)
    assert {r.unit for _, r in live} == {"tokens"}

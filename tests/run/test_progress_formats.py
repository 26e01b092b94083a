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

import pytest

from gputui.model import Throughput
from gputui.run.output_stream import LineSplitter, output_line
from gputui.run.throughput import ThroughputParser
from tests.support.process import REPO

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
        assert rates == pytest.approx([tokens * r for r in expected["live_rates"]], rel=1e-3)
        return
    # Steps may come first (the Trainer's bar before its first logging dict with tokens);
    # once the tool's own unit is read, it stays.
    # once the tool's own unit is read, it stays.  Taking over from the bar needs a second
    # reading (a script's closing line alone is a reported figure): the first is not live.
    first = next((i for i, r in enumerate(live) if r.unit == expected["unit"]), len(live))
    assert {r.unit for r in live[:first]} <= {"steps"} and {r.unit for r in live[first:]} <= {expected["unit"]}
    wanted = expected["live_rates"][1:] if first else expected["live_rates"]
    assert rates[first:] == pytest.approx(wanted, rel=2e-3)


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if EXPECTED[n].get("final") is not None or EXPECTED[n].get("other_units")))
def test_final_figures_keep_their_unit(name):
    expected = EXPECTED[name]
    finals = {r.unit: r.samples_per_sec for r in readings_of(name) if r.final}
    if expected.get("final") is not None:
        assert finals[expected["unit"]] == pytest.approx(expected["final"], rel=1e-3)
    for unit, other in (expected.get("other_units") or {}).items():
        if other.get("final") is not None:
            assert finals[unit] == pytest.approx(other["final"], rel=1e-3)


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

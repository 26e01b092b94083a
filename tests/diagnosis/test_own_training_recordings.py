"""The own-training runs recorded on an H200 (docs/own-training-results/, made by
benchmarks/own-training-gpu.sh from the unmodified scripts of benchmarks/own_training/)
still read, and today's diagnosis still says of each what it said there: a well-fed run
gets neither input_bound nor python_bound, a starved one input_bound from the probe's
data wait (sampled in nanoGPT's get_batch(), which has no DataLoader), a Python-bound one python_bound; ``--pid`` on the HF Trainer run, with no
output and no probe, input- or Python-bound from telemetry alone."""

from __future__ import annotations

import pytest

from gputui.diagnosis import Settings, replay_recording
from gputui.record import events as ev
from gputui.record.recording import read_recording
from tests.support.process import REPO
from tests.support.records import throughput_of

RESULTS = REPO / "docs" / "own-training-results"
RUNS = sorted(path.stem for path in RESULTS.glob("*.jsonl"))
JUDGED = {"input_bound", "python_bound"}


def expected_kinds(name: str) -> set[str]:
    if name.endswith("-pid"):
        return {"input_bound"}  # "Input- or Python-bound": without the probe it cannot tell which
    if name.endswith("-fed"):
        return set()
    if name.endswith("-python-bound"):
        return {"python_bound"}
    return {"input_bound"}  # nanoGPT's too: the probe's sampler saw its loop in get_batch()


def test_every_script_and_variant_is_there():
    scripts = {"hf_trainer", "lightning_fit", "nanogpt_loop", "torch_tqdm_loop"}
    assert {f"{s}-{v}" for s in scripts for v in ("fed", "starved", "python-bound")} <= set(RUNS)
    assert {"hf_trainer-starved-pid", "hf_trainer-python-bound-pid"} <= set(RUNS)


@pytest.mark.parametrize("name", RUNS)
def test_todays_diagnosis_says_what_it_said_on_the_h200(name):
    rec = read_recording(RESULTS / f"{name}.jsonl")
    findings = [e.payload for e in replay_recording(rec, Settings()) if isinstance(e.payload, ev.Finding)]
    kinds = {f.kind for f in findings if f.severity in ("warning", "critical")} & JUDGED
    assert kinds == expected_kinds(name), [f.title for f in findings]


@pytest.mark.parametrize("name", [n for n in RUNS if not n.endswith("-pid")])
def test_the_summary_reads_the_training_phase_in_the_jobs_unit(name):
    rec = read_recording(RESULTS / f"{name}.jsonl")
    summary = rec.summary
    assert summary is not None and summary.window == "training" and summary.phases
    assert summary.phases[0].phase == "startup" and any(p.phase == "training" for p in summary.phases)
    tp = throughput_of(summary)
    assert tp.unit == ("tokens" if name.startswith("nanogpt") else "samples")
    # the median against the script's own closing figure (docs/your-own-training.md's table)
    assert tp.reported is not None and tp.median == pytest.approx(tp.reported.samples_per_sec, rel=0.02)


def test_the_probe_reported_the_data_wait_of_a_starved_loop():
    rec = read_recording(RESULTS / "hf_trainer-starved.jsonl")
    reports = [e.payload for e in rec.events_of(ev.PROBE) if isinstance(e.payload, ev.ProbeReport) and e.payload.steps]
    assert reports and all(r.workers == 0 for r in reports)
    waited = sum(r.data_wait_s or 0.0 for r in reports) / sum(r.seconds or 0.0 for r in reports)
    assert waited > 0.7

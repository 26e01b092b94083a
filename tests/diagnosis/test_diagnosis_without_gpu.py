"""On a machine without a GPU the diagnosis stays honest: a rule that needs a GPU says
once, as a note in the summary, that it could not judge; a job watched with ``--pid``
says why it has no throughput, phases or findings; the input-bound advice counts no
cores per GPU where there is none; and the idle finding stands aside where another
finding names why the run waits."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.diagnosis import Settings
from gputui.diagnosis.engine import Diagnoser, replay
from gputui.model import ProcessSample
from gputui.presets.preset import Config
from gputui.record import events as ev
from gputui.record.recording import Recording, read_recording
from gputui.session.options import RunOptions
from gputui.session.progress import ProgressPrinter, summary_table
from gputui.session.session import Session
from gputui.telemetry.gpu import GpuTelemetry
from tests.support.fake_nvml import FakeNvml
from tests.support.lookback import without_gpus
from tests.support.process import REPO
from tests.support.records import make_summary

OWN = REPO / "docs" / "own-training-results"
PYTHON_BOUND_NOTE = "python-bound: needs a GPU's utilization; not judged on this machine"


def no_gpu(name: str, tmp_path: Path) -> Recording:
    """An own-training recording as a machine without a GPU would have made it."""
    return read_recording(without_gpus(OWN / f"{name}.jsonl", tmp_path / f"{name}.jsonl"))


def replayed(rec: Recording, settings: Settings | None = None) -> tuple[list[ev.Finding], list[str]]:
    """Each finding in its last state, in the order the summary lists them, and the notes."""
    diagnoser = Diagnoser(settings or Settings())
    replay(rec.header, rec.samples, rec.events, diagnoser=diagnoser)
    return diagnoser.findings(), diagnoser.notes()


def listed(rec: Recording) -> list[ev.Finding]:
    """Each finding in its last state, in the order the summary lists them (when each began)."""
    last = {e.payload.id: e.payload for e in replay(rec.header, rec.samples, rec.events) if isinstance(e.payload, ev.Finding)}
    return sorted(last.values(), key=lambda f: (f.since or 0.0, f.id))


def test_python_bound_says_once_that_it_needs_a_gpu(tmp_path):
    with_gpu, notes = replayed(read_recording(OWN / "hf_trainer-python-bound.jsonl"))
    assert "python_bound" in {f.kind for f in with_gpu} and not any(n.startswith("python-bound") for n in notes)
    findings, notes = replayed(no_gpu("hf_trainer-python-bound", tmp_path))
    assert "python_bound" not in {f.kind for f in findings}
    assert notes.count(PYTHON_BOUND_NOTE) == 1, notes


def test_a_rule_that_judged_even_once_has_no_note(tmp_path):
    # the probe's data wait lets input-bound judge without a GPU; python-bound still cannot
    findings, notes = replayed(no_gpu("hf_trainer-starved", tmp_path))
    assert "input_bound" in {f.kind for f in findings}
    assert notes == [PYTHON_BOUND_NOTE]


def test_the_summary_table_prints_the_notes():
    lines = summary_table(make_summary(duration_s=5.0, notes=[PYTHON_BOUND_NOTE]))
    assert f"  note      {PYTHON_BOUND_NOTE}" in lines, lines
    assert not any(line.lstrip().startswith("note") for line in summary_table(make_summary(duration_s=5.0)))


@pytest.fixture
def busy_loop():
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait()


def test_a_job_watched_by_pid_without_a_gpu_says_why_it_recorded_nothing(busy_loop):
    session = Session(RunOptions(interval=0.5, duration=2.0).session_config(None, attach_pid=busy_loop), gpu=GpuTelemetry(FakeNvml([])))
    stderr = io.StringIO()
    session.add_observer(ProgressPrinter(session.summary_builder, stderr))
    summary = session.run()
    assert summary.throughput is not None and not summary.throughput.readings and not summary.phases and not summary.findings
    notes = summary.notes or []
    assert any(n.startswith("no throughput: a job watched with --pid tells gputui nothing of its progress") for n in notes), notes
    assert any(n.startswith("diagnosis: nothing but memory judged: the run showed no progress and ended within the start grace period") for n in notes), notes
    assert PYTHON_BOUND_NOTE in notes
    assert f"note      {PYTHON_BOUND_NOTE}" in stderr.getvalue()


def test_past_the_grace_period_only_the_rules_that_need_a_gpu_have_notes(busy_loop):
    config = Config(presets={}, diagnosis={"start_grace_s": 0.5, "open_after_s": 1.0})
    options = RunOptions(config=config, interval=0.25, duration=2.0)
    summary = Session(options.session_config(None, attach_pid=busy_loop), gpu=GpuTelemetry(FakeNvml([]))).run()
    notes = summary.notes or []
    assert PYTHON_BOUND_NOTE in notes and not any(n.startswith("diagnosis: nothing but memory judged") for n in notes), notes


def test_input_bound_advice_counts_no_cores_per_gpu_without_a_gpu(tmp_path):
    finding = next(f for f in listed(no_gpu("hf_trainer-starved", tmp_path)) if f.kind == "input_bound")
    said = " ".join([finding.title, *(finding.advice or [])])
    assert "GPU(s)" not in said and "per GPU" not in said, said
    assert "this machine has 16 cores" in said, said
    assert (finding.evidence or {}).get("gpus") == 0


def waiting_on_its_data(rec: Recording) -> Recording:
    """The run's processes nearly still (the loop waits on slow reads), as the probe's
    data wait already says."""
    for sample in rec.samples:
        if sample.host is not None and sample.host.processes:
            quiet: list[ProcessSample] = [dataclasses.replace(p, cpu_percent=3.0, top_thread_pct=3.0) for p in sample.host.processes]
            sample.host.processes[:] = quiet
    return rec


def test_idle_stands_aside_where_input_bound_names_the_wait(tmp_path):
    findings = listed(waiting_on_its_data(no_gpu("hf_trainer-starved", tmp_path)))
    assert [f.kind for f in findings] == ["input_bound"], [f.title for f in findings]
    findings = listed(waiting_on_its_data(read_recording(OWN / "hf_trainer-starved.jsonl")))
    assert "idle" not in {f.kind for f in findings} and "input_bound" in {f.kind for f in findings}, [f.title for f in findings]


def test_idle_without_a_named_cause_is_still_found():
    assert [f.kind for f in listed(read_recording(REPO / "tests" / "data" / "traces" / "idle_io.jsonl"))] == ["idle"]

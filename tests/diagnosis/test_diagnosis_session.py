"""The Session wiring: findings reach the recording as events, the summary as a list,
and the headless progress line, both in process (a fake H200 that runs hot) and end
to end (`gputui --record` with a command preset that only waits)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from gputui.model import GpuSample, HostSample, Sample
from gputui.presets.preset import load_file
from gputui.record import events as ev
from gputui.record.recorder import Recorder
from gputui.record.recording import read_recording
from gputui.session.options import RunOptions
from gputui.session.progress import ProgressPrinter, progress_line
from gputui.session.session import Session
from gputui.session.summary import SummaryBuilder
from gputui.telemetry.gpu import GpuTelemetry
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.process import run_gputui

FAST = {"start_grace_s": 0.0, "open_after_s": 0.5, "close_after_s": 0.5}


def preset_file(tmp_path: Path, seconds: float, diagnosis: dict[str, float] | None = None, top: str = "") -> Path:
    lines = [top, "[presets.wait]", f'command = [{json.dumps(sys.executable)}, "-c", "import time; time.sleep({seconds})"]']
    if diagnosis:
        lines.append("[presets.wait.diagnosis]")
        lines += [f"{k} = {v}" for k, v in diagnosis.items()]
    path = tmp_path / "wait.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_hot_throttled_gpu_is_recorded_as_a_finding_and_summarised(tmp_path):
    # A fake H200 at 86 °C with SwThermalSlowdown and its SM clock down to 1500 MHz.
    hot = FakeGpu(temp_c=86, throttle_mask=0x20, sm_clock=1500)
    preset = load_file(preset_file(tmp_path, 2.5, FAST))["wait"]
    session = Session(RunOptions(interval=0.1).session_config(preset), gpu=GpuTelemetry(FakeNvml([hot])))
    out = tmp_path / "r.jsonl"
    recorder, stderr = Recorder(out), io.StringIO()
    session.add_observer(recorder)
    session.add_observer(ProgressPrinter(session.summary_builder, stderr))
    summary = session.run()

    rec = read_recording(out)
    thermal = [e for e in rec.events_of(ev.FINDING) if e.data["kind"] == "thermal"]
    assert thermal and thermal[0].data["state"] == "open" and thermal[0].data["severity"] == "critical"
    evidence = thermal[-1].data["evidence"]
    assert evidence["slowdown_c"] == 89 and evidence["sm_clock_max_mhz"] == 1980
    assert evidence["clock_drop_pct"] == 24.2
    assert (rec.header.diagnosis or {})["open_after_s"] == 0.5  # the settings used are recorded
    # The summary lists it, in the recording and as returned.
    assert rec.summary is not None and rec.summary.findings is not None and summary.findings is not None
    assert [f.kind for f in rec.summary.findings] == [f.kind for f in summary.findings]
    assert "thermal" in [f.kind for f in summary.findings]
    # Finding events come after the samples that caused them, in time order.
    first_finding = rec.events_of(ev.FINDING)[0].t
    assert sum(s.t <= first_finding for s in rec.samples) >= 5
    text = stderr.getvalue()
    assert "gputui: finding [critical]: GPU0 thermal throttling" in text
    assert "! thermal GPU0" in text  # the progress line names open findings
    assert "finding (critical)" in text  # and the summary table lists them


def test_no_finding_on_a_healthy_fake_gpu(tmp_path):
    cool = FakeGpu(temp_c=55, throttle_mask=0)
    preset = load_file(preset_file(tmp_path, 1.5, FAST))["wait"]
    session = Session(RunOptions(interval=0.1).session_config(preset), gpu=GpuTelemetry(FakeNvml([cool])))
    summary = session.run()
    kinds = {f.kind for f in summary.findings or []}
    assert not kinds & {"thermal", "power_cap", "hw_slowdown", "launch_bound", "pcie_link", "vram_full"}


def test_record_a_waiting_command_end_to_end(tmp_path):
    # No GPU needed: a run whose processes do nothing is "idle"; on a GPU machine its
    # idle GPU agrees.  The files' [diagnosis] table and the preset's own both apply.
    path = preset_file(tmp_path, 5, {"open_after_s": 1.0, "close_after_s": 1.0}, top="[diagnosis]\nstart_grace_s = 0.5\n")
    out = tmp_path / "r.jsonl"
    result = run_gputui(["--presets", str(path), "--record", str(out), "--preset", "wait", "--interval", "0.2"], tmp_path)
    assert result.returncode == 0, result.stderr

    rec = read_recording(out)
    diagnosis = rec.header.diagnosis or {}
    assert diagnosis["start_grace_s"] == 0.5 and diagnosis["open_after_s"] == 1.0
    findings = rec.events_of(ev.FINDING)
    idle = [e for e in findings if e.data["kind"] == "idle"]
    assert idle, [e.data["title"] for e in findings]
    assert idle[0].data["state"] == "open" and idle[0].data["evidence"]["run_cpu_pct"] < 20
    assert rec.summary is not None and any(f.kind == "idle" for f in rec.summary.findings or [])
    assert rec.events.index(findings[-1]) < len(rec.events)  # written before the summary
    assert "gputui: finding [warning]: The run is idle" in result.stderr


def test_progress_line_mentions_open_findings():
    sample = Sample(t=12.0, gpus=[GpuSample(index=0, util_gpu=14.0, sm_active=7.0)], host=HostSample(cpu_percent=8.0))
    findings = [ev.Finding(id="input_bound-run-1", kind="input_bound", evidence={}), ev.Finding(id="thermal-gpu0-1", kind="thermal", evidence={"gpu": 0})]
    line = progress_line(sample, "measure", 205.0, SummaryBuilder(), findings)
    assert line.endswith("! input-bound, thermal GPU0")
    assert "!" not in progress_line(sample, "measure", 205.0, SummaryBuilder())

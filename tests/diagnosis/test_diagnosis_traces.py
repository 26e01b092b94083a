"""Every diagnosis rule on recorded sample streams, positive and negative.

The traces in tests/data/traces are gputui recordings written by make_traces.py
(each scenario is described there); here they are read back with read_recording and
replayed through the diagnoser as a live session would feed it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import pytest

from gputui.diagnosis import Settings, replay
from gputui.record import events as ev
from gputui.record.events import make_event
from gputui.record.recording import read_recording
from tests.support.diagnosis_traces import TRACES, final, findings, kinds, load
from tests.support.records import with_preset


def measure_start(rec) -> float:
    return next(e.t for e in rec.events if e.kind == ev.PHASE and e.data["phase"] == "measure")


# --- what each trace must and must not produce ------------------------------------------

EXPECTED = {
    "healthy_synthetic": [],
    "input_bound_1worker": ["input_bound"],
    "input_enough_workers": [],
    "thermal_crossing": ["thermal"],
    "thermal_flapping": ["thermal"],
    "power_capped": ["power_cap"],
    "hw_slowdown": ["hw_slowdown"],
    "memory_pressure": ["host_memory", "oom", "vram_full"],
    "launch_bound": ["launch_bound"],
    "idle_io": ["idle"],
    "grace_startup": [],
    "pcie_link": ["pcie_link"],
    "pcie_idle_downshift": [],
    "pcie_traffic": ["pcie_traffic"],
    "warmup_only": [],
}


def test_every_trace_is_covered():
    assert sorted(p.stem for p in TRACES.glob("*.jsonl")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_trace_gives_exactly_its_findings_once(name):
    events = findings(name)
    assert kinds(events) == EXPECTED[name]
    per_kind = [d["kind"] for d in final(events).values()]
    assert len(per_kind) == len(set(per_kind)), f"a finding opened more than once: {per_kind}"
    for event in events:  # the event fields of gputui/record/events.py, every time
        data = event.data
        one_gpu = {"gpu"} if data["id"].split("-")[-2].startswith("gpu") else set()  # a finding about one GPU names it
        assert set(data) == {"id", "kind", "state", "severity", "title", "since", "until", "evidence", "advice"} | one_gpu
        assert data["state"] in ("open", "closed") and data["severity"] in ("info", "warning", "critical")
        assert data["since"] <= data["until"] <= event.t + 1e-6
        assert data["title"] and data["advice"] and all(isinstance(a, str) for a in data["advice"])
        assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in data["evidence"].values())


# --- 1. input-bound --------------------------------------------------------------------


def test_input_bound_is_flagged_within_30_s_of_the_measured_phase_with_its_evidence():
    rec = load("input_bound_1worker")
    events = findings(rec)
    first = events[0]
    assert first.data["kind"] == "input_bound" and first.data["state"] == "open"
    assert first.t - measure_start(rec) <= 30.0
    evidence = final(events)["input_bound-run-1"]["evidence"]
    assert evidence["workers"] == 1 and evidence["worker_cpu_pct"] >= 95
    assert evidence["gpu_sm_active_pct"] < 10
    assert evidence["host_cpu_pct"] < 15  # the machine looks idle: only the worker's own CPU tells
    assert evidence["cores"] == 16
    advice = " ".join(first.data["advice"])
    assert "workers" in advice and "DALI" in advice and "4-8 cores" in advice and "prefetch" in advice.lower()


def test_busy_workers_feeding_a_busy_gpu_are_not_input_bound():
    rec = load("input_enough_workers")
    worker_cpu = [p.cpu_percent for s in rec.samples if s.host for p in s.host.processes if p.role == "worker" and p.cpu_percent is not None]
    assert sum(worker_cpu) / len(worker_cpu) > 85  # the workers are saturated ...
    assert findings(rec) == []  # ... but the GPU is busy


def test_the_synthetic_pipeline_is_never_input_bound():
    # The input-bound trace relabelled as a synthetic-pipeline run: nothing to wait for.
    rec = load("input_bound_1worker")
    with_preset(rec, pipeline="synthetic")
    rec.events = [make_event(e.t, e.kind, {**e.data, "pipeline": "synthetic"}) if e.kind == ev.WORKLOAD else e for e in rec.events]
    assert "input_bound" not in kinds(findings(rec))


def test_a_throughput_ceiling_flags_a_gpu_that_looks_busy_enough():
    # Workers saturated, SM activity 82%: not input-bound by the GPU's numbers alone ...
    rec = load("input_enough_workers")
    assert findings(rec) == []
    # ... but 2,810 samples/s is below 70% of a 4,500 samples/s synthetic ceiling.
    events = findings(rec, Settings(ceiling_samples_per_sec=4500.0))
    assert kinds(events) == ["input_bound"]
    evidence = final(events)["input_bound-run-1"]["evidence"]
    assert evidence["ceiling_samples_per_sec"] == 4500.0 and 60 < evidence["ceiling_pct"] < 65
    assert findings(rec, Settings(ceiling_samples_per_sec=3000.0)) == []  # 94% of the ceiling


# --- 2. thermal ------------------------------------------------------------------------


def test_thermal_trace_crossing_80_warns_then_confirms_throttling_with_clock_and_throughput_drop():
    rec = load("thermal_crossing")
    crossing = next(s.t for s in rec.samples if s.gpus[0].temp_c >= 80)
    events = [e for e in findings(rec) if e.data["kind"] == "thermal"]
    states = [(e.data["state"], e.data["severity"]) for e in events]
    assert states[:2] == [("open", "warning"), ("open", "critical")]
    assert states[-1] == ("closed", "critical") and len(events) == 3
    opened = events[0]
    assert opened.data["since"] == pytest.approx(crossing, abs=2.5)
    assert "89 °C" in opened.data["title"]  # the GPU's own slowdown threshold
    last = events[-1].data["evidence"]
    assert last["slowdown_c"] == 89.0 and last["temp_max_c"] >= 86
    assert last["sm_clock_max_mhz"] == 1980 and 15 <= last["clock_drop_pct"] <= 22
    assert 15 <= last["throughput_drop_pct"] <= 22 and last["samples_per_sec_before"] > 2900
    assert "throttling" in events[-1].data["title"]


def test_below_the_warning_temperature_there_is_no_thermal_finding():
    rec = load("healthy_synthetic")
    assert max(s.gpus[0].temp_c for s in rec.samples) < 80
    assert findings(rec) == []
    # The same flapping trace with the warning raised to 85 °C: nothing.
    assert findings("thermal_flapping", Settings(thermal_warn_c=85.0)) == []


def test_a_flapping_temperature_gives_one_finding_not_twenty():
    rec = load("thermal_flapping")
    temps = [s.gpus[0].temp_c for s in rec.samples]
    crossings = sum((a >= 80) != (b >= 80) for a, b in zip(temps, temps[1:]))
    assert crossings >= 20  # a naive "above 80 °C" check would open and close twenty times
    events = findings(rec)
    assert [e.data["state"] for e in events] == ["open", "closed"]
    assert len(final(events)) == 1


# --- 3. power cap -----------------------------------------------------------------------


def test_power_capped_trace_reports_share_of_time_capped_and_clock_drop():
    events = findings("power_capped")
    assert kinds(events) == ["power_cap"]
    data = final(events)["power_cap-gpu0-1"]
    evidence = data["evidence"]
    assert 75 <= evidence["capped_pct"] <= 92
    assert evidence["power_limit_w"] == 700.0 and evidence["power_median_w"] >= 690
    assert 8 <= evidence["clock_drop_pct"] <= 16
    assert data["severity"] == "info"  # the card's own default limit: normal under heavy load
    assert [e.data["state"] for e in events].count("open") == 2  # opened, then the final update


def test_power_cap_blips_are_not_a_power_cap():
    rec = load("healthy_synthetic")
    capped = [s for s in rec.samples if "SwPowerCap" in (s.gpus[0].throttle_reasons or [])]
    assert len(capped) >= 10  # it does flicker
    assert findings(rec) == []


def test_a_lowered_power_limit_makes_the_power_cap_a_warning():
    rec = load("power_capped")
    rec.header.gpu_list[0].power_default_limit_w = 800.0  # someone capped the card below its default
    data = final(findings(rec))["power_cap-gpu0-1"]
    assert data["severity"] == "warning"
    assert "nvidia-smi -i 0 -pl 800" in " ".join(data["advice"])


# --- 4. hardware slowdown -------------------------------------------------------------------


def test_power_brake_is_critical_with_the_clock_halved():
    events = findings("hw_slowdown")
    data = final(events)["hw_slowdown-gpu0-1"]
    assert data["severity"] == "critical" and data["state"] == "closed"
    assert "HwPowerBrakeSlowdown" in data["title"]
    assert data["evidence"]["clock_drop_pct"] == pytest.approx(50, abs=1)
    assert 45 <= data["evidence"]["throughput_drop_pct"] <= 55
    assert 58 <= data["since"] <= 62 and 107 <= data["until"] <= 111
    assert "power supply" in " ".join(data["advice"])


# --- 5. memory ------------------------------------------------------------------------------


def test_memory_trace_flags_full_vram_host_memory_swapping_and_the_oom():
    found = final(findings("memory_pressure"))
    vram, host, oom = found["vram_full-gpu0-1"], found["host_memory-run-1"], found["oom-run-1"]
    assert vram["evidence"]["used_pct_max"] >= 95 and vram["severity"] == "warning"
    assert host["evidence"]["memory_used_pct_max"] >= 90 and host["evidence"]["swapping_pct"] > 50
    assert "swapping" in host["title"] and "memory limit" in " ".join(host["advice"])
    assert oom["severity"] == "critical" and oom["evidence"]["batch_size"] == 96
    assert "Out of memory at batch size 96" in oom["title"]
    assert oom["evidence"]["oom_events"] == 1  # the oom outcome repeats the workload's line: not counted twice


def test_tensorflow_reserving_vram_is_only_information():
    rec = load("memory_pressure")
    with_preset(rec, framework="tf")
    rec.events = [make_event(e.t, e.kind, {**e.data, "framework": "tf"}) if e.kind == ev.WORKLOAD else e for e in rec.events]
    vram = final(findings(rec))["vram_full-gpu0-1"]
    assert vram["severity"] == "info" and "TF_FORCE_GPU_ALLOW_GROWTH" in " ".join(vram["advice"])


def test_a_sigkill_under_memory_pressure_is_reported_as_the_memory_limit():
    rec = load("memory_pressure")
    rec.events = [e for e in rec.events if e.kind not in (ev.OOM, ev.OUTCOME)]
    rec.events.append(make_event(100.5, ev.OUTCOME, {"kind": "signaled", "signal": "SIGKILL", "ok": False}))
    oom = final(findings(rec))["oom-run-1"]
    assert "killed (SIGKILL)" in oom["title"] and oom["severity"] == "critical"


def test_no_memory_findings_when_memory_is_fine():
    for name in ("healthy_synthetic", "input_bound_1worker", "thermal_crossing"):
        assert not {"vram_full", "host_memory", "oom"} & set(kinds(findings(name)))


# --- 6. busy but not working ----------------------------------------------------------------


def test_launch_bound_needs_a_sustained_pattern():
    rec = load("launch_bound")
    events = findings(rec)
    data = final(events)["launch_bound-gpu0-1"]
    assert data["evidence"]["gpu_util_pct"] >= 99 and data["evidence"]["sm_active_pct"] < 35
    assert events[0].t - measure_start(rec) >= 30  # held 30 s, not the usual 10
    assert "batch size (8 now)" in " ".join(data["advice"]) and "CUDA graphs" in " ".join(data["advice"])
    # The healthy trace has a 15-s evaluation pass at 100% utilization and 25% SM: too short.
    healthy = load("healthy_synthetic")
    dip = [s for s in healthy.samples if (s.gpus[0].sm_active or 100) < 35 and s.gpus[0].util_gpu >= 99]
    assert 10 <= len(dip) <= 16
    assert findings(healthy) == []
    # With a 10-s hold it would have fired: the setting is what protects it.
    assert kinds(findings(healthy, Settings(launch_open_after_s=10.0))) == ["launch_bound"]


# --- 7. idle ---------------------------------------------------------------------------------


def test_idle_run_is_flagged_with_disk_reads_as_evidence():
    events = findings("idle_io")
    data = final(events)["idle-run-1"]
    assert 39 <= data["since"] <= 42
    assert data["evidence"]["run_cpu_pct"] < 5 and data["evidence"]["gpu_util_pct"] < 5
    assert data["evidence"]["disk_read_bps"] == pytest.approx(1.5e6, rel=0.2)
    assert "py-spy dump --pid 4242" in " ".join(data["advice"])


def test_start_grace_and_busy_cpu_keep_idle_quiet():
    assert findings("grace_startup") == []  # idle for its first 25 s: within the 30-s grace
    assert kinds(findings("grace_startup", Settings(start_grace_s=5.0))) == ["idle"]
    assert "idle" not in kinds(findings("input_bound_1worker"))  # the GPU waits but the CPU works


# --- 8. PCIe ---------------------------------------------------------------------------------


def test_pcie_link_below_its_generation_under_load():
    data = final(findings("pcie_link"))["pcie_link-gpu0-1"]
    assert data["evidence"]["pcie_gen"] == 4 and data["evidence"]["pcie_max_gen"] == 5
    assert "Gen4 x16" in data["title"] and "Gen5 x16" in data["title"]


def test_pcie_link_downshifted_at_idle_is_not_flagged():
    rec = load("pcie_idle_downshift")
    assert any(s.gpus[0].pcie_gen == 1 for s in rec.samples[20:])  # long idle stretches at Gen1
    assert findings(rec) == []


def test_heavy_host_to_device_traffic_while_under_busy():
    data = final(findings("pcie_traffic"))["pcie_traffic-gpu0-1"]
    assert 65 <= data["evidence"]["rx_link_pct"] <= 75 and data["evidence"]["sm_active_pct"] < 35
    assert "pin_memory" in " ".join(data["advice"])
    # The same traffic on a busy GPU is just a fast pipeline.
    assert "pcie_traffic" not in kinds(findings("pcie_traffic", Settings(input_sm_active_pct=25.0)))


# --- warm-up, settings -----------------------------------------------------------------------


def test_warm_up_is_excluded():
    rec = load("warmup_only")
    assert findings(rec) == []
    # Without its phase events the same run is judged from the start grace on, and the
    # warm-up's pattern is found.
    rec.events = [e for e in rec.events if e.kind != ev.PHASE]
    with_preset(rec, framework=None)
    rec.events = [e for e in rec.events if e.kind != ev.WORKLOAD]
    assert kinds(findings(rec, Settings(start_grace_s=5.0))) != []


def test_disabled_diagnosis_finds_nothing():
    assert findings("memory_pressure", Settings(enabled=False)) == []


def test_replay_uses_the_settings_recorded_in_the_header():
    rec = load("thermal_flapping")
    rec.header = dataclasses.replace(rec.header, diagnosis={"thermal_warn_c": 85.0})
    assert findings(rec) == []


def test_samples_and_events_interleave_by_time():
    rec = load("input_bound_1worker")
    events = replay(rec.header, rec.samples, rec.events, Settings())
    assert [e.t for e in events] == sorted(e.t for e in events)


# --- the fixtures are reproducible -----------------------------------------------------------


def test_make_traces_reproduces_the_committed_fixtures(tmp_path):
    spec = importlib.util.spec_from_file_location("make_traces", TRACES / "make_traces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--out", str(tmp_path)]) == 0
    for path in sorted(TRACES.glob("*.jsonl")):
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), f"{path.name} differs: rerun make_traces.py"


def test_fixtures_read_back_as_whole_recordings():
    for path in TRACES.glob("*.jsonl"):
        rec = read_recording(path)
        assert rec.cut is None and rec.summary is not None
        assert rec.header.gpu_list[0].temp_slowdown_c == 89.0
        assert dataclasses.asdict(rec.samples[5])["gpus"][0]["power_limit_w"] == 700.0


def test_a_failing_rule_is_dropped_and_the_others_go_on(caplog):
    from gputui.diagnosis import Diagnoser
    from gputui.diagnosis.rules import Thermal, make_rules

    class Broken(Thermal):
        kind = "broken"

        def observe(self, ctx, gpu):
            raise RuntimeError("boom")

    rec = load("thermal_crossing")
    diagnoser = Diagnoser(Settings(), rules=[Broken(), *make_rules()])
    diagnoser.on_header(rec.header)
    out = []
    items = sorted([(e.t, 0, e) for e in rec.events] + [(s.t, 1, s) for s in rec.samples], key=lambda x: (x[0], x[1]))
    for _t, which, item in items:
        out += diagnoser.on_event(item) if which == 0 else diagnoser.on_sample(item)
    assert {d.kind for d in out} == {"thermal"}
    assert "diagnosis rule broken failed" in caplog.text
    assert len([r for r in caplog.records if "broken" in r.getMessage()]) == 1  # once, not once per sample


def test_rediagnose_a_recording_from_the_command_line(capsys):
    from gputui.diagnosis.__main__ import main

    path = str(TRACES / "input_bound_1worker.jsonl")
    assert main([path]) == 0
    out = capsys.readouterr().out
    assert "measured phase from 20.4 s" in out and "(+10.6 s from the measured phase)" in out
    assert main([path, "--set", "worker_busy_pct=99.5"]) == 0
    assert "no findings" in capsys.readouterr().out
    assert main([path, "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["kind"] == "input_bound" and lines[0]["state"] == "open"
    assert main([path, "--set", "thermal_warn=1"]) == 2
    assert "unknown key" in capsys.readouterr().err


def test_a_cpu_only_run_on_a_gpu_machine_is_not_input_bound():
    # The input-bound trace as if it were the CPU smoke workload: the idle GPU is not its.
    rec = load("input_bound_1worker")
    rec.events = [make_event(e.t, e.kind, {**e.data, "device": "cpu"}) if e.kind == ev.WORKLOAD else e for e in rec.events]
    assert "input_bound" not in kinds(findings(rec))
    rec = load("input_bound_1worker")
    with_preset(rec, framework="smoke")
    rec.events = [e for e in rec.events if e.kind != ev.WORKLOAD]
    assert "input_bound" not in kinds(findings(rec))

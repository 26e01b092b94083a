"""Shared by the tests/diagnosis/test_diagnosis_*.py files: the committed traces read back,
reshaped for a scenario (GPM taken away, counters added), and replayed."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from gputui.diagnosis import Settings, replay_recording
from gputui.model import GpuSample, HostSample
from gputui.record.events import Event
from gputui.record.recording import Recording, read_recording

TRACES = Path(__file__).parents[1] / "data" / "traces"
GPM_FIELDS = ("sm_active", "sm_occupancy", "tensor_active", "dram_active", "pcie_tx_bps", "pcie_rx_bps")


def load(name: str) -> Recording:
    return read_recording(TRACES / f"{name}.jsonl")


def make_traces():
    """tests/data/traces/make_traces.py as a module (its Trace builder and scenarios)."""
    spec = importlib.util.spec_from_file_location("make_traces", TRACES / "make_traces.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def without_gpm(rec: Recording) -> Recording:
    """The recording as a GPU without GPM (an A100, L4 or RTX card) would have given it."""
    for info in rec.header.gpu_list:
        info.gpm_supported = False
    for gpu in gpus(rec):
        for name in GPM_FIELDS:
            setattr(gpu, name, None)
    return rec


def gpus(rec: Recording) -> list[GpuSample]:
    return [g for s in rec.samples for g in s.gpus]


def hosts(rec: Recording) -> list[tuple[float, HostSample]]:
    return [(s.t, s.host) for s in rec.samples if s.host is not None]


def each_gpu(rec: Recording, change: Callable[[float, GpuSample], None]) -> Recording:
    for s in rec.samples:
        for g in s.gpus:
            change(s.t, g)
    return rec


def findings(rec: Recording | str, settings: Settings | None = None) -> list[Event]:
    """The finding events a replay of ``rec`` (a recording, or a trace's name) gives."""
    return replay_recording(load(rec) if isinstance(rec, str) else rec, settings)


def final(events: list[Event]) -> dict[str, dict]:
    """Each finding's last state, by id."""
    out: dict[str, dict] = {}
    for event in events:
        out[event.data["id"]] = event.data
    return out


def kinds(events: list[Event]) -> list[str]:
    return sorted({e.data["kind"] for e in events})


def of_kind(events: list[Event], kind: str) -> dict:
    """The last state of the one finding of ``kind``."""
    found = [d for d in final(events).values() if d["kind"] == kind]
    assert len(found) == 1, f"{kind}: {len(found)} findings in {kinds(events)}"
    return found[0]

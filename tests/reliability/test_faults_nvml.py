"""NVML faults, injected at the NVML boundary (tests/support/fake_nvml.py, or pynvml missing),
through a whole Session into a recording: the other GPUs and the host keep being
recorded, and the recording says why a GPU is absent."""

from __future__ import annotations

import sys
from pathlib import Path

import pynvml
import pytest

from gputui.model import Sample
from gputui.record.observer import Observer
from gputui.record.recorder import Recorder
from gputui.record.recording import Recording, read_recording
from gputui.session.session import Session, SessionConfig
from gputui.telemetry.gpu import GpuTelemetry
from tests.support.fake_nvml import FakeGpu, FakeNvml

LOSE_AFTER = 3  # samples


class LoseGpuAfter(Observer):
    """Marks a GPU lost after a few samples: from then on every NVML call on it fails."""

    def __init__(self, gpu: FakeGpu, samples: int) -> None:
        self.gpu, self.samples, self.seen = gpu, samples, 0

    def on_sample(self, sample: Sample) -> None:
        self.seen += 1
        if self.seen == self.samples:
            self.gpu.lost = True


def record_session(path: Path, gpu: GpuTelemetry, *observers: Observer, duration: float = 2.5) -> Recording:
    session = Session(SessionConfig(interval=0.1, duration=duration), gpu=gpu)
    recorder = Recorder(path)
    for observer in (recorder, *observers):
        session.add_observer(observer)
    session.run()
    return read_recording(path)


@pytest.mark.parametrize("error", [pynvml.NVMLError_GpuIsLost, pynvml.NVMLError_Unknown, pynvml.NVMLError_GpuNotFound])
def test_a_gpu_lost_mid_run_leaves_the_others_and_the_host_recorded(tmp_path, error):
    gpus = [FakeGpu(), FakeGpu(name="second", lost_error=error), FakeGpu(name="third")]
    rec = record_session(tmp_path / "r.jsonl", GpuTelemetry(FakeNvml(gpus)), LoseGpuAfter(gpus[1], LOSE_AFTER))
    assert rec.cut is None
    assert len(rec.header.gpus) == 3
    # The sampler runs on its own thread: the loss shows from whichever sample came next.
    lost_from = next(i for i, s in enumerate(rec.samples) if s.gpus[1].lost)
    before, after = rec.samples[:lost_from], rec.samples[lost_from:]
    assert len(before) >= LOSE_AFTER and len(after) >= 3
    assert all(not g.lost for s in before for g in s.gpus)
    for sample in after:
        first, lost, third = sample.gpus
        assert lost.lost and lost.temp_c is None and lost.power_w is None
        assert not first.lost and first.temp_c == 51.0 and first.power_w == 312.5
        assert not third.lost and third.memory_used == gpus[2].memory_used
    # The host is read every HOST_INTERVAL_S (and in the last sample): it goes on too.
    hosted = [s for s in after if s.host is not None]
    assert len(hosted) >= 2 and after[-1].host is not None
    assert all(s.host.cpu_percent is not None for s in hosted)
    assert rec.summary is not None


@pytest.mark.parametrize(
    "error, words",
    [
        (pynvml.NVMLError_LibraryNotFound, "library not found"),
        (pynvml.NVMLError_DriverNotLoaded, "driver not loaded"),
        (pynvml.NVMLError_Unknown, "failed to initialise"),
    ],
)
def test_nvml_failing_at_init_still_records_the_host_and_says_why(tmp_path, error, words):
    rec = record_session(tmp_path / "r.jsonl", GpuTelemetry(FakeNvml(init_error=error)), duration=0.8)
    assert rec.header.gpus == [] and words in rec.header.gpu_unavailable_reason.lower()
    # No GPUs: only the ticks that read the host (about once a second, and the last) are samples
    assert len(rec.samples) >= 2
    assert all(s.gpus == [] and s.host is not None and s.host.cpu_percent is not None for s in rec.samples)
    assert rec.summary is not None


def test_nvml_not_installed_still_records_the_host_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` now raises ImportError
    rec = record_session(tmp_path / "r.jsonl", GpuTelemetry(), duration=0.8)
    assert rec.header.gpus == []
    assert "nvidia-ml-py is not installed" in rec.header.gpu_unavailable_reason
    assert len(rec.samples) >= 2 and all(s.host is not None for s in rec.samples)

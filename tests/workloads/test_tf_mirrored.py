"""The TensorFlow data-parallel path: a data_parallel preset runs Keras under
tf.distribute.MirroredStrategy, here on the CPU split into 2 logical devices, through a
Session: each step covers both replicas' batches, and the summary has the run's size
and its scaling against a one-device baseline."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from gputui.presets.preset import load_file
from gputui.record import events as ev
from gputui.record.recorder import Recorder
from gputui.record.recording import read_recording
from gputui.record.schema import Baseline
from gputui.session.session import Session, SessionConfig
from gputui.telemetry.gpu import GpuTelemetry
from tests.support.fake_nvml import FakeNvml
from tests.support.process import REPO

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(n) is None for n in ("tensorflow", "tf_keras")), reason="TensorFlow stack not installed: pip install -e '.[tf]'"
)


def test_mirrored_strategy_on_two_logical_cpus(tmp_path):
    import pynvml

    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "GPUTUI_CACHE_DIR": str(tmp_path / "cache"),
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
    }
    path = tmp_path / "tf.toml"
    path.write_text(
        '[presets.mirrored]\nframework = "tf"\nmodel = "mobilenetv2"\nimage_size = 32\nbatch_size = 2\n'
        'steps = 2\nwarmup_steps = 1\ndevice = "cpu"\ndata_parallel = 2\ntimeout = 400\n'
        "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }\n"
    )
    preset = load_file(path)["mirrored"]
    baseline = Baseline(samples_per_sec=10.0, source="one-replica.jsonl")
    session = Session(SessionConfig(preset=preset, interval=1.0, baseline=baseline), gpu=GpuTelemetry(FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound)))
    session.add_observer(Recorder(tmp_path / "r.jsonl"))
    summary = session.run()
    rec = read_recording(tmp_path / "r.jsonl")
    assert summary.outcome.ok, [e.data["text"] for e in rec.events_of(ev.OUTPUT)][-20:]

    (workload,) = rec.events_of(ev.WORKLOAD)
    assert workload.data["replicas"] == 2 and workload.data["strategy"] == "MirroredStrategy"
    assert workload.data["batch_size"] == 2 and workload.data["global_batch_size"] == 4
    measured = [e.data for e in rec.events_of(ev.THROUGHPUT) if e.data.get("phase") == "measure" and not e.data.get("final")]
    # 2 measured steps, each both replicas' batches (steps faster than 0.1 s share a window)
    assert measured and sum(d["samples"] for d in measured) == 2 * 4 and all(d["samples"] % 4 == 0 for d in measured)
    tp = rec.summary.throughput
    assert tp.world_size == 2 and tp.ranks == []  # one process: no per-rank readings
    assert tp.scaling.efficiency == pytest.approx(tp.median / 20.0, rel=1e-3)

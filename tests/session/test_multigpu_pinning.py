"""A preset pins GPUs (`gpus = [0, 1]`): the child sees them through
CUDA_VISIBLE_DEVICES, telemetry and findings cover only them, and findings name
the GPU.  Bad values are one-line UserErrors naming the file and key."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gputui.errors import UserError
from gputui.presets.preset import load_file
from gputui.record import events as ev
from gputui.record.recorder import Recorder
from gputui.record.recording import read_recording
from gputui.session.options import RunOptions
from gputui.session.session import Session
from gputui.telemetry.gpu import GpuTelemetry
from tests.support.fake_nvml import FakeGpu, FakeNvml

FAST = "[presets.pinned.diagnosis]\nstart_grace_s = 0.0\nopen_after_s = 0.3\nclose_after_s = 0.3\n"
PRINT_ENV = "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'), os.environ.get('CUDA_DEVICE_ORDER')); import time; time.sleep({s})"


def pinned_preset(tmp_path: Path, gpus: str, seconds: float = 1.5):
    command = json.dumps([sys.executable, "-c", PRINT_ENV.format(s=seconds)])
    path = tmp_path / "p.toml"
    path.write_text(f"[presets.pinned]\ncommand = {command}\ngpus = {gpus}\n{FAST}")
    return load_file(path)["pinned"]


def three_gpus(hot: set[int]) -> FakeNvml:
    return FakeNvml(
        [
            FakeGpu(
                uuid=f"GPU-{i}aaaaaaa-0000-0000-0000-00000000000{i}",
                pci=(0, 0x19 + i, 0),
                temp_c=86 if i in hot else 50,
                throttle_mask=0x20 if i in hot else 0,
                sm_clock=1500 if i in hot else 1980,
            )
            for i in range(3)
        ]
    )


def test_pinned_gpus_reach_the_child_and_bound_telemetry_and_findings(tmp_path):
    # GPUs 1 and 2 run hot; only 0 and 2 are pinned: GPU1 is none of this run's business.
    preset = pinned_preset(tmp_path, "[2, 0]")
    session = Session(RunOptions(interval=0.1).session_config(preset), gpu=GpuTelemetry(three_gpus(hot={1, 2})))
    session.add_observer(Recorder(tmp_path / "r.jsonl"))
    session.run()
    rec = read_recording(tmp_path / "r.jsonl")

    assert [g.index for g in rec.header.gpu_list] == [2, 0]
    assert rec.samples and all([g.index for g in s.gpus] == [2, 0] for s in rec.samples)
    assert (rec.header.env or {})["CUDA_VISIBLE_DEVICES"] == "2,0"
    printed = [e.data["text"] for e in rec.events_of(ev.OUTPUT)]
    assert "2,0 PCI_BUS_ID" in printed
    thermal = [e.data for e in rec.events_of(ev.FINDING) if e.data["kind"] == "thermal"]
    assert thermal and {f["gpu"] for f in thermal} == {2}
    assert thermal[0]["title"].startswith("GPU2 ")


def test_gpus_pinned_by_uuid_prefix(tmp_path):
    preset = pinned_preset(tmp_path, '["GPU-1aaaaaaa"]', seconds=0.3)
    session = Session(RunOptions(interval=0.1).session_config(preset), gpu=GpuTelemetry(three_gpus(hot=set())))
    session.add_observer(Recorder(tmp_path / "r.jsonl"))
    session.run()
    rec = read_recording(tmp_path / "r.jsonl")
    assert [g.index for g in rec.header.gpu_list] == [1]
    assert (rec.header.env or {})["CUDA_VISIBLE_DEVICES"] == "GPU-1aaaaaaa"


@pytest.mark.parametrize("gpus, missing", [("[0, 7]", "'7'"), ('"GPU-ffff"', "'GPU-ffff'"), ("[1, 2, 3]", "'3'")])
def test_a_pinned_gpu_this_machine_lacks_is_a_user_error(tmp_path, gpus, missing):
    preset = pinned_preset(tmp_path, gpus, seconds=0.1)
    session = Session(RunOptions(interval=0.1).session_config(preset), gpu=GpuTelemetry(three_gpus(hot=set())))
    with pytest.raises(UserError) as err:
        session.run()
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'p.toml'}: [presets.pinned].gpus: no GPU {missing} on this machine")
    assert "\n" not in message and "GPU-0aaaaaaa" in message  # it lists what there is


def test_without_nvml_a_pinned_preset_still_runs(tmp_path):
    import pynvml

    preset = pinned_preset(tmp_path, "[1]", seconds=0.1)
    session = Session(RunOptions(interval=0.1).session_config(preset), gpu=GpuTelemetry(FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound)))
    summary = session.run()
    assert summary.outcome is not None and summary.outcome.ok


@pytest.mark.parametrize(
    "gpus, expected",
    [
        ("[0, 1]", "0,1"),
        ('"0,1"', "0,1"),
        ('["GPU-8932f937", "GPU-1f3c2a10"]', "GPU-8932f937,GPU-1f3c2a10"),
        ('"MIG-8932f937-aaaa"', "MIG-8932f937-aaaa"),
    ],
)
def test_good_gpus_values(tmp_path, gpus, expected):
    preset = pinned_preset(tmp_path, gpus)
    assert preset.child_env()["CUDA_VISIBLE_DEVICES"] == expected
    assert preset.gpu_selectors() == expected.split(",")


@pytest.mark.parametrize(
    "gpus, detail",
    [
        ("[]", "GPU indices or UUIDs"),
        ("[0, 0]", "'0' is given twice"),
        ("[-1]", "got -1"),
        ("[true]", "got True"),
        ("[1.5]", "got 1.5"),
        ('"0,,1"', "got ''"),
        ('"cuda:0"', "got 'cuda:0'"),
        ('["0", 0]', "'0' is given twice"),
        ("3", "GPU indices or UUIDs"),
    ],
)
def test_bad_gpus_values_name_file_and_key(tmp_path, gpus, detail):
    with pytest.raises(UserError) as err:
        pinned_preset(tmp_path, gpus)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'p.toml'}: [presets.pinned].gpus: expected GPU indices or UUIDs")
    assert detail in message and "\n" not in message

"""Preset files: schema, merge order, and one-line errors that name file and key."""

from __future__ import annotations

import sys

import pytest

from gputui.errors import UserError
from gputui.presets.preset import builtin_presets_path, load_file, load_presets, search_path
from tests.support.presets import load_error, write_presets


def test_builtin_presets_load_and_resolve_to_the_workload_module():
    presets = load_file(builtin_presets_path())
    smoke = presets["smoke"]
    assert smoke.is_workload
    argv = smoke.argv()
    assert argv[:3] == [sys.executable, "-m", "gputui.workloads"]
    assert argv[argv.index("--framework") + 1] == "smoke"
    assert argv[argv.index("--batch-size") + 1] == "256"


def test_command_preset_with_env_gpus_and_reference(tmp_path):
    path = write_presets(
        tmp_path,
        """
[presets.mine]
description = "my training"
command = ["python", "train.py", "--bs", "64"]
env = { NCCL_DEBUG = "WARN" }
gpus = [0, 2]
timeout = 600
batch_size_hint = 64

[[presets.mine.reference]]
gpu = "A100"
samples_per_sec = 616.0
source = "seed article 000"
""",
    )
    preset = load_file(path)["mine"]
    assert preset.argv() == ["python", "train.py", "--bs", "64"]
    assert preset.child_env() == {"NCCL_DEBUG": "WARN", "CUDA_VISIBLE_DEVICES": "0,2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert preset.timeout == 600.0
    assert preset.throughput_batch_hint() == 64
    assert preset.reference[0].samples_per_sec == 616.0
    assert preset.describe().to_dict()["reference"][0]["gpu"] == "A100"


def test_boolean_workload_flags_become_paired_options(tmp_path):
    path = write_presets(tmp_path, '[presets.t]\nframework = "torch"\nmodel = "resnet50"\ncompile = false\nchannels_last = true\n')
    argv = load_file(path)["t"].argv()
    assert "--channels-last" in argv and "--no-compile" in argv


@pytest.mark.parametrize(
    "body, expected",
    [
        ('[presets.a]\nframework = "smoke"\nbatchsize = 3\n', "[presets.a].batchsize: unknown key"),
        ('[presets.a]\nframework = "smoke"\nbatch_size = "32"\n', "[presets.a].batch_size: expected a whole number of 1 or more"),
        ('[presets.a]\nframework = "smoke"\nbatch_size = 0\n', "[presets.a].batch_size: expected a whole number"),
        ('[presets.a]\nframework = "torch"\nmodel = "resnet51"\n', "[presets.a].model: unknown model 'resnet51'"),
        ('[presets.a]\nframework = "torch"\n', "[presets.a]: missing key model"),
        ('[presets.a]\ndescription = "x"\n', "[presets.a]: missing key framework"),
        ('[presets.a]\nframework = "jax"\n', "[presets.a].framework: expected one of"),
        ('[presets.a]\nframework = "tf"\nmodel = "resnet50"\nprecision = "bf16"\n', "[presets.a].precision: expected one of fp32, mixed_float16"),
        ('[presets.a]\ncommand = "python train.py"\n', "[presets.a].command: expected a list of arguments, e.g. ['python', 'train.py']"),
        ('[presets.a]\ncommand = ["x"]\nframework = "torch"\n', "[presets.a].framework: not allowed with command"),
        ('[presets.a]\ncommand = ["x"]\nenv = { A = 1 }\n', "[presets.a].env: expected a string for env.A"),
        ('[presets.a]\ncommand = ["x"]\nreference = [{ gpu = "A100" }]\n', "[presets.a].reference: expected gpu, samples_per_sec, source"),
        ('[presetz.a]\ncommand = ["x"]\n', "[presetz]: unknown table"),
    ],
)
def test_schema_errors_name_file_and_key(tmp_path, body, expected):
    path = write_presets(tmp_path, body)
    message = load_error(path)
    assert message.startswith(f"{path}: ")
    assert expected in message
    assert "\n" not in message


def test_syntax_error_names_file_line_and_column(tmp_path):
    path = write_presets(tmp_path, '[presets.a]\nframework = "smoke"\nsteps = = 3\n')
    with pytest.raises(UserError) as info:
        load_file(path)
    assert str(info.value).startswith(f"{path}:3:9: TOML syntax error")


def test_merge_order_builtin_user_cwd_extra(tmp_path, monkeypatch):
    config = tmp_path / "config"
    (config / "gputui").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    write_presets(config / "gputui", '[presets.smoke]\ncommand = ["user"]\n[presets.u]\ncommand = ["u"]\n')
    cwd = tmp_path / "project"
    cwd.mkdir()
    write_presets(cwd, '[presets.smoke]\ncommand = ["cwd"]\n')
    extra = write_presets(tmp_path, '[presets.x]\ncommand = ["extra"]\n', "extra.toml")

    merged = load_presets(extra=extra, cwd=cwd)
    assert merged["smoke"].command == ("cwd",)  # ./presets.toml beats the user's file
    assert merged["smoke"].source == cwd / "presets.toml"
    assert merged["u"].command == ("u",)
    assert merged["x"].command == ("extra",)
    assert [p.name for p in search_path(extra, cwd)][-1] == "extra.toml"

    write_presets(tmp_path, '[presets.smoke]\ncommand = ["extra"]\n', "extra.toml")
    assert load_presets(extra=extra, cwd=cwd)["smoke"].command == ("extra",)


def test_missing_optional_files_are_fine_but_a_missing_extra_file_is_an_error(tmp_path):
    assert "smoke" in load_presets(cwd=tmp_path)
    with pytest.raises(UserError, match="no such presets file"):
        load_presets(extra=tmp_path / "nope.toml", cwd=tmp_path)

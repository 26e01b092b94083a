"""The [diagnosis] table: schema errors in the presets' one-line style, defaults in
presets.toml, merging across files, and a preset's own overrides."""

from __future__ import annotations

import pytest

from gputui.diagnosis import DEFAULTS, KEYS, Settings
from gputui.presets.preset import (
    Config,
    builtin_presets_path,
    load_config,
    load_diagnosis_file,
    load_file,
    load_presets,
)
from gputui.session.options import RunOptions
from gputui.session.session import SessionConfig
from tests.support.presets import load_error, write_presets
from tests.support.process import REPO


def test_builtin_presets_toml_writes_out_every_default():
    table = load_diagnosis_file(builtin_presets_path())
    assert Settings.from_tables(table) == DEFAULTS
    assert set(table) == set(DEFAULTS.to_dict())  # every key with a default is shown
    assert "ceiling_samples_per_sec" in builtin_presets_path().read_text()  # the optional one, commented


def test_a_diagnosis_table_is_checked_and_converted(tmp_path):
    path = write_presets(tmp_path, "[diagnosis]\nthermal_warn_c = 83\nopen_after_s = 0\nenabled = false\n")
    assert load_diagnosis_file(path) == {"thermal_warn_c": 83.0, "open_after_s": 0.0, "enabled": False}
    assert load_file(path) == {}  # a file with only [diagnosis] has no presets, and that is fine


@pytest.mark.parametrize(
    "body, expected",
    [
        ("[diagnosis]\nthermal_warn = 80\n", "[diagnosis].thermal_warn: unknown key (expected one of: enabled, "),
        ('[diagnosis]\nthermal_warn_c = "80"\n', "[diagnosis].thermal_warn_c: expected a number greater than 0"),
        ("[diagnosis]\nthermal_warn_c = true\n", "[diagnosis].thermal_warn_c: expected a number greater than 0"),
        ("[diagnosis]\nenabled = 1\n", "[diagnosis].enabled: expected true or false"),
        ("[diagnosis]\nopen_after_s = -1\n", "[diagnosis].open_after_s: expected a number of seconds, 0 or more"),
        ("[diagnosis]\nhold_share = 0.4\n", "[diagnosis].hold_share: expected a share above 0.5 and at most 1"),
        ("[diagnosis]\nclear_share = 0.5\n", "[diagnosis].clear_share: expected a share from 0 to below 0.5"),
        ("[diagnosis]\nvram_full_pct = 120\n", "[diagnosis].vram_full_pct: expected a percentage above 0 and at most 100"),
        ("diagnosis = 3\n", "[diagnosis]: expected a table of diagnosis settings"),
        ('[presets.a]\ncommand = ["x"]\n[presets.a.diagnosis]\nthermal = 1\n', "[presets.a].diagnosis.thermal: unknown key"),
        ('[presets.a]\ncommand = ["x"]\n[presets.a.diagnosis]\nidle_cpu_pct = "low"\n', "[presets.a].diagnosis.idle_cpu_pct: expected a percentage"),
        ('[presets.a]\ncommand = ["x"]\ndiagnosis = 5\n', "[presets.a].diagnosis: expected a table of diagnosis settings"),
        ("[diagnostics]\nenabled = true\n", "[diagnostics]: unknown table (expected [presets.NAME] or [diagnosis])"),
    ],
)
def test_schema_errors_name_file_and_key_on_one_line(tmp_path, body, expected):
    path = write_presets(tmp_path, body)
    message = load_error(path)
    assert message.startswith(f"{path}: ")
    assert expected in message
    assert "\n" not in message


def test_every_setting_is_documented_with_its_default():
    docs = (REPO / "docs" / "diagnosis.md").read_text()
    presets_doc = (REPO / "docs" / "presets.md").read_text()
    for key in KEYS:
        assert f"`{key}`" in docs, key
    assert "[diagnosis]" in presets_doc


def test_files_merge_key_by_key_and_a_preset_table_wins(tmp_path, monkeypatch):
    config = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    write_presets(config / "gputui", "[diagnosis]\nthermal_warn_c = 82\nopen_after_s = 5\n")
    cwd = tmp_path / "project"
    write_presets(cwd, "[diagnosis]\nopen_after_s = 7\n")
    extra = write_presets(tmp_path, '[diagnosis]\nidle_cpu_pct = 5\n[presets.x]\ncommand = ["x"]\n[presets.x.diagnosis]\nthermal_warn_c = 84\n', "extra.toml")

    config = load_config(extra=extra, cwd=cwd)
    merged = config.diagnosis
    # built-in defaults, then the user's file, ./presets.toml, --presets: later keys win
    assert merged["thermal_warn_c"] == 82.0 and merged["open_after_s"] == 7.0 and merged["idle_cpu_pct"] == 5.0
    assert merged["close_after_s"] == DEFAULTS.close_after_s

    presets = config.presets
    assert presets == load_presets(extra=extra, cwd=cwd)
    x = presets["x"]
    assert x.diagnosis == {"thermal_warn_c": 84.0}
    assert x.describe().to_dict()["diagnosis"] == {"thermal_warn_c": 84.0}
    assert "diagnosis" not in presets["smoke"].describe().to_dict()

    settings = RunOptions(config=config).session_config(x).diagnosis
    # the preset's own wins
    assert settings.thermal_warn_c == 84.0 and settings.open_after_s == 7.0 and settings.idle_cpu_pct == 5.0
    # A session given the files' table explicitly (watch mode has no preset) uses it.
    assert RunOptions(config=Config(presets={}, diagnosis={"open_after_s": 3.0})).session_config(None).diagnosis.open_after_s == 3.0
    assert SessionConfig().diagnosis == DEFAULTS


def test_presets_without_any_diagnosis_table_keep_working(tmp_path):
    path = write_presets(tmp_path, '[presets.a]\ncommand = ["python", "x.py"]\n')
    preset = load_file(path)["a"]
    assert preset.diagnosis == {}
    assert preset.argv() == ["python", "x.py"]

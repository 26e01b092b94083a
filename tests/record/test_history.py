"""The run history: every run kept in $XDG_STATE_HOME/gputui/runs unless opted out,
pruned to a size cap; --record never replaces a file without --force."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys

import pytest

from gputui.errors import UserError
from gputui.record.history import RunHistory, cap_bytes, history_disabled, list_kept_runs, runs_dir
from gputui.record.recording import read_recording
from tests.support.lookback import with_started_at
from tests.support.process import REPO, gputui_env, run_gputui
from tests.support.records import outcome_of

FIXTURES = REPO / "docs" / "recordings"


def kept_files(tmp_path):
    folder = tmp_path / "state" / "gputui" / "runs"
    return sorted(folder.glob("*.jsonl")) if folder.exists() else []


def fail_preset(tmp_path):
    """A command preset that ends at once: a quick run with an outcome."""
    path = tmp_path / "p.toml"
    path.write_text(f'[presets.quick]\ncommand = [{json.dumps(sys.executable)}, "-c", "print(1)"]\n')
    return path


# -- Kept, or not ---------------------------------------------------------------------------


def test_a_headless_run_is_kept_beside_its_record_file(tmp_path):
    out = tmp_path / "r.jsonl"
    result = run_gputui(["--presets", str(fail_preset(tmp_path)), "--record", str(out), "--preset", "quick", "--interval", "0.1", "--quiet"], tmp_path)
    assert result.returncode == 0, result.stderr
    [kept] = kept_files(tmp_path)
    assert kept.name.endswith("-quick.jsonl") and kept.name[:8].isdigit()
    mine, theirs = read_recording(out), read_recording(kept)
    assert theirs.cut is None and theirs.summary == mine.summary and theirs.header == mine.header
    assert result.stderr == ""  # nothing to warn about


@pytest.mark.parametrize("how", ["flag", "env"])
def test_opting_out_keeps_nothing(tmp_path, how):
    args = ["--presets", str(fail_preset(tmp_path)), "--record", str(tmp_path / "r.jsonl"), "--preset", "quick", "--quiet"]
    if how == "flag":
        args.append("--no-history")
        result = run_gputui(args, tmp_path)
    else:
        import subprocess

        env = {**gputui_env(tmp_path), "GPUTUI_NO_HISTORY": "1"}
        result = subprocess.run([sys.executable, "-m", "gputui", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "r.jsonl").exists() and kept_files(tmp_path) == []


def test_opt_out_and_cap_come_from_the_environment():
    assert not history_disabled(False, {})
    assert history_disabled(True, {})
    assert history_disabled(False, {"GPUTUI_NO_HISTORY": "1"})
    assert not history_disabled(False, {"GPUTUI_NO_HISTORY": "0"})
    assert cap_bytes({}) == 500 * 1000**2
    assert cap_bytes({"GPUTUI_HISTORY_MAX_MB": "1.5"}) == 1_500_000
    with pytest.raises(UserError, match="GPUTUI_HISTORY_MAX_MB: expected a finite size in MB greater than 0, got 'lots'"):
        cap_bytes({"GPUTUI_HISTORY_MAX_MB": "lots"})
    assert runs_dir({"XDG_STATE_HOME": "/s"}) == runs_dir({"XDG_STATE_HOME": "/s"}) and str(runs_dir({"XDG_STATE_HOME": "/s"})) == "/s/gputui/runs"


def test_a_state_folder_that_cannot_be_made_is_one_warning_each_for_history_and_attaching_and_the_run_goes_on(tmp_path):
    (tmp_path / "state").write_text("a file where the folder should be")
    out = tmp_path / "r.jsonl"
    result = run_gputui(["--presets", str(fail_preset(tmp_path)), "--record", str(out), "--preset", "quick", "--quiet"], tmp_path)
    assert result.returncode == 0
    warnings = [line for line in result.stderr.splitlines() if line]
    assert len(warnings) == 2, result.stderr
    assert warnings[0].startswith("gputui: warning: run history off: cannot write to ")
    assert warnings[1].startswith("gputui: warning: this run cannot be attached to (gputui attach): cannot write to ")
    assert outcome_of(read_recording(out)).ok is True


def test_a_read_only_state_folder_warns_once_per_history(tmp_path):
    if os.geteuid() == 0:  # root writes anyway: stand a file where the runs folder goes instead
        (tmp_path / "gputui").mkdir()
        (tmp_path / "gputui" / "runs").write_text("")
    else:
        (tmp_path / "gputui" / "runs").mkdir(parents=True)
        os.chmod(tmp_path / "gputui" / "runs", 0o500)
    history = RunHistory(tmp_path / "gputui" / "runs")
    said = []
    assert history.start_recording("a", warn=said.append) is None
    assert history.start_recording("b", warn=said.append) is None
    assert len(said) == 1 and "run history off" in said[0]


# -- The cap ------------------------------------------------------------------------------------


def test_the_cap_prunes_the_oldest_runs_when_a_new_one_starts(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    now = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.timezone.utc)
    for days, name in ((3, "old.jsonl"), (2, "middle.jsonl"), (1, "new.jsonl")):
        with_started_at(folder, name, "torch-resnet50.jsonl", now - dt.timedelta(days=days))
    size = (folder / "old.jsonl").stat().st_size
    history = RunHistory(folder, cap=2 * size + 10)  # room for two of them
    recorder = history.start_recording("next one", warn=pytest.fail, now=lambda: now.timestamp())
    recorder.close()
    names = [r.path.name for r in list_kept_runs(folder)]
    assert "old.jsonl" not in names and {"middle.jsonl", "new.jsonl"} <= set(names)
    assert recorder.path.name.endswith("-next-one.jsonl")
    # the same second, the same preset: a second file, not an overwrite
    again = history.start_recording("next one", warn=pytest.fail, now=lambda: now.timestamp())
    again.close()
    assert again.path != recorder.path and again.path.name.endswith("-next-one-2.jsonl")


# -- --record and existing files ------------------------------------------------------------------


def test_record_refuses_to_overwrite_without_force(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_text("precious\n")
    args = ["--presets", str(fail_preset(tmp_path)), "--record", str(out), "--preset", "quick", "--quiet"]
    result = run_gputui(args, tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [f"gputui: error: {out}: already exists; not overwriting it (add --force to replace it, or pick another file)"]
    assert out.read_text() == "precious\n" and kept_files(tmp_path) == []

    result = run_gputui(args + ["--force"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert outcome_of(read_recording(out)).ok is True


def test_the_dashboard_refuses_an_existing_record_file_before_its_screen_opens(tmp_path, monkeypatch, capsys):
    from gputui.cli import dashboard_cli as launch
    from gputui.cli import main as cli

    out = tmp_path / "r.jsonl"
    out.write_text("precious\n")
    monkeypatch.setattr(launch.sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(launch.sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(cli, "_on_terminal", lambda: True)

    def no_screen(*args, **kwargs):
        raise AssertionError("the dashboard opened")

    monkeypatch.setattr("gputui.tui.live_app.make_app", no_screen)
    assert cli.main(["--record", str(out), "--preset", "smoke"]) == 2
    assert f"{out}: already exists" in capsys.readouterr().err
    assert out.read_text() == "precious\n"


def test_the_dashboard_keeps_every_run_and_records_over_a_file_only_with_force(tmp_path):
    from gputui.presets.preset import load_presets
    from tests.support.dashboard import fake_gpus, make_dashboard
    from tests.support.tui import run_async, wait_until

    presets = load_presets(extra=fail_preset(tmp_path), cwd=tmp_path)
    record = tmp_path / "r.jsonl"
    record.write_text("old\n")
    history = RunHistory(tmp_path / "runs")

    async def scenario():
        app = make_dashboard(
            presets, gpu_factory=fake_gpus(1), interval=0.25, settings_file=tmp_path / "s.toml", record_path=record, record_force=True, history=history
        )
        async with app.run_test(size=(120, 40)) as pilot:
            for n in (1, 2):
                app.start_preset("quick")
                await wait_until(
                    pilot,
                    lambda: len(app.state.runs) == n and app.state.runs[-1].ended,  # noqa: B023 (awaited here)
                    what=f"run {n}",
                )
                await pilot.press("escape")  # its summary
            await wait_until(pilot, lambda: len(app.state.history) == 2, what="the history reloaded")

    run_async(scenario())
    kept = list_kept_runs(tmp_path / "runs")
    assert [r.outcome for r in kept] == ["ok", "ok"] and all(r.label == "quick" for r in kept)
    assert outcome_of(read_recording(record)).ok is True  # replaced: --force was given

"""The run history: every run kept in $XDG_STATE_HOME/gputui/runs unless opted out,
pruned to a size cap; --record never replaces a file without --force."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from gputui.errors import UserError
from gputui.record import recorder as recorder_module
from gputui.record.history import RunHistory, cap_bytes, history_disabled, list_kept_runs, runs_dir
from gputui.record.recorder import Recorder
from gputui.record.recording import is_live, read_recording
from tests.support.leftovers import no_leftovers  # noqa: F401  (the fixture)
from tests.support.lookback import with_started_at
from tests.support.process import REPO, gputui_env, run_gputui, wait_for
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
    assert "warning" not in result.stderr and result.stderr.lstrip().startswith("gputui summary")  # nothing to warn about; --quiet keeps the summary


@pytest.mark.parametrize("how", ["flag", "env"])
def test_opting_out_keeps_nothing(tmp_path, how):
    args = ["--presets", str(fail_preset(tmp_path)), "--record", str(tmp_path / "r.jsonl"), "--preset", "quick", "--quiet"]
    if how == "flag":
        args.append("--no-history")
        result = run_gputui(args, tmp_path)
    else:
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
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
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


# -- Pruning never takes a live run's file ------------------------------------------------------


def _live_run(folder):
    """A headless run (its own session, as from a shell) of a command that waits to be stopped."""
    args = ["--headless", "--quiet", "--interval", "0.2", "--", sys.executable, "-c", "import time\nwhile True: time.sleep(0.1)"]
    return subprocess.Popen(
        [sys.executable, "-m", "gputui", *args],
        cwd=folder,
        env=gputui_env(folder),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _prune_cli(folder) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputui", "runs", "prune", "--keep", "0"], cwd=folder, env=gputui_env(folder),
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def _headers_written(tmp_path) -> bool:
    return len([path for path in kept_files(tmp_path) if path.stat().st_size > 0]) == 2


@pytest.mark.usefixtures("no_leftovers")
@pytest.mark.parametrize("attempt", range(5))
def test_ten_parallel_prunes_never_remove_a_live_runs_file(tmp_path, attempt):
    """Ten `gputui runs prune --keep 0` at once, over and over, while two runs start (each
    file made, then locked, then given its header) and go on: both runs' kept copies
    survive, and read whole to their summaries once the runs are stopped."""
    runs = [_live_run(tmp_path) for _ in range(2)]
    failures: list[str] = []
    try:
        settled = threading.Event()

        def prune_until_settled() -> None:
            while not settled.is_set():
                result = _prune_cli(tmp_path)
                if result.returncode != 0:
                    failures.append(result.stderr)

        workers = [threading.Thread(target=prune_until_settled) for _ in range(10)]
        for worker in workers:
            worker.start()
        try:
            wait_for(lambda: _headers_written(tmp_path) or len(kept_files(tmp_path)) < 2 and any(run.poll() is not None for run in runs), timeout=60)
            time.sleep(0.5)  # and some prunes more, the runs going
        finally:
            settled.set()
            for worker in workers:
                worker.join(120)
        assert failures == []
        assert len(kept_files(tmp_path)) == 2, "a prune removed a live run's file"
    finally:
        for run in runs:
            run.send_signal(signal.SIGTERM)
        for run in runs:
            _, err = run.communicate(timeout=60)
            assert run.returncode == 143, err
    kept = kept_files(tmp_path)
    assert len(kept) == 2
    for path in kept:
        recording = read_recording(path)
        assert recording.cut is None and recording.summary is not None


def test_a_run_whose_file_has_no_header_yet_is_not_pruned(tmp_path):
    """The moment between a run making its file and writing its header: the file reads as
    unreadable, and only the recorder's lock says it is live."""
    folder = tmp_path / "state" / "gputui" / "runs"
    folder.mkdir(parents=True)
    recorder = Recorder(folder / "20261129-101502-starting.jsonl", overwrite=False)
    try:
        result = _prune_cli(tmp_path)
        assert result.returncode == 0, result.stderr
        assert recorder.path.exists(), "the prune removed a live run's file"
        assert "removed 0 run(s)" in result.stdout
    finally:
        recorder.close()
    result = _prune_cli(tmp_path)
    assert result.returncode == 0 and not recorder.path.exists()  # no longer live: an unreadable file, pruned


def test_the_recorder_waits_for_its_lock_and_holds_it_for_the_runs_life(tmp_path):
    """A reader asking whether the file is live holds its lock for an instant: a recorder
    starting just then waits for it, rather than going unmarked (and prunable) for its life."""
    path = tmp_path / "r.jsonl"
    path.write_text("")
    with open(path, "rb") as reader:
        fcntl.flock(reader.fileno(), fcntl.LOCK_SH)
        threading.Timer(0.3, fcntl.flock, (reader.fileno(), fcntl.LOCK_UN)).start()
        recorder = Recorder(path)
    try:
        assert is_live(path)
    finally:
        recorder.close()
    assert not is_live(path)


def test_a_recording_another_recorder_is_writing_is_refused_not_cut_short(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder_module, "LOCK_WAIT_S", 0.2)
    path = tmp_path / "r.jsonl"
    first = Recorder(path)
    first._write({"type": "x"})
    try:
        with pytest.raises(UserError, match=r"r\.jsonl: another process is writing it \(it holds the file's lock\); not writing it as well"):
            Recorder(path)
        assert path.read_text() == '{"type":"x"}\n'
    finally:
        first.close()

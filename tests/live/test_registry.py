"""The live folder: entries a run writes, listing that tells a live run from a stale one,
names that find a run, and a folder no other user can read."""

from __future__ import annotations

import json
import stat
import subprocess

import psutil
import pytest

from gputui.errors import UserError
from gputui.live.registry import LiveRun, Registry, live_dir


@pytest.fixture
def sleeper():
    """A process to stand for a run's (not pytest's own: a run left going is stopped after the test)."""
    process = subprocess.Popen(["sleep", "600"])
    yield process.pid
    process.kill()
    process.wait()


def entry(tmp_path, pid, name="20261129-101502-resnet50", **given) -> LiveRun:
    return LiveRun(
        name=name,
        pid=pid,
        pid_started=given.pop("pid_started") if "pid_started" in given else psutil.Process(pid).create_time(),
        started_at="2026-11-29T10:15:02+00:00",
        label=given.pop("label", "resnet50"),
        recording=given.pop("recording", tmp_path / "runs" / f"{name}.jsonl"),
        **given,
    )


def test_the_folder_is_under_the_state_home_and_private(tmp_path, sleeper):
    assert live_dir() == tmp_path / "state" / "gputui" / "live"
    registry = Registry()
    registry.add(entry(tmp_path, sleeper))
    assert stat.S_IMODE(registry.folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(registry.entry_path("20261129-101502-resnet50").stat().st_mode) == 0o600


def test_a_folder_left_open_by_hand_is_made_private_again(tmp_path, sleeper):
    registry = Registry()
    registry.folder.mkdir(parents=True, mode=0o755)
    registry.folder.chmod(0o755)
    registry.add(entry(tmp_path, sleeper))
    assert stat.S_IMODE(registry.folder.stat().st_mode) == 0o700


def test_an_entry_reads_back_as_written(tmp_path, sleeper):
    registry = Registry()
    written = entry(tmp_path, sleeper, record_path=tmp_path / "run.jsonl", kept_path=tmp_path / "kept.jsonl", detached=True, notes=("run history off",))
    registry.add(written)
    assert registry.runs() == [written]


def test_a_run_whose_process_is_gone_is_stale_and_its_entry_removed(tmp_path, sleeper):
    child = subprocess.Popen(["sleep", "600"])
    started = psutil.Process(child.pid).create_time()
    child.kill()
    child.wait()
    registry = Registry()
    private_copy = registry.prepare() / "20261129-000000-gone.jsonl"
    private_copy.write_text("")
    registry.add(entry(tmp_path, child.pid, name="20261129-000000-gone", pid_started=started, recording=private_copy))
    registry.add(entry(tmp_path, sleeper))
    assert [run.name for run in registry.runs()] == ["20261129-101502-resnet50"]
    assert not registry.entry_path("20261129-000000-gone").exists()
    assert not private_copy.exists()  # the live copy of a run with no history goes with its entry


def test_a_pid_reused_by_another_process_is_not_the_run(tmp_path, sleeper):
    registry = Registry()
    registry.add(entry(tmp_path, sleeper, pid_started=psutil.Process(sleeper).create_time() - 3600))
    assert registry.runs() == []


def test_a_foreign_or_broken_entry_is_passed_over(tmp_path, sleeper):
    registry = Registry()
    registry.prepare()
    (registry.folder / "half.json").write_text('{"name": "x", ')
    (registry.folder / "odd.json").write_text(json.dumps({"name": "../etc", "pid": 1}))
    registry.add(entry(tmp_path, sleeper))
    assert [run.name for run in registry.runs()] == ["20261129-101502-resnet50"]


@pytest.mark.parametrize("text", ["20261129-101502-resnet50", "20261129-101502-resnet50.jsonl", "20261129-1015", "resnet50"])
def test_a_run_is_found_by_its_name_its_start_or_its_label(tmp_path, sleeper, text):
    registry = Registry()
    registry.add(entry(tmp_path, sleeper))
    assert registry.find(text).name == "20261129-101502-resnet50"


def test_a_run_is_found_by_its_pid_and_its_files(tmp_path, sleeper):
    registry = Registry()
    record = tmp_path / "mine.jsonl"
    registry.add(entry(tmp_path, sleeper, record_path=record))
    assert registry.find(str(sleeper)).name == "20261129-101502-resnet50"
    assert registry.find(str(record)).name == "20261129-101502-resnet50"


def test_finding_says_what_is_live_when_nothing_or_several_match(tmp_path, sleeper):
    registry = Registry()
    with pytest.raises(UserError, match="no run is live"):
        registry.find("x")
    registry.add(entry(tmp_path, sleeper, name="20261129-101502-resnet50"))
    registry.add(entry(tmp_path, sleeper, name="20261129-101503-resnet50"))
    with pytest.raises(UserError, match=r"names 2 live runs; expected one of: 20261129-101502-resnet50, 20261129-101503-resnet50"):
        registry.find("resnet50")
    with pytest.raises(UserError, match=r"no live run of that name or pid \(live: "):
        registry.find("bert")

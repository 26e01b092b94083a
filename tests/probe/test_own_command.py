"""``gputui -- CMD``: the user's own command, named after its script, its throughput in its
own unit, the probe on for Python and off on request; and ``x`` in the dashboard."""

from __future__ import annotations

import json
import sys

import pytest

from gputui.presets.command_preset import command_name, command_preset
from gputui.presets.preset import load_presets
from gputui.tui.screens.command_screen import CommandScreen, split_command
from tests.support.dashboard import app_for
from tests.support.process import REPO, run_gputui
from tests.support.tui import run_async, wait_until

# A training loop's tqdm bar, as tqdm draws it to a terminal (tests/data/progress/tqdm_its.log's
# format), ten redraws a second apart; no torch needed.
SCRIPT = r"""
import sys, time
for i in range(1, 9):
    time.sleep(0.25)
    sys.stderr.write(f"\r {i * 10}%|{'#' * i}| {i * 10}/100 [00:0{i}<00:09, 25.00it/s]")
    sys.stderr.flush()
sys.stderr.write("\n")
print("done")
"""


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["python", "train.py", "--lr", "3e-4"], "train.py"),
        (["python3", "-u", "examples/pytorch/run_glue.py"], "run_glue.py"),
        (["torchrun", "--nproc-per-node", "8", "train.py"], "train.py"),
        (["python", "-m", "torch.distributed.run", "--nproc-per-node=2", "train.py"], "train.py"),
        (["accelerate", "launch", "nlp_example.py"], "nlp_example.py"),
        (["python", "-m", "nanogpt.train"], "nanogpt.train"),
        (["./pretrain"], "pretrain"),
        (["deepspeed", "--num_gpus", "2", "ds_train.py"], "ds_train.py"),
        (["bash", "-c", "CUDA_VISIBLE_DEVICES=0 torchrun --nproc-per-node 2 pretrain.py"], "pretrain.py"),
        (["uv", "run", "python", "train.py"], "train.py"),
    ],
)
def test_a_command_is_named_after_the_script_it_runs(argv, name):
    assert command_name(argv) == name


def test_a_name_taken_by_a_preset_gets_a_number(tmp_path):
    presets = load_presets(cwd=tmp_path)
    first = command_preset(["python", "smoke"], presets)
    assert first.name == "smoke (2)" and first.command == ("python", "smoke")


def test_the_probe_is_on_for_python_and_off_for_other_programs_or_on_request():
    assert command_preset([sys.executable, "train.py"], {}).probed()
    assert not command_preset(["/bin/sh", "-c", "true"], {}).probed()
    assert not command_preset([sys.executable, "train.py"], {}, probe=False).probed()


def test_run_a_command_headless_named_recorded_and_in_steps(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    out = tmp_path / "run.jsonl"
    done = run_gputui(["--headless", "--record", str(out), "--", sys.executable, "train.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    header, summary = lines[0], lines[-1]
    assert header["preset"]["name"] == "train.py" and header["command"] == [sys.executable, "train.py"]
    assert header["probe"] is True
    assert summary["throughput"]["unit"] == "steps" and summary["throughput"]["median"] == pytest.approx(25.0)
    assert "25.0 steps/s" in done.stderr  # the progress line and the summary say the unit
    assert "the PyTorch probe is on" in done.stderr  # said the first time (a fresh HOME here)
    runs = run_gputui(["runs"], tmp_path)
    assert "train.py" in runs.stdout and "steps/s" in runs.stdout


def test_a_batch_size_makes_steps_samples_and_no_probe_leaves_the_environment_alone(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT + "import os\nprint('PYTHONPATH=' + os.environ.get('PYTHONPATH', ''))\n")
    out = tmp_path / "run.jsonl"
    done = run_gputui(["--headless", "--record", str(out), "--batch-size", "32", "--no-probe", "--", sys.executable, "train.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["probe"] is False and "probe is on" not in done.stderr
    assert lines[-1]["throughput"]["unit"] == "samples" and lines[-1]["throughput"]["median"] == pytest.approx(800.0)
    printed = [line["text"] for line in lines if line.get("event") == "output" and "PYTHONPATH=" in line.get("text", "")]
    assert printed and "probe" not in printed[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--headless", "--record", "x.jsonl", "--"], "--: expected a command after it"),
        (["--headless", "--record", "x.jsonl", "--preset", "smoke", "--", "true"], "not with --preset or --pid"),
        (["--headless", "--record", "x.jsonl", "--batch-size", "0", "--", "true"], "--batch-size: expected"),
    ],
)
def test_bad_command_lines_are_one_line_errors(tmp_path, args, expected):
    done = run_gputui(args, tmp_path)
    assert done.returncode == 2
    assert expected in done.stderr and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_a_subcommand_with_a_command_is_refused(tmp_path):
    done = run_gputui(["runs", "--", "python", "train.py"], tmp_path)
    assert done.returncode == 2 and "not with 'runs'" in done.stderr


def test_split_command_says_why_it_cannot():
    assert split_command("python 'train.py' --lr 3e-4") == ["python", "train.py", "--lr", "3e-4"]
    assert "cannot split" in split_command("python 'train.py")
    assert isinstance(split_command("   "), str)


def test_x_in_the_dashboard_runs_a_command_named_after_its_script(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    presets = load_presets(cwd=tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.state.session is not None, what="watching")
            await pilot.press("x")
            await wait_until(pilot, lambda: isinstance(app.screen, CommandScreen), what="command dialog")
            await pilot.press(*f"{sys.executable} {tmp_path / 'train.py'}", "enter")
            run = await wait_until(pilot, lambda: app.state.run, what="run started")
            assert run.preset.name == "train.py" and run.preset.probed()
            assert any("probe is on" in text for _stream, text in app.state.log)  # said in the output pane
            await wait_until(pilot, lambda: run.series.readings > 0, timeout=30, what="throughput")
            assert run.unit == "steps"

    run_async(scenario())


def test_ctrl_s_in_the_command_dialog_opens_the_editor_on_it(tmp_path):
    from gputui.tui.screens.editor import PresetEditorScreen

    presets = load_presets(cwd=tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("x")
            await wait_until(pilot, lambda: isinstance(app.screen, CommandScreen), what="command dialog")
            await pilot.press(*"python3 finetune.py --epochs 3", "ctrl+s")
            editor = await wait_until(pilot, lambda: isinstance(app.screen, PresetEditorScreen) and app.screen, what="editor")
            name, values = editor._initial
            assert name == "finetune.py" and values["command"] == ["python3", "finetune.py", "--epochs", "3"]
            assert values["probe"] is True

    run_async(scenario())


def test_runs_in_different_units_are_not_compared(tmp_path):
    from gputui.errors import UserError
    from gputui.lookback.compare import check_one_unit
    from gputui.lookback.facts import RunFacts
    from gputui.record.schema import ThroughputSummary

    def facts(label: str, unit: str) -> RunFacts:
        return RunFacts(
            label=label, machine="m", gpu="g", gpu_name=None, preset=None, command=None, outcome="ok", ok=True, cut=None, check=False,
            throughput=ThroughputSummary(median=10.0, unit=unit), rates=[10.0], energy_per_sample_j=None, price_per_hour=None, cost_per_million=None,
            peak_vram_workload=None, peak_vram_source=None, peak_vram_nvml={}, throttle={}, findings=[], findings_replayed=False, unit=unit,
        )  # fmt: skip

    check_one_unit([facts("a", "tokens"), facts("b", "tokens")])
    with pytest.raises(UserError, match="different units.*a: tokens/s; b: samples/s"):
        check_one_unit([facts("a", "tokens"), facts("b", "samples")])


def test_the_repository_scripts_path_exists():
    assert (REPO / "benchmarks" / "own-training-gpu.sh").exists()


STARVED_SCRIPT = r"""
import time, torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):  # each sample takes 4 ms to "decode": the loop waits on it
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        time.sleep(0.004)
        return torch.randn(16), torch.randn(1)


model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
end = time.monotonic() + 25
for x, y in DataLoader(Slow(), batch_size=8, num_workers=0):
    opt.zero_grad(); torch.nn.functional.mse_loss(model(x), y).backward(); opt.step()
    if time.monotonic() > end:
        break
"""


def test_a_starved_pytorch_loop_is_input_bound_from_the_probes_data_wait(tmp_path):
    """The real probe in a real PyTorch loop whose DataLoader (num_workers=0) takes 32 ms a
    batch against a step of about one: the loop waits for data nearly all the time,
    however busy the machine (the samples sleep rather than compute, so CI's two shared
    cores do not change the share)."""
    pytest.importorskip("torch")
    (tmp_path / "train.py").write_text(STARVED_SCRIPT)
    out = tmp_path / "run.jsonl"
    done = run_gputui(["--headless", "--record", str(out), "--", sys.executable, "train.py"], tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert any(line.get("event") == "probe_status" and line.get("state") == "armed" for line in lines)
    reports = [line for line in lines if line.get("event") == "probe" and line.get("steps")]
    assert reports and all(r["workers"] == 0 and r["samples"] == 8 * r["batches"] for r in reports)
    summary = lines[-1]
    assert summary["throughput"]["unit"] == "samples" and summary["throughput"]["source"] == "probe"
    found = [f for f in summary["findings"] if f["kind"] == "input_bound"]
    assert found and found[0]["evidence"]["data_wait_pct"] >= 80 and found[0]["evidence"]["source"] == "probe", summary["findings"]


OWN_BATCHES_SCRIPT = r"""
import time, torch


def get_batch():  # nanoGPT-style: no DataLoader, the loop makes each batch (20 ms to "tokenize")
    time.sleep(0.02)
    return torch.randn(8, 16), torch.randn(8, 1)


model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
end = time.monotonic() + 20
while time.monotonic() < end:
    x, y = get_batch()
    opt.zero_grad(); torch.nn.functional.mse_loss(model(x), y).backward(); opt.step()
"""


def test_a_loop_making_its_own_batches_is_input_bound_where_the_sampler_saw_it(tmp_path):
    """No DataLoader to time: the probe's sampler finds the loop in get_batch() most of the
    time, and the finding names it (sleeping, not computing, so CI's load does not matter)."""
    pytest.importorskip("torch")
    (tmp_path / "train.py").write_text(OWN_BATCHES_SCRIPT)
    out = tmp_path / "run.jsonl"
    done = run_gputui(["--headless", "--record", str(out), "--", sys.executable, "train.py"], tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    reports = [line for line in lines if line.get("event") == "probe" and line.get("steps")]
    assert reports and all(r["batches"] == 0 and r["data_site"] == "get_batch (train.py:5)" for r in reports)
    found = [f for f in lines[-1]["findings"] if f["kind"] == "input_bound"]
    assert found, lines[-1]["findings"]
    evidence = found[0]["evidence"]
    assert evidence["data_wait_pct"] >= 80 and evidence["data_site"] == "get_batch (train.py:5)" and "sampling" in evidence["source"]
    assert "making its own batches in get_batch (train.py:5)" in found[0]["title"]


RANK_SCRIPT = r"""
import time, torch
from torch.utils.data import DataLoader, TensorDataset
data = DataLoader(TensorDataset(torch.randn(512, 16), torch.randn(512, 1)), batch_size=8)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
end = time.monotonic() + 6
while time.monotonic() < end:
    for x, y in data:
        opt.zero_grad(); torch.nn.functional.mse_loss(model(x), y).backward(); opt.step()
        time.sleep(0.002)
"""


def test_under_torchrun_every_rank_reports_and_the_run_adds_them(tmp_path):
    """torchrun starts one process per rank with RANK and WORLD_SIZE set: each rank's probe
    reports for itself, and the run's throughput is the ranks' sum."""
    pytest.importorskip("torch")
    (tmp_path / "train.py").write_text(RANK_SCRIPT)
    out = tmp_path / "run.jsonl"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "train.py"]
    done = run_gputui(["--headless", "--record", str(out), "--", *torchrun], tmp_path, timeout=180)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["preset"]["name"] == "train.py"
    reports = [line for line in lines if line.get("event") == "probe" and line.get("steps")]
    assert {r.get("rank") for r in reports} == {0, 1} and {r.get("world_size") for r in reports} == {2}
    totals = [line for line in lines if line.get("event") == "throughput" and not line.get("final")]
    assert totals and all(t["source"] == "probe" and t["ranks"] == 2 for t in totals)
    assert {line["rank"] for line in lines if line.get("event") == "rank_throughput"} == {0, 1}
    assert lines[-1]["throughput"]["world_size"] == 2

"""The zero-code PyTorch probe (gputui.probe): real child interpreters with the env a
ProbeChannel gives them, real (CPU) torch, reports read back over the channel.  The
probe reports how the loop runs and never changes what the script does or prints."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gputui.probe import SITE_DIR, ProbeChannel, is_python_command
from gputui.protocol import decode
from gputui.record.events import ProbeReport
from tests.support.process import REPO

pytest.importorskip("torch")

# A small training loop; its options come as arguments so every test runs the same file.
TRAIN = textwrap.dedent(
    """
    import argparse, sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seconds", type=float, default=2.5)
    p.add_argument("--steps", type=int, default=0)  # a fixed number of batches (then --seconds is ignored)
    p.add_argument("--sleep", type=float, default=0.0)  # in __getitem__
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--weird", action="store_true")  # a batch whose .shape raises
    p.add_argument("--exit", type=int, default=0)
    a = p.parse_args()

    class Data(Dataset):
        def __init__(self):
            g = torch.Generator().manual_seed(0)
            self.x, self.y = torch.randn(1024, 8, generator=g), torch.randn(1024, 1, generator=g)
        def __len__(self):
            return len(self.x)
        def __getitem__(self, i):
            if a.sleep:
                time.sleep(a.sleep)
            return self.x[i], self.y[i]

    class Weird:
        @property
        def shape(self):
            raise RuntimeError("no shape here")

    def collate(items):
        return [Weird(), torch.stack([x for x, _ in items]), torch.stack([y for _, y in items])]

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Data(), batch_size=a.batch, num_workers=a.workers, collate_fn=collate if a.weird else None)
    end = time.monotonic() + a.seconds
    batches = 0
    while True:
        for batch in loader:
            x, y = batch[-2:]
            loss = torch.nn.functional.mse_loss(model(x), y) / a.accumulate
            loss.backward()
            batches += 1
            if batches % a.accumulate == 0:
                opt.step()
                opt.zero_grad()
            if a.steps and a.steps == batches:
                break
            if not a.steps and time.monotonic() > end and batches % a.accumulate == 0:
                break
        if (a.steps and a.steps == batches) or (not a.steps and time.monotonic() > end):
            break
    if a.steps:
        print(f"loss {loss.item():.6f} batches {batches}")
        print("to stderr", file=sys.stderr)
    else:
        print("done")
    sys.exit(a.exit)
    """
)


@pytest.fixture
def train(tmp_path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(TRAIN, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def shared_train(tmp_path_factory) -> Path:
    """TRAIN for the runs below that several tests read: each starts torch, so a run two
    tests can check is made once."""
    path = tmp_path_factory.mktemp("probe") / "train.py"
    path.write_text(TRAIN, encoding="utf-8")
    return path


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(extra or {})}
    for name in ("GPUTUI_PROBE_SOCKET", "RANK", "WORLD_SIZE"):
        if extra is None or name not in extra:
            env.pop(name, None)
    return env


def run_probed(argv: list[str], extra: dict[str, str] | None = None, timeout: float = 120) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """Run ``argv`` with the probe injected; the protocol lines it sent, in order."""
    channel = ProbeChannel()
    lines: list[str] = []
    channel.start(lines.append)
    try:
        base = child_env(extra)
        result = subprocess.run(argv, env={**base, **channel.env(base)}, capture_output=True, timeout=timeout)
    finally:
        channel.close()  # drains what the child sent before it exited
    payloads = [decode(line) for line in lines]
    assert all(p is not None for p in payloads), lines
    return result, payloads  # type: ignore[return-value]


def reports(payloads: list[dict]) -> list[dict]:
    return [p for p in payloads if p["event"] == "probe"]


def statuses(payloads: list[dict]) -> list[dict]:
    return [p for p in payloads if p["event"] == "probe_status"]


# --- what it reports -------------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 2])
def test_a_training_loop_reports_steps_batches_samples_and_workers(train, workers):
    result, payloads = run_probed([sys.executable, str(train), "--workers", str(workers)])
    assert result.returncode == 0, result.stderr.decode()
    assert payloads[0]["event"] == "probe_status" and payloads[0]["state"] == "armed"
    assert payloads[0]["hooks"] == ["optimizer_step", "backward", "dataloader", "train_mode"] and payloads[0]["torch"]
    got = reports(payloads)
    assert got, payloads
    pids = {p["pid"] for p in payloads}
    assert len(pids) == 1  # the forked workers never report
    for r in got:
        assert r["v"] == 2 and r["phase"] == "training" and r["steps"] > 0 and r["seconds"] >= 1.0
        assert r["batches"] == r["steps"] and r["samples"] == 16 * r["batches"]
        assert r["workers"] == workers
        assert 0 <= r["data_wait_s"] <= r["seconds"]
        assert "rank" not in r and "world_size" not in r


@pytest.fixture(scope="module")
def slow_dataset_run(shared_train) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """A loop whose dataset sleeps 20 ms a sample, probed: the two tests below read it."""
    return run_probed([sys.executable, str(shared_train), "--batch", "2", "--sleep", "0.02", "--seconds", "2.5"])


def test_a_slow_dataset_shows_as_time_waiting_for_data(slow_dataset_run):
    result, payloads = slow_dataset_run
    assert result.returncode == 0, result.stderr.decode()
    got = reports(payloads)
    assert got
    for r in got:
        assert r["data_wait_s"] / r["seconds"] > 0.5
        assert r["samples"] == 2 * r["batches"]


def test_the_sampler_stops_once_a_dataloader_feeds_the_training(slow_dataset_run):
    """The batches time the data wait, and a window with batches ignores the looks
    (events.ProbeReport.sampled_wait): a Python-bound loop should not share its
    interpreter with a sampler whose looks go unused."""
    result, payloads = slow_dataset_run
    assert result.returncode == 0, result.stderr.decode()
    got = reports(payloads)
    assert len(got) >= 2 and all(r["batches"] > 0 for r in got)
    # a few looks before the first batches are known to be training, then none
    assert got[0]["looks"] < 10 and all(r["looks"] == 0 for r in got[1:]), [r["looks"] for r in got]


NANOGPT = REPO / "benchmarks" / "own_training" / "nanogpt_loop.py"


# A small model, one micro-batch a step: a step takes tens of milliseconds, so even a
# machine busy enough to slow the run tenfold makes a report's worth of steps within
# --seconds (at the script's CPU size, 4 micro-batches of 12, a step took seconds under
# load, and a 4 s run sent no report).  The share of looks in get_batch is a ratio of
# two single-threaded costs (child_env: one OpenMP thread), which load slows alike.
NANOGPT_SMALL = ["--batch-size", "4", "--gradient-accumulation-steps", "1", "--n-layer", "2", "--n-head", "2", "--n-embd", "64", "--block-size", "32"]


@pytest.mark.parametrize("variant", ["starved", "fed"])
def test_a_nanogpt_loop_making_its_own_batches_is_seen_in_get_batch(variant):
    """benchmarks/own_training/nanogpt_loop.py follows karpathy/nanoGPT's train.py: no
    DataLoader, get_batch() in the loop.  Starved, its get_batch encodes raw text in
    Python; fed, it slices a token array.  Only the sampler sees the difference.
    Measured on 2 cores, alone and beside six CPU burners: starved 0.56-0.68 of the
    looks in get_batch, fed 0.03-0.06, 3 reports each."""
    argv = [sys.executable, str(NANOGPT), "--variant", variant, "--device", "cpu", "--seconds", "4", *NANOGPT_SMALL]
    result, payloads = run_probed(argv)
    assert result.returncode == 0, result.stderr.decode()
    got = reports(payloads)
    assert got and all(r["batches"] == 0 and r["looks"] >= 10 for r in got)
    share = sum(r["data_looks"] for r in got) / sum(r["looks"] for r in got)
    if variant == "starved":
        assert share > 0.3 and {r["data_site"] for r in got} == {f"get_batch ({NANOGPT.name}:{get_batch_line()})"}
    else:
        assert share < 0.15


def get_batch_line() -> int:
    return next(n for n, line in enumerate(NANOGPT.read_text().splitlines(), 1) if line.startswith("def get_batch("))


def load_probe_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_gputui_probe_under_test", Path(SITE_DIR) / "_gputui_probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_data_site_is_the_outermost_data_work_on_the_stack():
    probe = load_probe_module()

    def get_batch():
        return collate()

    def collate():
        return sys._getframe()

    def train_step():
        return sys._getframe()

    here = f"({Path(__file__).name}:"
    assert probe.data_site(get_batch()).startswith("get_batch " + here)  # the outer one, not collate
    assert probe.data_site(train_step()) is None
    assert probe.data_site(None) is None


@pytest.fixture(scope="module")
def rank_1_accumulating_run(shared_train) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """A loop that steps every four batches, probed as torchrun's rank 1 of 2 (RANK and
    WORLD_SIZE set): the two tests below read it, one for the steps, one for the rank."""
    return run_probed([sys.executable, str(shared_train), "--accumulate", "4"], extra={"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})


def test_gradient_accumulation_counts_four_batches_per_step(rank_1_accumulating_run):
    result, payloads = rank_1_accumulating_run
    assert result.returncode == 0, result.stderr.decode()
    got = reports(payloads)
    assert got
    for r in got:
        assert r["batches"] == 4 * r["steps"]


def test_torchrun_ranks_are_on_every_report(rank_1_accumulating_run):
    result, payloads = rank_1_accumulating_run
    assert result.returncode == 0, result.stderr.decode()
    got = reports(payloads)
    assert got
    assert all(r["rank"] == 1 and r["world_size"] == 2 for r in got)


# --- it never changes the script ---------------------------------------------------------


@pytest.fixture(scope="module")
def plain_2000_steps(shared_train) -> tuple[list[str], subprocess.CompletedProcess]:
    """2,000 steps, exit code 3, without the probe: what the two tests below compare a
    probed run (and one whose channel is closed) with."""
    argv = [sys.executable, str(shared_train), "--steps", "2000", "--exit", "3"]
    return argv, subprocess.run(argv, env=child_env(), capture_output=True, timeout=120)


def test_output_and_exit_code_are_byte_identical_with_and_without_the_probe(plain_2000_steps):
    argv, plain = plain_2000_steps
    probed, payloads = run_probed(argv)
    assert plain.returncode == probed.returncode == 3
    assert plain.stdout == probed.stdout and plain.stderr == probed.stderr
    assert b"loss" in plain.stdout
    assert statuses(payloads)[0]["state"] == "armed"


def test_a_failure_inside_the_probe_switches_it_off_and_the_script_goes_on(train):
    argv = [sys.executable, str(train), "--weird", "--steps", "300", "--exit", "5"]
    plain = subprocess.run(argv, env=child_env(), capture_output=True, timeout=120)
    probed, payloads = run_probed(argv)
    assert plain.returncode == probed.returncode == 5, probed.stderr.decode()
    assert plain.stdout == probed.stdout and plain.stderr == probed.stderr
    off = [s for s in statuses(payloads) if s["state"] == "off"]
    assert len(off) == 1 and off[0]["error"] == "RuntimeError: no shape here"
    assert reports(payloads) == []  # off before its first report, and for good


def test_a_compiled_optimizer_step_is_left_to_dynamo_untouched(tmp_path):
    # Traced, the hook would graph-break the user's compiled step, and Dynamo would warn on stderr.
    script = tmp_path / "compiled.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            model = torch.nn.Linear(8, 1)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            step = torch.compile(opt.step, backend="eager")
            x = torch.randn(16, 8)
            for _ in range(50):
                model(x).sum().backward()
                step()
                opt.zero_grad()
            print("done")
            """
        ),
        encoding="utf-8",
    )
    probed, payloads = run_probed([sys.executable, str(script)])
    assert probed.returncode == 0 and probed.stdout == b"done\n", probed.stderr.decode()
    assert b"Dynamo" not in probed.stderr and b"monotonic" not in probed.stderr
    assert [s["state"] for s in statuses(payloads)] == ["armed"]


def test_a_script_without_torch_gets_no_probe_and_runs_unchanged(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import sys, json\nprint(json.dumps({'a': 1}))\nprint('err', file=sys.stderr)\nsys.exit(7)\n", encoding="utf-8")
    plain = subprocess.run([sys.executable, str(script)], env=child_env(), capture_output=True, timeout=60)
    probed, payloads = run_probed([sys.executable, str(script)])
    assert plain.returncode == probed.returncode == 7
    assert plain.stdout == probed.stdout and plain.stderr == probed.stderr
    assert payloads == []
    check = subprocess.run(
        [sys.executable, "-c", "import sys; print('_gputui_probe' in sys.modules, type(sys.meta_path[0]).__name__)"],
        env=child_env({"PYTHONPATH": SITE_DIR, "GPUTUI_PROBE_SOCKET": "/nonexistent/s"}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.stdout.split() == ["False", "_ProbeFinder"]  # only the finder, waiting for torch


def test_a_non_python_program_runs_normally_and_sends_nothing():
    result, payloads = run_probed(["/bin/sh", "-c", "echo hi"])
    assert result.returncode == 0 and result.stdout == b"hi\n" and result.stderr == b""
    assert payloads == []


# --- the user's own sitecustomize -------------------------------------------------------


def test_the_users_sitecustomize_still_runs_and_the_probe_still_reports(train, tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text(
        "import os, sys\nos.environ['THEIRS_RAN'] = '1'\nprint('their marker', file=sys.stderr)\nVALUE = 42\n", encoding="utf-8"
    )
    (tmp_path / "check.py").write_text(
        "import os, sys, sitecustomize, runpy\n"
        "print(os.environ.get('THEIRS_RAN'), sitecustomize.VALUE, sys.path.count(sys.argv[1]))\n"
        "sys.argv = sys.argv[2:]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n",
        encoding="utf-8",
    )
    argv = [sys.executable, str(tmp_path / "check.py"), SITE_DIR, str(train), "--seconds", "1.5"]
    result, payloads = run_probed(argv, extra={"PYTHONPATH": str(theirs)})
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines()[0] == "1 42 1"  # ran, is sys.modules' sitecustomize, our dir still on sys.path
    assert result.stderr == b"their marker\n"
    assert reports(payloads)


def test_an_error_in_the_users_sitecustomize_reads_as_without_the_probe(train, tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("raise ValueError('their bug')\n", encoding="utf-8")
    argv = [sys.executable, str(train), "--steps", "1500"]
    plain = subprocess.run(argv, env=child_env({"PYTHONPATH": str(theirs)}), capture_output=True, timeout=120)
    probed, payloads = run_probed(argv, extra={"PYTHONPATH": str(theirs)})
    assert b"Error in sitecustomize; set PYTHONVERBOSE for traceback:\nValueError: their bug\n" in plain.stderr
    assert (plain.returncode, plain.stdout, plain.stderr) == (probed.returncode, probed.stdout, probed.stderr)
    assert statuses(payloads)[0]["state"] == "armed"  # installed before theirs ran


def test_without_the_socket_variable_the_site_dir_only_chains(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("print('theirs')\n", encoding="utf-8")
    env = child_env({"PYTHONPATH": os.pathsep.join([SITE_DIR, str(theirs)])})
    code = "import sys; print(any(type(f).__name__ == '_ProbeFinder' for f in sys.meta_path))"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["theirs", "False"]


# --- the channel ------------------------------------------------------------------------


def test_the_channel_env_prepends_the_site_dir_and_names_the_socket(monkeypatch):
    channel = ProbeChannel()
    try:
        assert channel.env({"PYTHONPATH": "/a"}) == {"PYTHONPATH": SITE_DIR + os.pathsep + "/a", "GPUTUI_PROBE_SOCKET": channel.path}
        monkeypatch.setenv("PYTHONPATH", "/from/os")
        assert channel.env({})["PYTHONPATH"] == SITE_DIR + os.pathsep + "/from/os"
        monkeypatch.delenv("PYTHONPATH")
        assert channel.env({})["PYTHONPATH"] == SITE_DIR
        assert len(os.fsencode(channel.path)) < 108
        assert os.stat(channel.directory).st_mode & 0o777 == 0o700
    finally:
        channel.close()


def test_the_channel_drops_oversized_and_undecodable_datagrams():
    channel = ProbeChannel()
    lines: list[str] = []
    channel.start(lines.append)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        for data in (b"first", b"x" * (64 * 1024 + 1), b"\xff\xfe bad", "h\u00e9".encode(), b"y" * (64 * 1024)):
            try:
                sender.sendto(data, channel.path)
            except OSError:
                pass  # a kernel that refuses the oversized one outright: dropped all the same
    channel.close()
    assert [line for line in lines if not line.startswith("@gputui ")] == ["first", "h\u00e9"]  # the two over 16 KiB dropped, with a note


def test_close_removes_the_directory_and_a_child_sending_to_it_does_not_notice(plain_2000_steps):
    channel = ProbeChannel()
    channel.start(lambda line: None)
    env = child_env()
    env.update(channel.env(env))
    channel.close()
    channel.close()  # idempotent
    assert not os.path.exists(channel.directory)
    argv, plain = plain_2000_steps
    probed = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    assert (probed.returncode, probed.stdout, probed.stderr) == (plain.returncode, plain.stdout, plain.stderr) and probed.returncode == 3


# --- which commands are Python ------------------------------------------------------------


def test_is_python_command(tmp_path):
    script = tmp_path / "entry"
    script.write_text("#!/usr/bin/env python3\nprint(1)\n", encoding="utf-8")
    script.chmod(0o755)
    shell = tmp_path / "shell"
    shell.write_text("#!/bin/sh\necho python\n", encoding="utf-8")
    shell.chmod(0o755)
    assert is_python_command(["python3", "x.py"])
    assert is_python_command(["python3.12", "-m", "x"])
    assert is_python_command([sys.executable])
    assert is_python_command(["/usr/bin/env", "python3", "x.py"])
    assert is_python_command(["env", "-u", "X", "A=1", "python", "x.py"])
    assert is_python_command([str(script), "--flag"])
    assert not is_python_command([str(shell)])  # "python" after the shebang line does not count
    # a shell or a project runner starts the program after it, with this environment
    assert is_python_command(["/bin/sh", "-c", "python x.py"])
    assert is_python_command(["bash", "-c", "CUDA_VISIBLE_DEVICES=0 python3 train.py --lr 3e-4"])
    assert not is_python_command(["sh", "-c", "./train.sh"])
    assert is_python_command(["uv", "run", "python", "train.py"])
    assert is_python_command(["uv", "run", "--with", "torch", "python", "-m", "train"])
    assert is_python_command(["conda", "run", "-n", "ml", "python", "train.py"])
    assert not is_python_command(["uv", "run", "./train.sh"])
    assert not is_python_command(["uv", "pip", "list"])
    assert not is_python_command(["no-such-program"])
    assert not is_python_command(["/usr/bin/env"])
    assert not is_python_command([])


# --- reading its reports -------------------------------------------------------------------


def probe_report(**fields) -> ProbeReport:
    return ProbeReport({"event": "probe", "v": 1, "steps": 3, "seconds": 1.0, **fields})


def test_a_window_without_batches_takes_its_data_wait_from_the_samplers_looks():
    sampled = probe_report(batches=0, data_wait_s=0.0, looks=50, data_looks=40, data_site="get_batch (train.py:9)")
    assert sampled.sampled_wait and sampled.data_wait_share == pytest.approx(0.8)
    # DataLoader batches were timed: the measurement beats the estimate
    timed = probe_report(batches=10, data_wait_s=0.3, looks=50, data_looks=45)
    assert not timed.sampled_wait and timed.data_wait_share == pytest.approx(0.3)
    # too few looks to tell, and a recording from before the sampler: as they were
    assert not probe_report(batches=0, data_wait_s=0.0, looks=5, data_looks=5).sampled_wait
    before = probe_report(batches=0, data_wait_s=0.0)
    assert not before.sampled_wait and before.data_wait_share == 0.0

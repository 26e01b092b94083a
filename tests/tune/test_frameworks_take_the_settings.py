"""A Lightning ``Trainer.fit`` and a Hugging Face ``Trainer`` take a tune trial's settings:
their own example scripts (tests/data/frameworks, kept as upstream wrote them, each
source in its SOURCE.md), unchanged, run under the probe as a trial runs them
(``GPUTUI_TUNE_LOADER``: one DataLoader worker), until their first training windows.
The frameworks build their loaders themselves (Lightning from the script's DataLoader,
the Trainer from TrainingArguments' dataloader_num_workers, then accelerate's prepare);
the probe tells what it built, and the training windows run on that one worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.probe import ProbeChannel
from gputui.protocol import decode
from gputui.tune.settings import ENV, LoaderSettings
from tests.frameworks.helpers import RUN_TIMEOUT_S, copy_scripts, framework_env, make_data, need

pytestmark = pytest.mark.frameworks
WINDOWS = 2  # training windows on the trial's worker, then the run is stopped: nothing more to see


def trial_of(work: Path, script: list[str], env: dict[str, str] | None = None) -> list[dict]:
    """The probe's lines from ``script`` run as a trial of one worker, until WINDOWS
    training windows came (or the script ended)."""
    channel = ProbeChannel()
    lines: list[dict] = []
    channel.start(lambda line: lines.append(decode(line)))
    base = framework_env(work, {**(env or {}), ENV: LoaderSettings(num_workers=1).env()})
    child = subprocess.Popen(
        [sys.executable, *script], cwd=work, env={**base, **channel.env(base)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while child.poll() is None and time.monotonic() < deadline:
            if len([p for p in lines if p and p["event"] == "probe" and p.get("phase", "training") == "training"]) >= WINDOWS:
                break
            time.sleep(0.2)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=60)
        channel.close()
    return [p for p in lines if p]


def check_took_one_worker(lines: list[dict], framework: str, *, evaluation_built: bool) -> None:
    told = [p for p in lines if p["event"] == "probe_status" and p.get("state") == "loader"]
    training = [p for p in told if p["training"]]
    assert training, told
    assert LoaderSettings.from_fields(training[0]["had"]).num_workers == 0  # as the example writes it
    # accelerate's prepare builds its own loader again from the first one's settings: the trial's by then
    assert all(LoaderSettings.from_fields(loader["got"]).num_workers == 1 for loader in training), training
    if evaluation_built:  # before the first training windows (Lightning's sanity check): left as written
        assert any(not p["training"] for p in told), told
    assert framework in training[0]["frameworks"]
    windows = [p for p in lines if p["event"] == "probe" and p.get("phase", "training") == "training" and p.get("batches")]
    assert windows and all(w["workers"] == 1 for w in windows), windows


def test_lightnings_fit_takes_the_trials_settings(tmp_path):
    need("lightning", "torchvision")
    copy_scripts("lightning", tmp_path, ["transformer.py"])
    make_data().make_wikitext(tmp_path, blocks=4240)
    # Lightning reads Trainer arguments from PL_TRAINER_* (its own defaults_from_env_vars)
    env = {"PL_TRAINER_MAX_STEPS": "100000", "PL_TRAINER_LIMIT_VAL_BATCHES": "2", "PL_TRAINER_ACCELERATOR": "cpu"}
    check_took_one_worker(trial_of(tmp_path, ["transformer.py"], env), "lightning", evaluation_built=True)


def test_the_hf_trainers_run_takes_the_trials_settings(tmp_path):
    need("transformers", "datasets", "accelerate")
    copy_scripts("hf_trainer", tmp_path, ["train_trainer.py"])
    make_data().make_hf_trainer(tmp_path / "hf", train=1000, test=1000)
    check_took_one_worker(trial_of(tmp_path, ["train_trainer.py"]), "transformers", evaluation_built=False)  # the Trainer builds it at its first evaluation

"""A Lightning ``Trainer.fit`` and a Hugging Face ``Trainer`` take a tune trial's settings:
their own example scripts (tests/data/frameworks, kept as upstream wrote them, each
source in its SOURCE.md), unchanged, tuned by hand to one DataLoader worker.  Their
training windows run on that worker, the probe's count from the loop itself; the
frameworks build their loaders themselves (Lightning from the script's DataLoader, the
Trainer from TrainingArguments' dataloader_num_workers, then accelerate's prepare)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.frameworks.helpers import RUN_TIMEOUT_S, copy_scripts, framework_env, make_data, need

pytestmark = pytest.mark.frameworks


def tune_one_worker(work: Path, script: list[str], env: dict[str, str] | None = None) -> dict:
    command = [sys.executable, "-m", "gputui", "tune", "--trial-seconds", "3", "--workers", "1", "--json", "--", sys.executable, *script]
    done = subprocess.run(command, cwd=work, env=framework_env(work, env), capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def check_took_one_worker(result: dict) -> None:
    written, tuned = result["trials"]
    assert written["failure"] is None and tuned["failure"] is None, result
    assert written["settings"]["num_workers"] == 0  # as both examples write it
    assert tuned["settings"]["num_workers"] == 1 and tuned["workers_seen"] == 1
    assert written["workers_seen"] == 0


def test_lightnings_fit_takes_the_trials_settings(tmp_path):
    need("lightning", "torchvision")
    copy_scripts("lightning", tmp_path, ["transformer.py"])
    make_data().make_wikitext(tmp_path, blocks=4240)
    # Lightning reads Trainer arguments from PL_TRAINER_* (its own defaults_from_env_vars)
    env = {"PL_TRAINER_MAX_STEPS": "100000", "PL_TRAINER_LIMIT_VAL_BATCHES": "2", "PL_TRAINER_ACCELERATOR": "cpu"}
    result = tune_one_worker(tmp_path, ["transformer.py"], env)
    check_took_one_worker(result)
    assert "lightning" in result["frameworks"]


def test_the_hf_trainers_run_takes_the_trials_settings(tmp_path):
    need("transformers", "datasets", "accelerate")
    copy_scripts("hf_trainer", tmp_path, ["train_trainer.py"])
    make_data().make_hf_trainer(tmp_path / "hf", train=1000, test=1000)
    result = tune_one_worker(tmp_path, ["train_trainer.py"])
    check_took_one_worker(result)
    assert "transformers" in result["frameworks"]  # the change is then said in TrainingArguments' words (test_verdict.py)

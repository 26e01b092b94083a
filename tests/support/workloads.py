"""Which framework packages the workload tests can import (a test helper, no tests)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest

from gputui.catalog import MODELS


@functools.cache
def _import_problem(package: str) -> str | None:
    """Why ``package`` cannot be imported in a fresh interpreter (None: it can)."""
    code = f"import {package}\n"
    if package == "transformers":
        code += "transformers.BertForSequenceClassification\n"
    env = {**os.environ, "USE_TF": "0"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode == 0:
        return None
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit code {proc.returncode}"


def needs(model: str):
    package = "torchvision" if MODELS[model].kind == "cnn" else "transformers"
    problem = _import_problem(package)
    if problem is not None:
        pytest.skip(f"{package} is not importable here: {problem}")

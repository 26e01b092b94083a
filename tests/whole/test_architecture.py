"""The layers of docs/architecture.md hold: import-linter's contracts (pyproject.toml,
``[tool.importlinter]``) pass on the tree, fail on a planted violation or a stale
exemption, and the layers and forbidden lists name every top-level module of gputui."""

from __future__ import annotations

import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gputui
from gputui.config import tomllib
from tests.support.process import REPO

# The script beside this interpreter (a virtual environment not on PATH), else on PATH.
_BESIDE = Path(sys.executable).parent / "lint-imports"
LINT_IMPORTS = str(_BESIDE) if _BESIDE.exists() else shutil.which("lint-imports")
needs_import_linter = pytest.mark.skipif(LINT_IMPORTS is None, reason="import-linter not installed (pip install -e '.[test]'): layer contracts NOT checked")


def run_lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    assert LINT_IMPORTS is not None
    env = {**os.environ, "PYTHONPATH": str(root)}  # analyse this tree, not an installed gputui
    return subprocess.run([LINT_IMPORTS, "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300)


def contracts() -> dict[str, dict]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c for c in config["tool"]["importlinter"]["contracts"]}


@needs_import_linter
def test_the_import_contracts_hold():
    result = run_lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@needs_import_linter
def test_a_planted_import_of_the_dashboard_breaks_the_build_naming_it(tmp_path):
    shutil.copytree(REPO / "gputui", tmp_path / "gputui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "gputui" / "session" / "session.py", "a", encoding="utf-8") as fh:
        fh.write("\nimport gputui.tui  # planted\n")
    result = run_lint_imports(tmp_path)
    assert result.returncode != 0
    assert "gputui.session.session -> gputui.tui" in result.stdout


@pytest.mark.parametrize(
    "contract_id, allowed",
    [
        ("workloads-protocol-only", {"gputui.workloads", "gputui.protocol", "gputui.catalog", "gputui.stats"}),
        ("protocol-and-catalog-are-leaves", {"gputui.protocol", "gputui.catalog", "gputui.stats"}),
        ("telemetry-knows-no-session", {"gputui.telemetry", "gputui.model"}),
        ("gpus-is-a-leaf", {"gputui.gpus", "gputui.config"}),
    ],
)
def test_forbidden_lists_name_every_other_module(contract_id, allowed):
    # A module added to gputui later must be forbidden too, or allowed here on purpose.
    forbidden = set(contracts()[contract_id]["forbidden_modules"])
    assert forbidden == top_level_modules() - allowed


def top_level_modules() -> set[str]:
    return {f"gputui.{m.name}" for m in pkgutil.iter_modules(gputui.__path__) if m.name != "__main__"}


def test_the_layers_name_every_top_level_module_once():
    # A module added to gputui later must be given its place in the layers.
    layers = contracts()["layers"]["layers"]
    named = [name.strip() for layer in layers for name in layer.replace("|", ":").split(":")]
    assert sorted(named) == sorted(top_level_modules() - {"gputui.__main__"})


def copy_of_the_tree(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "gputui", tmp_path / "gputui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@needs_import_linter
@pytest.mark.parametrize(
    "importer, planted",
    [
        ("run/runner.py", "import gputui.session.session"),  # the runner reaching up to the session
        ("record/history.py", "import gputui.lookback.load"),  # the record reaching up to a face's library
        ("session/summary.py", "import gputui.check.result"),
    ],
)
def test_a_planted_upward_import_breaks_the_layers(tmp_path, importer, planted):
    root = copy_of_the_tree(tmp_path)
    with open(root / "gputui" / importer, "a", encoding="utf-8") as fh:
        fh.write(f"\n{planted}  # planted\n")
    result = run_lint_imports(root)
    assert result.returncode != 0
    broken = result.stdout[result.stdout.index("Broken contracts") :]
    assert "Each layer imports only the layers under it" in broken and planted.split()[-1] in broken


@needs_import_linter
def test_an_exemption_that_matches_no_import_is_an_error(tmp_path):
    root = copy_of_the_tree(tmp_path)
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    stale = '"gputui.run.runner -> gputui.session.session",'
    assert "ignore_imports = []" in text  # the layers hold with no exception
    pyproject.write_text(text.replace("ignore_imports = []", f"ignore_imports = [\n    {stale}\n]", 1), encoding="utf-8")
    result = run_lint_imports(root)
    assert result.returncode != 0
    assert "gputui.run.runner -> gputui.session.session" in result.stdout + result.stderr


def test_every_module_but_the_worker_is_forbidden_to_import_the_worker():
    # A module added to gputui later is held to it too: the worker package is child-only code.
    contract = contracts()["core-no-workloads"]
    assert contract["forbidden_modules"] == ["gputui.workloads"]
    assert set(contract["source_modules"]) == top_level_modules() - {"gputui.workloads"}


@needs_import_linter
@pytest.mark.parametrize(
    "importer, planted, contract_name",
    [
        ("check/stage_context.py", "import gputui.workloads.measure", "Nothing outside gputui.workloads imports it"),
        ("protocol.py", "import gputui.record.recording", "The protocol and the catalog import nothing of gputui"),
        ("workloads/smoke.py", "import gputui.session.session", "The benchmark worker (gputui.workloads) imports none of the core"),
    ],
)
def test_a_planted_import_across_the_worker_boundary_breaks_the_build(tmp_path, importer, planted, contract_name):
    shutil.copytree(REPO / "gputui", tmp_path / "gputui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "gputui" / importer, "a", encoding="utf-8") as fh:
        fh.write(f"\n{planted}  # planted\n")
    result = run_lint_imports(tmp_path)
    assert result.returncode != 0
    broken = result.stdout[result.stdout.index("Broken contracts") :]
    assert contract_name in broken and planted.split()[-1] in broken


def test_ci_runs_the_readme_command_with_the_checkers_before_the_tests():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci_command = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert ci_command in readme  # verbatim
    checks = ci_command.index(
        "ruff check gputui tests benchmarks scripts && ruff format --check gputui tests benchmarks scripts && mypy gputui && lint-imports && "
    )
    assert checks < ci_command.index("python3 -m pytest")
    # three passes (README, "Test"): all but the serial tests in parallel, the frameworks'
    # serial runs two at a time (but those marked alone), then the other serial tests alone;
    # every pass runs
    passes = '(python3 -m pytest -n auto --dist worksteal -m "not serial"; a=$?; python3 -m pytest -n 2 --dist loadscope -m "serial and frameworks and not alone"; b=$?; python3 -m pytest -m "serial and (alone or not frameworks)"; c=$?; exit $((a | b | c)))'
    assert passes in ci_command

"""Running a framework's own example script under gputui, as a user would:
``gputui --headless --record r.jsonl [--no-probe] -- python SCRIPT FLAGS``, in a folder of
the test's own with the script copied in (the scripts write checkpoints, logs and data
beside themselves or in their working directory) and offline stand-ins for what they
download (tests/data/frameworks/make_data.py).

:class:`FrameworkRun` holds what one run gave: gputui's stdout (the script's output passed
through: a pseudo-terminal merges the script's stderr into it), the recording, and the
numbers the tests compare.  :func:`run_starved` runs a script through
tests/data/frameworks/starve.py, its training samples made slow, for the input-bound
checks.  Set ``FRAMEWORKS_REPORT=path`` to have every run append one
JSON line of those numbers there (the table in docs/your-own-training.md was made so),
and ``FRAMEWORKS_KEEP=folder`` to keep each run's recording, stdout and stderr there.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gputui.diagnosis import Settings
from gputui.model import Throughput
from gputui.record import events as ev
from gputui.record.recording import Recording, read_recording
from tests.support.process import REPO, gputui_env

DATA = REPO / "tests" / "data" / "frameworks"
STAND_INS = DATA / "stand_ins"  # a local ``evaluate`` (see its docstring)
STARVE = DATA / "starve.py"  # the starved variant's wrapper (see its docstring)
# Where the scripts train: "cpu" in CI; scripts/gpu-check.sh frameworks sets "cuda".
DEVICE = os.environ.get("FRAMEWORKS_DEVICE", "cpu")
TOLERANCE = 0.02  # gputui's figure against the script's own training-only figure
RUN_TIMEOUT_S = 300  # a loaded 2-core machine runs these several times slower than an idle one
# The starved variants' modes: without the probe the input-bound rule judges from a GPU's
# activity, which a CPU run has not (the summary says so in a note), so only on cuda.
STARVED_MODES = [pytest.param(True, id="probe"), *([pytest.param(False, id="no-probe")] if DEVICE == "cuda" else [])]


def make_data():
    """tests/data/frameworks/make_data.py as a module (it is a script there, beside the data it describes)."""
    spec = importlib.util.spec_from_file_location("frameworks_make_data", DATA / "make_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def need(*modules: str) -> None:
    """Skip, saying which, when a framework the script imports cannot be imported here."""
    missing = import_error(modules)
    if missing is not None:
        pytest.skip(f"needs {', '.join(modules)} (pip install -e '.[frameworks]'): {missing}")


@functools.cache
def import_error(modules: tuple[str, ...]) -> str | None:
    """The last line of the error importing ``modules``, or None; tried once a process, in
    a child (importing torch and the framework into the test process costs seconds and
    memory every test would share)."""
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    env = {**os.environ, "USE_TF": "0"}
    done = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True, text=True, env=env, timeout=120)
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]


def copy_scripts(name: str, work: Path, files: list[str], into: str = "") -> Path:
    """The upstream files of tests/data/frameworks/<name>/ copied, unchanged, into ``work/into``."""
    target = work / into
    target.mkdir(parents=True, exist_ok=True)
    for file in files:
        shutil.copyfile(DATA / name / file, target / file)
    return target


def framework_env(work: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """gputui's isolated test environment, plus: one intra-op thread (two cores shared with
    other tests: more threads only contend), the Hugging Face libraries offline and
    without TensorFlow (transformers would import it, for nothing, in seconds), and the
    ``evaluate`` stand-in first on PYTHONPATH."""
    env = gputui_env(work)
    env.update(
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        USE_TF="0",
        USE_TORCH="1",
        HF_HOME=str(work / "hf"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
        COLUMNS="120",
    )
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(STAND_INS), env.get("PYTHONPATH", "")]))
    env.update(extra or {})
    return env


@dataclass
class FrameworkRun:
    name: str
    probe: bool
    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    recording: Recording
    own_figure: float | None = None  # the script's own training-only figure, in gputui's unit, where it prints one
    own_note: str = ""
    notes: list[str] = field(default_factory=list)

    # -- What the script printed -------------------------------------------------------
    @property
    def lines(self) -> list[str]:
        """Its output lines as a terminal ends them (a progress bar's redraws, split on
        '\\r', each a line), ANSI codes left in."""
        return [part for line in self.stdout.replace("\r\n", "\n").split("\n") for part in line.split("\r")]

    # -- What gputui made of it --------------------------------------------------------
    @property
    def readings(self) -> list[Throughput]:
        return [e.payload for e in self.recording.events_of(ev.THROUGHPUT) if isinstance(e.payload, Throughput)]

    @property
    def units(self) -> dict[str, list[str]]:
        """Each unit the throughput readings use: the sources (live or final) that gave it."""
        out: dict[str, set[str]] = {}
        for reading in self.readings:
            out.setdefault(reading.unit, set()).add(f"{reading.source}{' (final)' if reading.final else ''}")
        return {unit: sorted(sources) for unit, sources in sorted(out.items())}

    @property
    def throughput(self):
        summary = self.recording.summary
        assert summary is not None, f"{self.name}: the recording has no summary ({self.recording.cut})"
        return summary.throughput

    @property
    def figure(self) -> float | None:
        throughput = self.throughput
        return throughput.run_figure if throughput is not None else None

    @property
    def phases(self) -> list[str]:
        summary = self.recording.summary
        return [f"{p.phase} {p.duration_s:.1f}s" for p in (summary.phases or [])] if summary else []

    @property
    def phase_names(self) -> set[str]:
        summary = self.recording.summary
        return {p.phase for p in (summary.phases or []) if p.phase} if summary else set()

    @property
    def probe_windows(self) -> list[ev.ProbeReport]:
        return [e.payload for e in self.recording.events_of(ev.PROBE) if isinstance(e.payload, ev.ProbeReport)]

    @property
    def probe_eval_seen(self) -> bool:
        """Whether the probe told any evaluation apart: a window of its own, or batches
        listed apart in a training window."""
        return any(w.fields.get("phase") == "evaluation" or w.fields.get("eval_batches") for w in self.probe_windows)

    def counted_steps(self) -> range:
        """Which optimizer steps, counted from the run's first, gputui's figure covers with
        the probe: those of every training window but the first (the start, which the
        summary leaves out)."""
        steps = [w.fields.get("steps") or 0 for w in self.probe_windows if w.fields.get("phase", "training") == "training"]
        return range(steps[0], sum(steps)) if steps else range(0)

    @property
    def findings(self) -> list[ev.Finding]:
        summary = self.recording.summary
        return list(summary.findings or []) if summary else []

    @property
    def data_wait(self) -> float | None:
        """The share of its training windows' time the loop waited for data (or made
        its own batches, by the probe's sampler), by the probe; None without it."""
        windows = [w for w in self.probe_windows if w.fields.get("phase", "training") == "training" and w.seconds]
        seconds = sum(w.seconds or 0.0 for w in windows)
        return sum(w.loop_wait_s or 0.0 for w in windows) / seconds if seconds > 0 else None

    def difference(self) -> float | None:
        if self.figure is None or not self.own_figure:
            return None
        return self.figure / self.own_figure - 1.0

    def describe(self) -> dict:
        throughput = self.throughput
        return {
            "script": self.name,
            "mode": "probe" if self.probe else "no-probe",
            "exit": self.returncode,
            "wall_s": round(self.wall_s, 1),
            "gputui_figure": self.figure,
            "unit": throughput.unit if throughput else None,
            "source": throughput.source if throughput else None,
            "readings": throughput.readings if throughput else 0,
            "median": throughput.median if throughput else None,
            "mean": throughput.mean if throughput else None,
            "mean_is_figure": throughput.mean_is_figure if throughput else None,
            "reported": (
                {"value": throughput.reported.samples_per_sec, "source": throughput.reported.source, "unit": throughput.reported.unit}
                if throughput and throughput.reported
                else None
            ),
            "own_figure": self.own_figure,
            "own_note": self.own_note,
            "difference": self.difference(),
            "units_seen": self.units,
            "phases": self.phases,
            "probe_windows": len(self.probe_windows),
            "probe_eval_seen": self.probe_eval_seen,
            "data_wait": round(self.data_wait, 3) if self.data_wait is not None else None,
            "findings": [f.kind for f in self.findings],
            "notes": self.notes,
        }

    def report(self) -> None:
        """Append :meth:`describe` to $FRAMEWORKS_REPORT, where set."""
        path = os.environ.get("FRAMEWORKS_REPORT")
        if path:
            with open(path, "a", encoding="utf8") as f:
                f.write(json.dumps(self.describe()) + "\n")


def run_starved(name: str, work: Path, argv: list[str], *, sample_ms: float, probe: bool = True, env: dict[str, str] | None = None) -> FrameworkRun:
    """``python starve.py --sample-ms MS ARGV...`` under gputui: the script unchanged, each
    of its training samples ``sample_ms`` slower to load (slept; computed without the
    probe, so that the wait shows from outside as a busy CPU too)."""
    shutil.copyfile(STARVE, work / STARVE.name)
    wrapper = [STARVE.name, f"--sample-ms={sample_ms:g}", *([] if probe else ["--spin"])]
    return run_framework(f"{name}-starved", work, [*wrapper, *argv], probe=probe, env=env)


def run_framework(name: str, work: Path, argv: list[str], *, probe: bool, env: dict[str, str] | None = None, timeout: float = RUN_TIMEOUT_S) -> FrameworkRun:
    """``python -m gputui --headless --record r.jsonl [--no-probe] -- python ARGV...`` in ``work``."""
    record = work / "r.jsonl"
    command = [sys.executable, *argv]
    gputui = [sys.executable, "-m", "gputui", "--headless", "--record", str(record), *([] if probe else ["--no-probe"]), "--", *command]
    started = time.monotonic()
    done = subprocess.run(gputui, cwd=work, env=framework_env(work, env), capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - started
    assert record.exists(), f"{name}: gputui wrote no recording (exit {done.returncode}):\n{done.stderr[-3000:]}"
    keep = os.environ.get("FRAMEWORKS_KEEP")  # a folder to keep each run's recording and output in
    if keep:
        stem = Path(keep) / f"{name}-{'probe' if probe else 'no-probe'}"
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(record, stem.with_suffix(".jsonl"))
        stem.with_suffix(".stdout").write_text(done.stdout, encoding="utf8")
        stem.with_suffix(".stderr").write_text(done.stderr, encoding="utf8")
    return FrameworkRun(name, probe, command, done.returncode, done.stdout, done.stderr, wall, read_recording(record))


# --- The checks every script's tests make -------------------------------------------------


def check_one_unit(run: FrameworkRun) -> None:
    """(b) the recording has throughput readings, all of them in one unit."""
    assert run.readings, f"{run.name}: no throughput readings in the recording; gputui's stderr ends:\n{run.stderr[-1500:]}"
    assert len(run.units) == 1, f"{run.name}: throughput readings in {len(run.units)} units: {run.units}"


def check_figure(run: FrameworkRun) -> None:
    """(c) gputui's figure within TOLERANCE of the script's own training-only figure."""
    assert run.own_figure, f"{run.name}: the script's own figure was not found in its output"
    assert run.figure is not None, f"{run.name}: the summary has no throughput figure"
    difference = run.difference()
    assert difference is not None and abs(difference) <= TOLERANCE, (
        f"{run.name} ({'probe' if run.probe else 'no probe'}): gputui's figure {run.figure:,.1f} {run.throughput.unit}/s"
        f" ({'mean' if run.throughput.mean_is_figure else 'median'} of {run.throughput.readings} readings from {run.throughput.source})"
        f" is {difference:+.1%} off the script's own {run.own_figure:,.1f} ({run.own_note})"
    )


def check_evaluation_phase(run: FrameworkRun) -> None:
    """(d) the script evaluated: the probe told its evaluation apart, and the summary's
    phases name it."""
    assert run.probe_eval_seen, f"{run.name}: the probe reported no evaluation (windows: {[w.fields for w in run.probe_windows][:6]})"
    assert "evaluation" in run.phase_names, f"{run.name}: the summary's phases name no evaluation: {run.phases}"


# On a GPU the tiny configurations leave most of its memory unused, which the headroom
# rule rightly says (a larger batch would fit): no bottleneck, so no fault of a fed run.
FED_MAY_FIND = frozenset({"headroom"}) if DEVICE == "cuda" else frozenset()


def check_little_data_wait(run: FrameworkRun) -> None:
    """With the probe, the loop waited for data in less than the input-bound rule's share of its time."""
    wait, threshold = run.data_wait, Settings().data_wait_pct / 100.0
    assert not run.probe or (wait is not None and wait < threshold), (
        f"{run.name}, fed: the loop waited for data {wait} of its time (input-bound at {threshold})"
    )


def check_fed(run: FrameworkRun) -> None:
    """(e) the script as it is, fed: no finding (on a GPU, none but headroom), and little data wait."""
    found = [f for f in run.findings if f.kind not in FED_MAY_FIND]
    assert not found, f"{run.name} ({'probe' if run.probe else 'no probe'}), fed: findings {[f.title for f in found]}"
    check_little_data_wait(run)


def check_loop_bound(run: FrameworkRun) -> None:
    """(e) on a GPU, a fed script whose fixed model leaves the GPU idle: its loop is the
    limit, not its data, and gputui says so.  With the probe: Python-bound, the loop
    waiting for data less than the input-bound rule's share of its time.  Without it:
    "Input- or Python-bound" on a main process with no workers, which only the probe can
    tell apart."""
    mode = "probe" if run.probe else "no probe"
    told = [f for f in run.findings if f.kind in ("python_bound", "input_bound")]
    others = [f.title for f in run.findings if f.kind not in FED_MAY_FIND and f not in told]
    assert not others, f"{run.name} ({mode}), fed: findings {others}"
    check_little_data_wait(run)
    if run.probe:
        assert [f.kind for f in told] == ["python_bound"], f"{run.name} (probe): findings {[f.title for f in run.findings]}"
    else:
        assert told, f"{run.name} (no probe): no finding names the loop: {[f.title for f in run.findings]}"
        for f in told:
            assert f.kind == "python_bound" or (f.title.startswith("Input- or Python-bound") and (f.evidence or {}).get("workers") == 0), f.title


def check_starved(run: FrameworkRun) -> None:
    """(f) the starved variant: gputui finds it input-bound."""
    assert run.returncode == 0, run.stderr[-2000:]
    found = [f for f in run.findings if f.kind == "input_bound"]
    assert found, (
        f"{run.name}: no input-bound finding (findings {[f.title for f in run.findings]}; data wait {run.data_wait}; notes {run.recording.summary and run.recording.summary.notes})"
    )
    if run.probe:
        assert (found[0].evidence or {}).get("data_wait_pct", 0) >= Settings().data_wait_pct, found[0].evidence

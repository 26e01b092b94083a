"""Presets: what a run starts.  Schema, loading, merging and the command a preset resolves to.

A preset is either a built-in *workload* (``framework`` + ``model`` and their knobs,
run by ``python -m gputui.workloads``) or any program (``command = [argv...]``).
Files are merged by preset name, later files replacing earlier presets whole:
built-in defaults, ``$XDG_CONFIG_HOME/gputui/presets.toml``, ``./presets.toml``,
then ``--presets FILE``.  A file may also hold a ``[diagnosis]`` table (thresholds
and hold times, merged key by key across files) and a preset its own ``diagnosis``
table, which wins over the files' for that preset.

Every problem becomes a :class:`UserError` whose one-line message names the file and
the line and column (syntax) or ``[presets.NAME].key`` (schema) and what was expected.
"""

from __future__ import annotations

import dataclasses
import errno
import math
import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.catalog import AUGMENT_LEVELS, COMPILE_MODES, DEVICES, FRAMEWORKS, METHODS, PIPELINES
from gputui.config import user_presets_path
from gputui.diagnosis_settings import KEYS as DIAGNOSIS_KEYS
from gputui.diagnosis_settings import check_value as check_diagnosis_value
from gputui.errors import UserError
from gputui.record.redact import redact_argv, redact_env
from gputui.record.schema import PresetRecord, PresetReference
from gputui.text_files import parse_toml, read_text_file

# One preset's table as its file writes it, plain values as TOML gives them (tomllib,
# tomlkit unwrapped), not yet checked: the TOML edge the editors and the store work at.
PresetTable = dict[str, Any]
# [diagnosis] keys, checked (gputui.diagnosis_settings.check_value): numbers, and true or false.
DiagnosisTable = dict[str, float | bool]


@dataclass(frozen=True)
class Reference:
    """A published result to compare a run against."""

    gpu: str
    samples_per_sec: float
    source: str
    note: str = ""


@dataclass(frozen=True)
class Preset:
    name: str
    source: Path
    description: str = ""
    # A built-in workload ...
    framework: str | None = None
    model: str | None = None
    batch_size: int | None = None
    steps: int | None = None
    warmup_steps: int | None = None
    precision: str | None = None
    pipeline: str | None = None
    workers: int | None = None
    augment: str | None = None
    image_size: int | None = None
    seq_len: int | None = None
    channels_last: bool | None = None
    compile: bool | None = None
    compile_mode: str | None = None
    xla: bool | None = None
    device: str | None = None
    method: str | None = None
    epochs: int | None = None
    find_max_batch: bool | None = None
    # Replicas, or "all" (every GPU the run sees): torch through torchrun, a process
    # each; tf through MirroredStrategy in one process.
    data_parallel: int | str | None = None
    # ... or any program.
    command: tuple[str, ...] | None = None
    # Both.
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout: float | None = None
    gpus: str | None = None  # becomes CUDA_VISIBLE_DEVICES
    batch_size_hint: int | None = None  # for throughput formats that count steps
    # The zero-code PyTorch probe (gputui.probe) in the command's Python: ``probe = true``
    # in a preset; ``gputui -- CMD`` sets it when CMD runs Python (and not --no-probe).
    probe: bool | None = None
    reference: tuple[Reference, ...] = ()
    # This preset's own [diagnosis] keys; they win over the files' table (Config.diagnosis).
    diagnosis: DiagnosisTable = field(default_factory=dict)
    # The built-in file, when this preset replaces a built-in of the same name (set by
    # load_presets): a ./presets.toml in a shared folder must not change `smoke` unseen.
    overrides: Path | None = field(default=None, compare=False, repr=False)

    @property
    def is_workload(self) -> bool:
        return self.command is None

    def argv(self) -> list[str]:
        """The command line this preset runs."""
        if self.command is not None:
            return list(self.command)
        args = [sys.executable, "-m", "gputui.workloads"]
        torchrun = self.framework == "torch" and self.data_parallel is not None
        if torchrun:  # torchrun (torch.distributed.run) starts a worker per rank and sets RANK, WORLD_SIZE
            nproc = "gpu" if self.data_parallel == "all" else self.data_parallel  # torchrun's "gpu": one per GPU
            args[1:1] = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
        for key in WORKLOAD_KEYS:
            value = getattr(self, key)
            if value is None or (torchrun and key == "data_parallel"):
                continue
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                args.append(flag if value else "--no-" + key.replace("_", "-"))
            else:
                args += [flag, str(value)]
        return args

    def child_env(self) -> dict[str, str]:
        """Variables added to the child's environment."""
        env = dict(self.env)
        if self.gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpus
            # NVML numbers GPUs by PCI bus; CUDA, unless told, fastest first.
            env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        return env

    def probed(self) -> bool:
        """Whether this run gets the probe: a command that asks for it; never gputui's
        own workloads, which report through the protocol themselves."""
        return self.command is not None and bool(self.probe)

    def gpu_selectors(self) -> list[str]:
        """The pinned GPUs as written (indices or UUIDs); [] when not pinned."""
        return self.gpus.split(",") if self.gpus else []

    def throughput_batch_hint(self) -> int | None:
        """Batch size used to turn steps/s (tqdm, Keras) into samples/s."""
        return self.batch_size_hint if self.batch_size_hint is not None else self.batch_size

    def describe(self, *, redacted: bool = False) -> PresetRecord:
        """The preset as written in a recording's header and by ``presets show``: its name,
        file and every key it sets, in schema order (``to_dict`` writes it).  ``redacted``:
        secret ``env`` values and the command's secrets replaced (gputui.record.redact), as a
        recording keeps them."""
        order = ["name", "source"] + (["overrides"] if self.overrides is not None else [])
        extra: dict[str, object] = {}
        for key in ALL_KEYS:
            value = getattr(self, key)
            if value in (None, {}, ()):
                continue
            order.append(key)
            if key == "command":
                extra[key] = redact_argv(value) if redacted else list(value)
            elif key == "env" and redacted:
                extra[key] = redact_env(value)[0]
            elif key not in _RECORD_FIELDS:
                extra[key] = value
        return PresetRecord(
            name=self.name,
            source=str(self.source),
            overrides=str(self.overrides) if self.overrides is not None else None,
            description=self.description,
            framework=self.framework,
            model=self.model,
            device=self.device,
            pipeline=self.pipeline,
            precision=self.precision,
            batch_size=self.batch_size,
            workers=self.workers,
            find_max_batch=self.find_max_batch,
            reference=[PresetReference(gpu=r.gpu, samples_per_sec=r.samples_per_sec, source=r.source, note=r.note) for r in self.reference] or None,
            extra=extra,
            key_order=tuple(order),
        )


# --- Schema ------------------------------------------------------------------------
# Each key maps to a checker that returns the converted value or raises _Bad(expected).


class _Bad(Exception):
    """A value that does not fit; the message says what was expected."""


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise _Bad("a string")
    return value


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _Bad("a whole number of 1 or more")
    return value


def _non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Bad("a whole number of 0 or more")
    return value


def _positive_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise _Bad("a finite number greater than 0")
    return float(value)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Bad("true or false")
    return value


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in choices:
            raise _Bad("one of " + ", ".join(repr(c) for c in choices))
        return value

    return check


def _argv(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        if not value.strip():
            raise _Bad("a non-empty list of strings")
        try:
            example = shlex.split(value)
        except ValueError:  # half-typed in the editor: an open quote
            raise _Bad(f"a list of arguments; {value!r} has a quote that is not closed") from None
        raise _Bad(f"a list of arguments, e.g. {example!r}")
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise _Bad("a non-empty list of strings")
    if any("\0" in v for v in value):
        raise _Bad("arguments without NUL characters (no program can be given one)")
    return tuple(value)


def _env(value: Any) -> dict[str, str]:
    """The child's extra environment.  Its values may be secrets (WANDB_API_KEY): no
    message ever shows one, only the variable's name."""
    if not isinstance(value, dict):
        raise _Bad('a table of NAME = "value" strings')
    for key, item in value.items():
        if not key or "=" in key or "\0" in key:
            raise _Bad(f"variable names without '=' or NUL characters (the environment cannot hold {key!r})")
        if not isinstance(item, str):
            raise _Bad(f'a string for env.{key} (quote numbers: {key} = "...")')
        if "\0" in item:
            raise _Bad(f"env.{key}: a value without NUL characters (the environment cannot hold one)")
    return dict(value)


_GPUS_EXPECTED = 'GPU indices or UUIDs, each once: a list like [0, 1] or ["GPU-8932f937", "GPU-1f3c2a10"], or a string like "0,1"'
_GPU_SELECTOR = re.compile(r"\d+|(GPU|MIG)-[0-9A-Fa-f-]+")


def _gpus(value: Any) -> str:
    """The CUDA_VISIBLE_DEVICES value: indices or UUIDs (as CUDA reads them), each once."""
    if isinstance(value, str):
        items: list[Any] = value.split(",")
    elif isinstance(value, list) and value:
        items = value
    else:
        raise _Bad(_GPUS_EXPECTED)
    selectors = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
            selectors.append(str(item))
        elif isinstance(item, str) and _GPU_SELECTOR.fullmatch(item.strip()):
            selectors.append(item.strip())
        else:
            raise _Bad(f"{_GPUS_EXPECTED}; got {item!r}")
    if len(set(selectors)) != len(selectors):
        raise _Bad(f"{_GPUS_EXPECTED}; {_first_repeat(selectors)!r} is given twice")
    return ",".join(selectors)


def _first_repeat(items: list[str]) -> str:
    seen: set[str] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return ""


def _replicas(value: Any) -> int | str:
    if value == "all" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise _Bad('a whole number of 1 or more, or "all" (every GPU the run sees)')


def _references(value: Any) -> tuple[Reference, ...]:
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise _Bad("a list of tables with gpu, samples_per_sec and source")
    refs = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise _Bad(f"a table at reference[{i}]")
        unknown = set(item) - {"gpu", "samples_per_sec", "source", "note"}
        missing = {"gpu", "samples_per_sec", "source"} - set(item)
        if unknown or missing:
            what = f"unknown key {sorted(unknown)[0]!r}" if unknown else f"missing {sorted(missing)[0]!r}"
            raise _Bad(f"gpu, samples_per_sec, source and optional note at reference[{i}] ({what})")
        try:
            refs.append(
                Reference(
                    gpu=_string(item["gpu"]),
                    samples_per_sec=_positive_number(item["samples_per_sec"]),
                    source=_string(item["source"]),
                    note=_string(item.get("note", "")),
                )
            )
        except _Bad as bad:
            raise _Bad(f"{bad} in reference[{i}]") from None
    return tuple(refs)


WORKLOAD_CHECKS: dict[str, Callable[[Any], Any]] = {
    "framework": _one_of(tuple(FRAMEWORKS)),
    "model": _string,  # checked against the framework below
    "batch_size": _positive_int,
    "steps": _positive_int,
    "warmup_steps": _non_negative_int,
    "precision": _string,  # checked against the framework below
    "pipeline": _one_of(PIPELINES),
    "workers": _non_negative_int,
    "augment": _one_of(AUGMENT_LEVELS),
    "image_size": _positive_int,
    "seq_len": _positive_int,
    "channels_last": _boolean,
    "compile": _boolean,
    "compile_mode": _one_of(COMPILE_MODES),
    "xla": _boolean,
    "device": _one_of(DEVICES),
    "method": _one_of(METHODS),
    "epochs": _positive_int,
    "find_max_batch": _boolean,
    "data_parallel": _replicas,
}
COMMON_CHECKS: dict[str, Callable[[Any], Any]] = {
    "description": _string,
    "command": _argv,
    "env": _env,
    "cwd": _string,
    "timeout": _positive_number,
    "gpus": _gpus,
    "batch_size_hint": _positive_int,
    "probe": _boolean,
    "reference": _references,
    "diagnosis": dict,  # checked key by key in _diagnosis_table
}
WORKLOAD_KEYS = tuple(WORKLOAD_CHECKS)
# The keys PresetRecord holds as fields of their own (the rest go to its ``extra``).
_RECORD_FIELDS = frozenset(f.name for f in dataclasses.fields(PresetRecord)) - {"extra", "key_order"}
DATA_PARALLEL_FRAMEWORKS = ("torch", "tf")
ALL_KEYS = tuple(COMMON_CHECKS) + WORKLOAD_KEYS
TOP_LEVEL_TABLES = ("presets", "diagnosis")


def _diagnosis_table(table: Any, where: str) -> DiagnosisTable:
    """A [diagnosis] table checked key by key; ``where`` is "file: [diagnosis]" or
    "file: [presets.NAME].diagnosis"."""
    if not isinstance(table, dict):
        raise UserError(f"{where}: expected a table of diagnosis settings")
    values: DiagnosisTable = {}
    for key, raw in table.items():
        try:
            values[key] = check_diagnosis_value(key, raw)
        except KeyError:
            raise UserError(f"{where}.{key}: unknown key (expected one of: {', '.join(DIAGNOSIS_KEYS)})") from None
        except ValueError as bad:
            raise UserError(f"{where}.{key}: expected {bad}") from None
    return values


def _parse_preset(name: str, table: Any, path: Path) -> Preset:
    where = f"{path}: [presets.{name}]"
    if not name.strip():  # `--preset ''` could not tell it from no --preset at all
        raise UserError(f'{path}: [presets."{name}"]: expected a preset name that is not empty or blank')
    if not isinstance(table, dict):
        raise UserError(f"{where}: expected a table of settings")
    values: dict[str, Any] = {}  # Preset's keyword arguments, each checked: TOML's values become the preset here
    checks = {**COMMON_CHECKS, **WORKLOAD_CHECKS}
    for key, raw in table.items():
        if key not in checks:
            raise UserError(f"{where}.{key}: unknown key (expected one of: {', '.join(ALL_KEYS)})")
        if key == "diagnosis":
            values[key] = _diagnosis_table(raw, f"{where}.diagnosis")
            continue
        try:
            values[key] = checks[key](raw)
        except _Bad as bad:
            raise UserError(f"{where}.{key}: expected {bad}") from None

    workload_keys = [k for k in values if k in WORKLOAD_CHECKS]
    if "command" in values:
        if workload_keys:
            raise UserError(f"{where}.{workload_keys[0]}: not allowed with command (a preset runs either a command or a workload)")
    else:
        if "framework" not in values:
            raise UserError(f"{where}: missing key framework (or command = [...] to run any program)")
        framework = FRAMEWORKS[values["framework"]]
        model = values.setdefault("model", framework["models"][0] if len(framework["models"]) == 1 else None)
        if model is None:
            raise UserError(f"{where}: missing key model (expected one of: {', '.join(framework['models'])})")
        if model not in framework["models"]:
            raise UserError(f"{where}.model: unknown model {model!r} for framework {values['framework']!r} (expected one of: {', '.join(framework['models'])})")
        if "data_parallel" in values and values["framework"] not in DATA_PARALLEL_FRAMEWORKS:
            raise UserError(
                f"{where}.data_parallel: expected framework {' or '.join(map(repr, DATA_PARALLEL_FRAMEWORKS))} "
                f"(data-parallel training), got {values['framework']!r}"
            )
        if values.get("data_parallel") and values.get("find_max_batch"):
            raise UserError(f"{where}.data_parallel: not allowed with find_max_batch (search the batch on one GPU)")
        precision = values.get("precision")
        if precision is not None and precision not in framework["precisions"]:
            raise UserError(f"{where}.precision: expected one of {', '.join(framework['precisions'])} for framework {values['framework']!r}, got {precision!r}")
    return Preset(name=name, source=path, **values)


def load_file(path: Path) -> dict[str, Preset]:
    """The presets of one file, validated.  Raises UserError naming file and place."""
    return _load_document(path)[0]


def load_diagnosis_file(path: Path) -> DiagnosisTable:
    """The [diagnosis] table of one file, validated ({} when it has none)."""
    return _load_document(path)[1]


def _load_document(path: Path) -> tuple[dict[str, Preset], DiagnosisTable]:
    try:
        text = read_text_file(path, "presets file")
    except FileNotFoundError:
        raise UserError(f"{path}: no such presets file") from None
    return parse_text(text, path)


def check_preset(name: str, table: Any, path: Path) -> Preset:
    """One preset's table, validated as a file would be (for editors): raises UserError."""
    return _parse_preset(name, table, path)


def parse_text(text: str, path: Path) -> tuple[dict[str, Preset], DiagnosisTable]:
    """The presets and [diagnosis] table of ``text``, validated as if read from ``path``
    (errors name ``path``).  Raises UserError."""
    data = parse_toml(text, path)
    try:
        return _parse_data(data, path)
    except RecursionError:  # str() of what tomllib built recurses per nesting level too
        raise UserError(f"{path}: nested too deeply to read (arrays or tables inside each other)") from None


def _parse_data(data: Mapping[str, object], path: Path) -> tuple[dict[str, Preset], DiagnosisTable]:
    for key in data:
        if key not in TOP_LEVEL_TABLES:
            raise UserError(f"{path}: [{key}]: unknown table (expected [presets.NAME] or [diagnosis])")
    presets = data.get("presets", {})
    if not isinstance(presets, dict):
        raise UserError(f"{path}: presets: expected tables [presets.NAME]")
    diagnosis = _diagnosis_table(data["diagnosis"], f"{path}: [diagnosis]") if "diagnosis" in data else {}
    return {name: _parse_preset(name, table, path) for name, table in presets.items()}, diagnosis


# --- Where presets come from ----------------------------------------------------------


def builtin_presets_path() -> Path:
    """The presets shipped with gputui: inside the installed package, else the repo root."""
    package = Path(__file__).resolve().parents[1]  # gputui/, where the wheel puts it
    packaged = package / "presets.toml"
    return packaged if packaged.exists() else package.parent / "presets.toml"


def search_path(extra: Path | None = None, cwd: Path | None = None) -> list[Path]:
    """Files in merge order, later ones winning; the built-in file must exist, the rest may not."""
    candidates = [builtin_presets_path(), user_presets_path(), (cwd or Path.cwd()) / "presets.toml"]
    files: list[Path] = []
    seen: set[Path] = set()
    for path in candidates:
        resolved = _real_path(path)
        if resolved in seen or (files and not path.is_file()):
            continue
        seen.add(resolved)
        files.append(path)
    if extra is not None:
        resolved = _real_path(extra)
        if resolved in seen:
            files = [f for f in files if _real_path(f) != resolved]
        files.append(extra)
    return files


def _real_path(path: Path) -> Path:
    """Where ``path`` leads, to spot one file reached twice.  A symlink loop is an error
    (is_file() would call it absent and hide it); a missing file is just absent."""
    try:
        return Path(os.path.realpath(path, strict=True))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"{path}: cannot read (a symlink loop: {exc.strerror})") from None
        return Path(os.path.realpath(path))


@dataclass(frozen=True)
class Config:
    """What the presets files say, read once and handed to every face (headless run or
    watch, dashboard, check): the presets, merged by name, and the files' ``[diagnosis]``
    tables, merged key by key.  A preset's own ``diagnosis`` table wins over
    ``diagnosis`` for its runs (SessionConfig applies both)."""

    presets: dict[str, Preset]
    diagnosis: DiagnosisTable


def load_config(extra: Path | None = None, cwd: Path | None = None) -> Config:
    """Every presets file in search order, each parsed once; later files win (whole
    presets by name, [diagnosis] key by key).  Raises UserError naming file and place."""
    merged: dict[str, Preset] = {}
    diagnosis: DiagnosisTable = {}
    builtin = builtin_presets_path()
    builtin_names: set[str] = set()
    for path in search_path(extra, cwd):
        presets, table = _load_document(path)
        if path == builtin:
            builtin_names = set(presets)
        merged.update(presets)
        diagnosis.update(table)
    presets = {name: dataclasses.replace(p, overrides=builtin if name in builtin_names and p.source != builtin else None) for name, p in merged.items()}
    return Config(presets=presets, diagnosis=diagnosis)


def load_presets(extra: Path | None = None, cwd: Path | None = None) -> dict[str, Preset]:
    """The presets of :func:`load_config`, for callers that need nothing else."""
    return load_config(extra, cwd).presets


def get_preset(presets: dict[str, Preset], name: str) -> Preset:
    try:
        return presets[name]
    except KeyError:
        known = ", ".join(sorted(presets)) or "none"
        raise UserError(f"no preset named {name!r} (known presets: {known})") from None

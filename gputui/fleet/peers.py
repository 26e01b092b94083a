"""The fleet report: every node and GPU of a fleet check in one table, each measured
check against the median of its peers, and the outliers by name.

What is compared: the checks that measure speed, where more is better: the per-GPU
micro-benchmarks and workloads (``micro.gpuN.matmul_bf16``, ``workload.gpuN.resnet50_tuned``)
and the node-wide ones (``micro.allreduce``, ``workload.host_pipeline``).  Peers are the
GPUs of the same model (an H100 is not a slow H200), and for node-wide checks the nodes
with the same GPUs (``2x NVIDIA H100 80GB HBM3``).  A value more than ``OUTLIER_BELOW``
under its peers' median is an outlier; so is a GPU whose loaded PCIe link differs from
the one most of its peers have.  A node whose every GPU is flagged is named as the node
(a Gen4 slot, a slow host), else the GPU.

What the report reads came from the nodes, so nothing in it is trusted to keep the
others honest: a measured value that is not a finite number from 0 to ``MAX_MEASURED``,
or a result that is not shaped as one, makes its node ``bad-input`` (named, and left
out of every median); two results under one node name are both kept, each named with
its file, and the shared name is a problem of its own; a folder's JSON of another kind
is skipped with a note.  None of these reads as an all-clear.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from gputui.check.result import CheckResult, name_and_gpu
from gputui.check.thresholds import PEER_OUTLIER_BELOW
from gputui.errors import UserError
from gputui.fleet.node import MAX_NAME
from gputui.fleet.results import FAIL, HEALTHY, OK, STATUSES, WARN
from gputui.text_files import read_text_file

OUTLIER_BELOW = PEER_OUTLIER_BELOW  # 8 % under the fleet median, as a GPU under its box's others in `gputui check`
_MEASURED = re.compile(r"(micro|workload)\.[a-z0-9_]+")  # speed checks, more is better (not micro.p2p.gpu0-gpu1: pairs)
COST_WORKLOAD = "workload.resnet50_tuned"  # the samples a fleet's cost is counted in
BAD_INPUT = "bad-input"  # the report's own status: the node's result cannot be taken as it is
# Speed figures are TFLOP/s, GB/s, images/s: far below this.  A bound keeps every sum and
# median of them finite, so one node's figure cannot make the fleet's median inf.
MAX_MEASURED = 1e12
_SHOWN_PROBLEMS = 3  # of a bad node's problems, those its reason names


@dataclass
class Node:
    name: str  # unique in a report: a shared name gets its file after it
    status: str
    reason: str = ""
    file: str = ""  # the result it was read from
    gpus: int = 0
    gpu_names: dict[int, str] = field(default_factory=dict)  # by NVML index
    failed: list[str] = field(default_factory=list)  # "id: value" of each failed check
    values: dict[tuple[str, int | None], tuple[float, str]] = field(default_factory=dict)  # (check, gpu) -> (value, unit)
    links: dict[int, str] = field(default_factory=dict)
    bad: list[str] = field(default_factory=list)  # what in its result could not be taken: "key: value: expected ..."

    def peers(self, gpu: int | None) -> str:
        """Whom a value is compared with: the GPU's model, or for a node-wide check the
        node's GPUs (``2x NVIDIA H100 80GB HBM3``)."""
        if gpu is not None:
            return self.gpu_names.get(gpu, "?")
        models = Counter(self.gpu_names.values())
        return " + ".join(f"{n}x {model}" for model, n in sorted(models.items())) or "?"


@dataclass
class Outlier:
    node: str
    gpu: int | None
    check: str
    value: Any
    median: Any  # of its peers (or the link most of them have)
    unit: str = ""
    peers: str = ""

    @property
    def shortfall(self) -> float | None:
        if isinstance(self.value, (int, float)) and isinstance(self.median, (int, float)) and self.median:
            return 1.0 - self.value / self.median
        return None


@dataclass
class Skipped:
    """A file of a folder that is no node result, and why."""

    file: str
    why: str


@dataclass
class FleetReport:
    nodes: list[Node]
    medians: dict[str, dict[str, tuple[float, str]]]  # check -> peers -> (median, unit)
    outliers: list[Outlier]
    price: float | None = None
    shared_names: dict[str, list[str]] = field(default_factory=dict)  # a name on several results -> their nodes' names here
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def peer_groups(self) -> list[str]:
        """The GPU models (and node-wide configurations) the fleet has, in order."""
        return sorted({peers for by_peers in self.medians.values() for peers in by_peers})

    @property
    def flagged(self) -> list[str]:
        """The outliers by name: a node where all of its GPUs (or a node-wide check) are
        flagged, else ``node GPUn``; sorted."""
        names: set[str] = set()
        by_node: dict[str, set[int | None]] = {}
        for o in self.outliers:
            by_node.setdefault(o.node, set()).add(o.gpu)
        for node in self.nodes:
            gpus = by_node.get(node.name)
            if not gpus:
                continue
            if None in gpus or (node.gpus > 1 and len(gpus) == node.gpus):
                names.add(node.name)
            else:
                names.update(f"{node.name} GPU{g}" for g in gpus)
        return sorted(names)

    @property
    def exit_code(self) -> int:
        """1 when a node failed, could not be checked or read, is an outlier, or shares
        its name with another result; else 0."""
        return 1 if self.outliers or self.shared_names or any(n.status not in HEALTHY for n in self.nodes) else 0

    def cost_per_million(self, node: Node) -> float | None:
        """USD per million ResNet-50 samples on ``node`` at ``price`` per node-hour: its
        GPUs each at the mean rate its measured ones reached."""
        rates = [v for (check, _gpu), (v, _u) in node.values.items() if check == COST_WORKLOAD]
        if self.price is None or not rates or not node.gpus:
            return None
        rate = statistics.mean(rates) * node.gpus
        cost = self.price / 3600.0 / rate * 1e6 if rate > 0 else math.inf
        return cost if math.isfinite(cost) else None


# --- reading -----------------------------------------------------------------------------


def node_files(paths: list[Path]) -> list[tuple[Path, bool]]:
    """The node JSONs of folders (every ``*.json`` in them) and files, in name order,
    each with whether it was named (a folder's may be skipped, a named file may not);
    a file named twice is read once."""
    files: list[tuple[Path, bool]] = []
    for path in paths:
        if path.is_dir():
            files += [(file, False) for file in sorted(path.glob("*.json"))]
        elif path.exists():
            files.append((path, True))
        else:
            raise UserError(f"{path}: no such file or folder")
    if not files:
        raise UserError(f"{', '.join(map(str, paths))}: no node results (*.json) in it; run gputui fleet check --out DIR first")
    seen: set[Path] = set()
    unique = []
    for file, named in files:
        key = file.resolve()
        if key not in seen:
            seen.add(key)
            unique.append((file, named))
    return unique


class NotANodeResult(UserError):
    """A JSON of another kind: skipped in a folder, refused when named."""


class _Bad(Exception):
    """Where a node's result is not what it should be, and what was expected."""


def read_node(path: Path, named: bool = True) -> Node:
    """A NODE.json of ``gputui fleet check``, or a plain ``gputui check --json`` output
    (named after its file).  A result that cannot be taken as it is (a key of the wrong
    kind, a value out of range) is a ``bad-input`` node saying which key and what was
    expected; so is a folder's file that is not JSON (a node's result damaged), where a
    file the user ``named`` is refused.  NotANodeResult for JSON of another kind."""
    try:
        data = json.loads(read_text_file(path, "node result (JSON)"))
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except UserError as exc:
        if named:
            raise
        return _bad_node(path.stem, path, str(exc).removeprefix(f"{path}: "))
    except (ValueError, RecursionError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        why = f"not JSON{where}; expected a node result of gputui fleet check or gputui check --json"
        if named:
            raise UserError(f"{path}: {why}") from None
        return _bad_node(path.stem, path, why)
    if not isinstance(data, dict) or not ({"fleet_node", "checks", "verdict"} & data.keys()):
        raise NotANodeResult(f"{path}: not a node result; expected the JSON of gputui fleet check or gputui check --json")
    try:
        return _node_of(path, data)
    except _Bad as exc:
        name = data.get("node") if "fleet_node" in data else path.stem
        return _bad_node(name if _is_name(name) else path.stem, path, str(exc))


def _is_name(name: Any) -> TypeGuard[str]:
    return isinstance(name, str) and 0 < len(name) <= MAX_NAME


def _bad_node(name: str, path: Path, why: str) -> Node:
    return Node(name=name, status=BAD_INPUT, reason=why, file=str(path))


def _node_of(path: Path, data: dict[str, Any]) -> Node:
    if "fleet_node" in data:
        name, status, reason, check = data.get("node"), data.get("status"), data.get("reason") or "", data.get("check")
        if not _is_name(name):
            raise _Bad(f"node: expected the node's name (text of 1 to {MAX_NAME} characters)")
        if status not in STATUSES:
            raise _Bad(f"status: expected one of {', '.join(STATUSES)}")
        if not isinstance(reason, str):
            raise _Bad("reason: expected text")
    else:
        name, check = path.stem, data
        verdict = data.get("verdict")
        status = verdict.get("verdict") if isinstance(verdict, dict) else None
        reason = ""
        if status not in (OK, WARN, FAIL):
            raise _Bad("verdict.verdict: expected the JSON of gputui check --json (ok, warn or fail)")
    node = Node(name=name, status=status, reason=reason, file=str(path))
    if check is not None:
        _read_check(node, check, "check." if "fleet_node" in data else "")
    if node.bad:
        more = len(node.bad) - _SHOWN_PROBLEMS
        shown = "; ".join(node.bad[:_SHOWN_PROBLEMS]) + (f"; and {more} more" if more > 0 else "")
        node.reason = f"{shown} (its own status: {status}{': ' + reason if reason else ''})"
        node.status, node.values, node.links = BAD_INPUT, {}, {}  # in no median: its figures are not to be trusted
    return node


def _read_check(node: Node, check: Any, key: str) -> None:
    """The check's JSON, its keys named in errors after ``key`` (``check.`` in a NODE.json)."""
    checks = check.get("checks") if isinstance(check, dict) else None
    if not isinstance(checks, list):
        raise _Bad(f"{key}checks: expected the list of results of gputui check --json")
    header = check.get("header")
    gpus = header.get("gpus") if isinstance(header, dict) else None
    if isinstance(gpus, list):
        node.gpus = len(gpus)
        node.gpu_names = {
            g["index"] if isinstance(g.get("index"), int) and not isinstance(g.get("index"), bool) else i: str(g.get("name", "?"))
            for i, g in enumerate(gpus)
            if isinstance(g, dict)
        }
    for i, item in enumerate(checks):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise _Bad(f"{key}checks[{i}].id: expected objects with an id")
        _read_result(node, CheckResult.from_dict(item))


def _read_result(node: Node, result: CheckResult) -> None:
    cid, value, unit = result.id, result.value, str(result.unit or "")
    if result.status == FAIL:
        node.failed.append(f"{cid}: {_value_text(value)}{' ' + unit if unit else ''}" if value is not None else cid)
    try:
        name, gpu = name_and_gpu(cid)
    except ValueError:  # a GPU index past Python's int-string limit
        node.bad.append(f"{_value_text(cid)}: expected a check id with a GPU index of a few digits")
        return
    if name == "pcie_link_loaded" and gpu is not None and isinstance(value, str):
        node.links[gpu] = value
    elif _MEASURED.fullmatch(name):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if 0 <= value <= MAX_MEASURED:  # NaN, inf and an int past float's range all fail here, exactly
                node.values[(name, gpu)] = (float(value), unit)
            else:
                node.bad.append(f"{cid}: {_value_text(value)}: expected a finite number from 0 to {MAX_MEASURED:.0e}")


def _value_text(value: Any) -> str:
    """A value from a node for a message: an int of hundreds of digits by its length,
    anything long cut."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return f"a number of {len(str(abs(value)))} digits"
    text = str(value)
    return text if len(text) <= 80 else text[:79] + "…"


# --- judging -----------------------------------------------------------------------------


def build_report(nodes: list[Node], price: float | None = None) -> FleetReport:
    """Compare the nodes; a name several of them carry is made unique first (each such
    node renamed ``NAME (FILE)``), and kept in the report as a problem."""
    shared = _unique_names(nodes)
    medians: dict[str, dict[str, tuple[float, str]]] = {}
    groups: dict[tuple[str, str], list[tuple[Node, int | None, float, str]]] = {}
    for node in nodes:
        if node.status == BAD_INPUT:
            continue  # its figures are not to be trusted, nor compared with
        for (check, gpu), (value, unit) in node.values.items():
            groups.setdefault((check, node.peers(gpu)), []).append((node, gpu, value, unit))
    outliers: list[Outlier] = []
    for (check, peers), entries in sorted(groups.items()):
        median = statistics.median(v for _, _, v, _ in entries)
        unit = entries[0][3]
        medians.setdefault(check, {})[peers] = (median, unit)
        if len(entries) < 2 or median <= 0:
            continue  # no peers: nothing to be slower than
        for node, gpu, value, _ in entries:
            if value < (1.0 - OUTLIER_BELOW) * median:
                outliers.append(Outlier(node.name, gpu, check, value, median, unit, peers))
    outliers += _link_outliers([n for n in nodes if n.status != BAD_INPUT])
    return FleetReport(nodes, medians, outliers, price, shared)


def _unique_names(nodes: list[Node]) -> dict[str, list[str]]:
    """Rename the nodes that share a name to ``NAME (FILE)`` (``#N`` added should even
    that be taken), so that no result stands for another; the shared names -> the
    names given."""
    by_name: dict[str, list[Node]] = {}
    for node in nodes:
        by_name.setdefault(node.name, []).append(node)
    taken = set(by_name)
    shared: dict[str, list[str]] = {}
    for name, group in by_name.items():
        if len(group) < 2:
            continue
        for i, node in enumerate(group, 1):
            base = candidate = f"{name} ({node.file or f'#{i}'})"
            n = 1
            while candidate in taken:
                n += 1
                candidate = f"{base} #{n}"
            taken.add(candidate)
            node.name = candidate
        shared[name] = [node.name for node in group]
    return shared


def _link_outliers(nodes: list[Node]) -> list[Outlier]:
    """GPUs whose loaded PCIe link is not the one most GPUs of their model have."""
    by_model: dict[str, Counter[str]] = {}
    for node in nodes:
        for gpu, link in node.links.items():
            by_model.setdefault(node.peers(gpu), Counter())[link] += 1
    out = []
    for node in nodes:
        for gpu, link in sorted(node.links.items()):
            links = by_model[node.peers(gpu)]
            usual = links.most_common(1)[0][0]
            if len(links) > 1 and link != usual:
                out.append(Outlier(node.name, gpu, "pcie_link_loaded", link, usual, peers=node.peers(gpu)))
    return out


def load_report(paths: list[Path], price: float | None = None) -> FleetReport:
    """The report over node results: files as named, and every ``*.json`` of folders,
    where one that is no node result is skipped (and listed in the report)."""
    nodes: list[Node] = []
    skipped: list[Skipped] = []
    for file, named in node_files(paths):
        if not named and not file.is_file():
            skipped.append(Skipped(str(file), "not a regular file"))
            continue
        try:
            nodes.append(read_node(file, named))
        except NotANodeResult as exc:
            if named:
                raise
            skipped.append(Skipped(str(file), str(exc).removeprefix(f"{file}: ")))
    if not nodes:
        raise UserError(
            f"{', '.join(map(str, paths))}: no node results in it ({len(skipped)} other file{'s' if len(skipped) != 1 else ''} skipped);"
            " run gputui fleet check --out DIR first"
        )
    report = build_report(nodes, price)
    report.skipped = skipped
    return report

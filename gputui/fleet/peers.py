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
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.check.result import CheckResult, name_and_gpu
from gputui.check.thresholds import PEER_OUTLIER_BELOW
from gputui.errors import UserError
from gputui.fleet.results import FAIL, HEALTHY, STATUSES
from gputui.text_files import read_text_file

OUTLIER_BELOW = PEER_OUTLIER_BELOW  # 8 % under the fleet median, as a GPU under its box's others in `gputui check`
_MEASURED = re.compile(r"(micro|workload)\.[a-z0-9_]+")  # speed checks, more is better (not micro.p2p.gpu0-gpu1: pairs)
COST_WORKLOAD = "workload.resnet50_tuned"  # the samples a fleet's cost is counted in


@dataclass
class Node:
    name: str
    status: str
    reason: str = ""
    gpus: int = 0
    gpu_names: dict[int, str] = field(default_factory=dict)  # by NVML index
    failed: list[str] = field(default_factory=list)  # "id: value" of each failed check
    values: dict[tuple[str, int | None], tuple[float, str]] = field(default_factory=dict)  # (check, gpu) -> (value, unit)
    links: dict[int, str] = field(default_factory=dict)

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
class FleetReport:
    nodes: list[Node]
    medians: dict[str, dict[str, tuple[float, str]]]  # check -> peers -> (median, unit)
    outliers: list[Outlier]
    price: float | None = None

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
        """1 when a node failed, could not be checked, or is an outlier; else 0."""
        return 1 if self.outliers or any(n.status not in HEALTHY for n in self.nodes) else 0

    def cost_per_million(self, node: Node) -> float | None:
        """USD per million ResNet-50 samples on ``node`` at ``price`` per node-hour: its
        GPUs each at the mean rate its measured ones reached."""
        rates = [v for (check, _gpu), (v, _u) in node.values.items() if check == COST_WORKLOAD]
        if self.price is None or not rates or not node.gpus:
            return None
        return self.price / 3600.0 / (statistics.mean(rates) * node.gpus) * 1e6


# --- reading -----------------------------------------------------------------------------


def node_files(paths: list[Path]) -> list[Path]:
    """The node JSONs of folders (every ``*.json`` in them) and files, in name order."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(path.glob("*.json"))
        elif path.exists():
            files.append(path)
        else:
            raise UserError(f"{path}: no such file or folder")
    if not files:
        raise UserError(f"{', '.join(map(str, paths))}: no node results (*.json) in it; run gputui fleet check --out DIR first")
    return files


def read_node(path: Path) -> Node:
    """A NODE.json of ``gputui fleet check``, or a plain ``gputui check --json`` output
    (named after its file)."""
    try:
        data = json.loads(read_text_file(path, "node result (JSON)"))
    except (ValueError, RecursionError):
        raise UserError(f"{path}: not JSON; expected a node result of gputui fleet check or gputui check --json") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object (a node result)")
    if "fleet_node" in data:
        name, status, reason, check = data.get("node"), data.get("status"), data.get("reason") or "", data.get("check")
        if not isinstance(name, str) or status not in STATUSES or not isinstance(reason, str):
            raise UserError(f"{path}: node, status: expected a node name and one of {', '.join(STATUSES)}")
    else:
        name, check = path.stem, data
        status = ((data.get("verdict") or {}) if isinstance(data.get("verdict"), dict) else {}).get("verdict")
        reason = ""
        if status not in STATUSES:
            raise UserError(f"{path}: verdict: expected the JSON of gputui check --json (ok, warn or fail)")
    node = Node(name=name, status=status, reason=reason)
    if check is not None:
        _read_check(node, check, path)
    return node


def _read_check(node: Node, check: Any, path: Path) -> None:
    checks = check.get("checks") if isinstance(check, dict) else None
    if not isinstance(checks, list):
        raise UserError(f"{path}: checks: expected the list of results of gputui check --json")
    gpus = ((check.get("header") or {}).get("gpus")) if isinstance(check.get("header"), dict) else None
    if isinstance(gpus, list):
        node.gpus = len(gpus)
        node.gpu_names = {g["index"] if isinstance(g.get("index"), int) else i: str(g.get("name", "?")) for i, g in enumerate(gpus) if isinstance(g, dict)}
    for item in checks:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise UserError(f"{path}: checks: expected objects with an id")
        _read_result(node, CheckResult.from_dict(item))


def _read_result(node: Node, result: CheckResult) -> None:
    cid, value, unit = result.id, result.value, str(result.unit or "")
    if result.status == FAIL:
        node.failed.append(f"{cid}: {value}{' ' + unit if unit else ''}" if value is not None else cid)
    name, gpu = name_and_gpu(cid)
    if name == "pcie_link_loaded" and gpu is not None and isinstance(value, str):
        node.links[gpu] = value
    elif _MEASURED.fullmatch(name) and isinstance(value, (int, float)) and not isinstance(value, bool):
        node.values[(name, gpu)] = (float(value), unit)


# --- judging -----------------------------------------------------------------------------


def build_report(nodes: list[Node], price: float | None = None) -> FleetReport:
    medians: dict[str, dict[str, tuple[float, str]]] = {}
    groups: dict[tuple[str, str], list[tuple[Node, int | None, float, str]]] = {}
    for node in nodes:
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
    outliers += _link_outliers(nodes)
    return FleetReport(nodes, medians, outliers, price)


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
    return build_report([read_node(path) for path in node_files(paths)], price)

"""A recording's samples as one flat table: a row per sample and GPU.

Each row carries that GPU's readings, the host's readings of the same sample, the
run's CPU by process role, and the latest throughput reading at or before the
sample.  A sample without GPUs is one row with the GPU columns empty.  Absent values
stay empty (CSV) or null (Parquet), never 0.  The columns are documented in
docs/report.md; ``COLUMNS`` is the one list both writers use.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from gputui.errors import UserError
from gputui.escape import for_csv_cell
from gputui.model import GpuSample, Sample, Throughput
from gputui.record import events as ev
from gputui.record.recording import Recording
from gputui.safe_write import write_atomic_with


@dataclass
class Row:
    sample: Sample
    gpu: GpuSample | None
    throughput: Any  # the latest non-final throughput Event, or None


@dataclass
class Column:
    name: str
    kind: str  # "float", "int", "str" or "bool": the Parquet type
    get: Callable[[Row], Any]


def _gpu(key: str) -> Callable[[Row], Any]:
    return lambda row: None if row.gpu is None or (row.gpu.lost and key != "lost") else getattr(row.gpu, key)


def _host(key: str) -> Callable[[Row], Any]:
    return lambda row: None if row.sample.host is None else getattr(row.sample.host, key)


def _role_cpu(role: str | None) -> Callable[[Row], Any]:
    def get(row: Row) -> float | None:
        host = row.sample.host
        if host is None or not host.processes:
            return None
        values = [p.cpu_percent for p in host.processes if (role is None or p.role == role) and p.cpu_percent is not None]
        return sum(values) if values else None

    return get


def _run_rss(row: Row) -> int | None:
    host = row.sample.host
    if host is None or not host.processes:
        return None
    return sum(p.rss or 0 for p in host.processes)


def _workers(row: Row) -> int | None:
    host = row.sample.host
    return None if host is None else sum(p.role == "worker" for p in host.processes)


def _load_1m(row: Row) -> float | None:
    host = row.sample.host
    return host.load_avg[0] if host is not None and host.load_avg else None


def _throttle_reasons(row: Row) -> str | None:
    reasons = _gpu("throttle_reasons")(row)
    return None if reasons is None else "|".join(reasons)


def _gpu_process_memory(row: Row) -> int | None:
    processes = _gpu("processes")(row)
    return None if processes is None else sum(p.used_memory or 0 for p in processes)


def _throughput(key: str) -> Callable[[Row], Any]:
    if key == "t":
        return lambda row: None if row.throughput is None else row.throughput.t
    return lambda row: None if row.throughput is None else getattr(row.throughput.payload, key, None)


COLUMNS: list[Column] = [
    Column("t", "float", lambda row: row.sample.t),
    Column("gpu", "int", lambda row: None if row.gpu is None else row.gpu.index),
    Column("gpu_lost", "bool", _gpu("lost")),
    *[
        Column(key, kind, _gpu(key))
        for key, kind in (
            ("util_gpu", "float"),
            ("util_mem", "float"),
            ("sm_active", "float"),
            ("sm_occupancy", "float"),
            ("tensor_active", "float"),
            ("dram_active", "float"),
            ("memory_used", "int"),
            ("memory_total", "int"),
            ("temp_c", "float"),
            ("power_w", "float"),
            ("power_limit_w", "float"),
            ("energy_mj", "int"),
            ("sm_clock_mhz", "int"),
            ("mem_clock_mhz", "int"),
            ("throttle_mask", "int"),
        )
    ],
    Column("throttle_reasons", "str", _throttle_reasons),
    *[
        Column(key, kind, _gpu(key))
        for key, kind in (("pstate", "int"), ("pcie_gen", "int"), ("pcie_width", "int"), ("pcie_tx_bps", "float"), ("pcie_rx_bps", "float"))
    ],
    Column("gpu_process_memory", "int", _gpu_process_memory),
    Column("host_cpu_percent", "float", _host("cpu_percent")),
    Column("host_load_1m", "float", _load_1m),
    *[
        Column(f"host_{key}", kind, _host(key))
        for key, kind in (
            ("memory_used", "int"),
            ("memory_available", "int"),
            ("memory_total", "int"),
            ("swap_used", "int"),
            ("disk_read_bps", "float"),
            ("disk_write_bps", "float"),
        )
    ],
    Column("run_cpu_percent", "float", _role_cpu(None)),
    Column("run_main_cpu_percent", "float", _role_cpu("main")),
    Column("run_worker_cpu_percent", "float", _role_cpu("worker")),
    Column("run_child_cpu_percent", "float", _role_cpu("child")),
    Column("run_rss", "int", _run_rss),
    Column("run_workers", "int", _workers),
    Column("samples_per_sec", "float", _throughput("samples_per_sec")),
    Column("throughput_t", "float", _throughput("t")),
    Column("throughput_phase", "str", _throughput("phase")),
]


def rows(recording: Recording) -> Iterator[Row]:
    """One Row per sample and GPU, in time order, with the latest throughput reading."""
    readings = [e for e in recording.events_of(ev.THROUGHPUT) if isinstance(e.payload, Throughput) and not e.payload.final]
    readings.sort(key=lambda e: e.t)
    latest, next_index = None, 0
    for sample in recording.samples:
        while next_index < len(readings) and readings[next_index].t <= sample.t:
            latest = readings[next_index]
            next_index += 1
        gpus: list[GpuSample | None] = list(sample.gpus) if sample.gpus else [None]  # a row even with no GPU
        for gpu in gpus:
            yield Row(sample, gpu, latest)


def table_values(recording: Recording) -> Iterator[list[Any]]:
    for row in rows(recording):
        yield [column.get(row) for column in COLUMNS]


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return for_csv_cell(value)  # a throttle reason or phase name comes from the recording


def write_csv(recording: Recording, out: Path | TextIO) -> int:
    """Write the table as CSV (to a file atomically, or to an open stream such as
    stdout); returns the number of rows."""
    count = 0

    def fill(handle: TextIO) -> None:
        nonlocal count
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow([c.name for c in COLUMNS])
        for values in table_values(recording):
            writer.writerow([_csv_cell(v) for v in values])
            count += 1

    if isinstance(out, Path):
        _write(out, fill, binary=False)
    else:
        fill(out)
        out.flush()
    return count


PARQUET_TYPES = {"float": "float64", "int": "int64", "str": "string", "bool": "bool_"}


def write_parquet(recording: Recording, out: Path) -> int:
    """Write the table as Parquet (needs pyarrow: the ``parquet`` extra); returns the rows."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError("--parquet: needs pyarrow, which is not installed: pip install pyarrow") from None
    columns: list[list[Any]] = [[] for _ in COLUMNS]
    for values in table_values(recording):
        for column, value in zip(columns, values):
            column.append(value)
    schema = pa.schema([(c.name, getattr(pa, PARQUET_TYPES[c.kind])()) for c in COLUMNS])
    table = pa.Table.from_arrays([pa.array(v, type=f.type) for v, f in zip(columns, schema)], schema=schema)
    _write(out, lambda handle: pq.write_table(table, handle), binary=True)
    return table.num_rows


def _write(out: Path, fill, *, binary: bool) -> None:
    if out.is_dir():
        raise UserError(f"{out}: is a directory, expected a file to write")
    try:
        write_atomic_with(out, fill, binary=binary)
    except OSError as exc:
        raise UserError(f"{out}: cannot write the export ({exc.strerror or exc})") from None

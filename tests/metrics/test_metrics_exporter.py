"""--serve-metrics: the exposition parses with prometheus-client's own parser, GPU
fields carry dcgm-exporter's names, labels and units, and gputui's own metrics say
what the session last saw.  Synthetic telemetry; the real server is started too."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import (
    generate_latest as generate_openmetrics,
)
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as parse_openmetrics,
)
from prometheus_client.parser import text_string_to_metric_families

from gputui.errors import UserError
from gputui.metrics.families import SnapshotCollector
from gputui.metrics.live import LiveMetrics
from gputui.metrics.server import parse_listen_address, start_metrics_server
from gputui.model import GpuSample, HostSample, ProcessSample, Sample
from gputui.record import events as ev
from gputui.record.events import make_event
from tests.support.process import run_gputui
from tests.support.records import make_header

MIB = 1024**2

# dcgm-exporter's etc/default-counters.csv (and its DCP section for DCGM_FI_PROF_*):
# name -> its Prometheus type.  Our GPU metrics must use exactly these names.
DCGM_DEFAULT_COUNTERS = {
    "DCGM_FI_DEV_SM_CLOCK": "gauge",
    "DCGM_FI_DEV_MEM_CLOCK": "gauge",
    "DCGM_FI_DEV_MEMORY_TEMP": "gauge",
    "DCGM_FI_DEV_GPU_TEMP": "gauge",
    "DCGM_FI_DEV_POWER_USAGE": "gauge",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT": "counter",
    "DCGM_FI_DEV_PCIE_RX_THROUGHPUT": "counter",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "counter",
    "DCGM_FI_DEV_GPU_UTIL": "gauge",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "gauge",
    "DCGM_FI_DEV_ENC_UTIL": "gauge",
    "DCGM_FI_DEV_DEC_UTIL": "gauge",
    "DCGM_FI_DEV_XID_ERRORS": "gauge",
    "DCGM_FI_DEV_FB_FREE": "gauge",
    "DCGM_FI_DEV_FB_USED": "gauge",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gauge",
    "DCGM_FI_PROF_SM_ACTIVE": "gauge",
    "DCGM_FI_PROF_SM_OCCUPANCY": "gauge",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "gauge",
    "DCGM_FI_PROF_DRAM_ACTIVE": "gauge",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "gauge",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "gauge",
}
DCGM_LABELS = {"gpu", "UUID", "modelName", "Hostname"}

HEADER_LINE = {
    "gputui": "0.1.0",
    "host": {"hostname": "box-7", "os": "Linux", "cpu_available": 8.0},
    "preset": {"name": "torch-resnet50"},
    "gpus": [
        {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-aaaa"},
        {"index": 1, "name": "NVIDIA H200", "uuid": "GPU-bbbb"},
    ],
}
HEADER = make_header(HEADER_LINE)


def _gpu(index: int, energy_mj: int, **extra) -> GpuSample:
    values = {
        "util_gpu": 97.0,
        "util_mem": 40.0,
        "memory_used": 3 * 1024 * MIB,
        "memory_total": 141 * 1024 * MIB,
        "temp_c": 51.0,
        "power_w": 312.5,
        "energy_mj": energy_mj,
        "sm_clock_mhz": 1980,
        "mem_clock_mhz": 3201,
        "throttle_mask": 0x4,
        "throttle_reasons": ["SwPowerCap"],
        "sm_active": 42.0,
        "sm_occupancy": 21.5,
        "tensor_active": 30.0,
        "dram_active": 55.0,
        "pcie_tx_bps": 1.5e9,
        "pcie_rx_bps": 2.5e8,
    }
    values.update(extra)
    return GpuSample(index=index, **values)


def _host() -> HostSample:
    return HostSample(
        cpu_percent=37.5,
        memory_used=10 * 1024 * MIB,
        memory_total=64 * 1024 * MIB,
        memory_available=50 * 1024 * MIB,
        processes=[
            ProcessSample(pid=10, role="main", cpu_percent=120.0, rss=2_000_000),
            ProcessSample(pid=11, role="worker", cpu_percent=90.0, rss=500_000),
            ProcessSample(pid=12, role="worker", cpu_percent=60.0, rss=700_000),
        ],
    )


def fed(price: float | None = None) -> LiveMetrics:
    """A session that has seen a header, two samples, throughput and findings."""
    live = LiveMetrics(price)
    live.on_header(HEADER)
    live.on_sample(Sample(t=1.0, gpus=[_gpu(0, 9_000_000), _gpu(1, 5_000_000)], host=_host()))
    live.on_sample(Sample(t=2.0, gpus=[_gpu(0, 9_312_500), _gpu(1, 5_100_000, throttle_reasons=[], throttle_mask=0)], host=_host()))
    live.on_event(make_event(1.5, ev.THROUGHPUT, {"samples_per_sec": 2400.0, "samples": 256, "source": "gputui"}))
    live.on_event(make_event(2.0, ev.THROUGHPUT, {"samples_per_sec": 2560.0, "samples": 256, "source": "gputui"}))
    live.on_event(make_event(2.0, ev.FINDING, {"id": "thermal-gpu1-1", "kind": "thermal", "state": "open", "severity": "warning", "evidence": {"gpu": 1}}))
    live.on_event(make_event(2.0, ev.FINDING, {"id": "input_bound-run-1", "kind": "input_bound", "state": "open", "severity": "critical", "evidence": {}}))
    live.on_event(make_event(2.1, ev.FINDING, {"id": "input_bound-run-1", "kind": "input_bound", "state": "closed", "severity": "critical", "evidence": {}}))
    return live


def scrape(live: LiveMetrics) -> dict:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(live))
    text = generate_latest(registry).decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(families: dict, name: str, **labels) -> float:
    matches = [s.value for f in families.values() for s in f.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(matches) == 1, (name, labels, matches)
    return matches[0]


def test_gpu_metrics_carry_dcgm_exporters_names_types_and_labels():
    families = scrape(fed())
    dcgm = {name: f for name, f in families.items() if name.startswith("DCGM_")}
    for name, family in dcgm.items():
        assert name in DCGM_DEFAULT_COUNTERS, f"{name} is not one of dcgm-exporter's"
        expected = DCGM_DEFAULT_COUNTERS[name]
        # dcgm-exporter's counters have no _total suffix; prometheus-client would add one,
        # so the counter is exposed untyped under the very name dashboards query.
        assert family.type == (expected if expected == "gauge" else "unknown"), name
        assert [s.name for s in family.samples] == [name, name], name
        for sample in family.samples:
            assert set(sample.labels) == DCGM_LABELS
    assert set(dcgm) >= {
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
    }


def test_gpu_values_are_in_dcgm_units():
    families = scrape(fed())
    gpu0 = {"gpu": "0", "UUID": "GPU-aaaa", "modelName": "NVIDIA H200", "Hostname": "box-7"}
    assert value(families, "DCGM_FI_DEV_FB_USED", **gpu0) == 3 * 1024  # MiB
    assert value(families, "DCGM_FI_DEV_FB_FREE", **gpu0) == 138 * 1024
    assert value(families, "DCGM_FI_DEV_POWER_USAGE", **gpu0) == 312.5  # W
    assert value(families, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", **gpu0) == 9_312_500  # mJ, since boot
    assert value(families, "DCGM_FI_PROF_SM_ACTIVE", **gpu0) == pytest.approx(0.42)  # a ratio, not percent
    assert value(families, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", **gpu0) == pytest.approx(0.30)
    assert value(families, "DCGM_FI_PROF_PCIE_TX_BYTES", **gpu0) == 1.5e9  # bytes per second
    assert value(families, "DCGM_FI_DEV_SM_CLOCK", gpu="1") == 1980


def test_gputui_metrics_say_what_the_session_last_saw():
    families = scrape(fed(price=3.6))
    assert value(families, "gputui_throughput_samples_per_second", preset="torch-resnet50", Hostname="box-7") == 2560.0
    assert value(families, "gputui_samples_processed_total") == 512
    # 3.6 USD an hour is 0.001 USD a second; a million samples at 2560/s take 390.6 s.
    assert value(families, "gputui_cost_usd_per_million_samples") == pytest.approx(1e6 / 2560 * 0.001)
    assert value(families, "gputui_gpu_energy_joules_total", gpu="0") == 312.5  # since the session's first sample
    assert value(families, "gputui_gpu_energy_joules_total", gpu="1") == 100.0
    assert value(families, "gputui_gpu_throttle_reason_active", gpu="0", reason="SwPowerCap") == 1
    assert value(families, "gputui_gpu_throttle_reason_active", gpu="0", reason="HwThermalSlowdown") == 0
    assert value(families, "gputui_gpu_throttle_reason_active", gpu="1", reason="SwPowerCap") == 0
    assert value(families, "gputui_findings_active", kind="thermal", gpu="1") == 1
    assert value(families, "gputui_findings_severity", kind="thermal", gpu="1") == 2
    assert value(families, "gputui_findings_active", kind="input_bound", gpu="") == 0  # closed: reads 0, not gone
    assert value(families, "gputui_run_cpu_cores", role="main") == pytest.approx(1.2)
    assert value(families, "gputui_run_cpu_cores", role="worker") == pytest.approx(1.5)
    assert value(families, "gputui_run_processes", role="worker") == 2
    assert value(families, "gputui_host_cpu_utilization_ratio") == 0.375
    assert value(families, "gputui_host_memory_used_bytes") == 10 * 1024 * MIB
    assert value(families, "gputui_host_cpu_available_cores") == 8


def test_samples_processed_counts_readings_that_give_only_a_rate():
    # "512 samples/sec" lines: no samples count.  A reading with its window's seconds
    # counts rate x seconds; one without counts over the time since the previous reading.
    live = LiveMetrics()
    live.on_header(HEADER)
    live.on_event(make_event(1.0, ev.THROUGHPUT, {"samples_per_sec": 500.0, "source": "generic"}))  # no window yet
    live.on_event(make_event(3.0, ev.THROUGHPUT, {"samples_per_sec": 500.0, "source": "generic"}))  # 2 s: 1000
    live.on_event(make_event(3.5, ev.THROUGHPUT, {"samples_per_sec": 400.0, "seconds": 0.25, "source": "tqdm"}))  # its own 0.25 s: 100
    live.on_event(make_event(4.0, ev.THROUGHPUT, {"samples_per_sec": 300.0, "samples": 64, "source": "gputui"}))  # counted: 64
    live.on_event(make_event(5.0, ev.THROUGHPUT, {"samples_per_sec": 9999.0, "final": True, "source": "generic"}))  # repeats the run
    assert value(scrape(live), "gputui_samples_processed_total") == pytest.approx(1164)


def test_without_a_price_there_is_no_cost_and_a_new_session_starts_afresh():
    live = fed()
    assert "gputui_cost_usd_per_million_samples" not in scrape(live)
    live.on_header(make_header({**HEADER_LINE, "preset": None}))  # the dashboard goes back to watching
    families = scrape(live)
    assert "gputui_throughput_samples_per_second" not in {s.name for f in families.values() for s in f.samples}
    assert value(families, "gputui_session_info", preset="") == 1
    assert "DCGM_FI_DEV_GPU_UTIL" not in {s.name for f in families.values() for s in f.samples}


def test_openmetrics_exposition_parses_too():
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(fed(price=2.0)))
    names = {f.name for f in parse_openmetrics(generate_openmetrics(registry).decode())}
    assert {"DCGM_FI_DEV_GPU_UTIL", "gputui_throughput_samples_per_second", "gputui_gpu_energy_joules"} <= names


def test_the_server_answers_scrapes_with_the_latest_snapshot():
    server = start_metrics_server("127.0.0.1:0")
    try:
        for name, payload in (("on_header", HEADER),):
            getattr(server.live, name)(payload)
        server.live.on_event(make_event(1, ev.THROUGHPUT, {"samples_per_sec": 77.0, "source": "gputui"}))
        text = urllib.request.urlopen(server.url, timeout=10).read().decode()
    finally:
        server.close()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert value(families, "gputui_throughput_samples_per_second") == 77.0


@pytest.mark.parametrize(
    "text, expected",
    [
        ("9400", ("127.0.0.1", 9400)),
        ("0.0.0.0:9500", ("0.0.0.0", 9500)),
        ("[::1]:9401", ("::1", 9401)),
    ],
)
def test_listen_address(text, expected):
    assert parse_listen_address(text) == expected


@pytest.mark.parametrize("text", ["", "host:", ":9400", "abc", "1:70000", "9400x"])
def test_bad_listen_address_is_a_user_error(text):
    with pytest.raises(UserError, match=r"--serve-metrics: expected \[HOST:\]PORT"):
        parse_listen_address(text)


def test_port_in_use_is_one_line_and_exit_2_before_anything_runs(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_gputui(["--headless", "--record", "x.jsonl", "--serve-metrics", f"127.0.0.1:{port}", "--preset", "smoke"], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    expected = f"gputui: error: --serve-metrics: port {port} on 127.0.0.1 is already in use (is another exporter running? pick another port)"
    assert lines == [expected]
    assert not (tmp_path / "x.jsonl").exists()


def test_bad_price_is_one_line_and_exit_2(tmp_path):
    result = run_gputui(["--headless", "--record", "x.jsonl", "--serve-metrics", "127.0.0.1:0", "--price", "-1", "--preset", "smoke"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "gputui: error: --price: expected a price per hour greater than 0, got -1.0"


def test_the_grafana_dashboard_queries_only_metrics_gputui_serves():
    import json
    import re

    from tests.support.process import REPO

    dashboard = json.loads((REPO / "docs/fleet/grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["query"] for v in dashboard["templating"]["list"]]
    referenced = {m for e in exprs for m in re.findall(r"\b(?:DCGM_FI_\w+|gputui_\w+)", e)}
    runs = [fed(price=1.0), ddp_fed({"samples_per_sec": 1250.0, "source": "one.jsonl"}), check_fed()]  # a plain run, a data-parallel one, a check
    served = {s.name for live in runs for f in scrape(live).values() for s in f.samples}
    assert referenced and referenced <= served, referenced - served
    assert {"gputui_throughput_samples_per_second", "gputui_findings_active", "DCGM_FI_PROF_SM_ACTIVE"} <= referenced
    assert {"gputui_rank_throughput_samples_per_second", "gputui_scaling_efficiency_ratio"} <= referenced
    assert {"gputui_check_status", "gputui_check_ratio"} <= referenced
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))  # Grafana keys panels by id


def test_the_dashboards_supervisor_feeds_the_metrics_to_every_session():
    import threading

    from gputui.view.supervisor import SessionSupervisor
    from tests.support.process import wait_for

    class WaitingSession:
        def __init__(self, config) -> None:
            self.observers: list = []
            self._stopped = threading.Event()
            sessions.append(self)

        def add_observer(self, observer) -> None:
            self.observers.append(observer)

        def run(self) -> dict:
            self._stopped.wait(30)
            return {}

        def stop(self, reason: str = "") -> None:
            self._stopped.set()

    sessions: list[WaitingSession] = []
    own, live = object(), LiveMetrics()
    sup = SessionSupervisor(WaitingSession, lambda session, ticket: [own])
    sup.add_observer(live)
    thread = threading.Thread(target=sup.loop)
    thread.start()
    try:
        wait_for(lambda: sessions and sessions[0].observers)
        assert sessions[0].observers == [own, live]
    finally:
        sup.shutdown("quit")
        assert sup.wait_closed(10)
        thread.join(5)


# -- A data-parallel run: each rank's throughput and the scaling efficiency -----------


def ddp_fed(baseline: dict | None) -> LiveMetrics:
    """Two ranks pinned as gpus = "1,0" (the header lists them in that order)."""
    live = LiveMetrics()
    header = {**HEADER_LINE, "gpus": list(reversed(HEADER_LINE["gpus"]))}
    live.on_header(make_header({**header, "baseline": baseline} if baseline else header))
    live.on_event(make_event(1.0, ev.WORKLOAD, {"framework": "torch", "world_size": 2, "rank": 0}))
    for rank, rate in ((0, 1300.0), (1, 1100.0), (0, 1280.0)):
        live.on_event(make_event(2.0, ev.RANK_THROUGHPUT, {"rank": rank, "ranks": 2, "samples_per_sec": rate, "phase": "measure", "source": "gputui"}))
    live.on_event(make_event(2.0, ev.THROUGHPUT, {"samples_per_sec": 2380.0, "phase": "measure", "source": "gputui"}))
    live.on_event(make_event(3.0, ev.RANK_THROUGHPUT, {"rank": 1, "ranks": 2, "samples_per_sec": 999.0, "final": True, "source": "gputui"}))
    return live


def test_each_rank_is_exported_with_the_gpu_it_drives_and_the_scaling_against_the_baseline():
    families = scrape(ddp_fed({"samples_per_sec": 1250.0, "source": "one.jsonl"}))
    name = "gputui_rank_throughput_samples_per_second"
    assert families[name].type == "gauge"
    assert value(families, name, rank="0", gpu="1", preset="torch-resnet50", Hostname="box-7") == 1280.0  # the latest; rank 0 drives GPU1
    assert value(families, name, rank="1", gpu="0") == 1100.0  # a final result is no live reading
    assert value(families, "gputui_scaling_efficiency_ratio", preset="torch-resnet50", Hostname="box-7") == pytest.approx(2380.0 / (2 * 1250.0))


def test_no_baseline_no_scaling_and_a_plain_run_no_ranks():
    families = scrape(ddp_fed(None))
    assert "gputui_scaling_efficiency_ratio" not in families
    assert value(families, "gputui_rank_throughput_samples_per_second", rank="1") == 1100.0
    plain = scrape(fed())
    assert "gputui_scaling_efficiency_ratio" not in plain
    assert plain["gputui_rank_throughput_samples_per_second"].samples == []


def test_rank_metrics_parse_as_openmetrics_too():
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(ddp_fed({"samples_per_sec": 1250.0, "source": "x"})))
    names = {f.name for f in parse_openmetrics(generate_openmetrics(registry).decode())}
    assert {"gputui_rank_throughput_samples_per_second", "gputui_scaling_efficiency_ratio"} <= names


# -- gputui check's results as metrics (a fleet's alerts) ------------------------------

CHECK_RESULTS = [
    {"id": "host.shm", "group": "preflight", "status": "fail", "value": 64, "unit": "MiB", "expected": 4096, "bound": "at least"},
    {"id": "micro.gpu0.matmul_bf16", "status": "ok", "value": 792.4, "unit": "TFLOP/s", "expected": 800.0, "ratio": 0.9905, "gpu": 0},
    {"id": "micro.gpu1.matmul_bf16", "status": "warn", "value": 700.0, "unit": "TFLOP/s", "expected": 800.0, "ratio": 0.875, "gpu": 1},
    {"id": "gpu1.pcie_link_loaded", "status": "warn", "value": "Gen4 x16", "expected": "Gen5 x16", "gpu": 1},
    {"id": "micro.p2p", "status": "skipped", "cause": "one GPU"},
]


def check_fed() -> LiveMetrics:
    live = LiveMetrics()
    live.on_header(make_header({**HEADER_LINE, "preset": {}, "check": {"quick": True}}))
    for i, result in enumerate(CHECK_RESULTS):
        live.on_event(make_event(1.0 + i, ev.CHECK, result))
    return live


def test_check_results_are_a_status_a_value_and_a_ratio_per_check_and_gpu():
    families = scrape(check_fed())
    assert value(families, "gputui_check_status", check="host.shm", gpu="", Hostname="box-7") == 2.0
    assert value(families, "gputui_check_status", check="micro.matmul_bf16", gpu="1") == 1.0
    assert value(families, "gputui_check_status", check="pcie_link_loaded", gpu="1") == 1.0
    assert value(families, "gputui_check_value", check="micro.matmul_bf16", gpu="0", unit="TFLOP/s") == 792.4
    assert value(families, "gputui_check_ratio", check="micro.matmul_bf16", gpu="1") == 0.875
    statuses = [s for s in families["gputui_check_status"].samples]
    assert not any(s.labels["check"] == "micro.p2p" for s in statuses)  # skipped: it measured nothing


def test_check_results_outlive_the_sessions_after_them_until_the_next_check():
    live = check_fed()
    live.on_header(HEADER)  # the dashboard watches again after the check
    assert "gputui_check_status" in scrape(live)
    live.on_header(make_header({**HEADER_LINE, "check": {"quick": False}}))  # the next check starts afresh
    assert "gputui_check_status" not in scrape(live)


def test_gputui_check_writes_its_results_as_a_metrics_file(tmp_path):
    out = tmp_path / "gputui.prom"
    done = run_gputui(["check", "--quick", "--no-history", "--metrics-file", str(out)], tmp_path, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    families = {f.name: f for f in text_string_to_metric_families(out.read_text())}
    checks = {s.labels["check"] for s in families["gputui_check_status"].samples}
    assert {"host.shm", "host.disk_free"} <= checks
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # written atomically: no temp left


def test_a_check_from_the_dashboard_feeds_the_metrics_server(tmp_path, monkeypatch):
    from tests.support.dashboard import make_dashboard
    from tests.support.keys import quick_check
    from tests.support.tui import demo_preset, run_async, scripted_factory, wait_until

    preset = demo_preset()
    app = make_dashboard(
        {preset.name: preset}, session_factory=scripted_factory(), settings_file=tmp_path / "s.toml", check_factory=quick_check, confirm_quit=False
    )
    live = LiveMetrics()
    app.supervisor.add_observer(live)

    async def scenario():
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("k")
            await pilot.pause(0.2)
            await pilot.press("enter")
            await wait_until(pilot, lambda: "host.shm" in live.snapshot.checks, what="the check's result in the metrics")
            await pilot.press("escape")
            await pilot.press("q")

    run_async(scenario())
    assert live.snapshot.checks["host.shm"].status == "ok"

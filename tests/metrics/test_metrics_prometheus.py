"""A real Prometheus (Debian's ``prometheus`` package) scrapes
``gputui --headless --record --serve-metrics`` while a smoke run goes, and what its
HTTP API answers matches the recording."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from gputui.record import events as ev
from gputui.record.recording import read_recording
from tests.support.process import start_gputui, wait_for

PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary (Debian: apt-get install prometheus)"),
    # free_port() picks ports that are bound only later (another worker could take them),
    # and the scrapes are counted against the run's timing: alone, after the parallel pass.
    pytest.mark.serial,
]

# The smoke workload, long enough that Prometheus scrapes it many times; the test stops it.
LONG_SMOKE = '[presets.long-smoke]\nframework = "smoke"\nbatch_size = 64\nsteps = 100000\nwarmup_steps = 1\n'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(web: str, expr: str) -> list[dict]:
    url = f"{web}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]["result"]


def scraped_values(web: str, metric: str) -> list[float]:
    """Every value Prometheus scraped for ``metric`` (one series) in the last hour."""
    result = query(web, f"{metric}[1h]")
    assert len(result) == 1, result
    return [float(v) for _t, v in result[0]["values"]]


def start_prometheus(tmp_path: Path, target_port: int) -> tuple[subprocess.Popen, str]:
    web_port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 200ms\n  scrape_timeout: 150ms\n"
        f"scrape_configs:\n  - job_name: gputui\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
    )
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{web_port}"],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "prometheus.log").open("w"),
    )
    web = f"http://127.0.0.1:{web_port}"

    def ready() -> bool:
        assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
        try:
            return urllib.request.urlopen(f"{web}/-/ready", timeout=2).status == 200
        except OSError:
            return False

    wait_for(ready, timeout=60, interval=0.2)
    return proc, web


def test_prometheus_scrapes_throughput_and_host_metrics_that_match_the_recording(tmp_path):
    (tmp_path / "long.toml").write_text(LONG_SMOKE)
    port = free_port()
    prometheus, web = start_prometheus(tmp_path, port)
    gputui = None
    try:
        gputui = start_gputui(
            [
                "--headless",
                "--presets",
                "long.toml",
                "--preset",
                "long-smoke",
                "--record",
                "x.jsonl",
                "--serve-metrics",
                f"127.0.0.1:{port}",
                "--interval",
                "0.2",
                "--price",
                "3.6",
            ],
            tmp_path,
        )

        def scraped_enough() -> bool:
            assert gputui.poll() is None, gputui.communicate()[1]
            counts = [query(web, f"count_over_time({name}[1h])") for name in ("gputui_throughput_samples_per_second", "gputui_host_cpu_utilization_ratio")]
            return all(len(c) == 1 and float(c[0]["value"][1]) >= 3 for c in counts)

        wait_for(scraped_enough, timeout=120, interval=0.5)
        assert query(web, 'up{job="gputui"}')[0]["value"][1] == "1"
        gputui.send_signal(signal.SIGTERM)
        _out, err = gputui.communicate(timeout=60)
        assert gputui.returncode == 143, err
        throughput = scraped_values(web, "gputui_throughput_samples_per_second")
        cpu = scraped_values(web, "gputui_host_cpu_utilization_ratio")
        memory_total = scraped_values(web, "gputui_host_memory_total_bytes")
        cost = scraped_values(web, "gputui_cost_usd_per_million_samples")
        main_cores = scraped_values(web, 'gputui_run_cpu_cores{role="main"}')
    finally:
        if gputui is not None and gputui.poll() is None:
            gputui.kill()
            gputui.wait()
        prometheus.terminate()
        prometheus.wait(timeout=30)

    rec = read_recording(tmp_path / "x.jsonl")
    # The exporter shows the latest reading: every value scraped is one the recording holds.
    recorded_rates = [e.data["samples_per_sec"] for e in rec.events_of(ev.THROUGHPUT)]
    assert recorded_rates and all(any(v == pytest.approx(r, rel=1e-12) for r in recorded_rates) for v in throughput)
    assert all(any(c == pytest.approx(3.6 / 3600 / r * 1e6, rel=1e-9) for r in recorded_rates) for c in cost)
    hosts = [s.host for s in rec.samples if s.host is not None]
    recorded_cpu = [h.cpu_percent / 100 for h in hosts if h.cpu_percent is not None]
    assert all(any(v == pytest.approx(r, rel=1e-12, abs=1e-12) for r in recorded_cpu) for v in cpu)
    assert set(memory_total) == {float(h.memory_total) for h in hosts}
    recorded_main = [sum((p.cpu_percent or 0) / 100 for p in h.processes if p.role == "main") for h in hosts]
    assert all(any(v == pytest.approx(r, rel=1e-9, abs=1e-12) for r in recorded_main) for v in main_cores)

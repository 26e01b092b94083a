"""Host contention: cgroup CPU throttling growing, or steal, on the committed traces
with the counters a rented container reports added; the worker count judged against
the cores of the quota, not the machine's; and the sampler's reads of both."""

from __future__ import annotations

from types import SimpleNamespace

from gputui.diagnosis import Settings
from gputui.model import HostSample
from gputui.telemetry.host import HostTelemetry, read_cpu_throttling, steal_percent
from tests.support.diagnosis_traces import findings, hosts, kinds, load, of_kind


def rented(name: str, *, throttled_share: float = 0.0, steal: float | None = None, cores: float = 7.65, visible: int = 96, from_t: float = 0.0):
    """The trace as a container with a ``cores`` quota on a ``visible``-core host would
    record it: cpu.stat periods every 100 ms, throttled in ``throttled_share`` of them
    (120 ms held back each) from ``from_t`` on, and ``steal`` % stolen."""
    rec = load(name)
    assert rec.header.host is not None
    rec.header.host.cpu_available, rec.header.host.cpu_logical = cores, visible
    periods = throttled = 0
    seconds = 0.0
    last = 0.0
    for t, host in hosts(rec):
        dt = t - last
        last = t
        periods += round(10 * dt)
        if t >= from_t:
            got = round(10 * dt * throttled_share)
            throttled += got
            seconds += 0.12 * got
        host.cpu_periods, host.cpu_throttled_periods, host.cpu_throttled_s = periods, throttled, round(seconds, 3)
        host.steal_pct = steal
    return rec


def test_a_throttled_cgroup_is_found_with_its_numbers_and_the_workers_judged_against_the_quota():
    rec = rented("input_enough_workers", throttled_share=0.4, from_t=20.0)
    events = findings(rec)
    assert kinds(events) == ["host_contention"]
    finding = of_kind(events, "host_contention")
    evidence = finding["evidence"]
    assert finding["severity"] == "warning"
    assert 35 <= evidence["cpu_throttled_pct"] <= 45
    assert 25 < evidence["throttled_s_per_min"] < 33  # 4 periods/s x 120 ms = 0.48 s/s
    assert evidence["cores_available"] == 7.65 and evidence["cores_visible"] == 96 and evidence["workers"] == 12
    assert f"throttled the run in {evidence['cpu_throttled_pct']:.0f}% of CPU periods" in finding["title"]
    assert "12 data-loader workers and the main process on 7.65 available cores; the machine shows 96" in finding["title"]
    assert any("at most 6 data-loader workers" in a for a in finding["advice"])


def test_a_few_throttled_periods_are_not_contention():
    rec = rented("input_enough_workers", throttled_share=0.05)
    assert findings(rec) == []


def test_counters_that_stopped_growing_do_not_count():
    # Throttled long ago (a big cumulative count) but not during the run: no finding.
    rec = rented("input_enough_workers", throttled_share=0.0)
    for _t, host in hosts(rec):
        host.cpu_throttled_periods += 50_000
    assert findings(rec) == []


def test_high_steal_is_contention_and_low_steal_is_not():
    events = findings(rented("healthy_synthetic", steal=22.0, cores=16, visible=16))
    finding = of_kind(events, "host_contention")
    assert finding["evidence"]["steal_pct"] == 22.0 and "steal" in finding["title"]
    assert "cpu_throttled_pct" not in finding["evidence"]
    assert "data-loader workers" not in finding["title"]  # the main process alone fits 16 cores
    assert any("noisy neighbour" in a for a in finding["advice"])
    assert findings(rented("healthy_synthetic", steal=3.0, cores=16, visible=16)) == []
    assert "host_contention" not in kinds(findings(rented("healthy_synthetic", steal=22.0), Settings(steal_pct=30.0)))


def test_the_traces_without_counters_say_nothing():
    assert findings(load("input_enough_workers")) == []


# --- the sampler's reads ------------------------------------------------------------------


def test_cpu_stat_v2_and_v1_are_read(tmp_path):
    (tmp_path / "cpu.stat").write_text("usage_usec 10\nnr_periods 120\nnr_throttled 30\nthrottled_usec 4500000\n")
    got = read_cpu_throttling(tmp_path)
    assert (got.periods, got.throttled, got.throttled_s) == (120, 30, 4.5)
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.stat").write_text("nr_periods 10\nnr_throttled 2\nthrottled_time 3000000000\n")
    got = read_cpu_throttling(v1)
    assert (got.periods, got.throttled, got.throttled_s) == (10, 2, 3.0)
    assert read_cpu_throttling(tmp_path / "none") is None


class CpuTimes(tuple):
    """Like psutil's cpu_times: a tuple whose sum is the total, with named fields."""

    def __new__(cls, user: float, idle: float, steal: float):
        obj = super().__new__(cls, (user, idle, steal))
        obj.user, obj.idle, obj.steal = user, idle, steal
        return obj


def test_steal_percent_is_the_stolen_share_of_the_interval():
    assert steal_percent(CpuTimes(100.0, 100.0, 0.0), CpuTimes(150.0, 130.0, 20.0)) == 20.0
    assert steal_percent(CpuTimes(1.0, 1.0, 0.0), SimpleNamespace(user=2.0, idle=2.0)) is None  # no steal field


def test_the_host_sampler_reports_steal_and_cgroup_counters(monkeypatch, tmp_path):
    import gputui.telemetry.host as host_module

    (tmp_path / "cpu.stat").write_text("nr_periods 50\nnr_throttled 5\nthrottled_usec 250000\n")
    monkeypatch.setattr(host_module, "CGROUP_ROOT", tmp_path)
    telemetry = HostTelemetry()
    sample: HostSample = telemetry.sample()
    assert (sample.cpu_periods, sample.cpu_throttled_periods, sample.cpu_throttled_s) == (50, 5, 0.25)
    assert sample.steal_pct is None or sample.steal_pct >= 0.0  # Linux reports it; 0 on an idle host

"""The summary's long series in bounded memory (issue 11): counts of rounded values give
the same percentiles as the whole series rounded, and stay small however long the run."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gputui.model import GpuSample, Sample
from gputui.record.schema import Stats
from gputui.session.summary import SummaryBuilder
from gputui.stats import ValueCounts, percentile

values = st.lists(st.floats(min_value=0, max_value=2000, allow_nan=False), min_size=1, max_size=300)


@given(values, st.sampled_from([0.0, 5.0, 37.5, 50.0, 95.0, 100.0]))
def test_percentiles_are_those_of_the_rounded_series(series, q):
    counts = ValueCounts(digits=1)
    for value in series:
        counts.append(value)
    rounded = [round(v, 1) for v in series]
    assert counts.percentile(q) == percentile(rounded, q)
    assert counts.max() == max(rounded) and len(counts) == len(series)


def test_a_day_at_ten_hertz_keeps_a_bounded_number_of_values():
    counts = ValueCounts(digits=1)
    for i in range(864_000):
        counts.append((i * 7919 % 100_003) / 1000.0)  # 0-100 %, finer than 0.1
    assert len(counts) == 864_000
    assert len(counts._counts) <= 1001
    assert abs(counts.percentile(50.0) - 50.0) < 0.1


def test_the_summary_keeps_counts_not_every_sample():
    b = SummaryBuilder()
    for i in range(5000):
        b.on_sample(Sample(t=float(i), gpus=[GpuSample(index=0, util_gpu=float(90 + i % 10), power_w=400.0 + i % 3)]))
    window = b.gpus_all[0]
    assert all(len(series._counts) <= 10 for series in window.series.values())
    assert b.build().gpus[0].util_gpu == Stats(median=94.5, max=99.0)

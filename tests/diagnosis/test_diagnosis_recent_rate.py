"""The run's current throughput for the rules (Context.recent_rate): the median of the
last RATE_RECENT_S of readings up to the latest sample, worked out again whenever a
sample or a reading comes."""

from __future__ import annotations

from gputui.diagnosis import Settings
from gputui.diagnosis.context import RATE_RECENT_S, Context


def test_the_recent_rate_is_the_median_of_the_last_seconds_up_to_the_latest_sample():
    ctx = Context(Settings())
    assert ctx.recent_rate() is None
    for t in range(30):
        ctx.add_rate(float(t), 100.0 + t)
    ctx.now = 29.0
    # readings at 19..29 s: 119..129
    assert ctx.recent_rate() == 124.0
    ctx.now = 20.0  # a reading newer than the latest sample does not count yet
    assert ctx.recent_rate() == 115.0  # 10..20 s
    ctx.now = 29.0
    ctx.add_rate(29.5, 1000.0)
    ctx.now = 29.5
    assert ctx.recent_rate() == 125.0  # 19.5..29.5 s: 120..129 and 1000
    ctx.add_rate(30.0, 1000.0)
    ctx.now = 30.0 + RATE_RECENT_S + 1.0
    assert ctx.recent_rate() is None  # nothing in the last seconds

"""RollingMedian keeps the latest readings in order: the running median every live
reading carries, without sorting a thousand readings ten times a second."""

import math
import random

from gputui.record import events as ev
from gputui.record.events import make_event
from gputui.session.summary import RECENT_READINGS, SummaryBuilder
from gputui.stats import RollingMedian, median


def test_it_is_the_median_of_the_latest_window_values_through_ties_and_the_window_sliding():
    rng = random.Random(7)
    rolling, seen = RollingMedian(50), []
    for i in range(400):
        value = float(rng.choice([100, 101, 102])) if i % 3 else rng.uniform(50, 150)  # ties, repeats
        rolling.add(value)
        seen.append(value)
        assert rolling.median == median(seen[-50:]), f"after {i + 1} values"


def test_an_empty_or_cleared_one_has_no_median_and_values_that_are_not_finite_are_left_out():
    rolling = RollingMedian(3)
    assert rolling.median is None
    for value in (1.0, math.nan, 3.0, math.inf, 2.0):
        rolling.add(value)
    assert rolling.median == 2.0
    rolling.clear()
    assert rolling.median is None
    rolling.add(9.0)
    assert rolling.median == 9.0


def test_live_readings_carry_the_median_of_the_latest_thousand_and_a_new_unit_starts_afresh():
    builder, rates = SummaryBuilder(), []
    for i in range(RECENT_READINGS + 300):
        rate = 1000.0 + (i * 37) % 501
        rates.append(rate)
        event = builder.counted(make_event(float(i), ev.THROUGHPUT, {"samples_per_sec": rate, "source": "gputui", "phase": "measure"}))
        assert event.running_median == median(rates[-RECENT_READINGS:])
    tokens = builder.counted(make_event(2000.0, ev.THROUGHPUT, {"samples_per_sec": 5e5, "unit": "tokens", "source": "gputui", "phase": "measure"}))
    assert tokens.running_median == 5e5, "readings in another unit are another series"

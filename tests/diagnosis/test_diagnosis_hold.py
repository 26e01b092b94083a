"""The hold machinery: findings open after a condition held, close after it cleared,
and a signal that flaps opens and closes nothing in between."""

from __future__ import annotations

from gputui.diagnosis.hold import CLOSE, OPEN, RAISE, Hold


def feed(hold: Hold, levels, start: float = 0.0, step: float = 1.0):
    """(t, change) for every change while feeding one level a step."""
    changes = []
    for i, level in enumerate(levels):
        t = start + i * step
        change = hold.update(t, level, {"i": i})
        if change:
            changes.append((t, change))
    return changes


def make(open_s=10.0, close_s=20.0, hold=0.8, clear=0.2) -> Hold:
    return Hold(open_s, close_s, hold, clear)


def test_opens_only_after_the_condition_held_for_the_hold_time():
    hold = make()
    changes = feed(hold, [0] * 5 + [2] * 30)
    # active from 5 s; at 13 s, 9 of the 11 samples of the last 10 s (>= 80%) are active
    assert changes == [(13.0, OPEN)]
    assert hold.since == 5.0 and hold.level == 2


def test_a_blip_shorter_than_the_hold_time_opens_nothing():
    assert feed(make(), [0] * 10 + [3] * 8 + [0] * 30) == []


def test_closes_only_after_the_condition_cleared_for_the_close_time():
    hold = make()
    changes = feed(hold, [2] * 30 + [0] * 30)
    assert changes[0] == (10.0, OPEN)
    # active until 29 s; at most 20% of the 20-s window active from 45 s on
    assert changes[1][1] == CLOSE and 44.0 <= changes[1][0] <= 46.0
    assert hold.last_active_t == 29.0


def test_a_signal_flapping_between_the_shares_neither_opens_nor_closes_again():
    hold = make()
    flapping = [1, 1, 1, 0, 0] * 40  # active 60% of the time: between 20% and 80%
    assert feed(hold, flapping) == []  # never held 80% for 10 s: stays closed

    hold = make()
    changes = feed(hold, [2] * 12 + [2, 2, 0, 0, 2] * 40 + [0] * 40)
    assert [c for _, c in changes] == [OPEN, CLOSE]  # one finding, not forty


def test_severity_rises_within_a_finding_and_never_falls():
    hold = make()
    changes = feed(hold, [2] * 15 + [3] * 15 + [2] * 15)
    assert [c for _, c in changes] == [OPEN, RAISE]
    assert hold.level == 3


def test_unknown_samples_neither_count_nor_clear():
    hold = make()
    changes = feed(hold, [2] * 12 + [None] * 100 + [2] * 3)
    assert [c for _, c in changes] == [OPEN]  # a gap in the data does not close it
    assert hold.is_open


def test_open_window_is_measured_in_time_not_samples():
    hold = make(open_s=10.0)
    changes = feed(hold, [1] * 150, step=0.1)  # 10 Hz sampling
    assert changes and abs(changes[0][0] - 10.0) < 1e-6
    hold = make(open_s=10.0)
    changes = feed(hold, [1] * 10, step=2.0)  # 0.5 Hz sampling
    assert changes and changes[0][0] == 10.0


def test_a_long_close_time_does_not_close_right_after_opening():
    hold = make(open_s=10.0, close_s=60.0)
    changes = feed(hold, [0] * 60 + [2] * 40)  # a minute of clear history before it
    assert [c for _, c in changes] == [OPEN]


def test_window_returns_the_samples_since_the_start_for_evidence():
    hold = make()
    feed(hold, [0] * 3 + [2] * 12)
    window = hold.window(hold.since)
    assert window[0][0] == 3.0 and window[0][2] == {"i": 3}
    assert all(level == 2 for _, level, _ in window)


def test_memory_stays_bounded_over_a_long_run():
    hold = make()
    feed(hold, [0, 1] * 50_000, step=0.1)
    assert len(hold._t) < 2000


def test_samples_a_millisecond_late_still_fill_a_window_as_long_as_their_interval():
    # A 1 s sampler's real times (a CI run without GPUs): each tick a fraction of a
    # millisecond late, so no 1.0 s window ever held two samples, and an idle run whose
    # every sample was idle opened nothing.
    hold = make(open_s=1.0, close_s=1.0)
    changes = [(t, hold.update(t, 2)) for t in (1.0629, 2.0628, 3.0630, 4.0632, 5.0637)]
    assert [c for c in changes if c[1]] == [(2.0628, OPEN)]


def test_a_window_edge_takes_in_jitter_but_not_a_whole_sample_more():
    hold = make(open_s=2.0, close_s=2.0)
    for t, level in ((0.0, 0), (1.0, 2), (2.0, 2), (3.0, 2)):
        change = hold.update(t, level)
    # at 3.0 the 2 s window is 1.0..3.0 (three active samples); the idle one at 0.0 stays out
    assert change == OPEN and hold.since == 1.0

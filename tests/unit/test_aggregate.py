"""Several clients copying at once: the overlap window, the bytes inside it (edge slots pro rata), Jain's
fairness index, the naive sum of rates it replaces, and the medians over rounds."""

from __future__ import annotations

import math

import pytest

from workbench.core.aggregate import ClientCopy, aggregate_rounds, bytes_between, jain_index, overlap
from workbench.core.results import INTERVAL_S

T0 = 1_700_000_000.0  # a wall clock of today's magnitude: the sums must survive its rounding
R = 1_000_000.0  # bytes per second
REL = 1e-5  # slot edges computed near T0 carry ~1e-7 s of float rounding


def steady(host: str, start_s: float, rate: float, seconds: float) -> ClientCopy:
    """A copy moving `rate` bytes/s evenly, its last slot partial when `seconds` is not a whole number of slots."""
    slots = math.ceil(seconds / INTERVAL_S - 1e-9)
    last_s = seconds - (slots - 1) * INTERVAL_S
    intervals = (round(rate * INTERVAL_S),) * (slots - 1) + (round(rate * last_s),)
    return ClientCopy(host, start_s, seconds, sum(intervals), intervals)


def phased(host: str, start_s: float, phases: list[tuple[float, float]]) -> ClientCopy:
    """A copy made of (rate, whole seconds) phases, each a whole number of slots."""
    intervals: tuple[int, ...] = ()
    for rate, seconds in phases:
        intervals += (round(rate * INTERVAL_S),) * round(seconds / INTERVAL_S)
    return ClientCopy(host, start_s, sum(s for _, s in phases), sum(intervals), intervals)


def test_two_clients_together_at_the_same_rate_share_the_whole_copy_evenly() -> None:
    o = overlap([steady("a", T0, R, 2.0), steady("b", T0, R, 2.0)])
    assert (o.start_s, o.end_s, o.seconds) == (T0, T0 + 2.0, 2.0)
    assert o.bytes_by_host == {"a": pytest.approx(2 * R, rel=REL), "b": pytest.approx(2 * R, rel=REL)}
    assert o.total_bytes_per_s == pytest.approx(2 * R, rel=REL)
    assert o.per_host_bytes_per_s == {"a": pytest.approx(R, rel=REL), "b": pytest.approx(R, rel=REL)}
    assert o.jain_index == pytest.approx(1.0)
    assert o.note is None


def test_a_staggered_start_counts_only_the_window_after_the_late_client_began() -> None:
    # a runs alone at 2R for a second, then shares with b at R each; b runs alone at R for its last second
    a = phased("a", T0, [(2 * R, 1.0), (R, 2.0)])
    b = steady("b", T0 + 1.0, R, 3.0)
    o = overlap([b, a])
    assert o.start_s == pytest.approx(T0 + 1.0)
    assert o.end_s == pytest.approx(T0 + 3.0)
    assert o.last_done_s == pytest.approx(T0 + 4.0)
    assert (o.first_done_host, o.last_done_host) == ("a", "b")
    assert o.seconds == pytest.approx(2.0)
    assert o.bytes_by_host["a"] == pytest.approx(2 * R, rel=REL)  # not the 4R of a's whole copy
    assert o.total_bytes_per_s == pytest.approx(2 * R, rel=REL)
    assert o.first_done_elapsed_s == pytest.approx(3.0)
    assert o.last_done_elapsed_s == pytest.approx(4.0)


def test_one_client_at_three_times_the_other_gives_jain_four_squared_over_twenty() -> None:
    o = overlap([steady("a", T0, 3 * R, 2.0), steady("b", T0, R, 2.0)])
    assert o.total_bytes_per_s == pytest.approx(4 * R, rel=REL)
    assert o.jain_index == pytest.approx(4**2 / (2 * (3**2 + 1**2)), rel=REL)
    assert jain_index([3.0, 1.0]) == pytest.approx(0.8)


def test_a_client_done_before_another_started_leaves_no_window() -> None:
    o = overlap([steady("a", T0, R, 1.0), steady("b", T0 + 1.5, R, 1.0)])
    assert o.seconds == 0.0
    assert o.total_bytes_per_s is None
    assert o.per_host_bytes_per_s is None
    assert o.jain_index is None
    assert o.bytes_by_host == {"a": 0.0, "b": 0.0}
    assert o.note is not None
    assert "a finished 0.500 s before b started" in o.note
    assert (o.first_done_host, o.last_done_host) == ("a", "b")


def test_a_copy_that_took_no_time_leaves_no_window() -> None:
    o = overlap([steady("a", T0, R, 1.0), ClientCopy("b", T0, 0.0, 0)])
    assert o.total_bytes_per_s is None
    assert o.note is not None and "the copy on b took no time" in o.note


def test_a_window_shorter_than_one_interval_gives_no_rate_but_keeps_the_bytes() -> None:
    o = overlap([steady("a", T0, R, 1.0), steady("b", T0 + 0.95, R, 1.0)])
    assert o.seconds == pytest.approx(0.05)
    assert o.total_bytes_per_s is None
    assert o.jain_index is None
    assert o.note is not None and "shorter than one 100 ms interval" in o.note
    assert o.bytes_by_host["a"] == pytest.approx(0.05 * R, rel=1e-3)


def test_edge_slots_are_counted_pro_rata_on_a_hand_computed_example() -> None:
    # a: ten slots of 10, 20, ..., 100 bytes. b runs 0.25 s .. 0.85 s, so the window cuts a's slot 2
    # (0.2-0.3 s, 30 bytes) in half, takes slots 3-7 whole (40+50+60+70+80) and half of slot 8 (90 bytes).
    a = ClientCopy("a", T0, 1.0, 550, tuple(range(10, 101, 10)))
    b = ClientCopy("b", T0 + 0.25, 0.6, 42, (7,) * 6)
    o = overlap([a, b])
    assert o.bytes_by_host["a"] == pytest.approx(15 + 300 + 45, rel=REL)
    assert o.bytes_by_host["b"] == pytest.approx(42, rel=REL)
    assert o.total_bytes_per_s == pytest.approx((360 + 42) / 0.6, rel=REL)


def test_the_last_slot_is_only_as_long_as_the_copy_ran_into_it() -> None:
    # a's last slot covers 0.90-0.95 s with 20 bytes; the window ends at 0.925 s, half of that slot
    a = ClientCopy("a", T0, 0.95, 110, (10,) * 9 + (20,))
    o = overlap([a, steady("b", T0, R, 0.925)])
    assert o.end_s == pytest.approx(T0 + 0.925)
    assert o.bytes_by_host["a"] == pytest.approx(90 + 10, rel=REL)  # 95 if the slot were taken as 100 ms


def test_a_copy_without_intervals_is_spread_evenly_over_its_seconds() -> None:
    copy = ClientCopy("a", T0, 2.0, 1000)
    assert bytes_between(copy, T0 + 0.5, T0 + 1.0) == pytest.approx(250, rel=REL)


def test_the_naive_sum_of_rates_exceeds_the_overlap_total_when_staggered() -> None:
    # The link carries L throughout: a alone, then a and b sharing it, then b alone.
    link = 10 * R
    a = phased("a", T0, [(link, 1.0), (link / 2, 1.0)])
    b = phased("b", T0 + 1.0, [(link / 2, 1.0), (link, 1.0)])
    o = overlap([a, b])
    assert o.total_bytes_per_s == pytest.approx(link, rel=REL)
    assert o.sum_of_rates_bytes_per_s == pytest.approx(1.5 * link, rel=REL)
    assert o.sum_of_rates_bytes_per_s > o.total_bytes_per_s


def test_three_clients_equal_and_with_one_at_zero() -> None:
    equal = overlap([steady(h, T0, R, 1.0) for h in ("a", "b", "c")])
    assert equal.jain_index == pytest.approx(1.0)
    assert equal.total_bytes_per_s == pytest.approx(3 * R, rel=REL)
    starved = overlap([steady("a", T0, R, 1.0), steady("b", T0, R, 1.0), ClientCopy("c", T0, 1.0, 0, (0,) * 10)])
    assert starved.jain_index == pytest.approx((2 * R) ** 2 / (3 * 2 * R**2), rel=REL)
    assert starved.jain_index == pytest.approx(2 / 3, rel=REL)


def test_jain_index_edges() -> None:
    assert jain_index([]) is None
    assert jain_index([5.0]) is None
    assert jain_index([0.0, 0.0]) is None
    assert jain_index([7.0, 0.0]) == pytest.approx(0.5)  # 1/n: one client takes all
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)


def test_a_single_client_has_a_rate_but_no_fairness() -> None:
    o = overlap([steady("a", T0, R, 1.0)])
    assert o.total_bytes_per_s == pytest.approx(R, rel=REL)
    assert o.jain_index is None


def test_a_round_needs_one_copy_per_host() -> None:
    with pytest.raises(ValueError, match="one copy per client host"):
        overlap([steady("a", T0, R, 1.0), steady("a", T0, R, 1.0)])
    with pytest.raises(ValueError, match="at least one"):
        overlap([])


def test_aggregate_rounds_takes_medians_over_usable_rounds() -> None:
    rounds = [
        [steady("a", T0, R, 2.0), steady("b", T0, R, 2.0)],  # total 2R, Jain 1, done together
        [steady("a", T0 + 10, 3 * R, 2.0), steady("b", T0 + 10, R, 2.5)],  # 4R, 0.8, spread 0.5 s
        [steady("a", T0 + 20, R, 2.0), steady("b", T0 + 20, 2 * R, 3.0)],  # 3R, 9/10, spread 1 s
        [steady("a", T0 + 30, R, 1.0), steady("b", T0 + 31.5, R, 1.0)],  # no overlap, spread 1.5 s
    ]
    row = aggregate_rounds(rounds)
    assert len(row.rounds) == 4
    assert row.rounds_without_overlap == 1
    assert row.total_bytes_per_s == pytest.approx(3 * R, rel=REL)  # median of 2R, 4R, 3R
    assert row.jain_index == pytest.approx(0.9, rel=REL)  # median of 1, 0.8, 0.9
    assert row.first_done_elapsed_s == pytest.approx((2.0, 2.0, 2.0, 1.0))
    assert row.last_done_elapsed_s == pytest.approx((2.0, 2.5, 3.0, 2.5))
    assert row.done_spread_s == pytest.approx(0.75)  # median of 0, 0.5, 1, 1.5
    assert row.sum_of_rates_bytes_per_s == pytest.approx(2.5 * R, rel=REL)  # median of 2R, 4R, 3R, 2R


def test_aggregate_rounds_of_nothing_is_empty() -> None:
    row = aggregate_rounds([])
    assert (row.rounds, row.rounds_without_overlap) == ((), 0)
    assert row.total_bytes_per_s is None and row.jain_index is None and row.done_spread_s is None

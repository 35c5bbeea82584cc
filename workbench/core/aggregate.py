"""Aggregate throughput of several clients copying at once, counted only while all of them were copying.

Adding each client's own rate overstates what the server delivered whenever the clients did not run
at the same time: a client that starts late or finishes early had the server to itself for a while.
So the aggregate here is taken over the overlap window, from the latest start to the first finish
("first done"), using each copy's 100 ms byte counts; when the slowest client finished ("last done")
is kept beside it, and Jain's fairness index says how evenly the window's throughput was shared.

Bytes inside the window come from whole slots plus a pro-rata share of the slot cut by each edge, on the
assumption that bytes are spread evenly within a slot. The error this brings is at most one slot's bytes
at each edge (two slots per client in all), so for a steady copy the window's rate is off by at most
about 2 × INTERVAL_S / window seconds; below one interval the error can exceed the signal, which is why
no rate is given for such a window. A residual offset between the clients' clocks shifts the window by
the same amount and is not covered by that bound.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.core.results import INTERVAL_S

# Float sums of 0.1 s steps are never exact; a window this close to one interval counts as one.
_EPSILON_S = 1e-9


@dataclass(frozen=True)
class ClientCopy:
    """One copy made by one client host, with its wall-clock start on clocks aligned across the clients."""

    client_host: str
    started_s: float  # wall clock (seconds since the epoch) of the copy's first request
    seconds: float
    bytes: int
    intervals: tuple[int, ...] = ()  # bytes moved in each INTERVAL_S slot from started_s; the last slot partial

    @property
    def ended_s(self) -> float:
        return self.started_s + self.seconds

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Overlap:
    """One round (the same copy run at once on every client) seen through the window when all were copying."""

    first_start_s: float  # earliest start: the round's time zero for the elapsed first/last done times
    start_s: float  # latest start: the window opens when the last client begins
    end_s: float  # earliest end ("first done"): the window closes when one client stops loading the server
    last_done_s: float  # latest end
    first_done_host: str
    last_done_host: str
    seconds: float  # end_s - start_s, never below 0
    bytes_by_host: dict[str, float]  # bytes each client moved inside the window (0.0 without one)
    total_bytes_per_s: float | None  # all bytes in the window / its seconds; None when no usable window
    per_host_bytes_per_s: dict[str, float] | None  # None when no usable window
    jain_index: float | None  # over the per-host rates in the window
    sum_of_rates_bytes_per_s: float  # naive: each client's whole-copy rate added up (see aggregate_rounds)
    note: str | None = None  # why there is no rate, when there is none

    @property
    def first_done_elapsed_s(self) -> float:
        return self.end_s - self.first_start_s

    @property
    def last_done_elapsed_s(self) -> float:
        return self.last_done_s - self.first_start_s


@dataclass(frozen=True)
class AggregateRow:
    """Several rounds of one plan step: medians over the rounds that had a usable overlap window."""

    rounds: tuple[Overlap, ...]
    total_bytes_per_s: float | None  # median of the rounds' window totals
    jain_index: float | None  # median of the rounds' fairness indexes
    first_done_elapsed_s: tuple[float, ...]  # per round: first start to first done
    last_done_elapsed_s: tuple[float, ...]  # per round: first start to last done
    done_spread_s: float | None  # median over rounds of last done - first done: how long the stragglers ran on
    rounds_without_overlap: int  # rounds whose window was absent or shorter than one interval
    sum_of_rates_bytes_per_s: float | None  # median of the rounds' naive sums, for contrast only


def jain_index(rates: Sequence[float]) -> float | None:
    """Jain's fairness index (Σx)² / (n·Σx²): 1 when all rates are equal, 1/n when one client takes everything.

    None for fewer than two rates (nothing to share) or when all are zero (nobody got anything to share).
    """
    if len(rates) < 2:
        return None
    squares = sum(r * r for r in rates)
    if squares == 0:
        return None
    return sum(rates) ** 2 / (len(rates) * squares)


def _slots(copy: ClientCopy) -> list[tuple[float, float, int]]:
    """(start, end, bytes) of each slot on the wall clock.

    The last slot ends with the copy, so it is shorter than INTERVAL_S (or longer, if the meter stopped
    early). A copy without intervals is one slot spanning the whole copy: its bytes spread evenly.
    """
    if not copy.intervals:
        return [(copy.started_s, copy.ended_s, copy.bytes)]
    last = len(copy.intervals) - 1
    slots = []
    for i, n in enumerate(copy.intervals):
        a = copy.started_s + i * INTERVAL_S
        # max(): sampling jitter can leave the copy ending before its last slot nominally began
        b = copy.started_s + (i + 1) * INTERVAL_S if i < last else max(a, copy.ended_s)
        slots.append((a, b, n))
    return slots


def bytes_between(copy: ClientCopy, lo_s: float, hi_s: float) -> float:
    """Bytes `copy` moved between two wall-clock times: whole slots, and edge slots pro rata to the time inside.

    A zero-length slot (see _slots) counts whole if its instant is inside [lo_s, hi_s].
    """
    total = 0.0
    for a, b, n in _slots(copy):
        if b > a:
            total += n * max(0.0, min(b, hi_s) - max(a, lo_s)) / (b - a)
        elif lo_s <= a <= hi_s:
            total += n
    return total


def overlap(copies: Sequence[ClientCopy]) -> Overlap:
    """The window when every client of one round was copying, its aggregate rate and its fairness.

    One copy per client host; raises ValueError otherwise (the caller built the round wrongly).
    """
    if not copies:
        raise ValueError("a round needs at least one client copy")
    hosts = [c.client_host for c in copies]
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"one copy per client host in a round, got hosts {hosts}")
    if any(c.seconds < 0 for c in copies):
        raise ValueError("a copy cannot take negative seconds")
    latest_start = max(copies, key=lambda c: c.started_s)
    first_done = min(copies, key=lambda c: c.ended_s)
    last_done = max(copies, key=lambda c: c.ended_s)
    start_s, end_s = latest_start.started_s, first_done.ended_s
    seconds = max(0.0, end_s - start_s)
    note: str | None = None
    if seconds <= 0:
        bytes_by_host = {c.client_host: 0.0 for c in copies}
        if first_done.seconds <= 0:
            note = f"no overlap: the copy on {first_done.client_host} took no time"
        else:
            note = (
                f"no overlap: {first_done.client_host} finished {start_s - end_s:.3f} s "
                f"before {latest_start.client_host} started"
            )
    else:
        bytes_by_host = {c.client_host: bytes_between(c, start_s, end_s) for c in copies}
        if seconds + _EPSILON_S < INTERVAL_S:
            note = f"overlap {seconds * 1000:.0f} ms is shorter than one {INTERVAL_S * 1000:.0f} ms interval"
    total: float | None = None
    per_host: dict[str, float] | None = None
    fairness: float | None = None
    if note is None:
        per_host = {h: n / seconds for h, n in bytes_by_host.items()}
        total = sum(bytes_by_host.values()) / seconds
        fairness = jain_index(list(per_host.values()))
    return Overlap(
        first_start_s=min(c.started_s for c in copies),
        start_s=start_s,
        end_s=end_s,
        last_done_s=last_done.ended_s,
        first_done_host=first_done.client_host,
        last_done_host=last_done.client_host,
        seconds=seconds,
        bytes_by_host=bytes_by_host,
        total_bytes_per_s=total,
        per_host_bytes_per_s=per_host,
        jain_index=fairness,
        sum_of_rates_bytes_per_s=sum(c.bytes_per_s for c in copies),
        note=note,
    )


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def aggregate_rounds(rounds: Sequence[Sequence[ClientCopy]]) -> AggregateRow:
    """The medians over several rounds of one plan step, counting the rounds that had no usable window.

    `sum_of_rates_bytes_per_s` adds each client's rate over its own whole copy. It is shown only for
    contrast: those rates were not reached at the same time when the clients were staggered, and a client
    running alone for part of its copy had the server and the link to itself, so the sum counts the same
    capacity more than once (two clients copying one after the other at the full link rate sum to twice
    the link). The window total measures only what was delivered while everyone was asking for it.
    """
    overlaps = tuple(overlap(r) for r in rounds)
    return AggregateRow(
        rounds=overlaps,
        total_bytes_per_s=_median([o.total_bytes_per_s for o in overlaps]),
        jain_index=_median([o.jain_index for o in overlaps]),
        first_done_elapsed_s=tuple(o.first_done_elapsed_s for o in overlaps),
        last_done_elapsed_s=tuple(o.last_done_elapsed_s for o in overlaps),
        done_spread_s=_median([o.last_done_s - o.end_s for o in overlaps]),
        rounds_without_overlap=sum(1 for o in overlaps if o.total_bytes_per_s is None),
        sum_of_rates_bytes_per_s=_median([o.sum_of_rates_bytes_per_s for o in overlaps]),
    )

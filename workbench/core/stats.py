"""Summary statistics of throughput samples (hyperfine-style: raw values kept next to the summary)."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    stdev: float | None  # None for a single sample: one value has no spread
    minimum: float
    maximum: float

    @property
    def relative_stdev(self) -> float | None:
        if self.stdev is None or self.mean == 0:
            return None
        return self.stdev / self.mean


def summarize(values: Sequence[float]) -> Summary | None:
    """Median, mean, sample standard deviation, min and max; None when there are no values."""
    if not values:
        return None
    return Summary(
        n=len(values),
        median=statistics.median(values),
        mean=statistics.fmean(values),
        stdev=statistics.stdev(values) if len(values) > 1 else None,
        minimum=min(values),
        maximum=max(values),
    )


def find_stalls(intervals: Sequence[int], near_zero: float = 0.05, min_run: int = 3) -> list[tuple[int, int]]:
    """Stalls in a copy sampled every 100 ms, as (first interval, number of intervals) runs.

    A stall is a run of intervals, in the middle of a copy, that each moved less than `near_zero` of
    the median busy interval, lasting at least `min_run` intervals and at least three times the
    client's usual gap between progress reports. That last rule matters: a client that moves 8 MiB
    requests or reports through its process's reads shows short quiet gaps that are its rhythm, not a
    stall. Nothing before the first bytes (session set-up) and no quiet tail counts.
    """
    if len(intervals) < 5:
        return []
    busy = [moved for moved in intervals if moved > 0]
    if not busy:
        return []
    typical = statistics.median(busy)
    quiet = [moved < typical * near_zero for moved in intervals]
    busy_at = [i for i, q in enumerate(quiet) if not q]
    gaps = [b - a for a, b in itertools.pairwise(busy_at)]
    usual_gap = statistics.median(gaps) if gaps else 1
    needed = max(min_run, math.ceil(3 * usual_gap))
    runs: list[tuple[int, int]] = []
    i = max(1, busy_at[0]) if busy_at else 1  # before the first bytes is session set-up, not a stall
    while i < len(intervals) - 1:
        if quiet[i]:
            j = i
            while j < len(intervals) - 1 and quiet[j]:
                j += 1
            if j - i >= needed and j < len(intervals) - 1:  # a quiet tail is the end of the copy
                runs.append((i, j - i))
            i = j
        else:
            i += 1
    return runs

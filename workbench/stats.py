"""Summary statistics of throughput samples (hyperfine-style: raw values kept next to the summary)."""

from __future__ import annotations

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


def find_stalls(intervals: Sequence[int], typical_fraction: float = 0.05) -> list[int]:
    """Indexes of intervals in the middle of a copy that moved almost nothing.

    An interval is a stall when it moved less than `typical_fraction` of the median interval; the first
    and last intervals are ignored (ramp-up and the final partial interval are not stalls).
    """
    inner = list(intervals[1:-1])
    if len(inner) < 3:
        return []
    typical = statistics.median(inner)
    if typical <= 0:
        return []
    return [i + 1 for i, moved in enumerate(inner) if moved < typical * typical_fraction]

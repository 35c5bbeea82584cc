"""Split a client's copy time into a fixed cost per copy and a streaming rate.

A client started per copy (OpenSSH sftp, rsync over ssh, smbclient, curl) pays its process start,
key exchange and login inside every timed copy, so its small files look slow for a reason that has
nothing to do with the network. With single-file copies of two or more sizes, the least-squares line
`seconds = fixed + bytes / streaming` over every good sample separates the two: e.g. OpenSSH sftp on
the wifi-ac lab, 21.7 MB/s on 16 MiB and 48.3 on 128 MiB, is ≈0.49 s per copy plus 58 MB/s streaming.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MIN_SIZE_RATIO = 2.0  # the sizes must differ enough for the slope to mean anything
MIN_FIXED_S = 0.02  # below 20 ms the fixed part is within the timing noise of a copy
MIN_FIXED_SHARE = 0.1  # ...or under a tenth of the smallest copy: not worth a note


@dataclass(frozen=True)
class FixedCost:
    fixed_s: float  # seconds every copy pays whatever its size
    streaming_bytes_per_s: float  # bytes/s once the copy streams
    sizes: tuple[int, ...]  # the distinct copy sizes the fit used

    def share_of(self, nbytes: int) -> float:
        """The part of a copy of `nbytes` that the fixed cost takes."""
        return self.fixed_s / (self.fixed_s + nbytes / self.streaming_bytes_per_s)


def fit(points: Sequence[tuple[int, float]]) -> FixedCost | None:
    """Fit (bytes, seconds) samples of single-file copies; None when the data cannot tell, or tell nothing.

    Nothing is claimed unless the sizes span a factor of two, the slope is positive and the fixed part is
    both over 20 ms and over a tenth of the smallest copy's time.
    """
    sizes = sorted({b for b, _ in points})
    if len(sizes) < 2 or sizes[0] <= 0 or sizes[-1] / sizes[0] < MIN_SIZE_RATIO:
        return None
    n = len(points)
    mean_b = sum(b for b, _ in points) / n
    mean_t = sum(t for _, t in points) / n
    var_b = sum((b - mean_b) ** 2 for b, _ in points)
    slope = sum((b - mean_b) * (t - mean_t) for b, t in points) / var_b  # seconds per byte
    if slope <= 0:
        return None
    fixed = mean_t - slope * mean_b
    smallest_time = min(t for b, t in points if b == sizes[0])
    if fixed < MIN_FIXED_S or fixed < MIN_FIXED_SHARE * smallest_time:
        return None
    return FixedCost(fixed_s=fixed, streaming_bytes_per_s=1 / slope, sizes=tuple(sizes))

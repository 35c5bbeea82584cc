"""Split a client's copy time into a fixed cost per copy and a streaming rate.

A client started per copy (OpenSSH sftp, rsync over ssh, smbclient, curl) pays its process start,
key exchange and login inside every timed copy, so its small files look slow for a reason that has
nothing to do with the network. With single-file copies of two or more sizes, the least-squares line
`seconds = fixed + bytes / streaming` over every good sample separates the two: e.g. OpenSSH sftp on
the wifi-ac lab, 21.7 MB/s on 16 MiB and 48.3 on 128 MiB, is ≈0.49 s per copy plus 58 MB/s streaming.
A client that streams a whole set (rsync: no round trip per file) gives a second size with its set.

With one size only, a client started per copy shows its start-up in the copy's own progress (`startup`): the
100 ms slots before it moved its data, e.g. OpenSSH sftp's ≈0.6 s of process start, key exchange and login
before the first of 64 MiB arrives.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from workbench.core.results import INTERVAL_S, Result

MIN_SIZE_RATIO = 2.0  # the sizes must differ enough for the slope to mean anything
MIN_FIXED_S = 0.02  # below 20 ms the fixed part is within the timing noise of a copy
MIN_FIXED_SHARE = 0.1  # ...or under a tenth of the smallest copy: not worth a note
STARTED = 0.1  # a slot that moved a tenth of the copy's mean slot or more: the data are moving
# A copy's CPU also holds work done once per copy, not per file: the session's or process's start, the set's login,
# listing and directory, the edges of the readings. A set's CPU per file spreads it over its files, and charged in
# turn it can put a small set's ceiling under the copy. Each side's charge leaves out PER_COPY_CPU_S per copy, also a
# clock tick, the most a figure read in ticks (serve's process trees outside a lab) may be over. Lab figures are
# exact (getrusage, cgroups), and without the allowance sets of 2 and 4 files beat their ceilings by up to 9 % on
# the wan and wifi-ac counting runs; with 5 or 10 ms none did beyond its noise. Larger allowances only loosen
# ceilings: on gige, where CPU is most of a file's time, 10 ms leaves 12 of 46 rows of the default lab unexplained
# where none would leave 6, and 20 ms 17.
PER_COPY_CPU_S = 0.01


@dataclass(frozen=True)
class FixedCost:
    fixed_s: float  # seconds every copy pays whatever its size
    streaming_bytes_per_s: float  # bytes/s once the copy streams
    sizes: tuple[int, ...]  # the distinct copy sizes the fit used
    # How it was found: "fit" (a line over two sizes or more) or "start-up" (the slots before the data moved)
    method: str = "fit"
    # The client's CPU seconds (median) in one copy of the smallest single file measured: a bound on what its
    # start-up costs the client's CPU, since that copy paid its start-up too
    client_cpu_s: float | None = None

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


@dataclass(frozen=True)
class Copy:
    """One timed single-file copy as the start-up reads it: its bytes, seconds, and bytes per progress slot."""

    bytes: int
    seconds: float
    intervals: tuple[int, ...]
    client_cpu_s: float | None = None


def startup_s(copy: Copy, interval_s: float, path_bytes_per_s: float) -> float:
    """The seconds a copy spent before moving its data: its leading slots that moved under STARTED of its mean
    slot, less the time at the path's rate of its largest slot's bytes (a meter that sees progress in lumps, a
    local file growing 8 MiB at a time, may have hidden that much data in what looked like start-up).

    Never negative; an under-estimate by construction, so a ceiling that pays it stays a ceiling."""
    slots = copy.intervals
    if not slots or copy.bytes <= 0 or path_bytes_per_s <= 0:
        return 0.0
    lead = data_started(slots, copy.bytes)
    lead_s = (len(slots) if lead is None else lead) * interval_s
    return max(0.0, min(lead_s, copy.seconds) - max(slots) / path_bytes_per_s)


def data_started(slots: Sequence[int], nbytes: int) -> int | None:
    """The progress slot a copy of `nbytes` started moving its data in: the first to move STARTED of its mean slot
    (a login's few bytes before it are start-up); None: none did."""
    if not slots or nbytes <= 0:
        return None
    mean = nbytes / len(slots)
    return next((i for i, moved in enumerate(slots) if moved >= STARTED * mean), None)


def startup(copies: Sequence[Copy], interval_s: float, path_bytes_per_s: float) -> FixedCost | None:
    """The fixed cost of a client started per copy, from single-file copies of one size: the median start-up
    (`startup_s`) and the rate of the rest of each copy; None when it is under MIN_FIXED_S or a tenth of a copy."""
    if not copies:
        return None
    fixed = statistics.median(startup_s(c, interval_s, path_bytes_per_s) for c in copies)
    seconds = statistics.median(c.seconds for c in copies)
    if fixed < MIN_FIXED_S or fixed < MIN_FIXED_SHARE * seconds or fixed >= seconds:
        return None
    size = min(c.bytes for c in copies)
    streaming = statistics.median(c.bytes / (c.seconds - fixed) for c in copies if c.seconds > fixed)
    cpus = [c.client_cpu_s for c in copies if c.client_cpu_s is not None]
    return FixedCost(
        fixed_s=fixed,
        streaming_bytes_per_s=streaming,
        sizes=(size,),
        method="start-up",
        client_cpu_s=statistics.median(cpus) if cpus else None,
    )


def of_rows(rows: Sequence[Result], path_bytes_per_s: float | None) -> FixedCost | None:
    """The fixed cost of one client and direction from its single-file rows and its sets streamed whole (`fit`,
    unless its streaming rate beats the path's), else, for a client started per copy, from its single-file copies'
    start-up (`startup`); None: not found.

    `path_bytes_per_s` is the rate the path carries that way (the start-up's allowance for a lumpy meter)."""
    singles = [r for r in rows if r.files == 1 and r.good_samples]
    if not singles:
        return None
    smallest = min(singles, key=lambda r: r.bytes)
    cpus = [s.client_cpu_s for s in smallest.good_samples if s.client_cpu_s is not None]
    cpu = statistics.median(cpus) if cpus else None
    streamed = [r for r in rows if r.files > 1 and r.details.streams_sets and r.good_samples]
    cost = fit([(s.bytes, s.seconds) for r in (*singles, *streamed) for s in r.good_samples])
    # A line that streams faster than the path carries is no fixed cost plus a stream: the smaller copies cost
    # more than their bytes and a start-up (a streamed set's work per file), and its fixed part is overstated.
    if cost is not None and (not path_bytes_per_s or cost.streaming_bytes_per_s <= path_bytes_per_s):
        return replace(cost, client_cpu_s=cpu)
    if not path_bytes_per_s or not all(r.details.timed_includes_setup for r in singles):
        return None
    copies = [Copy(s.bytes, s.seconds, s.intervals, s.client_cpu_s) for r in singles for s in r.good_samples]
    return startup(copies, INTERVAL_S, path_bytes_per_s)


def client_cpu_per_file_s(row: Result, cost: FixedCost | None) -> float | None:
    """The client's CPU seconds per file of a set (median over its copies), less what a fixed cost's start-up
    could have taken of it (the whole CPU of the client's smallest single-file copy: an over-allowance) and the
    per-copy allowance (PER_COPY_CPU_S), so the figure is never more than the files took. None: not measured."""
    cpus = [s.client_cpu_s for s in row.good_samples if s.client_cpu_s is not None]
    if row.files <= 1 or not cpus:
        return None
    startup_cpu_s = cost.client_cpu_s if cost is not None and cost.client_cpu_s is not None else 0.0
    return max(0.0, statistics.median(cpus) - startup_cpu_s - PER_COPY_CPU_S) / row.files

"""Byte counting for a copy in progress, sampled every 100 ms on a background thread, and the run-queue wait and
CPU time of this process's threads over the copy (workbench.shared.schedstat)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

from workbench.core.results import INTERVAL_S
from workbench.shared import schedstat


class CopyMeter:
    """The `progress` callback for one copy, plus per-interval sampling and a live-display hook."""

    def __init__(self, on_tick: Callable[[int], None] | None = None, interval: float = INTERVAL_S) -> None:
        self.total = 0
        self.interval = interval
        self._on_tick = on_tick
        self._marks: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._threads0: dict[int, tuple[int, int]] | None = None
        self._cpu0_s = 0.0
        self._own_cpu_s = 0.0  # this sampling thread's CPU, left out of the copy's
        # the most-waiting copying thread's run-queue wait (schedstat.most_waited), once stopped; None: not measured
        self.wait_s: float | None = None
        # CPU seconds this process spent on the copy to the nanosecond, the sampling and the TCP watch's threads left
        # out, once stopped; None where schedstat is not kept (the caller then reads the process's clock ticks).
        # Child processes are not in it.
        self.cpu_s: float | None = None

    def __call__(self, n: int) -> None:
        # Only the copying thread adds; the sampler only reads, so no lock is needed.
        self.total += n

    def start(self) -> None:
        self._threads0 = schedstat.readings()
        self._cpu0_s = time.process_time()  # read after the /proc scan and before the one in stop: both stay out
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="copy-meter", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        tick = 1
        while not self._stop.wait(max(0.0, self._t0 + tick * self.interval - time.perf_counter())):
            self._marks.append(self.total)
            if self._on_tick:
                self._on_tick(self.total)
            tick += 1
        self._own_cpu_s = time.thread_time()  # the thread started with the copy: all its CPU is the sampling's

    def stop(self) -> tuple[int, ...]:
        """Stop sampling; returns the bytes moved in each interval (the last one partial)."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        cpu1_s = time.process_time()
        threads1 = schedstat.readings()
        if self._threads0 is not None and threads1 is not None:
            watching = schedstat.watching_threads()  # the TCP watch's; this meter's thread has ended
            waits0, waits1 = schedstat.waits_of(self._threads0), schedstat.waits_of(threads1)
            self.wait_s = round(schedstat.most_waited(waits0, waits1, watching), 4)
            watchers_s = schedstat.ran(self._threads0, threads1, watching) + self._own_cpu_s
            self.cpu_s = round(max(0.0, cpu1_s - self._cpu0_s - watchers_s), 6)
        marks = [*self._marks, self.total]
        intervals = [marks[0]] + [b - a for a, b in itertools.pairwise(marks)]
        return tuple(intervals)

"""Byte counting for a copy in progress, sampled every 100 ms on a background thread, and the run-queue wait of
this process's threads over the copy (workbench.shared.schedstat)."""

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
        self._threads0: dict[int, int] | None = None
        # the most-waiting copying thread's run-queue wait (schedstat.most_waited), once stopped; None: not measured
        self.wait_s: float | None = None

    def __call__(self, n: int) -> None:
        # Only the copying thread adds; the sampler only reads, so no lock is needed.
        self.total += n

    def start(self) -> None:
        self._threads0 = schedstat.threads()
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

    def stop(self) -> tuple[int, ...]:
        """Stop sampling; returns the bytes moved in each interval (the last one partial)."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        threads1 = schedstat.threads()
        if self._threads0 is not None and threads1 is not None:
            self.wait_s = round(schedstat.most_waited(self._threads0, threads1, schedstat.watching_threads()), 4)
        marks = [*self._marks, self.total]
        intervals = [marks[0]] + [b - a for a, b in itertools.pairwise(marks)]
        return tuple(intervals)

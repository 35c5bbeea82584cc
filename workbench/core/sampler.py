"""Byte counting for a copy in progress, sampled every 100 ms on a background thread."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

from workbench.core.results import INTERVAL_S


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

    def __call__(self, n: int) -> None:
        # Only the copying thread adds; the sampler only reads, so no lock is needed.
        self.total += n

    def start(self) -> None:
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
        marks = [*self._marks, self.total]
        intervals = [marks[0]] + [b - a for a, b in itertools.pairwise(marks)]
        return tuple(intervals)

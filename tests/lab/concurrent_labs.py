"""Lab runs side by side: the jobs of the `concurrent_lab` tests (tests/lab/conftest.py says which and why)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DRAIN_DEADLINE_S = 1500  # the whole pool took 200-300 s in CI: a pool still busy after this is stuck


@dataclass(frozen=True)
class LabJob:
    """One run of a concurrent_lab test: `run` builds its lab(s) and returns what the test reads."""

    key: str
    folder: Path  # the run's own folder (its HOME, its JSON)
    run: Callable[[], Any]
    labs: int = 1  # labs it builds one after the other: the jobs of most labs start first, so none starts last


class ConcurrentLabs:
    """The selected concurrent_lab jobs, started at once on CONCURRENT_LABS workers."""

    def __init__(self, jobs: list[LabJob], workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lab-job")
        self._runs: dict[str, tuple[Path, Future]] = {}
        for job in sorted(jobs, key=lambda j: -j.labs):  # stable: equal jobs keep their modules' order
            self._runs[job.key] = (job.folder, self._pool.submit(job.run))

    def result(self, key: str, timeout_s: float = 900) -> tuple[Path, Any]:
        """The job's folder and what its run returned (its exception, raised here)."""
        folder, future = self._runs[key]
        return folder, future.result(timeout=timeout_s)

    def drain(self, deadline_s: float) -> None:
        """Wait until every job has ended; a job still running after `deadline_s` fails the waiting test."""
        _, running = wait([future for _, future in self._runs.values()], timeout=deadline_s)
        if running:
            raise TimeoutError(f"{len(running)} concurrent lab run(s) still running after {deadline_s:.0f} s")

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)

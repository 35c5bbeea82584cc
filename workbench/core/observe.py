"""What the runner tells its caller while it runs, and where it hands what it measured.

The runner draws nothing and writes no file: a `RunObserver` shows status lines and each row's
progress (the command line's is rich, in workbench.cli.progress), and a `Recorder` keeps the run
as it is made (the results database's is workbench.core.store.StoreRecorder). Both are protocols so
that tests can watch a run's orchestration with plain objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from workbench.core.results import Baseline, Result, Run, Sample

if TYPE_CHECKING:
    from workbench.core.plan import Plan

# The steps a CopyGate holds, in the order a run reaches them: a fleet's clients compare them as tuples.
STEP_PREPARE = (0,)  # make the test files on both hosts
STEP_BASELINE = (1,)  # the raw-TCP baseline of this client alone
TOGETHER_STEP = 2  # the raw-TCP rate again, every client at once: (TOGETHER_STEP, 0) up, (TOGETHER_STEP, 1) down
COPY_STEP = 3  # a copy: (COPY_STEP, entry index, direction index, set index, attempt)


class CopyProgress(Protocol):
    """One row's progress display: restarted for each copy of the row, closed when the row ends."""

    def restart(self, description: str) -> None: ...

    def advance(self, done_bytes: int) -> None:
        """Bytes copied so far in this copy; called from the copy meter's thread every 100 ms."""
        ...

    def close(self) -> None: ...


class RunObserver(Protocol):
    def status(self, line: str) -> None:
        """A line saying what the run does now (plain text, no markup)."""
        ...

    def row_progress(self, description: str, total_bytes: int) -> CopyProgress: ...


@runtime_checkable
class RunPace(Protocol):
    """What an observer that shows the whole run's progress (copies done, time left) is told besides the
    RunObserver calls. Optional: the runner tells only an observer that has these methods (`pace_of`), so an
    observer written before them works as it did."""

    def plan(self, total_copies: int, total_bytes: int, least_s: float | None) -> None:
        """Before the first copy: every copy the run will make (warm-ups included), their bytes, and the least
        time they take at the raw TCP rate just measured (None without a baseline)."""
        ...

    def copy_done(self, set_bytes: int) -> None:
        """A copy ended, warm-up or timed, failed or not; `set_bytes` is its file set's size."""
        ...

    def copies_dropped(self, copies: int, set_bytes: int) -> None:
        """Planned copies that will not be made: a row that failed stops, a client that cannot connect."""
        ...


class _NoPace:
    def plan(self, total_copies: int, total_bytes: int, least_s: float | None) -> None:
        pass

    def copy_done(self, set_bytes: int) -> None:
        pass

    def copies_dropped(self, copies: int, set_bytes: int) -> None:
        pass


def pace_of(observer: RunObserver) -> RunPace:
    """The observer itself if it follows the whole run's progress, else a RunPace that ignores it all."""
    return observer if isinstance(observer, RunPace) else _NoPace()


class CopyGate(Protocol):
    """Holds each step of a run until it may start, and hears what it measured. Only a fleet's member has one:
    every client of the fleet starts each copy at the same instant (workbench.core.fleet)."""

    def wait(self, step: tuple[int, ...]) -> None:
        """Block until `step` may start; steps come in increasing order, skipped ones are never waited for."""
        ...

    def copied(self, step: tuple[int, ...], row: tuple[str, str, str], sample: Sample, started_perf_s: float) -> None:
        """A copy of `step` ended: `row` is its (client label, direction, file set), `started_perf_s`
        time.perf_counter() at its first request."""
        ...

    def together(self, plan: Plan | None) -> None:
        """Measure the raw-TCP rate each way again, every client at once (each direction a step of its own);
        `plan` None: the far host has no probe (a server given by URL), the steps are only waited for."""
        ...


class Recorder(Protocol):
    """Keeps a run as it is made, so that Ctrl-C, SIGTERM or a crash never loses a finished row."""

    def unfinished_runs(self) -> list[tuple[int, dict[str, Any]]]:
        """(id, meta) of earlier runs that never finished, or whose stock scratch directory is still there: what
        they left on a far host may need removing."""
        ...

    def update_meta(self, run_id: int, meta: Mapping[str, Any]) -> None:
        """The metadata of the run this process runs (a fleet's controller records its members' scratch
        directories as they name them)."""
        ...

    def record_cleanup(self, run_id: int, keys: Mapping[str, Any]) -> None:
        """What this run did with what an earlier run `run_id` left on the far host: kept beside that run's
        metadata, which is never rewritten, and read back over it (unfinished_runs, the stored run)."""
        ...

    def begin(
        self,
        meta: Mapping[str, Any],
        label: str | None,
        link: Mapping[str, Any] | None,
        window_sweep: tuple[Mapping[str, Any], ...] | None,
    ) -> int:
        """Open the run's record; returns its id."""
        ...

    def baseline(self, run_id: int, baseline: Baseline) -> None: ...

    def row(self, run_id: int, index: int, row: Result) -> None:
        """Each finished row, in the order the rows were measured, as soon as it finishes."""
        ...

    def finish(self, run: Run) -> None:
        """The run as it ended, also when it was interrupted or failed: rows so far, warnings, finish time."""
        ...


class _QuietProgress:
    def restart(self, description: str) -> None:
        pass

    def advance(self, done_bytes: int) -> None:
        pass

    def close(self) -> None:
        pass


class QuietObserver:
    """Shows nothing (tests, and callers with nowhere to show progress)."""

    def status(self, line: str) -> None:
        pass

    def row_progress(self, description: str, total_bytes: int) -> CopyProgress:
        return _QuietProgress()

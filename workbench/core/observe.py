"""What the runner tells its caller while it runs, and where it hands what it measured.

The runner draws nothing and writes no file: a `RunObserver` shows status lines and each row's
progress (the command line's is rich, in workbench.cli.progress), and a `Recorder` keeps the run
as it is made (the results database's is workbench.core.store.StoreRecorder). Both are protocols so
that tests can watch a run's orchestration with plain objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from workbench.core.results import Baseline, Result, Run


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


class Recorder(Protocol):
    """Keeps a run as it is made, so that Ctrl-C, SIGTERM or a crash never loses a finished row."""

    def unfinished_runs(self) -> list[tuple[int, dict[str, Any]]]:
        """(id, meta) of earlier runs that never finished, or whose stock scratch directory is still there: what
        they left on a far host may need removing."""
        ...

    def update_meta(self, run_id: int, meta: Mapping[str, Any]) -> None: ...

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

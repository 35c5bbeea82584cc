"""A run's progress on the terminal: status lines, one overall line (copies, bytes, time elapsed and left) and a
bar for the copy under way (rich). What a run shows at its end, and where it is recorded, is workbench.cli.screen's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TransferSpeedColumn,
)
from rich.table import Column
from rich.text import Text

from workbench.cli.eta import Pace, clock
from workbench.core.observe import CopyProgress
from workbench.shared.safetext import for_terminal


class _RowBar:
    def __init__(self, observer: RichObserver, bar: Progress, task: TaskID, total_bytes: int) -> None:
        self._observer, self._bar, self._task, self._total = observer, bar, task, total_bytes

    def restart(self, description: str) -> None:
        self._bar.reset(self._task, total=self._total, description=for_terminal(description))

    def advance(self, done_bytes: int) -> None:
        self._bar.update(self._task, completed=done_bytes)  # rich's Progress takes a lock: safe from the meter
        self._observer.moving(done_bytes)

    def close(self) -> None:
        self._bar.remove_task(self._task)


class _TailColumn(ProgressColumn):
    """A row's copy rate; on the overall line, the time elapsed and the time left, computed at each refresh so
    that they count on between copies."""

    def __init__(self, overall: Callable[[], str]) -> None:
        super().__init__(table_column=Column(no_wrap=True))  # the bar gives way, the time left stays one line
        self._overall = overall
        self._speed = TransferSpeedColumn()

    def render(self, task: Task) -> Text:
        if task.fields.get("overall"):
            return Text(self._overall(), style="progress.remaining")
        return self._speed.render(task)


class RichObserver:
    """The runner's RunObserver (and RunPace) on a rich console: plain status lines; while the copies run, one
    overall line (copies made of all, warm-ups included, bytes, time elapsed and time left) above a transient
    bar for the copy under way, which shows its own rate."""

    def __init__(self, console: Console, now: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self._bar: Progress | None = None
        self._now = now
        self._started_s = now()  # the run's start: the elapsed time counts making the files and the baseline
        self._pace: Pace | None = None
        self._overall: TaskID | None = None
        self._lock = threading.Lock()  # the copy meter's thread moves the pace, the refresh thread reads it

    def status(self, line: str) -> None:
        # a status line quotes servers, fleet members and host names: printed as plain text, controls removed
        self.console.print(for_terminal(line), markup=False, highlight=False)

    def _progress(self) -> Progress:
        if self._bar is None:  # started at the copies: the status lines before them print plainly
            # on a narrow terminal the bar and then the description give way; figures never fold
            columns = (
                TextColumn(
                    "{task.description}", markup=False, table_column=Column(no_wrap=True, overflow="ellipsis")
                ),
                BarColumn(),
                DownloadColumn(table_column=Column(no_wrap=True)),
                _TailColumn(self.overall_text),
            )
            self._bar = Progress(*columns, console=self.console, transient=True)
            self._bar.start()
        return self._bar

    def plan(self, total_copies: int, total_bytes: int, least_s: float | None) -> None:
        pace = Pace(total_copies, total_bytes, least_s, started_s=self._now())
        with self._lock:
            self._pace = pace
        self._overall = self._progress().add_task(pace.copies_text(), total=total_bytes, overall=True)

    def copy_done(self, set_bytes: int) -> None:
        self._move(lambda pace: pace.copy_done(set_bytes))

    def copies_dropped(self, copies: int, set_bytes: int) -> None:
        self._move(lambda pace: pace.dropped(copies, set_bytes))

    def moving(self, done_bytes: int) -> None:
        """The copy under way has moved `done_bytes` (from the copy meter's thread)."""
        self._move(lambda pace: pace.under_way(done_bytes))

    def _move(self, change: Callable[[Pace], None]) -> None:
        with self._lock:
            if self._pace is None:
                return
            change(self._pace)
            shown = (self._pace.copies_text(), self._pace.total_bytes, self._pace.moved_bytes)
        if self._bar is not None and self._overall is not None:
            self._bar.update(self._overall, description=shown[0], total=shown[1], completed=shown[2])

    def overall_text(self) -> str:
        """The overall line's tail: '2:31 elapsed, ≈ 4 min left'."""
        now = self._now()
        with self._lock:
            left = self._pace.time_left(now) if self._pace is not None else None
        text = f"{clock(now - self._started_s)} elapsed"
        return f"{text}, {left.text()}" if left is not None else text

    def row_progress(self, description: str, total_bytes: int) -> CopyProgress:
        bar = self._progress()
        task = bar.add_task(for_terminal(description), total=total_bytes)
        return _RowBar(self, bar, task, total_bytes)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> RichObserver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""How `run` and `lab` show a run on the terminal: status lines and a progress bar per row (rich), then the
summary table and the JSON document, which are written also when Ctrl-C, SIGTERM or a failure stops the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TransferSpeedColumn

from workbench.core.observe import CopyProgress, Recorder
from workbench.core.results import Run
from workbench.core.store import StoreRecorder
from workbench.shared.errors import from_os_error


class _RowBar:
    def __init__(self, bar: Progress, task: TaskID, total_bytes: int) -> None:
        self._bar, self._task, self._total = bar, task, total_bytes

    def restart(self, description: str) -> None:
        self._bar.reset(self._task, total=self._total, description=description)

    def advance(self, done_bytes: int) -> None:
        self._bar.update(self._task, completed=done_bytes)  # rich's Progress takes a lock: safe from the meter

    def close(self) -> None:
        self._bar.remove_task(self._task)


class RichObserver:
    """The runner's RunObserver on a rich console: plain status lines, one transient bar per row."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._bar: Progress | None = None

    def status(self, line: str) -> None:
        self.console.print(line, markup=False)

    def row_progress(self, description: str, total_bytes: int) -> CopyProgress:
        if self._bar is None:  # started at the first row: the status lines before it print plainly
            columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
            self._bar = Progress(*columns, console=self.console, transient=True)
            self._bar.start()
        task = self._bar.add_task(description, total=total_bytes)
        return _RowBar(self._bar, task, total_bytes)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> RichObserver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_writable(path: Path) -> None:
    """Refuse a JSON path this process cannot write before the run starts, not after it (and leave no file)."""
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        raise from_os_error(exc, f"opening {path} for the JSON document") from exc
    if not existed:
        path.unlink(missing_ok=True)


def present_run(
    console: Console,
    db_path: Path,
    json_out: Path | None,
    start: Callable[[Recorder, RichObserver], Run],
) -> Run:
    """Call `start(recorder, observer)` (which executes a run), then show the table and write the JSON.

    The JSON document is written however the run ended: a run stopped by Ctrl-C, SIGTERM or a failure keeps
    the rows it finished, in the database (saved as each finished) and in the JSON; the table is shown only
    for a run that completed.
    """
    from workbench.cli.report import render_run

    if json_out is not None:
        check_writable(json_out)
    recorder = StoreRecorder(db_path)
    try:
        with recorder, RichObserver(console) as observer:
            run = start(recorder, observer)
    finally:
        if json_out is not None and recorder.finished is not None:
            json_out.write_text(json.dumps(recorder.finished.to_json(), indent=1))
    render_run(console, run)
    if json_out is not None:
        console.print(f"JSON document: {json_out}")
    return run


"""How the command line shows and records the runs of a session (workbench.core.session's Screen): each run
inside the results database's recorder and a rich progress display, then its summary table and the files asked
for (the JSON document, Markdown, CSV), which are written also when Ctrl-C, SIGTERM or a failure stops it; the
lines about a session's runs (banners, a run that could not run, rows that failed) on the terminal."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console

from workbench.cli.exports import Outputs
from workbench.cli.progress import RichObserver
from workbench.core.observe import Recorder
from workbench.core.results import Result, Run
from workbench.core.session import Part, Start
from workbench.core.store import StoreRecorder
from workbench.shared import paths
from workbench.shared.errors import WorkbenchError

# messages quote user input and servers' words: print them, never parse them, no control codes
from workbench.shared.safetext import for_markup as escape
from workbench.shared.safetext import for_terminal


def results_db(given: Path | None) -> Path:
    """--db, or the user's data directory's results database."""
    return given or paths.default_db()


def present_run(
    console: Console,
    db_path: Path,
    outputs: Outputs | Path | None,
    start: Callable[[Recorder, RichObserver], Run],
    wide: bool = False,
) -> Run:
    """Call `start(recorder, observer)` (which executes a run), then show the table and write the files asked
    for (`outputs`; a bare path is the JSON document's).

    The files are written however the run ended: a run stopped by Ctrl-C, SIGTERM or a failure keeps the rows
    it finished, in the database (saved as each finished) and in the files; the table is shown only
    for a run that completed; `wide` shows every column and the notes inline (render_run).
    """
    from workbench.cli.report import render_run

    files = outputs if isinstance(outputs, Outputs) else Outputs(json=outputs)
    files.check_writable()
    recorder = StoreRecorder(db_path)
    try:
        with recorder, RichObserver(console) as observer:
            run = start(recorder, observer)
    finally:
        if recorder.finished is not None:
            files.write(recorder.finished)
    render_run(console, run, wide)
    for line in files.lines():
        console.print(for_terminal(line), markup=False, highlight=False)
    return run


class TerminalScreen:
    """The session's Screen on a rich console: tables and progress on `out`, lines about the session on `err`,
    every run recorded in the database `db` and written to `outputs` (numbered or named per run)."""

    def __init__(self, out: Console, err: Console, db: Path | None, outputs: Outputs, wide: bool = False) -> None:
        self.out, self.err = out, err
        self.db = results_db(db)
        self.outputs = outputs
        self.wide = wide

    def files(self, part: Part) -> Outputs:
        """A part's files: PATH-NAME.json for a named one, PATH-1.json, ... among several, else PATH itself."""
        if part.name is not None:
            return self.outputs.suffixed(part.name)
        return self.outputs.numbered(part.index, part.count)

    def check_files(self, parts: Sequence[Part]) -> None:
        for part in parts:
            self.files(part).check_writable()

    def present(self, part: Part, start: Start) -> Run:
        return present_run(self.out, self.db, self.files(part), start, self.wide)

    def status(self) -> RichObserver:
        return RichObserver(self.out)

    def heading(self, part: Part) -> None:
        if part.banner is None:
            return
        if part.rule:
            self.out.rule(escape(part.banner))
        else:
            self.out.print(f"[bold]{escape(part.banner)}[/]")

    def say(self, line: str) -> None:
        self.err.print(escape(line), soft_wrap=True)

    def warn(self, line: str) -> None:
        self.err.print(f"[yellow]warning:[/] {escape(line)}", soft_wrap=True)

    def could_not(self, part: Part, error: WorkbenchError) -> None:
        self.err.print(f"[bold red]error:[/] {escape(part.title or '')}: {escape(error.one_line())}", soft_wrap=True)

    def rows_failed(self, run: Run, failed: Sequence[Result]) -> None:
        names = escape(", ".join(sorted({f"{r.label} {r.direction}" for r in failed})))
        said = f"{len(failed)} of {len(run.results)} rows failed or did not verify: {names}"
        self.err.print(f"[bold red]error:[/] {said}")

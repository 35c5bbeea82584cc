"""The files a run is written to, behind one interface: an Exporter has a name (its flag without the dashes), a
file suffix, what the terminal calls the file, and `render(run)`; EXPORTERS lists them (JSON, Markdown, CSV, HTML)
and `Outputs`, the files one command was asked for, goes through that list for everything it does.

A new format is one Exporter in EXPORTERS and one field of Outputs of the same name (a unit test checks they
agree); its flag is the command's to declare.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from workbench.core.results import Run
from workbench.shared.errors import UsageError, from_os_error


class Exporter(Protocol):
    """One file format of a run."""

    name: str  # the flag without its dashes, and the field of Outputs that holds the path
    suffix: str  # the file's extension, given when a path without one is numbered or suffixed
    label: str  # what the terminal calls the file written: '<label>: PATH'

    def render(self, run: Run) -> str | bytes:
        """The file's whole content (text is written as UTF-8, as it is: no newline translation)."""
        ...


class JsonExporter:
    """The run document (workbench/core/run_schema.json): every row, sample and note, for scripts and `compare`."""

    name = "json"
    suffix = ".json"
    label = "JSON document"

    def render(self, run: Run) -> str:
        return json.dumps(run.to_json(), indent=1)


class MarkdownExporter:
    """The terminal's table and verdict as Markdown (workbench.cli.export_markdown)."""

    name = "markdown"
    suffix = ".md"
    label = "Markdown"

    def render(self, run: Run) -> str:
        from workbench.cli.export_markdown import markdown

        return markdown(run)


class CsvExporter:
    """One line per line of the terminal's table, the numbers themselves (workbench.cli.export_csv)."""

    name = "csv"
    suffix = ".csv"
    label = "CSV"

    def render(self, run: Run) -> str:
        from workbench.cli.export_csv import csv_text

        return csv_text(run)


class HtmlExporter:
    """One self-contained page: table, verdict, plots (workbench.cli.export_html)."""

    name = "html"
    suffix = ".html"
    label = "HTML report"

    def render(self, run: Run) -> str:
        from workbench.cli.export_html import render_html  # matplotlib: imported only when a page is asked for

        return render_html(run)


# In the order the files are written: the JSON document first, so a failure in a later one still leaves it.
EXPORTERS: tuple[Exporter, ...] = (JsonExporter(), MarkdownExporter(), CsvExporter(), HtmlExporter())


def write(exporter: Exporter, run: Run, path: Path) -> None:
    """`exporter`'s rendering of `run` into `path` (text as UTF-8), a failure as one line naming the file."""
    content = exporter.render(run)
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise from_os_error(exc, f"writing {path}") from exc


def check_writable(path: Path, what: str) -> None:
    """Refuse a path this process cannot write before the run starts, not after it (and leave no file)."""
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        raise from_os_error(exc, f"opening {path} for {what}") from exc
    if not existed:
        path.unlink(missing_ok=True)


@dataclass(frozen=True)
class Outputs:
    """The files a run is written to, one field per exporter (its name), each None when not asked for."""

    json: Path | None = None
    markdown: Path | None = None
    csv: Path | None = None
    html: Path | None = None

    def asked(self) -> list[tuple[Exporter, Path]]:
        """(exporter, path) of each file asked for, in EXPORTERS order."""
        return [(e, path) for e in EXPORTERS if (path := getattr(self, e.name)) is not None]

    def check(self) -> None:
        """Refuse, before any work, a path whose directory does not exist, and two flags naming one file."""
        from workbench.shared.validate import check_output_file

        seen: dict[Path, str] = {}
        for e, path in self.asked():
            flag = f"--{e.name}"
            check_output_file(path, flag)
            same = seen.setdefault(path.resolve(), flag)
            if same != flag:
                raise UsageError(f"{same} and {flag} name the same file {path}", "give each its own file")

    def check_writable(self) -> None:
        """Refuse, before the run, a file this process cannot write (see check_writable)."""
        for e, path in self.asked():
            check_writable(path, f"--{e.name}")

    def numbered(self, index: int, count: int) -> Outputs:
        """The files of the index-th of `count` runs (`run URL URL...`): these for one run; for several
        PATH-1.json, PATH-1.md, PATH-2.json, ..."""
        if count == 1:
            return self
        return self._renamed(lambda path, _: path.with_name(f"{path.stem}-{index}{path.suffix}"))

    def suffixed(self, name: str) -> Outputs:
        """The files of the run called `name` among several (a stock server's scheme, a scenario's variant):
        PATH-NAME.json, PATH-NAME.md, PATH-NAME.csv (the extension given, else the exporter's)."""
        return self._renamed(lambda path, default: path.with_name(f"{path.stem}-{name}{path.suffix or default}"))

    def _renamed(self, rename: Callable[[Path, str], Path]) -> Outputs:
        return dataclasses.replace(self, **{e.name: rename(path, e.suffix) for e, path in self.asked()})

    def write(self, run: Run) -> None:
        """Write every file asked for, in EXPORTERS order (the JSON document first)."""
        for e, path in self.asked():
            write(e, run, path)

    def lines(self) -> list[str]:
        """What the terminal says of the files written: 'JSON document: PATH', ..."""
        return [f"{e.label}: {path}" for e, path in self.asked()]

"""`workbench compare A B` shown: the terminal table and its Markdown twin, both from one Comparison.

The comparison itself (matching rows, the noise test, the run-level warnings) is workbench.core.comparison;
this module only lays it out. MB/s is 10^6 bytes/s, as in every table of workbench.
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from workbench.cli.export_markdown import markdown_table
from workbench.cli.summary import SHORT_DIRECTION, mb
from workbench.core.comparison import CONFIDENCE, RAW_TCP_TOLERANCE, Comparison, RowChange
from workbench.core.noise import FASTER, SLOWER, TOO_FEW, Change
from workbench.shared.safetext import for_markdown_line
from workbench.shared.safetext import for_markup as escape  # a run's words: no markup, no control codes

CHANGE = f"change ({CONFIDENCE * 100:g} % interval)"
HEADERS = ("client", "dir", "set", "before MB/s", "after MB/s", CHANGE, "verdict", "n", "notes")
RIGHT = frozenset({3, 4, 5, 7})  # the columns of figures
_VERDICT_STYLE = {FASTER: "green", SLOWER: "red", TOO_FEW: "dim"}


def percent(ratio: float) -> str:
    """A ratio as a signed change in per cent, one decimal: 0.939 -> '-6.1'; never '-0.0'."""
    value = round((ratio - 1.0) * 100.0, 1)
    return f"{value + 0.0:+.1f}"


def change_text(change: Change) -> str:
    """The change with its interval, e.g. '-6.1 % (-9.8…-2.3)'; the ratio alone when there is no interval."""
    if change.ratio is None or not math.isfinite(change.ratio):
        return "—"
    if change.low is None or change.high is None:
        return f"{percent(change.ratio)} %"
    return f"{percent(change.ratio)} % ({percent(change.low)}…{percent(change.high)})"


def _cells(row: RowChange) -> list[str]:
    """The cells of one line in HEADERS order, as plain text."""
    change = row.change
    return [
        row.client,
        SHORT_DIRECTION.get(row.direction, row.direction),
        row.file_set,
        mb(row.before_bytes_per_s),
        mb(row.after_bytes_per_s),
        change_text(change),
        change.verdict,
        f"{change.n_before}/{change.n_after}",
        "; ".join(row.notes),
    ]


def _lines(comparison: Comparison) -> list[RowChange]:
    return [*comparison.baseline_rows, *comparison.rows]


def _title(comparison: Comparison) -> str:
    def name(run_id: int | None) -> str:
        return f"run {run_id}" if run_id is not None else "run"

    return f"{name(comparison.before_id)} (before) → {name(comparison.after_id)} (after)"


def footer(comparison: Comparison) -> list[str]:
    """What is under the table: the verdict counts, the test, and what a raw-TCP line can and cannot say."""
    said = [f"{comparison.summary()}."]
    said.append(
        f"Method: {comparison.method}, over each row's per-copy rates: the change is after/before of their "
        "geometric means, with its interval; 'faster' or 'slower' when the interval excludes no change and the "
        f"change is at least {comparison.min_change * 100:g} %. MB/s are medians; n is the copies before/after."
    )
    if comparison.baseline_rows:
        said.append(
            "Raw TCP is one probe per direction and run, so it has no noise estimate; a change beyond "
            f"{RAW_TCP_TOLERANCE * 100:g} % is warned above the table."
        )
    return said


def render_compare(console: Console, comparison: Comparison) -> None:
    for warning in comparison.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    table = Table(title=_title(comparison), title_justify="left", pad_edge=False)
    for index, name in enumerate(HEADERS):
        # a row's name stays whole on a narrow terminal: the notes and verdict wrap first
        table.add_column(name, justify="right" if index in RIGHT else "left", overflow="fold", no_wrap=index == 0)
    for row in _lines(comparison):
        cells = [escape(cell) for cell in _cells(row)]
        if row.baseline:
            cells[0] = f"[bold]{cells[0]}[/]"
        style = _VERDICT_STYLE.get(row.verdict)
        if style:
            cells[6] = f"[{style}]{cells[6]}[/]"
        table.add_row(*cells)
    console.print(table, highlight=False)
    for line in footer(comparison):
        console.print(escape(line), highlight=False)


def compare_markdown(comparison: Comparison) -> str:
    """The comparison as a Markdown document: a heading, the warnings, the table, the counts and the method."""
    parts = [f"## {_title(comparison)}", ""]
    if comparison.warnings:
        parts += [f"- **warning:** {_prose(warning)}" for warning in comparison.warnings]
        parts.append("")
    parts.append(markdown_table(HEADERS, [_cells(row) for row in _lines(comparison)], right=RIGHT))
    parts += [f"{_prose(line)}\n" for line in footer(comparison)]
    return "\n".join(parts).rstrip("\n") + "\n"


def _prose(line: str) -> str:
    # a '<' (a host's kernel string, an error quoted in a warning) would open an HTML tag on GitHub and hide the rest
    return for_markdown_line(line)

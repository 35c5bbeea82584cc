"""The summary table of a run on the terminal, drawn from workbench.cli.summary's rows.

The default table fits 120 columns: Mbit/s is the rate and the ceiling's (what iperf and link rates are given
in), the min–max range shrinks to the relative σ, and each row's notes become a footnote number whose text is listed
under the table (rows with the same notes share one). `wide` draws every column of the summary inline, the
notes too. Either way the rows are grouped by protocol, raw TCP first, with a rule between groups.

A fleet run's default table keeps one line per aggregate row (client 'http/aiohttp ×3'): each client's own
healthy lines are folded into that line's footnote, which starts with every client's rate; a client's line
that failed stays a line of its own ('http/aiohttp @c2'). `wide` shows every line, with a host column.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from workbench.cli.summary import ALL_HOSTS, Justify, SummaryRow, summary_rows, table_columns
from workbench.core.results import Run
from workbench.shared.safetext import for_markup

# The default table's width at most: a row of typical content stays on one line in it.
NARROW_WIDTH = 120

# (name, justify) of the default table's columns; the last holds the footnote number.
NARROW_COLUMNS: tuple[tuple[str, Justify], ...] = (
    ("client", "left"),
    ("dir", "left"),
    ("set", "left"),
    ("Mbit/s", "right"),
    ("±σ", "right"),
    ("% TCP", "right"),
    ("bound Mbit/s", "left"),
    ("TCP limit", "left"),
    ("verified", "left"),
    ("note", "left"),
)

_STATUS_MARKUP = {"ok": "[green]ok[/]", "failed": "[red]failed[/]", "MISMATCH": "[red]MISMATCH[/]",
                  "unchecked": "[yellow]unchecked[/]", "not verifiable": "[cyan]not verifiable[/]"}  # fmt: skip

# The default columns a console narrower than NARROW_WIDTH hides, first to last: the diagnosis goes before the
# rate and its share of raw TCP, which say how far from the network a row is.
DROP_ORDER = ("TCP limit", "bound Mbit/s", "±σ", "% TCP")


def grouped(lines: Sequence[SummaryRow]) -> list[list[SummaryRow]]:
    """The lines by protocol: groups in the order their first line comes, each keeping the run's order."""
    groups: dict[str, list[SummaryRow]] = {}
    for line in lines:
        groups.setdefault(line.group, []).append(line)
    return list(groups.values())


def footnotes(lines: Sequence[SummaryRow]) -> tuple[list[str], list[str]]:
    """(each line's footnote mark, '' for none; the footnote texts, the first being [1]): numbered in the
    order the lines come, the same notes under one number. A line that others fold into says their figures
    (`per_client`) first."""
    texts: list[str] = []
    marks: list[str] = []
    for line in lines:
        text = "; ".join((line.per_client, *line.notes) if line.per_client else line.notes)
        if not text:
            marks.append("")
            continue
        if text not in texts:
            texts.append(text)
        marks.append(f"[{texts.index(text) + 1}]")
    return marks, texts


def _narrow_cells(line: SummaryRow, mark: str) -> dict[str, str]:
    # No host column here: a fleet client's line that stays unfolded names its host beside the client.
    on_host = line.host and line.host != ALL_HOSTS
    return {
        "client": f"{line.client} @{line.host}" if on_host else line.client,
        "dir": line.direction,
        "set": line.file_set,
        "Mbit/s": line.mbit_per_s,
        "±σ": line.sigma,
        "% TCP": line.pct_of_tcp,
        "bound Mbit/s": line.bound_mbit,
        "TCP limit": line.tcp_limit,
        "verified": line.status,
        "note": mark,
    }


def results_table(run: Run, wide: bool = False, hidden: Collection[str] = ()) -> tuple[Table, list[str]]:
    """The table, and the footnote texts to print under it (none when `wide`: the notes are in the table).
    `hidden` names default columns left out (for a console narrower than NARROW_WIDTH)."""
    title = f"run {run.id}" if run.id is not None else "run"
    table = Table(title=title, title_justify="left", show_lines=False, pad_edge=False)
    lines = summary_rows(run)
    columns = table_columns(lines) if wide else tuple(c for c in NARROW_COLUMNS if c[0] not in hidden)
    for name, justify in columns:
        table.add_column(name, justify=justify, overflow="fold")
    groups = grouped(lines if wide else [line for line in lines if not line.folded])
    marks, texts = footnotes([line for group in groups for line in group])
    at = 0
    for group in groups:
        for index, line in enumerate(group):
            cells = line.named() if wide else _narrow_cells(line, marks[at])
            at += 1
            shown = {name: for_markup(text) for name, text in cells.items()}  # a server's words stay words
            if line.baseline:
                shown["client"] = f"[bold]{shown['client']}[/]"
            shown["verified"] = _STATUS_MARKUP.get(line.status, for_markup(line.status or "—"))
            last = index == len(group) - 1  # a rule under each protocol's rows
            row = [shown[name] for name, _ in columns]
            table.add_row(*row, style="dim" if line.unavailable else None, end_section=last)
    return table, ([] if wide else texts)


def fitting_table(console: Console, run: Run, width: int) -> tuple[Table, list[str], list[str]]:
    """The default table in `width` columns: (table, footnote texts, the columns hidden to fit). Below
    NARROW_WIDTH the least needed columns go first (DROP_ORDER), so that each row stays on one line; when even
    the rest does not fit, rich folds cells onto a second line."""
    hidden: list[str] = []
    options = console.options.update_width(10_000)  # room to measure the table's natural width in
    while True:
        table, texts = results_table(run, hidden=hidden)
        if len(hidden) == len(DROP_ORDER) or Measurement.get(console, options, table).maximum <= width:
            return table, texts, hidden
        hidden.append(DROP_ORDER[len(hidden)])


def footnote_list(texts: Sequence[str]) -> Table:
    """The footnotes as a numbered list, each text wrapped under itself (a hanging indent)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column(overflow="fold")
    for number, text in enumerate(texts, start=1):
        grid.add_row(f"\\[{number}]", for_markup(text))
    return grid


def table_width(console: Console, wide: bool) -> int | None:
    """The width the table, its footnotes and the verdict are drawn in: NARROW_WIDTH at most, so that a log
    piped at 200 columns reads as a terminal does; the console's own when `wide` (None)."""
    return None if wide else min(console.width, NARROW_WIDTH)


def print_results(console: Console, run: Run, wide: bool = False) -> None:
    """The table and its footnotes, in table_width."""
    width = table_width(console, wide)
    if width is None:
        table, _ = results_table(run, wide=True)
        console.print(table)
        return
    table, texts, hidden = fitting_table(console, run, width)
    console.print(table, width=width)
    if hidden:
        console.print(f"hidden at {width} columns: {', '.join(hidden)} (--wide shows every column)", width=width)
    if texts:
        console.print(footnote_list(texts), width=width)

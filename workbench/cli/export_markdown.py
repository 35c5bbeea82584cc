"""A run as Markdown, ready to paste into an issue or a forum post: the link and host lines, the verdict, the
summary table (built from workbench.cli.summary, as the terminal's is, so every format says the same thing), the
window sweep and the notes. MB/s is 10^6 bytes/s and Mbit/s 10^6 bits/s, so figures compare directly with iperf.

Words from outside (errors quoting a server, host names, labels, client names) are data: a cell or a line adds no
structure (workbench.shared.safetext.for_markdown_cell, for_markdown_line).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from workbench.cli.summary import SummaryRow, host_lines, link_line, mb, summary_rows, table_columns
from workbench.core.results import Run
from workbench.shared.safetext import for_markdown_cell, for_markdown_line


def markdown_cell(text: str) -> str:
    """`text` as one GitHub-flavoured Markdown table cell: a '|' would end the cell and a newline the row."""
    return for_markdown_cell(text)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Collection[int] = ()) -> str:
    """A GitHub-flavoured Markdown table, one line per row, every cell escaped (markdown_cell).

    headers: the column names; rows: the cells of each row, as text, as many as headers (short rows are padded
    with empty cells, longer ones refused); right: the indexes of the columns to right-align (numbers).
    The text ends with a newline.
    """
    width = len(headers)
    lines = ["| " + " | ".join(markdown_cell(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---:" if i in right else "---" for i in range(width)) + "|")
    for row in rows:
        if len(row) > width:
            raise ValueError(f"a row of {len(row)} cells for {width} columns")
        cells = [*row, *([""] * (width - len(row)))]
        lines.append("| " + " | ".join(markdown_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _text(line: str) -> str:
    # a line of prose: a newline would start a block, '<' open an HTML tag on GitHub and hide what follows
    return for_markdown_line(line)


def _when(utc: object) -> str:
    text = str(utc or "")
    return text.replace("T", " ").replace("Z", " UTC") if text.endswith("Z") else text


def _context_lines(run: Run) -> list[str]:
    """What the terminal shows above the table: the server given by URL, the lab's link, both hosts, the baseline
    when it is missing."""
    lines: list[str] = []
    server = run.meta.get("server") or {}
    if isinstance(server, Mapping) and server.get("kind") == "stock":
        scratch = f"; scratch directory {server['scratch_path']}" if server.get("scratch_path") else ""
        lines.append(f"server: {server.get('url')} (not started by workbench{scratch})")
    if run.link:
        lines.append(link_line(run.link))
    lines.extend(host_lines(run))
    base = run.baseline
    if base.error:
        lines.append(f"raw TCP baseline failed: {base.error}")
    elif not (base.up_bytes_per_s or base.down_bytes_per_s) and base.details.get("no_baseline"):
        lines.append(f"no raw-TCP baseline ({base.details['no_baseline']}): figures are absolute, '% TCP' is '—'")
    return lines


def summary_markdown(lines: Sequence[SummaryRow]) -> str:
    """The summary table in Markdown: the terminal's columns (a fleet run's host column too), numbers
    right-aligned, one table line per line."""
    columns = table_columns(lines)
    headers = [name for name, _ in columns]
    right = {i for i, (_, justify) in enumerate(columns) if justify == "right"}
    rows = []
    for line in lines:
        named = line.named()
        named["verified"] = named["verified"] or "—"
        rows.append([named[name] for name in headers])
    return markdown_table(headers, rows, right)


def _sweep_markdown(points: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for p in points:
        predicted = p.get("predicted_bytes_per_s") or 0
        used = p.get("effective_window_bytes")
        rows.append(
            [
                f"{p['window_bytes'] // 1024} KiB",
                f"{used // 1024} KiB" if used else "—",
                mb(p.get("measured_bytes_per_s")),
                mb(predicted or None),
                str(p.get("predicted_by", "window")),
                f"{p['measured_bytes_per_s'] / predicted:.2f}" if predicted else "—",
            ]
        )
    headers = ("window", "in use", "measured MB/s", "predicted MB/s", "by", "measured/predicted")
    return markdown_table(headers, rows, right={0, 1, 2, 3, 5})


def markdown(run: Run) -> str:
    """The run as Markdown: a heading (run id, start time), the link and host lines, the verdict, the summary
    table (one table line per SummaryRow), the window sweep in the lab, then the run's notes."""
    title = f"workbench run {run.id}" if run.id is not None else "workbench run"
    started = _when(run.meta.get("started_utc"))
    parts = [f"### {title}" + (f" — {_text(started)}" if started else "") + "\n"]
    context = _context_lines(run)
    if context:
        parts.append("".join(f"- {_text(line)}\n" for line in context))
    if run.explanation is not None and run.explanation.verdict:
        parts.append(f"**Verdict:** {_text(' '.join(run.explanation.verdict))}\n")
    parts.append(summary_markdown(summary_rows(run)))
    if run.window_sweep:
        parts.append("TCP window sweep (predicted: window / RTT, or the path's rate once the window exceeds its BDP)\n")
        parts.append(_sweep_markdown(run.window_sweep))
    if run.warnings:
        parts.append("Notes:\n\n" + "".join(f"- {_text(w)}\n" for w in run.warnings))
    return "\n".join(parts)

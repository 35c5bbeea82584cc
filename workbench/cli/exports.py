"""A run's summary table as files to share: Markdown ready to paste into an issue or a forum post, and CSV for a
spreadsheet or a script. Both are built from workbench.cli.summary, as the terminal's table is, so every format
says the same thing; the CSV carries the numbers themselves (bytes/s, seconds) under stable column names.

MB/s is 10^6 bytes/s and Mbit/s 10^6 bits/s throughout, so figures compare directly with iperf.

Words from outside (errors quoting a server, host names, labels, client names) are data in both: a Markdown cell
or line adds no structure (workbench.shared.safetext.for_markdown_cell, for_markdown_line), a CSV cell is never
taken for a formula (for_csv_cell); numbers stay numbers.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from workbench.cli.summary import (
    ALL_HOSTS,
    SummaryRow,
    client_baselines,
    host_lines,
    is_fleet,
    link_line,
    mb,
    raw_tcp_for,
    summary_rows,
    table_columns,
)
from workbench.core.results import Baseline, Result, RowExplanation, Run
from workbench.shared.safetext import for_csv_cell, for_markdown_cell, for_markdown_line
from workbench.shared.triage import TcpTriage

# The CSV's header, in order: one line per line of the summary table (the raw-TCP lines first, `kind` raw-tcp,
# then every row, `kind` row). Scripts read these names, so they only ever grow at the end; README lists them.
CSV_COLUMNS: tuple[str, ...] = (
    "run_id",
    "kind",  # raw-tcp | row
    "protocol",  # tcp on a raw-TCP line
    "client",  # raw-tcp on a raw-TCP line
    "direction",  # upload | download
    "file_set",  # mem on a raw-TCP line
    "set_bytes",  # bytes per copy
    "files",  # files per copy
    "repeats",  # timed copies made (failed ones included)
    "median_bytes_per_s",
    "median_bits_per_s",
    "min_bytes_per_s",
    "max_bytes_per_s",
    "stdev_bytes_per_s",
    "pct_of_tcp",
    "raw_tcp_bytes_per_s",  # the raw TCP rate the same way
    "ceiling_bytes_per_s",
    "bound",
    "tcp_limit",  # application | receive-window | send-buffer | network | mixed; empty when not said
    "tcp_side",  # sender | receiver: whose counters tcp_limit comes from
    "files_per_s",
    "stalls",
    "stall_s",
    "verified",  # true | false
    "status",  # ok | failed | MISMATCH | unchecked | empty (nothing to check)
    "error",
    "notes",  # the table's notes, joined with '; '
)
# A fleet run's CSV has one more column, last: the client host of each line ("all": the clients together).
FLEET_CSV_COLUMNS: tuple[str, ...] = (*CSV_COLUMNS, "host")

_FULL_DIRECTION = {"up": "upload", "down": "download"}


# ---------------------------------------------------------------- Markdown
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


# ---------------------------------------------------------------- CSV
def _flag(value: bool | None) -> str:
    return "" if value is None else ("true" if value else "false")


def _baseline_line(run: Run, line: SummaryRow, base: Baseline) -> dict[str, Any]:
    direction = _FULL_DIRECTION.get(line.direction, line.direction)
    rate = base.for_direction(direction)
    tcp = TcpTriage.from_json((base.tcp or {}).get(direction))
    return {
        "run_id": run.id,
        "kind": "raw-tcp",
        "protocol": "tcp",
        "client": "raw-tcp",
        "direction": direction,
        "file_set": line.file_set,
        "median_bytes_per_s": rate,
        "median_bits_per_s": rate * 8 if rate is not None else None,
        "pct_of_tcp": 100.0,
        "raw_tcp_bytes_per_s": rate,
        "tcp_limit": tcp.limit if tcp else None,
        "tcp_side": tcp.side if tcp else None,
        "status": line.status,
        "error": base.error if line.host else None,  # a fleet client's probe that failed
        "notes": "; ".join(line.notes),
        "host": line.host,
    }


def _row_line(run: Run, row: Result, why: RowExplanation, line: SummaryRow) -> dict[str, Any]:
    summary = row.summary
    median = row.median_bytes_per_s
    tcp = row.tcp
    return {
        "run_id": run.id,
        "kind": "row",
        "protocol": row.protocol,
        "client": row.client,
        "direction": row.direction,
        "file_set": row.file_set,
        "set_bytes": row.bytes,
        "files": row.files,
        "repeats": len(row.samples),
        "median_bytes_per_s": median,
        "median_bits_per_s": median * 8 if median is not None else None,
        "min_bytes_per_s": summary.minimum if summary else None,
        "max_bytes_per_s": summary.maximum if summary else None,
        "stdev_bytes_per_s": summary.stdev if summary else None,
        "pct_of_tcp": why.pct_of_tcp,
        "raw_tcp_bytes_per_s": raw_tcp_for(run, row),
        "ceiling_bytes_per_s": why.ceiling_bytes_per_s,
        "bound": why.bound,
        "tcp_limit": tcp.limit if tcp else None,
        "tcp_side": tcp.side if tcp else None,
        "files_per_s": row.files_per_s,
        "stalls": row.stall_count,
        "stall_s": round(row.stall_seconds, 3),
        "verified": _flag(row.verified),
        "status": line.status,
        "error": row.error,
        "notes": "; ".join(line.notes),
        "host": line.host,
    }


def csv_columns(run: Run) -> tuple[str, ...]:
    """The CSV's header for `run`: CSV_COLUMNS, FLEET_CSV_COLUMNS for a fleet run."""
    return FLEET_CSV_COLUMNS if is_fleet(run) else CSV_COLUMNS


def csv_records(run: Run) -> list[dict[str, Any]]:
    """One dict per line of the summary table, keyed by csv_columns(run) (absent or None: an empty cell): numbers
    as numbers, the status and notes as the table says them."""
    lines = summary_rows(run)
    baseline = [line for line in lines if line.baseline]
    rows = [line for line in lines if not line.baseline]
    if len(rows) != len(run.results):  # summary_rows gives one line per row, after the raw-TCP lines
        raise ValueError(f"{len(rows)} summary lines for {len(run.results)} rows")
    alone = client_baselines(run)
    records = [
        _baseline_line(run, line, alone[line.host] if line.host not in ("", ALL_HOSTS) else run.baseline)
        for line in baseline
    ]
    records += [_row_line(run, row, why, line) for (row, why), line in zip(run.explained_rows(), rows, strict=True)]
    columns = csv_columns(run)
    return [{name: _cell(record.get(name)) for name in columns} for record in records]


def _cell(value: Any) -> Any:
    """A CSV cell: '' for None, a number as it is, text never taken for a formula."""
    return "" if value is None else for_csv_cell(value)


def write_csv(run: Run, stream: TextIO) -> None:
    """The CSV (header csv_columns(run), then csv_records) to a text stream opened with newline=''."""
    writer = csv.DictWriter(stream, fieldnames=csv_columns(run))
    writer.writeheader()
    writer.writerows(csv_records(run))


def csv_text(run: Run) -> str:
    """The CSV as text: RFC 4180 (CRLF line ends; a note with a comma, quote or newline is quoted)."""
    out = io.StringIO(newline="")
    write_csv(run, out)
    return out.getvalue()


# ---------------------------------------------------------------- files
def write_exports(run: Run, markdown_path: Path | None, csv_path: Path | None) -> list[Path]:
    """Write the Markdown and the CSV where asked (None: not asked); the paths written. UTF-8 both."""
    written: list[Path] = []
    if markdown_path is not None:
        markdown_path.write_text(markdown(run), encoding="utf-8")
        written.append(markdown_path)
    if csv_path is not None:
        with open(csv_path, "w", encoding="utf-8", newline="") as stream:
            write_csv(run, stream)
        written.append(csv_path)
    return written

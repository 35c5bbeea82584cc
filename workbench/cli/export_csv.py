"""A run's summary table as CSV for a spreadsheet or a script: one line per line of the terminal's table (built
from workbench.cli.summary, as that table is), the numbers themselves (bytes/s, seconds) under stable column names.

Words from outside are data: a cell is never taken for a formula (workbench.shared.safetext.for_csv_cell); numbers
stay numbers.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from workbench.cli.summary import ALL_HOSTS, SummaryRow, client_baselines, is_fleet, raw_tcp_for, summary_rows
from workbench.core.results import Baseline, Result, RowExplanation, Run
from workbench.shared.safetext import for_csv_cell
from workbench.shared.triage import TcpTriage

# The CSV's header, in order: one line per line of the summary table (the raw-TCP lines first, `kind` raw-tcp,
# then every row, `kind` row). Scripts read these names, so they only ever grow at the end; docs/output-formats.md
# lists them.
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
    "status",  # ok | failed | MISMATCH | unchecked | not verifiable | empty (nothing to check)
    "error",
    "notes",  # the table's notes, joined with '; '
)
# A fleet run's CSV has one more column, last: the client host of each line ("all": the clients together).
FLEET_CSV_COLUMNS: tuple[str, ...] = (*CSV_COLUMNS, "host")

_FULL_DIRECTION = {"up": "upload", "down": "download"}


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


def csv_text(run: Run) -> str:
    """The CSV (header csv_columns(run), then csv_records) as text: RFC 4180 (CRLF line ends; a note with a comma,
    quote or newline is quoted)."""
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=csv_columns(run))
    writer.writeheader()
    writer.writerows(csv_records(run))
    return out.getvalue()

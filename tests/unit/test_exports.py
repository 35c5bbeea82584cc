"""`--markdown` and `--csv`: the summary table as Markdown to paste (the link and hosts above it, one table line
per line of the table, cells escaped) and as CSV (the documented header, one line per line of the table, the
run's own numbers), both from the same SummaryRows as the terminal's table."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from pathlib import Path

import pytest

from tests.synthetic_runs import ODD_ERROR, lab_run, stock_run, stopped_run
from tests.unit.test_results_values import _new_run
from workbench.cli.export_csv import CSV_COLUMNS, csv_text
from workbench.cli.export_html import render_html
from workbench.cli.export_markdown import markdown, markdown_table
from workbench.cli.exports import EXPORTERS, Outputs
from workbench.cli.summary import COLUMNS, host_lines, link_line, summary_rows
from workbench.core.results import Run
from workbench.shared.errors import NotFoundError, UsageError

ROOT = Path(__file__).resolve().parents[2]
RUNS = {"lab": lab_run, "stock": stock_run, "stopped": stopped_run, "served": _new_run}


def _records(run: Run) -> list[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(csv_text(run), newline=""))
    assert tuple(reader.fieldnames or ()) == CSV_COLUMNS
    return list(reader)


def _number(cell: str) -> float | None:
    return None if cell == "" else float(cell)


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table line, split on the pipes that are not escaped."""
    assert line.startswith("|") and line.endswith("|"), line
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]


def _summary_table(text: str) -> list[str]:
    """The lines of the first table in `text` (the summary table)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


# ---------------------------------------------------------------- CSV
@pytest.mark.parametrize("name", list(RUNS))
def test_csv_has_the_documented_header_and_one_line_per_table_line(name: str) -> None:
    run = RUNS[name]()
    records = _records(run)
    lines = summary_rows(run)
    assert len(records) == len(lines)
    assert [r["kind"] for r in records] == ["raw-tcp" if line.baseline else "row" for line in lines]
    # the same words as the table: its notes and its verification, line for line
    assert [r["notes"] for r in records] == ["; ".join(line.notes) for line in lines]
    assert [r["status"] for r in records] == [line.status for line in lines]
    assert {r["run_id"] for r in records} <= {"" if run.id is None else str(run.id)}


def test_csv_numbers_are_the_runs_own_values() -> None:
    run = lab_run()
    records = _records(run)
    base = [r for r in records if r["kind"] == "raw-tcp"]
    assert [(r["direction"], _number(r["median_bytes_per_s"])) for r in base] == [
        ("upload", run.baseline.up_bytes_per_s),
        ("download", run.baseline.down_bytes_per_s),
    ]
    rows = [r for r in records if r["kind"] == "row"]
    for record, (row, why) in zip(rows, run.explained_rows(), strict=True):
        assert (record["protocol"], record["client"], record["direction"], record["file_set"]) == (
            row.protocol,
            row.client,
            row.direction,
            row.file_set,
        )
        assert int(record["set_bytes"]) == row.bytes and int(record["files"]) == row.files
        assert int(record["repeats"]) == len(row.samples)
        median = _number(record["median_bytes_per_s"])
        assert median == row.median_bytes_per_s
        bits = _number(record["median_bits_per_s"])
        assert (bits is None and median is None) or bits == pytest.approx(8 * median)
        summary = row.summary
        assert _number(record["min_bytes_per_s"]) == (summary.minimum if summary else None)
        assert _number(record["max_bytes_per_s"]) == (summary.maximum if summary else None)
        assert _number(record["pct_of_tcp"]) == why.pct_of_tcp
        assert _number(record["ceiling_bytes_per_s"]) == why.ceiling_bytes_per_s
        assert (record["bound"] or None) == why.bound
        assert _number(record["raw_tcp_bytes_per_s"]) == run.baseline.for_direction(row.direction)
        assert _number(record["files_per_s"]) == row.files_per_s
        assert int(record["stalls"]) == row.stall_count
        assert float(record["stall_s"]) == pytest.approx(row.stall_seconds)
        assert record["verified"] == ("true" if row.verified else "false")
        assert (record["tcp_limit"] or None) == (row.tcp.limit if row.tcp else None)
        assert (record["error"] or None) == row.error
    measured = [r for r in rows if r["median_bytes_per_s"]]
    assert len(measured) == 3 and all(float(r["stall_s"]) >= 0 for r in measured)
    assert any(int(r["stalls"]) > 0 for r in measured)  # the stalled row says so in numbers


def test_csv_keeps_an_error_with_quotes_a_comma_and_a_newline_in_one_cell() -> None:
    records = _records(lab_run())
    (failed,) = [r for r in records if r["status"] == "failed"]
    assert failed["error"] == ODD_ERROR and failed["median_bytes_per_s"] == "" and failed["verified"] == "false"
    # one CRLF per record and the header; the cell's own newline stays inside its quotes
    text = csv_text(lab_run())
    assert text.count("\r\n") == len(records) + 1 and '"server said: 550 ""no | such file"", sorry\n' in text


def test_csv_of_a_run_without_a_baseline_leaves_its_shares_empty() -> None:
    records = _records(stock_run())
    assert [r["kind"] for r in records] == ["row", "row"]
    assert all(r["pct_of_tcp"] == "" and r["raw_tcp_bytes_per_s"] == "" for r in records)
    assert [r["tcp_side"] for r in records] == ["sender", "receiver"]


def test_the_output_formats_page_documents_every_csv_column() -> None:
    page = (ROOT / "docs" / "output-formats.md").read_text()
    documented = set(re.findall(r"`([a-z_]+)`", page[page.index("--csv") :]))
    assert set(CSV_COLUMNS) <= documented, sorted(set(CSV_COLUMNS) - documented)


# ---------------------------------------------------------------- Markdown
def test_markdown_table_has_one_line_per_table_line_with_the_link_and_hosts_above() -> None:
    run = lab_run()
    text = markdown(run)
    table = _summary_table(text)
    lines = summary_rows(run)
    header, separator, *body = table
    assert _cells(header) == [name for name, _ in COLUMNS]
    assert _cells(separator) == ["---:" if justify == "right" else "---" for _, justify in COLUMNS]
    assert len(body) == len(lines) == 7
    for line, row in zip(body, lines, strict=True):
        cells = _cells(line)
        assert len(cells) == len(COLUMNS)
        assert cells[:10] == [c.replace("|", "\\|") for c in row.cells()[:10]]
    assert text.startswith(f"### workbench run {run.id} — 2026-11-25 17:57:50 UTC\n")
    above = text[: text.index(table[0])]
    assert run.link is not None and f"- {link_line(run.link)}\n" in above
    assert all(f"- {line}\n" in above for line in host_lines(run)) and len(host_lines(run)) == 2
    assert run.explanation is not None and " ".join(run.explanation.verdict) in above
    below = text[text.index(table[-1]) :]
    assert "TCP window sweep" in below and all(f"- {w}" in below for w in run.warnings)


def test_markdown_escapes_pipes_and_newlines_in_cells() -> None:
    table = _summary_table(markdown(lab_run()))
    (failed,) = [line for line in table if "failed" in line]
    cells = _cells(failed)
    assert cells[-1] == 'server said: 550 "no \\| such file", sorry<br>second line'
    assert len(cells) == len(COLUMNS)  # the escaped pipe did not open a cell, the newline did not end the line


def test_markdown_of_a_stock_run_names_the_server_and_the_missing_baseline() -> None:
    text = markdown(stock_run())
    above = text[: text.index("| client |")]
    assert "- server: sftp\\://nas.local/\\~/tmp (not started by workbench" in above  # no autolink, no strikethrough
    assert "- no raw-TCP baseline" in above and "- client laptop" in above
    assert len(_summary_table(text)) == 2 + 2


def test_markdown_of_a_stopped_run_has_the_header_and_its_raw_tcp_lines() -> None:
    text = markdown(stopped_run())
    assert len(_summary_table(text)) == 2 + 2 and "Verdict" not in text


def test_markdown_table_aligns_pads_and_escapes() -> None:
    text = markdown_table(["name", "MB/s", "notes"], [["a|b", "1.0"], ["<x>", "2.0", "one\ntwo"]], right={1})
    assert text.splitlines() == [
        "| name | MB/s | notes |",
        "|---|---:|---|",
        "| a\\|b | 1.0 |  |",
        "| \\<x\\> | 2.0 | one<br>two |",
    ]
    with pytest.raises(ValueError, match="4 cells for 3 columns"):
        markdown_table(["a", "b", "c"], [["1", "2", "3", "4"]])


def test_outputs_write_each_exporters_rendering_as_it_is(tmp_path: Path) -> None:
    run = lab_run()
    files = Outputs(tmp_path / "run.json", tmp_path / "run.md", tmp_path / "run.csv", tmp_path / "run.html")
    files.write(run)
    assert json.loads((tmp_path / "run.json").read_text(encoding="utf-8")) == run.to_json()
    assert (tmp_path / "run.md").read_text(encoding="utf-8") == markdown(run)
    assert (tmp_path / "run.csv").read_bytes() == csv_text(run).encode("utf-8")  # CRLF kept, not translated
    assert (tmp_path / "run.html").read_text(encoding="utf-8") == render_html(run)
    Outputs(markdown=tmp_path / "only.md").write(run)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["only.md", "run.csv", "run.html", "run.json", "run.md"]


def test_every_exporter_has_its_field_of_outputs_and_its_own_name_and_suffix() -> None:
    names = [e.name for e in EXPORTERS]
    assert names == [field.name for field in dataclasses.fields(Outputs)]
    assert len({e.suffix for e in EXPORTERS}) == len(EXPORTERS) and all(e.suffix.startswith(".") for e in EXPORTERS)
    assert len({e.label for e in EXPORTERS}) == len(EXPORTERS)


# ---------------------------------------------------------------- the files of one run, of several
def test_outputs_of_several_runs_are_named_as_their_json_documents(tmp_path: Path) -> None:
    asked = Outputs(tmp_path / "out.json", tmp_path / "out.md", tmp_path / "table")
    assert asked.numbered(1, 1) == asked  # one run: the paths as given
    assert asked.numbered(2, 3) == Outputs(tmp_path / "out-2.json", tmp_path / "out-2.md", tmp_path / "table-2")
    # a stock server's scheme or a scenario's variant: the extension given, else the file's own
    assert asked.suffixed("sftp") == Outputs(
        tmp_path / "out-sftp.json", tmp_path / "out-sftp.md", tmp_path / "table-sftp.csv"
    )
    assert Outputs(markdown=tmp_path / "m").suffixed("v") == Outputs(markdown=tmp_path / "m-v.md")
    assert Outputs().suffixed("v") == Outputs() and Outputs().numbered(1, 2) == Outputs()


def test_outputs_are_refused_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"--markdown: directory .*no-dir does not exist"):
        Outputs(json=tmp_path / "ok.json", markdown=tmp_path / "no-dir" / "x.md").check()
    with pytest.raises(UsageError, match="--json and --csv name the same file"):
        Outputs(json=tmp_path / "same", csv=tmp_path / "." / "same").check()
    with pytest.raises(UsageError, match=r"--csv .* is a directory"):
        Outputs(csv=tmp_path).check()
    fine = Outputs(tmp_path / "a.json", tmp_path / "a.md", tmp_path / "a.csv")
    fine.check()
    fine.check_writable()
    assert sorted(tmp_path.iterdir()) == []  # checking leaves no file behind
    fine.write(lab_run())
    assert [line.split(": ")[0] for line in fine.lines()] == ["JSON document", "Markdown", "CSV"]
    assert all(path.stat().st_size > 0 for _, path in fine.asked())
    with pytest.raises(UsageError, match="--csv and --html name the same file"):
        Outputs(csv=tmp_path / "page", html=tmp_path / "page").check()

"""A fleet run's rows: each client's own rows (`client_host` its alias) and the aggregate rows
(`client_host` "all", `aggregate` their figures) through the JSON document of schema 3, the results database, and
every way a run is shown: the terminal's default table folds each client's healthy rows into the aggregate row's
footnote and keeps a failed one in sight; --wide, Markdown, CSV and HTML show every row with a host column."""

from __future__ import annotations

import copy
import csv
import dataclasses
import io
import json
import re
import statistics
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.schema_check import assert_valid_run_document, schema_errors
from tests.synthetic_runs import FLEET_CLIENTS, FLEET_FAILURE, fleet_run, lab_run, stock_run
from workbench.cli.export_csv import CSV_COLUMNS, FLEET_CSV_COLUMNS, csv_text
from workbench.cli.export_html import render_html
from workbench.cli.export_markdown import markdown
from workbench.cli.report import render_run
from workbench.cli.run_table import NARROW_WIDTH
from workbench.cli.summary import COLUMNS, mb, summary_rows
from workbench.core.results import AGGREGATE_KEYS, Result, Run, Sample
from workbench.core.schema import SCHEMA, upgrade_document
from workbench.core.store import Store


def _doc(run: Run) -> dict[str, Any]:
    return json.loads(json.dumps(run.to_json()))  # as a reader gets it


def _render(run: Run, width: int, wide: bool = False) -> str:
    out = StringIO()
    render_run(Console(file=out, width=width, color_system=None), run, wide=wide)
    return out.getvalue()


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]


def _footnotes(text: str) -> dict[str, str]:
    """The footnotes under the table by mark ('[3]'), each text on one line again."""
    below = text.split("└", 1)[1].split("\n", 1)[1]
    found: dict[str, str] = {}
    for number, body in re.findall(r"^\[(\d+)\] (.*?)(?=^\[\d+\] |\Z)", below, re.MULTILINE | re.DOTALL):
        found[f"[{number}]"] = " ".join(body.split())
    return found


def _aggregates(run: Run) -> list[Result]:
    return [row for row in run.results if row.client_host == "all"]


def _members(run: Run, aggregate: Result) -> list[Result]:
    key = (aggregate.label, aggregate.direction, aggregate.file_set)
    return [r for r in run.results if r.client_host not in (None, "all") and (r.label, r.direction, r.file_set) == key]


# ---------------------------------------------------------------- the document
def test_a_fleet_run_reads_back_from_its_document_with_every_host_and_aggregate() -> None:
    run = fleet_run()
    doc = _doc(run)
    assert doc["schema"] == SCHEMA == 3
    assert [r["client_host"] for r in doc["results"]] == [r.client_host for r in run.results]
    assert ["all", *FLEET_CLIENTS] == [r["client_host"] for r in doc["results"][:4]]  # aggregate, then clients
    for row in doc["results"]:
        if row["client_host"] == "all":
            assert set(row["aggregate"]) == set(AGGREGATE_KEYS)
            assert row["files_per_s"] is None  # one file per client's copy: no rate of files
        else:
            assert row["aggregate"] is None
    again = Run.from_json(doc)
    assert again.results == run.results  # client_host and aggregate included
    assert again.to_json() == doc
    first = _aggregates(again)[0]
    assert first.aggregate is not None and first.aggregate["clients"] == list(FLEET_CLIENTS)
    assert first.aggregate["per_client_bytes_per_s"] == _aggregates(run)[0].aggregate["per_client_bytes_per_s"]  # type: ignore[index]


def test_a_row_outside_a_fleet_has_neither_key_set() -> None:
    doc = _doc(lab_run())
    assert all(r["client_host"] is None and r["aggregate"] is None for r in doc["results"])
    assert all(r.client_host is None and r.aggregate is None for r in Run.from_json(doc).results)


def test_the_fleet_document_validates_and_a_broken_aggregate_does_not() -> None:
    doc = _doc(fleet_run())
    assert_valid_run_document(doc)
    for damage, where in (
        (lambda d: d["results"][0]["aggregate"].pop("jain_index"), "results/0/aggregate"),
        (lambda d: d["results"][0]["aggregate"]["per_client_bytes_per_s"].update(c1=-1.0), "results/0/aggregate"),
        (lambda d: d["results"][1].pop("client_host"), "results/1"),
        (lambda d: d["run"]["fleet"]["baselines"]["c1"].update(up_bps=1.0), "run/fleet/baselines/c1"),
    ):
        broken = copy.deepcopy(doc)
        damage(broken)
        errors = schema_errors(broken)
        assert any(e.startswith(where) for e in errors), (where, errors)


def _as_schema_2(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` as the previous version wrote it: schema 2, no fleet keys on the rows."""
    old = copy.deepcopy(doc)
    old["schema"] = 2
    for row in old["results"]:
        del row["client_host"], row["aggregate"]
    return old


def test_a_schema_2_document_is_upgraded_to_3() -> None:
    doc = _doc(lab_run())
    old = _as_schema_2(doc)
    errors = schema_errors(old)
    assert any(e.startswith("schema:") for e in errors) and any("client_host" in e for e in errors)
    assert upgrade_document(old) == doc  # both keys added, null, on every row
    again = _doc(Run.from_json(old))
    assert_valid_run_document(again)
    assert again == doc
    with pytest.raises(ValueError, match="schema 4"):
        upgrade_document({**doc, "schema": 4})


def test_the_results_database_keeps_the_fleet_keys_and_reads_older_rows(tmp_path: Path) -> None:
    run = fleet_run()
    with Store(tmp_path / "runs.sqlite") as store:
        run_id = store.begin_run(dict(run.meta))
        store.save_baseline(run_id, run.baseline)
        for index, (row, why) in enumerate(run.explained_rows()):
            store.save_result(run_id, index, row, why)
        store.finish_run(run_id, "2026-11-26T08:04:00Z", [], dict(run.meta), ["a verdict"])
        loaded = store.load(run_id)
        assert loaded.results == run.results
        assert [why.pct_of_tcp for why in loaded.explanation.rows] == [  # type: ignore[union-attr]
            why.pct_of_tcp for _, why in run.explained_rows()
        ]
        # a database written by the previous version: schema 2 in the run, rows without the fleet's keys
        lab = lab_run()
        old_id = store.begin_run(dict(lab.meta))
        store.save_baseline(old_id, lab.baseline)
        for index, (row, why) in enumerate(lab.explained_rows()):
            row_doc = row.to_json(why)
            del row_doc["client_host"], row_doc["aggregate"]
            store.db.execute(
                "INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (old_id, index, row.protocol, row.client, row.direction, row.file_set, row.median_bytes_per_s,
                 json.dumps(row_doc)),
            )  # fmt: skip
        store.db.execute("UPDATE runs SET schema = 2 WHERE id = ?", (old_id,))
        store.db.commit()
        old = store.load(old_id)
    assert old.results == lab.results
    assert_valid_run_document(_doc(old))


# ---------------------------------------------------------------- the terminal
def test_the_default_table_folds_each_clients_rows_into_the_aggregate_rows_note() -> None:
    run = fleet_run()
    text = _render(run, 200)
    assert max(len(line) for line in text.splitlines()) <= NARROW_WIDTH
    rows = _rows(text)
    notes = _footnotes(text)
    clients = [cells[0] for cells in rows]
    # one line per aggregate row and per raw-TCP direction, plus the failed client's own line: nothing else
    assert clients.count("raw TCP ×3") == 2
    assert not any(re.search(r"@c[13]\b", c) for c in clients)  # healthy clients' rows are folded away
    assert len(rows) == 2 + len(_aggregates(run)) + 1
    for aggregate in _aggregates(run):
        line = next(
            cells
            for cells in rows
            if cells[0] == f"{aggregate.label} ×{len(FLEET_CLIENTS)}"
            and cells[1] == {"upload": "up", "download": "down"}[aggregate.direction]
        )
        note = notes[line[-1]]
        members = _members(run, aggregate)
        figures = " · ".join(
            f"{m.client_host} {mb(m.median_bytes_per_s) if m.median_bytes_per_s else 'failed'}" for m in members
        )
        assert f"per client MB/s: {figures}" in note
        assert len(members) == len(FLEET_CLIENTS) and figures.count(" · ") == len(FLEET_CLIENTS) - 1
        figures_of = aggregate.aggregate or {}
        assert f"Jain {figures_of['jain_index']:.2f}" in note
        first, last = statistics.median(figures_of["first_done_s"]), statistics.median(figures_of["last_done_s"])
        assert f"first done {first:.1f} s · last done {last:.1f} s" in note
        assert line[3] == f"{aggregate.median_bytes_per_s * 8 / 1e6:,.0f}"  # type: ignore[operator]
    # the raw TCP measured by each client alone, folded into the all-at-once line
    alone = run.meta["fleet"]["baselines"]
    up = next(cells for cells in rows if cells[:2] == ["raw TCP ×3", "up"])
    expected = " · ".join(f"{h} {mb(alone[h]['up_bytes_per_s'])}" for h in FLEET_CLIENTS)
    assert f"alone MB/s: {expected}" in notes[up[-1]]


def test_a_failed_clients_row_stays_in_sight_with_its_error() -> None:
    run = fleet_run()
    rows = _rows(_render(run, 200))
    notes = _footnotes(_render(run, 200))
    failed = [cells for cells in rows if cells[0] == "sftp/openssh @c2"]
    assert len(failed) == 1 and failed[0][-2] == "failed"
    assert notes[failed[0][-1]] == FLEET_FAILURE
    # a client's copy that did not verify is not folded away either
    mismatched = [
        dataclasses.replace(r, samples=(Sample(r.bytes, 1.0, verified=False), *r.samples[1:]))
        if (r.client_host, r.protocol, r.direction) == ("c3", "http", "download")
        else r
        for r in run.results
    ]
    rows = _rows(_render(dataclasses.replace(run, results=tuple(mismatched)), 200))
    assert [cells[-2] for cells in rows if cells[0] == "http/aiohttp @c3"] == ["MISMATCH"]


def test_wide_shows_every_row_with_a_host_column() -> None:
    run = fleet_run()
    text = _render(run, 400, wide=True)
    header = next(line for line in text.splitlines() if line.startswith("┃"))
    names = [c.strip() for c in header.split("┃")[1:-1]]
    assert names == ["client", "host", *[name for name, _ in COLUMNS[1:]]]
    rows = _rows(text)
    lines = summary_rows(run)
    assert len(rows) == len(lines) == 2 * (1 + len(FLEET_CLIENTS)) + len(run.results)
    body = [cells[1] for cells in rows[2 * (1 + len(FLEET_CLIENTS)) :]]
    assert body == [r.client_host for r in run.results]
    assert [cells[1] for cells in rows if cells[0] == "raw TCP"] == [*FLEET_CLIENTS, *FLEET_CLIENTS]


# ---------------------------------------------------------------- Markdown, CSV, HTML
def _markdown_rows(text: str) -> list[list[str]]:
    table = [line for line in text.splitlines() if line.startswith("|")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in table]


def test_markdown_and_csv_carry_a_host_column_and_every_row() -> None:
    run = fleet_run()
    lines = summary_rows(run)
    header, _, *body = _markdown_rows(markdown(run))
    assert header[:2] == ["client", "host"] and len(header) == len(COLUMNS) + 1
    assert len(body) == len(lines)
    assert [cells[1] for cells in body] == [line.host for line in lines]
    assert [cells[1] for cells in body if not cells[0].startswith("raw TCP")] == [r.client_host for r in run.results]

    reader = csv.DictReader(io.StringIO(csv_text(run), newline=""))
    assert tuple(reader.fieldnames or ()) == FLEET_CSV_COLUMNS and FLEET_CSV_COLUMNS[-1] == "host"
    records = list(reader)
    assert len(records) == len(lines)
    rows = [r for r in records if r["kind"] == "row"]
    assert [r["host"] for r in rows] == [r.client_host for r in run.results]
    alone = run.meta["fleet"]["baselines"]
    for record, row in zip(rows, run.results, strict=True):
        # a client's row compares with its own raw TCP alone, an aggregate row with the clients' at once
        base = run.baseline.to_json() if row.client_host == "all" else alone[row.client_host]
        key = "up_bytes_per_s" if row.direction == "upload" else "down_bytes_per_s"
        assert float(record["raw_tcp_bytes_per_s"]) == base[key]
    raw = [(r["host"], r["direction"], float(r["median_bytes_per_s"])) for r in records if r["kind"] == "raw-tcp"]
    assert ("all", "upload", run.baseline.up_bytes_per_s) in raw
    assert all((h, "download", alone[h]["down_bytes_per_s"]) in raw for h in FLEET_CLIENTS)
    failed = next(r for r in rows if r["host"] == "c2" and r["protocol"] == "sftp")
    assert failed["status"] == "failed" and failed["error"] == FLEET_FAILURE


def test_the_html_page_has_a_host_column_and_every_row() -> None:
    run = fleet_run()
    page = render_html(run)
    table = page.split('<table class="summary">', 1)[1].split("</table>", 1)[0]
    assert '<th scope="col">host</th>' in table
    assert table.count("<tr") - table.count('class="group"') - 1 == len(summary_rows(run))  # less the header
    lines = summary_rows(run)
    for host in ("all", *FLEET_CLIENTS):  # the host cell of every line
        assert table.count(f"<td>{host}</td>") == sum(1 for line in lines if line.host == host) > 0
    assert FLEET_FAILURE in table


@pytest.mark.parametrize("make", [lab_run, stock_run], ids=["lab", "stock"])
def test_a_run_that_is_no_fleet_has_no_host_column_anywhere(make: Any) -> None:
    run = make()
    assert not any(line.host or line.folded or line.per_client for line in summary_rows(run))
    header, *_ = _markdown_rows(markdown(run))
    assert header == [name for name, _ in COLUMNS]
    assert csv_text(run).splitlines()[0] == ",".join(CSV_COLUMNS)
    wide = next(line for line in _render(run, 400, wide=True).splitlines() if line.startswith("┃"))
    assert "host" not in [c.strip() for c in wide.split("┃")]
    assert '<th scope="col">host</th>' not in render_html(run)


def test_the_html_plots_tell_each_client_host_apart() -> None:
    import re

    page = render_html(fleet_run())
    ids = set(re.findall(r'id="wb-spread-copies-([^"]+)"', page))
    # one series per host and one for the aggregate, not every host's copies drawn on one client's line
    for host in ("c1", "c2", "c3"):
        assert f"download-http-aiohttp-{host}-16M" in ids, ids
    assert "download-http-aiohttp-3-16M" in ids, ids

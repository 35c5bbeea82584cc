"""The run's summary on the terminal (workbench.cli.run_table via render_run): the verdict first, a table that
fits 120 columns with its notes as numbered footnotes under it, grouped by protocol; `wide` shows it all inline."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from workbench.cli.report import render_run
from workbench.cli.run_table import DROP_ORDER, NARROW_WIDTH, footnotes, grouped
from workbench.cli.summary import COLUMNS, summary_rows
from workbench.core.results import Baseline, Explanation, Result, RowExplanation, Run, Sample
from workbench.core.store import Store
from workbench.protocols.details import ClientDetails

SSH = ClientDetails(
    request_bytes=32768, requests_in_flight=64, cipher="aes128-gcm@openssh.com", timed_includes_setup=True
)
SMB = ClientDetails(request_bytes=65536, requests_in_flight=1, dialect="3.1.1")
LONG = (
    "the sender's TCP counters say application (app 97 %); no ceiling explains the rate; this note is long enough "
    "that it would fold a 120-column table's row over several lines"
)
VERDICT = ("Raw TCP reached 500 Mbit/s up and 501 Mbit/s down at 2.80 ms RTT.", "smb/pysmb is bound by requests.")


def _row(protocol: str, client: str, direction: str, file_set: str, mb_per_s: float, **kw: object) -> Result:
    size = 16_000_000
    samples = [Sample(bytes=size, seconds=size / (mb_per_s * f * 1e6), verified=True) for f in (0.9, 1.0, 1.05)]
    return Result(protocol, client, direction, file_set, size, 1, samples=samples, **kw)  # type: ignore[arg-type]


def _run() -> Run:
    """Three protocols whose rows interleave in the run's order, long notes, shared notes, a failed, an
    unavailable and a mismatched row."""
    rows: list[tuple[Result, RowExplanation]] = []
    why = RowExplanation(pct_of_tcp=80.0, bound="raw-tcp", ceiling_bytes_per_s=62.6e6)
    for direction in ("upload", "download"):
        for file_set in ("16M", "128M", "100x64K"):
            rows.append((_row("http", "aiohttp", direction, file_set, 59.1), why))
            rows.append((_row("sftp", "openssh", direction, file_set, 24.5, details=SSH), why))
            rows.append((_row("smb", "pysmb", direction, file_set, 16.1, details=SMB), why))
    long_why = RowExplanation(pct_of_tcp=14.0, bound="unexplained", ceiling_bytes_per_s=13e6, triage_note=LONG)
    rows.append((_row("http", "curl", "upload", "100x64K", 8.7, details=SSH), long_why))
    failed = Result("sftp", "paramiko", "upload", "16M", 16_000_000, 1, error="connection refused by 10.0.0.2:22")
    rows.append((failed, RowExplanation()))
    gone = Result("smb", "mount_smbfs", "upload", "-", 0, 0, error="unavailable: mount_smbfs is macOS only")
    rows.append((gone, RowExplanation()))
    bad = Sample(bytes=16_000_000, seconds=1.0, verified=False)
    rows.append((Result("http", "curl", "download", "16M", 16_000_000, 1, samples=(bad,)), why))
    return Run(
        id=7,
        meta={},
        baseline=Baseline(up_bytes_per_s=62.6e6, down_bytes_per_s=62.6e6, rtt_ms=2.8, iperf3_up_bytes_per_s=62.5e6),
        results=tuple(r for r, _ in rows),
        explanation=Explanation(rows=tuple(w for _, w in rows), verdict=VERDICT),
        warnings=("a run-level note",),
    )


def _render(run: Run, width: int, wide: bool = False, colour: bool = False) -> str:
    out = StringIO()
    console = Console(file=out, width=width, force_terminal=colour, color_system="standard" if colour else None)
    render_run(console, run, wide=wide)
    return out.getvalue()


def _rows(text: str) -> list[list[str]]:
    """The table's body rows, as cells (a row folded over two lines would show as a line with an empty client)."""
    return [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]


def test_the_default_table_fits_120_columns_one_line_per_row_with_numbered_footnotes() -> None:
    run = _run()
    text = _render(run, 200)  # a log piped at 200 columns reads as a 120-column terminal does
    lines = text.splitlines()
    assert NARROW_WIDTH == 120 and max(len(line) for line in lines) <= 120, max(lines, key=len)
    rows = _rows(text)
    expected = summary_rows(run)
    assert len(rows) == len(expected) == 2 + 18 + 4  # each row exactly one line: no continuation lines
    assert all(cells[0] for cells in rows)
    header = next(line for line in lines if line.startswith("┃"))
    assert [c.strip() for c in header.split("┃")[1:-1]] == [
        "client", "dir", "set", "Mbit/s", "±σ", "% TCP", "bound Mbit/s", "TCP limit", "verified", "note",
    ]  # fmt: skip
    assert "MB/s" not in [c.strip() for c in header.split("┃")] and "files/s" not in header
    by_client = {(r[0], r[1], r[2]): r for r in rows}
    aiohttp = by_client[("http/aiohttp", "up", "16M")]
    stdev = run.results[0].summary.relative_stdev  # type: ignore[union-attr]
    assert aiohttp[3] == f"{59.1 * 8:,.0f}" and aiohttp[4] == f"±{stdev * 100:.0f}%" != "±0%"
    assert aiohttp[-1] == ""  # no notes: no mark
    # the footnotes: under the table, numbered from 1 in the order the rows come, each text once
    bottom = next(i for i, line in enumerate(lines) if line.startswith("└"))
    listed = [re.match(r"\s*\[(\d+)\] (.*)", line) for line in lines[bottom + 1 :]]
    numbers = [int(m.group(1)) for m in listed if m]
    marks = [cells[-1] for cells in rows if cells[-1]]
    assert numbers == list(range(1, len(numbers) + 1)) and numbers
    assert sorted({int(m.strip("[]")) for m in marks}) == numbers  # every footnote is referred to
    below = " ".join(" ".join(lines[bottom + 1 :]).split())
    assert " ".join(LONG.split()) in below and "iperf3 62.5 MB/s" in below
    assert "connection refused by 10.0.0.2:22" in below and "unavailable: mount_smbfs is macOS only" in below
    assert LONG[:40] not in "\n".join(lines[: bottom + 1])  # not in the table
    # identical notes share one number: sftp/openssh's six rows all say the same
    openssh = {cells[-1] for cells in rows if cells[0] == "sftp/openssh"}
    assert len(openssh) == 1 and openssh != {""}
    assert len(numbers) == len({"; ".join(line.notes) for line in expected if line.notes})


def test_the_rows_are_grouped_by_protocol_with_a_rule_between_groups() -> None:
    text = _render(_run(), 120)
    lines = text.splitlines()
    table = lines[next(i for i, ln in enumerate(lines) if ln.startswith("┏")) :]
    rules = [i for i, line in enumerate(table) if line.startswith("├")]
    assert len(rules) == 3  # raw TCP | http | sftp | smb
    clients = [line.split("│")[1].strip() for line in table if line.startswith("│")]
    groups = []
    for client in clients:
        group = "raw TCP" if client == "raw TCP" else client.split("/")[0]
        if not groups or groups[-1] != group:
            groups.append(group)
    assert groups == ["raw TCP", "http", "sftp", "smb"]  # each protocol once, in the order it first ran
    # each rule sits where the protocol changes
    body = [line for line in table if line.startswith(("│", "├"))]
    for i, line in enumerate(body):
        if line.startswith("├"):
            before, after = body[i - 1].split("│")[1].strip(), body[i + 1].split("│")[1].strip()
            assert before.split("/")[0] != after.split("/")[0], (before, after)
    # within a group, the run's order: http/aiohttp's rows, then curl's upload then download
    http = [c for c in clients if c.startswith("http/")]
    assert http == ["http/aiohttp"] * 6 + ["http/curl"] * 2


def test_the_verdict_comes_before_the_table_and_the_notes_after_it() -> None:
    text = _render(_run(), 120)
    verdict, top, bottom = text.index("verdict:"), text.index("┏"), text.index("└")
    assert verdict < top < bottom < text.index("note: a run-level note")
    assert "smb/pysmb is bound by requests." in " ".join(text[verdict:top].split())


def test_wide_shows_every_column_and_the_notes_inline() -> None:
    run = _run()
    text = _render(run, 400, wide=True)
    header = next(line for line in text.splitlines() if line.startswith("┃"))
    assert [c.strip() for c in header.split("┃")[1:-1]] == [name for name, _ in COLUMNS]
    assert {"MB/s", "min–max σ", "files/s", "notes"} <= {name for name, _ in COLUMNS}
    rows = _rows(text)
    curl = next(r for r in rows if r[:3] == ["http/curl", "up", "100x64K"])
    assert LONG in curl[-1] and curl[3] == "8.7"
    assert not re.search(r"^\s*\[\d+\] ", text, re.MULTILINE)  # no footnotes
    assert max(len(line) for line in text.splitlines()) > NARROW_WIDTH  # the console's width, not 120
    assert text.count("├") == 3


def test_a_narrower_console_hides_the_diagnosis_columns_first_and_keeps_one_line_per_row() -> None:
    run = _run()
    text = _render(run, 80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = _rows(text)
    assert len(rows) == len(summary_rows(run)) and all(cells[0] for cells in rows)
    header = [c.strip() for c in next(line for line in lines if line.startswith("┃")).split("┃")[1:-1]]
    hidden = [name for name in DROP_ORDER if name not in header]
    # the diagnosis goes first; the rate, its spread and share of raw TCP and the status stay
    assert hidden == ["TCP limit", "bound Mbit/s"] == list(DROP_ORDER[:2])
    assert header == ["client", "dir", "set", "Mbit/s", "±σ", "% TCP", "verified", "note"]
    assert f"hidden at 80 columns: {', '.join(hidden)}" in text


def test_status_colours_and_dimmed_unavailable_rows_are_kept() -> None:
    text = _render(_run(), 120, colour=True)
    assert "\x1b[31mMISMATCH" in text and "\x1b[31mfailed" in text and "\x1b[32mok" in text
    unavailable = next(line for line in text.splitlines() if "mount_smbfs" in line)
    assert "\x1b[2m" in unavailable  # dimmed


def test_footnotes_grouping_and_spread_as_pure_logic() -> None:
    lines = summary_rows(_run())
    marks, texts = footnotes(lines)
    assert len(marks) == len(lines) and len(texts) == len(set(texts))
    for line, mark in zip(lines, marks, strict=True):
        assert (mark == "") == (not line.notes)
        if mark:
            assert texts[int(mark.strip("[]")) - 1] == "; ".join(line.notes)
    groups = grouped(lines)
    assert [g[0].group for g in groups] == ["raw TCP", "http", "sftp", "smb"]
    assert [line for g in groups for line in g if line.group == "smb"] == [x for x in lines if x.group == "smb"]
    for line in lines:  # the σ and the ceiling in Mbit/s say what the wide table's cells say
        if line.baseline:
            assert line.sigma == "" and line.bound_mbit == ""
        elif line.spread != "—":
            assert line.spread.endswith(f"σ{line.sigma[1:]}") or (line.sigma == "—" and "σ" not in line.spread)
        if line.bound not in ("", "—") and not line.bound.startswith("unexpl."):
            name, mb_per_s = line.bound.rsplit(" ", 1)
            bound_name, mbit_per_s = line.bound_mbit.rsplit(" ", 1)
            assert bound_name == name
            assert float(mbit_per_s.replace(",", "")) == pytest.approx(8 * float(mb_per_s.replace(",", "")), abs=8)


def test_report_draws_the_120_column_table_and_wide_draws_it_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from workbench.cli import app as cli

    run = _run()
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:
        run_id = store.begin_run({"started_utc": "2026-11-25T00:00:00Z"})
        store.save_baseline(run_id, run.baseline)
        for index, (row, why) in enumerate(run.explained_rows()):
            store.save_result(run_id, index, row, why)
        store.finish_run(run_id, "2026-11-25T00:01:00Z", [], verdict=list(VERDICT))
    shown: dict[bool, str] = {}
    for wide in (False, True):
        out = StringIO()
        monkeypatch.setattr(cli, "out", Console(file=out, width=200, color_system=None))
        args = ["report", str(run_id), "--db", str(db), *(["--wide"] if wide else [])]
        result = CliRunner().invoke(cli.app, args)
        assert result.exit_code == 0, result.output
        shown[wide] = out.getvalue()
    narrow, wide_text = shown[False], shown[True]
    assert max(len(line) for line in narrow.splitlines()) <= 120 and "files/s" not in narrow
    assert re.search(r"^\[1\] ", narrow, re.MULTILINE) and LONG[:60] not in narrow.split("└")[0]
    assert "files/s" in wide_text and not re.search(r"^\s*\[1\] ", wide_text, re.MULTILINE)
    assert narrow.index("verdict:") < narrow.index("┏") and wide_text.index("verdict:") < wide_text.index("┏")

"""A run whose every outside word is hostile (label, host names, client names, file sets, errors, warnings, the
baseline's error, the server's URL, the verdict built from them) rendered everywhere a run is shown: the terminal
(report, --wide, the table, the verdict, history), Markdown, CSV, JSON and the HTML page, in process and through
the real `workbench report` / `history` commands. No renderer fails, no control code reaches the terminal, no
markup is interpreted (the words show as typed), no CSV cell is a formula, the Markdown table keeps its columns,
the HTML is escaped. The run itself keeps the words as they came."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tests.markdown_check import assert_no_markdown_from_data
from tests.synthetic_runs import fleet_run, lab_run, stock_run
from workbench.cli.export_csv import csv_columns, csv_text
from workbench.cli.export_html import render_html
from workbench.cli.export_markdown import markdown
from workbench.cli.report import render_history, render_run
from workbench.cli.summary import summary_rows, table_columns
from workbench.core.explain import explain
from workbench.core.results import Run
from workbench.core.store import RunSummary, Store

REPO = Path(__file__).resolve().parents[2]
OSC52 = "\x1b]52;c;aGVsbG8=\x07"
CLEAR = "\x1b[2J"
MARKUP = "[/] [link=http://x]click[/link] [bold]B"
# Every class of attack in one string: markup, control sequences, a formula, a pipe and a newline (structure),
# mathtext, HTML, an emoji code, a bidi override.
HOSTILE = f"{MARKUP} {OSC52}{CLEAR} | two\nlines $x^2$ $\\undefinedcmd$ <script>alert(1)</script> :warning: \u202eRLO"
FORMULAS = ('=HYPERLINK("http://x","y")', "+1", "@SUM(A1:A9)", "-2+3")
# What a terminal would act on: ESC, BEL, any C0 but newline, DEL, C1, bidi overrides.
ACTED_ON = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _hostile(run: Run, host: str) -> Run:
    """`run` with every outside word hostile: rows' clients, file sets and errors, host names, warnings, the
    baseline's error, the server's URL; explained again so that the verdict quotes them."""
    rows = []
    for index, row in enumerate(run.results):
        words = FORMULAS[index % len(FORMULAS)]
        hostile_host = f"@h{index}|{MARKUP}" if row.client_host and row.client_host != "all" else row.client_host
        rows.append(
            dataclasses.replace(
                row,
                client=f"{words} {HOSTILE}" if index % 2 == 0 else f"{row.client}{MARKUP}$x^2$",
                file_set=row.file_set if row.file_set == "-" else f"{row.file_set}{MARKUP}",
                error=f"{words} {HOSTILE}" if row.error else None,
                client_host=hostile_host,
            )
        )
    meta = dict(run.meta)
    meta["client"] = {**(meta.get("client") or {}), "hostname": f"=cmd|{HOSTILE}"}
    meta["server"] = {**(meta.get("server") or {}), "hostname": f"+srv {HOSTILE}", "url": f"ftp://h/{HOSTILE}"}
    if meta.get("fleet"):
        fleet = dict(meta["fleet"])
        fleet["clients"] = [f"@c{i}|{MARKUP}" for i, _ in enumerate(fleet.get("clients") or ())]
        meta["fleet"] = fleet
    base = dataclasses.replace(run.baseline, error=f"iperf3 at [fd00::5]:5201 failed: {HOSTILE}")
    changed = Run(
        run.id,
        meta,
        base,
        results=tuple(rows),
        link=run.link,
        window_sweep=run.window_sweep,
        warnings=(*run.warnings, f"-1+1 {HOSTILE}", f"@warning {OSC52}"),
    )
    if run.explanation is None:
        return changed
    return changed.explained(explain(changed, host))


RUNS = {
    "lab": lambda: _hostile(lab_run(), "10.77.0.2"),
    "stock": lambda: _hostile(stock_run(), "nas.local"),
    "fleet": lambda: _hostile(fleet_run(), "10.77.0.2"),
}


def _console(width: int = 4000) -> tuple[Console, io.StringIO]:
    """The console the commands print with (its emoji, markup and highlighting as they are), into a buffer: a
    console of the test's own making would pass whatever the app's does."""
    from workbench.cli.app import _console as app_console

    out = io.StringIO()
    console = app_console(stderr=False)
    console.file = out
    console.width = width
    return console, out


def _assert_safe_terminal(text: str) -> None:
    assert not ACTED_ON.search(text), repr(ACTED_ON.search(text))
    assert "52;c;" not in text and "[2J" not in text


@pytest.mark.parametrize("name", list(RUNS))
@pytest.mark.parametrize("wide", [False, True])
def test_terminal_report_prints_the_words_as_typed_and_no_control_code(name: str, wide: bool) -> None:
    run = RUNS[name]()
    console, out = _console()
    render_run(console, run, wide=wide)
    text = out.getvalue()
    _assert_safe_terminal(text)
    assert "[link=http://x]click[/link]" in text and "[/]" in text and "[bold]B" in text  # not interpreted
    assert "iperf3 at [fd00::5]:5201 failed" in text
    assert ":warning:" in text and "<script>" in text
    assert "$x^2$" in text
    said = run.explanation.verdict if run.explanation else ()
    if any("[link=" in sentence for sentence in said):
        assert "verdict:" in text


@pytest.mark.parametrize("name", list(RUNS))
def test_the_default_table_at_80_columns_folds_but_stays_safe(name: str) -> None:
    console, out = _console(width=80)
    render_run(console, RUNS[name]())
    _assert_safe_terminal(out.getvalue())


def test_history_prints_a_hostile_label_as_typed() -> None:
    console, out = _console()
    label = f"x [/] y {MARKUP} {OSC52}{CLEAR}"
    render_history(console, [RunSummary(7, "2026-11-26T08:00:00Z", label, 3, True)])
    text = out.getvalue()
    _assert_safe_terminal(text)
    assert "x [/] y [/] [link=http://x]click[/link] [bold]B" in text


def _md_cells(line: str) -> list[str]:
    return re.split(r"(?<!\\)\|", line)[1:-1]


@pytest.mark.parametrize("name", list(RUNS))
def test_markdown_keeps_its_structure(name: str) -> None:
    run = RUNS[name]()
    text = markdown(run)
    assert not ACTED_ON.search(text.replace("\n", ""))
    assert "\nlines" not in text
    assert_no_markdown_from_data(text)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = [line for line in lines[start:] if line.startswith("|")][: 2 + len(summary_rows(run))]
    width = len(table_columns(summary_rows(run)))
    assert [len(_md_cells(line)) for line in table] == [width] * len(table)
    context = lines[1:start]
    assert all(line == "" or line.startswith(("- ", "**Verdict:**")) for line in context), context
    notes = lines[lines.index("Notes:") + 2 :] if "Notes:" in lines else []
    assert notes and all(line.startswith("- ") for line in notes if line), notes


@pytest.mark.parametrize("name", list(RUNS))
def test_csv_cells_are_never_formulas_and_numbers_stay_numbers(name: str) -> None:
    run = RUNS[name]()
    records = list(csv.DictReader(io.StringIO(csv_text(run), newline="")))
    assert records and tuple(records[0]) == csv_columns(run)
    for record in records:
        for column, cell in record.items():
            assert not ACTED_ON.search(cell.replace("\n", "").replace("\t", "")), (column, cell)
            if cell[:1] in ("=", "+", "@", "\t", "\r"):
                pytest.fail(f"{column}: {cell!r} would be a formula")
            if cell.startswith("-") and cell != "-":
                float(cell)  # a negative number, nothing else
    clients = {r["client"] for r in records}
    assert any(c.startswith("'=HYPERLINK(") for c in clients) or any(c.startswith("'+1 ") for c in clients)
    numbers = [r["median_bytes_per_s"] for r in records if r["median_bytes_per_s"]]
    assert numbers and all(float(n) > 0 for n in numbers)


@pytest.mark.parametrize("name", list(RUNS))
def test_json_keeps_the_words_as_they_came(name: str) -> None:
    run = RUNS[name]()
    doc = json.loads(json.dumps(run.to_json()))
    assert HOSTILE in json.dumps(doc, ensure_ascii=False) or HOSTILE in "".join(doc.get("warnings", ()))
    assert "\x1b" not in json.dumps(doc)  # JSON escapes control characters itself


@pytest.mark.parametrize("name", list(RUNS))
def test_html_page_is_escaped_and_draws_its_plots(name: str) -> None:
    run = RUNS[name]()
    page = render_html(run)
    assert "<script" not in page and "&lt;script&gt;" in page
    assert not ACTED_ON.search(page.replace("\n", "").replace("\t", ""))
    assert "[link=http://x]click[/link]" in page
    if name != "stock":  # a stock run's rows have no intervals to plot over time, but every run has a spread plot
        assert "<svg" in page
    assert "$x^2$" in page  # as text in the plots and the table, never drawn as math


def _store(db: Path, run: Run, label: str) -> int:
    with Store(db) as store:
        run_id = store.begin_run(dict(run.meta), label=label)
        store.save_baseline(run_id, run.baseline)
        store.save_extra(run_id, dict(run.link or {}), [dict(p) for p in run.window_sweep or ()])
        for idx, (row, why) in enumerate(run.explained_rows()):
            store.save_result(run_id, idx, row, why)
        verdict = list(run.explanation.verdict) if run.explanation else None
        store.finish_run(run_id, "2026-11-26T09:00:00Z", list(run.warnings), verdict=verdict)
    return run_id


def _workbench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_report_and_history_commands_on_a_stored_hostile_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    label = f"x [/] y {OSC52}{CLEAR}"
    run_id = _store(db, RUNS["lab"](), label)
    for _ in range(2):  # every later call too
        history = _workbench(tmp_path, "history", "--db", str(db))
        assert history.returncode == 0, history.stderr
        _assert_safe_terminal(history.stdout + history.stderr)
        assert "x [/] y" in history.stdout
    files = {ext: tmp_path / f"run.{ext}" for ext in ("md", "csv", "json", "html")}
    report = _workbench(
        tmp_path,
        "report",
        str(run_id),
        "--db",
        str(db),
        "--wide",
        *("--markdown", str(files["md"]), "--csv", str(files["csv"])),
        *("--json", str(files["json"]), "--html", str(files["html"])),
    )
    assert report.returncode == 0, report.stderr
    assert report.stderr == "" and "Traceback" not in report.stdout
    _assert_safe_terminal(report.stdout)
    assert "[link=http://x]click[/link]" in report.stdout and "iperf3 at [fd00::5]:5201 failed" in report.stdout
    assert "<script" not in files["html"].read_text(encoding="utf-8")
    assert f"@warning {OSC52}" in json.loads(files["json"].read_text())["warnings"]  # stored as it came
    assert "\n'=cmd" not in files["csv"].read_text(encoding="utf-8")

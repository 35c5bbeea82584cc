"""`--markdown FILE` and `--csv FILE` through the real command: `run` against `workbench serve` writes them
beside the JSON document, from the same run; `report ID` writes them for a run stored in a results database;
a bad output path is refused in one line before anything is written."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.schema_check import assert_valid_run_document
from tests.serve_fixtures import ServeRunner
from tests.synthetic_runs import lab_run
from workbench.cli.export_csv import CSV_COLUMNS, csv_text
from workbench.cli.export_markdown import markdown
from workbench.cli.summary import summary_rows
from workbench.core.results import Run
from workbench.core.store import Store
from workbench.shared.errors import ExitCode

REPO = Path(__file__).resolve().parents[2]


def _workbench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args], capture_output=True, text=True, env=env, timeout=60
    )


def _store(db: Path, run: Run) -> int:
    """Save `run` as the runner saves one (meta, baseline, the lab's link and sweep, rows, warnings, verdict)."""
    with Store(db) as store:
        run_id = store.begin_run(dict(run.meta), label="exports")
        store.save_baseline(run_id, run.baseline)
        store.save_extra(run_id, dict(run.link or {}), [dict(p) for p in run.window_sweep or ()])
        for idx, (row, why) in enumerate(run.explained_rows()):
            store.save_result(run_id, idx, row, why)
        verdict = list(run.explanation.verdict) if run.explanation else None
        store.finish_run(run_id, str(run.meta["finished_utc"]), list(run.warnings), verdict=verdict)
    return run_id


def test_report_writes_the_markdown_and_the_csv_of_a_stored_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = _store(db, lab_run(run_id=None))
    md, table, doc = tmp_path / "run.md", tmp_path / "run.csv", tmp_path / "run.json"
    proc = _workbench(
        tmp_path, "report", str(run_id), "--db", str(db), "--markdown", str(md), "--csv", str(table), "--json", str(doc)
    )
    assert proc.returncode == 0, proc.stderr
    assert f"Markdown: {md}" in proc.stdout and f"CSV: {table}" in proc.stdout
    with Store(db) as store:
        stored = store.load(run_id)
    assert stored.link and stored.window_sweep  # the lab's parts came back from the database
    assert md.read_text(encoding="utf-8") == markdown(stored)
    assert f"### workbench run {run_id} — " in md.read_text(encoding="utf-8")
    with open(table, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        records = list(reader)
    assert tuple(reader.fieldnames or ()) == CSV_COLUMNS
    assert len(records) == len(summary_rows(stored)) == 7 and {r["run_id"] for r in records} == {str(run_id)}
    assert float(records[2]["median_bytes_per_s"]) == stored.results[0].median_bytes_per_s
    assert_valid_run_document(json.loads(doc.read_text()))


def test_a_bad_output_path_fails_in_one_line_before_anything_is_written(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    run_id = _store(db, lab_run(run_id=None))
    md = tmp_path / "run.md"
    missing = tmp_path / "no-such-dir" / "run.csv"
    proc = _workbench(tmp_path, "report", str(run_id), "--db", str(db), "--markdown", str(md), "--csv", str(missing))
    assert proc.returncode == ExitCode.NOT_FOUND, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --csv: directory ") and "does not exist" in lines[0], lines
    assert "Traceback" not in proc.stderr and proc.stdout == ""  # refused before the table, too
    assert not md.exists() and not missing.parent.exists()
    # two flags naming one file: refused the same way
    proc = _workbench(tmp_path, "report", str(run_id), "--db", str(db), "--markdown", str(md), "--csv", str(md))
    assert proc.returncode == ExitCode.USAGE, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--markdown and --csv name the same file" in lines[0], lines
    assert not md.exists()


def test_run_writes_the_json_markdown_and_csv_of_one_run(served: ServeRunner, tmp_path: Path) -> None:
    doc, md, table = tmp_path / "run.json", tmp_path / "run.md", tmp_path / "run.csv"
    state = served.ctx.state_dir
    proc = _workbench(
        tmp_path, "run", "--target", str(state / "target.json"), "--credentials", str(state / "credentials.json"),
        "--protocols", "http/aiohttp", "--sizes", "1M", "--repeat", "1", "--warmup", "0",
        "--tcp-duration", "1", "--files", str(tmp_path / "files"), "--db", str(tmp_path / "runs.sqlite"),
        "--json", str(doc), "--markdown", str(md), "--csv", str(table),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    for line in (f"JSON document: {doc}", f"Markdown: {md}", f"CSV: {table}"):
        assert line in proc.stdout, proc.stdout[-2000:]
    written = json.loads(doc.read_text())
    assert_valid_run_document(written)
    run = Run.from_json(written)
    assert [(r.label, r.direction) for r in run.results] == [("http/aiohttp", "upload"), ("http/aiohttp", "download")]
    # the three files say the same run: the Markdown and the CSV are what that JSON document renders
    assert md.read_text(encoding="utf-8") == markdown(run)
    assert table.read_bytes() == csv_text(run).encode("utf-8")
    assert md.read_text(encoding="utf-8").count("| http/aiohttp |") == 2

"""Verification is real: a copy the server corrupted, or one that cannot be checked, never passes as "ok".

Each test runs `workbench run` end to end against a real server with one fault of its own:
- a served host (`workbench serve`, which hashes uploads itself) that flips a byte of a stored upload, that
  sends a download with a byte flipped, or that refuses to hash uploads (tests/tampering_serve.py);
- a stock FTP server (verified by reading each upload back) that flips a byte of a stored upload, or a drop
  box that refuses to send a file back (tests/tampering_ftp.py).

Only files of at least BIG_BYTES are touched, so every run also copies a small-file set that stays intact:
the fault fails exactly the rows it hits, the others verify and are kept, and the run exits ROWS_FAILED (8)
with one line on stderr naming the failed rows (README, "Exit codes").
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import stock_urls
from tests.schema_check import assert_valid_run_document
from tests.serve_fixtures import ServeRunner
from tests.stock_urls import StockSite, run_workbench
from tests.tampering_ftp import CorruptingStockFtp, DropBoxStockFtp
from tests.tampering_serve import TamperingServe
from workbench.shared.errors import ExitCode

REPO = Path(__file__).resolve().parents[2]
# One set of one file big enough to be tampered with, one set of small files that never is.
SETS = ("--sizes", "1M", "--small", "4x4K", "--repeat", "1", "--warmup", "0")
BIG, SMALL = "1M", "4x4K"
HTTP_CLIENTS = ("aiohttp", "curl")


@pytest.fixture
def tampering(tmp_path: Path) -> Iterator[Any]:
    """Start `workbench serve` with the fault its argument names (tests/tampering_serve.py MODES)."""
    runners: list[ServeRunner] = []

    def start(mode: str) -> ServeRunner:
        base = tmp_path / f"serve-{mode}"
        base.mkdir()
        runner = ServeRunner(base)
        runner.server = TamperingServe(runner.ctx, mode)
        runner.ensure()
        runners.append(runner)
        return runner

    try:
        yield start
    finally:
        for runner in runners:
            runner.stop()


def _run_served(runner: ServeRunner, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "220"}
    env.pop("WORKBENCH_PASSWORD", None)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    argv = [sys.executable, "-m", "workbench", "run", "--target", str(runner.ctx.state_dir / "target.json")]
    argv += ["--credentials", str(runner.ctx.state_dir / "credentials.json"), "--tcp-duration", "0.5"]
    argv += ["--skip-iperf3"]  # no figure of iperf3 is read
    argv += [*SETS, "--files", str(tmp_path / "files"), *_outputs(tmp_path), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240)
    return proc, _rows(proc, tmp_path)


def _outputs(tmp_path: Path) -> tuple[str, ...]:
    return ("--json", str(tmp_path / "run.json"), "--csv", str(tmp_path / "run.csv"))


def _rows(proc: subprocess.CompletedProcess, tmp_path: Path) -> dict[tuple[str, str, str], dict]:
    """The JSON document's rows by (label, direction, set), each with the table's `status` word from the CSV."""
    doc_path = tmp_path / "run.json"
    assert doc_path.exists(), (proc.returncode, proc.stdout[-3000:], proc.stderr)
    doc = json.loads(doc_path.read_text())
    assert_valid_run_document(doc)
    with open(tmp_path / "run.csv", newline="") as fh:
        statuses = {
            (f"{c['protocol']}/{c['client']}", c["direction"], c["file_set"]): c["status"]
            for c in csv.DictReader(fh)
            if c["kind"] == "row"
        }
    rows = {(f"{r['protocol']}/{r['client']}", r["direction"], r["file_set"]): r for r in doc["results"]}
    assert set(statuses) == set(rows), (sorted(statuses), sorted(rows))
    return {key: {**row, "status": statuses[key]} for key, row in rows.items()}


def _assert_rows_failed_exit(proc: subprocess.CompletedProcess, failed: set[str]) -> None:
    """Exit 8, no traceback, and one stderr line naming exactly the failed rows ("label direction")."""
    assert proc.returncode == ExitCode.ROWS_FAILED, (proc.returncode, proc.stdout[-3000:], proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "rows failed or did not verify" in lines[0], proc.stderr
    assert set(lines[0].split(": ", 2)[-1].split(", ")) == failed, lines[0]


def _assert_verified(row: dict) -> None:
    assert row["error"] is None and row["verified"] is True, row
    assert [s["verified"] for s in row["samples"]] == [True], row


def _assert_mismatch(row: dict) -> None:
    """The copy itself went through; its verification found the flipped byte."""
    assert row["verified"] is False and row["status"] == "failed", row
    assert row["error"].startswith("verification failed:") and "hash mismatch" in row["error"], row
    [sample] = row["samples"]
    assert sample["verified"] is False and sample["bytes"] == 1 << 20, sample


def _assert_unverifiable(row: dict, why: str) -> None:
    """The copy went through; its verification could not be done, which is never counted as a pass."""
    assert row["verified"] is False and row["status"] == "failed", row
    assert row["error"].startswith("could not verify ") and why in row["error"], row
    assert [s["verified"] for s in row["samples"]] == [None], row


def test_an_upload_the_served_host_corrupted_fails_its_rows_and_the_rest_verify(tampering, tmp_path: Path) -> None:
    runner = tampering("corrupt-uploads")
    proc, rows = _run_served(runner, tmp_path, "--protocols", "http/aiohttp,http/curl,ftp/ftplib")
    _assert_rows_failed_exit(proc, {f"http/{c} upload" for c in HTTP_CLIENTS})
    assert len(rows) == 3 * 2 * 2, sorted(rows)
    for label, direction, file_set in rows:
        if label.startswith("http/") and direction == "upload" and file_set == BIG:
            _assert_mismatch(rows[(label, direction, file_set)])
        else:
            _assert_verified(rows[(label, direction, file_set)])
    # a copy's wait for a core is read from this process's threads: measured for the clients that copy in it,
    # unknown (not a near-zero) for curl, whose copy waited in a child process
    if Path("/proc/self/schedstat").exists():
        for (label, _, _), row in rows.items():
            waits = [s["client_wait_s"] for s in row["samples"]]
            assert all((w is None) == (label == "http/curl") for w in waits), (label, waits)


def test_a_download_the_served_host_corrupted_fails_its_rows_and_the_rest_verify(tampering, tmp_path: Path) -> None:
    runner = tampering("corrupt-downloads")
    proc, rows = _run_served(runner, tmp_path, "--protocols", "http/aiohttp,http/curl,ftp/ftplib")
    _assert_rows_failed_exit(proc, {f"http/{c} download" for c in HTTP_CLIENTS})
    assert len(rows) == 3 * 2 * 2, sorted(rows)
    for label, direction, file_set in rows:
        if label.startswith("http/") and direction == "download" and file_set == BIG:
            _assert_mismatch(rows[(label, direction, file_set)])
        else:
            _assert_verified(rows[(label, direction, file_set)])
    # the file on the server is intact: the fault was in what it sent
    assert "arrived corrupted" in rows[("http/curl", "download", BIG)]["error"]


def test_uploads_the_served_host_will_not_hash_are_not_verified(tampering, tmp_path: Path) -> None:
    runner = tampering("no-hashes")
    proc, rows = _run_served(runner, tmp_path, "--protocols", "http/aiohttp,ftp/ftplib")
    _assert_rows_failed_exit(proc, {"http/aiohttp upload", "ftp/ftplib upload"})
    assert len(rows) == 2 * 2 * 2, sorted(rows)
    for (_, direction, _), row in rows.items():
        if direction == "upload":
            _assert_unverifiable(row, "HTTP 503")
        else:
            _assert_verified(row)
    assert "did not verify" in proc.stderr


@pytest.fixture
def corrupting_site(site: StockSite, monkeypatch: pytest.MonkeyPatch) -> StockSite:
    monkeypatch.setitem(stock_urls.KINDS, "ftp", (CorruptingStockFtp, "ftp"))
    site.start("ftp")
    return site


def test_an_upload_a_stock_server_corrupted_fails_its_rows_and_the_rest_verify(
    corrupting_site: StockSite, tmp_path: Path
) -> None:
    site = corrupting_site
    proc = run_workbench(
        site, "run", site.url("ftp"), "--protocols", "ftp/ftplib,ftp/curl", *SETS, "--files", str(tmp_path / "f"),
        *_outputs(tmp_path),
    )  # fmt: skip
    _assert_rows_failed_exit(proc, {"ftp/ftplib upload", "ftp/curl upload"})
    rows = _rows(proc, tmp_path)
    assert len(rows) == 2 * 2 * 2, sorted(rows)
    for (_, direction, file_set), row in rows.items():
        if direction == "upload":
            assert row["details"]["verified_by"] == "read back", row["details"]
        if direction == "upload" and file_set == BIG:
            _assert_mismatch(row)
        else:
            _assert_verified(row)
    # the run still removed its scratch directory
    assert [p.name for p in site.root("ftp").iterdir() if p.name.startswith("workbench-")] == []


@pytest.fixture
def drop_box_site(site: StockSite, monkeypatch: pytest.MonkeyPatch) -> StockSite:
    monkeypatch.setitem(stock_urls.KINDS, "ftp", (DropBoxStockFtp, "ftp"))
    site.start("ftp")
    return site


def test_uploads_a_stock_drop_box_will_not_send_back_are_not_verified(drop_box_site: StockSite, tmp_path: Path) -> None:
    site = drop_box_site
    proc = run_workbench(
        site, "run", site.url("ftp"), "--protocols", "ftp/ftplib", "--directions", "upload", *SETS,
        "--files", str(tmp_path / "f"), *_outputs(tmp_path),
    )  # fmt: skip
    _assert_rows_failed_exit(proc, {"ftp/ftplib upload"})
    rows = _rows(proc, tmp_path)
    assert set(rows) == {("ftp/ftplib", "upload", BIG), ("ftp/ftplib", "upload", SMALL)}, sorted(rows)
    for row in rows.values():
        _assert_unverifiable(row, "incoming/")
        assert row["details"]["verified_by"] == "read back", row["details"]
    assert [p.name for p in site.root("ftp").iterdir() if p.name.startswith("workbench-")] == []

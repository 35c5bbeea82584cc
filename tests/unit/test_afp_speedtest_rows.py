"""netatalk's afp_speedtest as a reference row: its output parsed into figures, and a row of its own data that
says "not verifiable" in the JSON, the table, the CSV and the notes without ever counting as verified or as a
failure (the exit code ignores it)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.schema_check import assert_valid_run_document
from tests.synthetic_runs import lab_run
from workbench.cli.export_csv import _flag, csv_records
from workbench.cli.export_html import render_html
from workbench.cli.summary import NOT_VERIFIABLE, notes, status
from workbench.core.results import Result, RowExplanation, Sample
from workbench.core.runner import failed_rows
from workbench.protocols.afp_speedtest import MEASURES, UNVERIFIABLE, _run_tool, parse_output
from workbench.protocols.details import ClientDetails

# netatalk 4.2.3's output, as it printed it against workbench's afpd (its first line: no -w was given)
READ_OUTPUT = (
    "Error: Define a password with -w\nRead qantum 262144, size 4194304 \nrun\t microsec\t  KB/s\n"
    "1\t     1763\t2436169.75\n"
)
WRITE_OUTPUT = (
    "Error: Define a password with -w\nWrite quantum 262144, size 4194304\nrun\t microsec\t  KB/s\n"
    "1\t     3118\t1377475.12\n2\t     3001\t1431100.00\n\n"
)


def test_read_output_gives_its_bytes_request_size_and_microseconds() -> None:
    run = parse_output(READ_OUTPUT)
    assert (run.test, run.request_bytes, run.size_bytes, run.microseconds) == ("Read", 262144, 4194304, (1763,))


def test_every_iteration_of_a_write_is_kept() -> None:
    run = parse_output(WRITE_OUTPUT)
    assert (run.test, run.size_bytes, run.microseconds) == ("Write", 4194304, (3118, 3001))


@pytest.mark.parametrize(
    ("stdout", "said"),
    [
        ("Error: Define a password with -w\n", "no test header"),  # the login or the volume was refused
        ("Write quantum 262144, size 4194304\nrun\t microsec\t  KB/s\n", "no result"),
        ("Read qantum 262144, size 4194304\nNOT TESTED\n", "NOT TESTED"),
        ("Write quantum 262144, size 4194304\nFAILED write\n1\t 10\t 1.0\n", "FAILED"),
        ("Write quantum 262144, size 4194304\nrun\t microsec\t  KB/s\n1\t 0\t 0.0\n", "0 µs"),
        ("1\t     3118\t1377475.12\n", "no test header"),  # a result line before any header is not a figure
    ],
)
def test_output_that_timed_nothing_is_refused_with_a_reason(stdout: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        parse_output(stdout)


def _reference_row(error: str | None = None) -> Result:
    samples = () if error else (Sample(bytes=64 << 20, seconds=0.9, verified=None), Sample(64 << 20, 1.1))
    return Result(
        "afp", "afp_speedtest", "download", "64M", 64 << 20, 1, samples=samples, error=error,
        details=ClientDetails(request_bytes=1 << 20, requests_in_flight=4, measures=MEASURES["download"]),
        unverifiable=UNVERIFIABLE,
    )  # fmt: skip


def test_the_row_says_not_verifiable_and_is_never_verified_nor_a_failure() -> None:
    row = _reference_row()
    assert not row.verified
    assert status(row) == NOT_VERIFIABLE
    said = notes(row, RowExplanation())
    assert UNVERIFIABLE in said and MEASURES["download"] in said
    base = lab_run()
    run = dataclasses.replace(base, results=(*base.results, row), explanation=None)
    assert row not in failed_rows(run)
    doc = run.to_json()
    assert_valid_run_document(doc)
    [written] = [r for r in doc["results"] if r["client"] == "afp_speedtest"]
    assert written["unverifiable"] == UNVERIFIABLE and written["verified"] is False
    assert written["details"]["measures"] == MEASURES["download"]
    assert Result.from_json(written) == row
    assert all(r["unverifiable"] is None for r in doc["results"] if r["client"] != "afp_speedtest")


def test_a_reference_row_whose_tool_failed_is_a_failure() -> None:
    row = _reference_row(error="afp/afp_speedtest Read: afp_speedtest printed no test header (exit 2: )")
    base = lab_run()
    run = dataclasses.replace(base, results=(row,), explanation=None)
    assert failed_rows(run) == [row] and status(row) == "failed"


def test_html_and_csv_say_not_verifiable_for_that_row_alone() -> None:
    base = lab_run()
    run = dataclasses.replace(base, results=(*base.results, _reference_row()), explanation=None)
    html = render_html(run)
    assert html.count('<span class="status-unverifiable">not verifiable</span>') == 1
    records = [r for r in csv_records(run) if r.get("status") == NOT_VERIFIABLE]
    assert len(records) == 1 and records[0]["verified"] == _flag(False)
    assert UNVERIFIABLE in records[0]["notes"]


def test_a_row_without_figures_says_only_why() -> None:
    text = "unavailable: afp_speedtest times one file of whole MiB, not this set of 100 file(s)"
    row = _reference_row(error=text)
    said = notes(row, RowExplanation())
    assert said[0] == text and status(row) == ""
    assert UNVERIFIABLE not in said and MEASURES["download"] not in said


@pytest.mark.parametrize(
    ("first", "runs"),
    [
        ("Write quantum 1048576, size 1048576", 2),  # began its test and timed nothing: once more
        ("Write quantum 1048576, size 1048576\n1\t 1763\t2436169.75", 1),  # timed: kept
        ("login failed", 1),  # never began a test: trying again would say the same
    ],
)
def test_the_tool_runs_once_more_only_when_it_began_its_test_and_timed_nothing(
    tmp_path: Path, first: str, runs: int
) -> None:
    # a stand-in for afp_speedtest: its first run prints `first`, every later one a timed Write
    count = tmp_path / "runs"
    script = tmp_path / "tool.sh"
    script.write_text(
        f'echo x >> "{count}"\n'
        f'if [ "$(wc -l < "{count}")" -eq 1 ]; then printf \'%b\\n\' \'{first}\'; exit 1; fi\n'
        "printf 'Write quantum 1048576, size 1048576\\n1\\t 2000\\t512000.00\\n'\n"
    )
    done = _run_tool(["sh", str(script)], timeout_s=30)
    assert len(count.read_text().splitlines()) == runs
    if runs == 2:
        assert parse_output(done.stdout).microseconds == (2000,)

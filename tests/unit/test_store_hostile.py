"""The results database given something that is not one, or a run changed behind workbench's back.

Read-only opens (report, history, compare) create and write nothing: a missing file is "not found", a foreign
or junk file is refused untouched, an older workbench's file is read without migrating it. Recording refuses a
foreign file before altering it. A corrupt run is refused with one line naming the run and what is wrong,
quoting the stored words safely.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import SCHEMA_1_TABLES
from workbench.core.results import Result, Sample
from workbench.core.store import Store
from workbench.shared.errors import ExitCode, NotFoundError, UsageError

# What a schema-1 workbench made: no verdict or cleanup column, the median named median_bps.
_OLD_DDL = SCHEMA_1_TABLES + """
INSERT INTO runs (schema, started_utc, label, meta, warnings, finished_utc) VALUES
    (1, '2025-01-01T00:00:00Z', 'old', '{"started_utc": "2025-01-01T00:00:00Z"}', '["w"]', '2025-01-01T00:01:00Z');
"""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sqlite(path: Path, script: str) -> Path:
    db = sqlite3.connect(path)
    try:
        db.executescript(script)
    finally:
        db.close()
    return path


def _recorded(path: Path) -> Path:
    """A workbench database holding one finished run of one row, recorded through the Store."""
    row = Result("sftp", "openssh", "upload", "1M", 1 << 20, 1, samples=(Sample(1 << 20, 0.5, verified=True),))
    with Store(path) as store:
        run_id = store.begin_run({"started_utc": "2026-01-01T00:00:00Z"}, label="one")
        store.save_result(run_id, 0, row)
        store.finish_run(run_id, "2026-01-01T00:01:00Z", ["a warning"], verdict=["a verdict"])
    return path


def _update(path: Path, sql: str, *args: object) -> None:
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute(sql, args)
    finally:
        db.close()


@pytest.fixture
def foreign(tmp_path: Path) -> Path:
    return _sqlite(tmp_path / "foreign.db", "CREATE TABLE runs (x); INSERT INTO runs VALUES (42);")


# ---------------------------------------------------------------- opening (defect A)


def test_read_only_of_a_missing_file_is_not_found_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "runs.db"
    with pytest.raises(NotFoundError) as caught:
        Store(path, read_only=True)
    assert caught.value.exit_code == ExitCode.NOT_FOUND
    assert caught.value.one_line() == (
        f"no results database at {path} (choose another --db, or record a run first with 'workbench run')"
    )
    assert not path.parent.exists()


@pytest.mark.parametrize("read_only", [True, False])
def test_a_foreign_database_is_refused_untouched(foreign: Path, read_only: bool) -> None:
    before = _digest(foreign)
    with pytest.raises(UsageError) as caught:
        Store(foreign, read_only=read_only)
    assert caught.value.exit_code == ExitCode.USAGE
    assert caught.value.one_line() == f"{foreign} is not a workbench results database (choose another --db)"
    assert _digest(foreign) == before
    db = sqlite3.connect(foreign)
    assert [r[1] for r in db.execute("PRAGMA table_info(runs)")] == ["x"]
    assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["runs"]
    db.close()


@pytest.mark.parametrize("read_only", [True, False])
def test_a_database_of_other_tables_is_refused_untouched(tmp_path: Path, read_only: bool) -> None:
    """No runs table at all: recording must not add workbench's tables to someone's app database."""
    path = _sqlite(tmp_path / "app.db", "CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ann');")
    before = _digest(path)
    with pytest.raises(UsageError, match=r"is not a workbench results database$"):
        Store(path, read_only=read_only)
    assert _digest(path) == before


@pytest.mark.parametrize("read_only", [True, False])
def test_a_junk_file_is_refused_untouched(tmp_path: Path, read_only: bool) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"\x1b[2J not sqlite at all " * 100)
    before = _digest(path)
    with pytest.raises(UsageError) as caught:
        Store(path, read_only=read_only)
    assert caught.value.one_line() == f"{path} is not a workbench results database (choose another --db)"
    assert _digest(path) == before


def test_read_only_of_an_empty_file_has_no_runs_and_is_left_untouched(tmp_path: Path) -> None:
    # what recording leaves when it is stopped before it made its tables
    path = tmp_path / "empty.db"
    path.touch()
    with pytest.raises(NotFoundError, match=r"^no runs yet in .*empty.db \(an empty file\)$"):
        Store(path, read_only=True)
    assert path.read_bytes() == b""


def test_read_only_of_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "runs.fifo"
    os.mkfifo(path)
    with pytest.raises(UsageError, match=r"is not a regular file: no workbench results database$"):
        Store(path, read_only=True)


def test_read_only_rolls_back_a_write_interrupted_by_a_kill(tmp_path: Path) -> None:
    # a writer killed mid-transaction leaves a hot journal: a read-only connection alone cannot read past it
    path = _recorded(tmp_path / "runs.sqlite")
    script = (
        "import sqlite3, os, sys\n"
        f"db = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
        "db.execute('BEGIN IMMEDIATE')\n"
        "db.execute(\"UPDATE runs SET label = 'half-written' WHERE id = 1\")\n"
        "db.execute('PRAGMA cache_size = 0')\n"
        "db.execute(\"INSERT INTO runs (schema, started_utc, meta) SELECT schema, started_utc, meta FROM runs\")\n"
        "os._exit(9)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=False, timeout=60)
    journal = Path(f"{path}-journal")
    assert journal.exists() and journal.stat().st_size > 0  # a hot journal, as a SIGKILL leaves one
    with Store(path, read_only=True) as store:
        assert [(r.id, r.label) for r in store.history(10)] == [(1, "one")]


def test_read_only_of_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"is a directory, not a workbench results database$"):
        Store(tmp_path, read_only=True)


def test_read_only_reads_an_old_workbench_database_without_migrating_it(tmp_path: Path) -> None:
    path = _sqlite(tmp_path / "old.db", _OLD_DDL)
    before = _digest(path)
    with Store(path, read_only=True) as store:
        [summary] = store.history()
        run = store.load(summary.id)
    assert (summary.label, summary.rows, summary.finished) == ("old", 0, True)
    assert run.meta == {"started_utc": "2025-01-01T00:00:00Z"} and run.warnings == ("w",)
    assert run.explanation is None
    assert _digest(path) == before
    # recording to it still migrates it, as before
    with Store(path) as store:
        assert "verdict" in store._columns("runs")
    assert _digest(path) != before


def test_read_only_reads_what_recording_wrote(tmp_path: Path) -> None:
    """A valid run reads the same either way, also from a file name a URI would otherwise parse."""
    path = _recorded(tmp_path / "a?b#c%20 d.db")
    before = _digest(path)
    with Store(path) as store:
        written = store.load().to_json()
    with Store(path, read_only=True) as store:
        read = store.load()
        [summary] = store.history()
    assert read.to_json() == written
    assert read.warnings == ("a warning",) and read.results[0].protocol == "sftp"
    assert (summary.label, summary.rows, summary.finished) == ("one", 1, True)
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no other file made for the odd name


def test_read_only_cannot_write(tmp_path: Path) -> None:
    path = _recorded(tmp_path / "runs.db")
    with Store(path, read_only=True) as store, pytest.raises(sqlite3.OperationalError, match="readonly"):
        store.begin_run({"started_utc": "x"})


# ---------------------------------------------------------------- corrupt runs (defect B)


_RUN = "UPDATE runs SET {} = ? WHERE id = 1"
_DOC = "UPDATE results SET doc = ? WHERE run_id = 1 AND idx = 0"
# A row with every key, whose one sample is a number instead of an object.
_BAD_SAMPLE = {"protocol": "sftp", "client": "c", "direction": "d", "file_set": "f", "bytes": 1, "samples": [7]}


@pytest.mark.parametrize(
    ("sql", "value", "what"),
    [
        (_RUN.format("meta"), "not json \x1b[2J", r"its meta is not JSON: 'not json \x1b[2J'"),
        (_RUN.format("meta"), "[]", "its meta is not an object but '[]'"),
        (_RUN.format("meta"), "[" * 100_000, "its meta is not JSON: '" + "[" * 58 + "…"),
        (_RUN.format("schema"), "zz", "its schema 'zz' is not a schema workbench writes"),
        (_RUN.format("schema"), 0, "its schema 0 is not a schema workbench writes"),
        (_RUN.format("warnings"), '{"a": 1}', """its warnings is not an array but '{"a": 1}'"""),
        (_RUN.format("verdict"), "[1]", "its verdict are not all text"),
        (_RUN.format("baseline"), "{oops", "its baseline is not JSON: '{oops'"),
        (_RUN.format("cleanup"), "7", "its cleanup is not an object but '7'"),
        (_DOC, json.dumps({"client": "openssh"}), "row 0 has no 'protocol'"),
        (_DOC, '"a row"', """row 0 is not an object but '"a row"'"""),
        (_DOC, json.dumps(_BAD_SAMPLE), "row 0 does not read (TypeError: argument of type 'int' is not iterable)"),
    ],
)
def test_a_corrupt_run_is_one_line_naming_it(tmp_path: Path, sql: str, value: object, what: str) -> None:
    path = _recorded(tmp_path / "runs.db")
    _update(path, sql, value)
    for read_only in (True, False):
        with Store(path, read_only=read_only) as store, pytest.raises(UsageError) as caught:
            store.load(1)
        assert caught.value.exit_code == ExitCode.USAGE
        assert caught.value.message == f"run 1 in {path} is corrupt: {what}"
        line = caught.value.one_line()
        assert "\x1b" not in line and "\n" not in line
        assert line.endswith("(it was changed outside workbench: choose another run, or record it again)")


def test_the_latest_run_is_refused_the_same_way(tmp_path: Path) -> None:
    path = _recorded(tmp_path / "runs.db")
    _update(path, _RUN.format("meta"), "nope")
    with Store(path, read_only=True) as store, pytest.raises(UsageError, match=r"^run 1 in .* is corrupt: its meta"):
        store.load()


def test_a_newer_schema_is_still_newer(tmp_path: Path) -> None:
    path = _recorded(tmp_path / "runs.db")
    _update(path, _RUN.format("schema"), 99)
    with Store(path, read_only=True) as store, pytest.raises(UsageError) as caught:
        store.load(1)
    assert caught.value.message == f"run 1 in {path} has schema 99, newer than this workbench reads"


def test_a_run_whose_meta_does_not_read_is_passed_over_when_looking_for_leftovers(tmp_path: Path) -> None:
    # run 1 finished, then its meta was spoilt; runs 2 and 3 never finished, 3's meta spoilt too
    path = _recorded(tmp_path / "runs.sqlite")
    with Store(path) as store:
        second = store.begin_run({"started_utc": "2026-01-02T00:00:00Z", "server": {"kind": "serve"}})
        third = store.begin_run({"started_utc": "2026-01-03T00:00:00Z"})
    _update(path, _RUN.format("meta"), "{not json")
    _update(path, "UPDATE runs SET meta = ? WHERE id = ?", "[]", third)
    with Store(path) as store:
        assert store.unfinished_runs() == [
            (second, {"started_utc": "2026-01-02T00:00:00Z", "server": {"kind": "serve"}})
        ]

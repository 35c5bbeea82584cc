"""Two processes opening one results database made by an older workbench at the same moment (two runs
started together, a fleet's controller and `history`) both see it migrated: neither says "not a workbench
results database", and the columns are added once. Real processes, released together by a barrier, on many
fresh databases in turn so the two really meet inside the migration."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

from tests.helpers import SCHEMA_1_TABLES
from workbench.core.store import Store

TRIALS = 25  # fresh old databases; each is opened by WORKERS processes at once
WORKERS = 3

# What a schema-1 workbench made: no verdict column, the median named median_bps.
_OLD_DDL = SCHEMA_1_TABLES + """
INSERT INTO runs (schema, started_utc, meta) VALUES (1, '2025-01-01T00:00:00Z', '{}');
"""


def _open(path: str, start: multiprocessing.synchronize.Barrier, errors: multiprocessing.Queue) -> None:
    start.wait(timeout=60)
    try:
        with Store(Path(path)) as store:
            store.history()
    except BaseException as exc:  # the parent asserts on what each process met
        errors.put(f"{type(exc).__name__}: {exc}")
    else:
        errors.put("")


def test_concurrent_openers_all_migrate(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    failures: list[str] = []
    for trial in range(TRIALS):
        path = tmp_path / f"runs-{trial}.sqlite"
        with sqlite3.connect(path) as db:
            db.executescript(_OLD_DDL)
        db.close()
        start = ctx.Barrier(WORKERS)
        errors = ctx.Queue()
        procs = [ctx.Process(target=_open, args=(str(path), start, errors)) for _ in range(WORKERS)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(timeout=120)
            assert proc.exitcode == 0, f"trial {trial}: an opener died ({proc.exitcode})"
        failures += [f"trial {trial}: {e}" for e in (errors.get(timeout=10) for _ in procs) if e]
        with sqlite3.connect(path) as db:
            runs = [row[1] for row in db.execute("PRAGMA table_info(runs)")]
            results = [row[1] for row in db.execute("PRAGMA table_info(results)")]
        db.close()
        assert runs.count("verdict") == 1 and "median_bytes_per_s" in results and "median_bps" not in results
    assert failures == []

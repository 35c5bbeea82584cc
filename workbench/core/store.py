"""Every run in one SQLite file: the run document plus one row per result, written as each row finishes.

Rows are committed as soon as they are measured, so a crash or Ctrl-C never loses what was
already measured. The raw samples live inside each result's JSON (bytes, seconds, intervals).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.core.results import Baseline, Result, RowExplanation, Run, explanation_from_json
from workbench.core.schema import READABLE, SCHEMA, upgrade_link_v1, upgrade_stored_row, upgrade_v1
from workbench.shared.errors import NotFoundError, UsageError, WorkbenchError, from_os_error
from workbench.shared.validate import check_run_id

_DDL = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    schema INTEGER NOT NULL,
    started_utc TEXT NOT NULL,
    label TEXT,
    meta TEXT NOT NULL,
    baseline TEXT,
    link TEXT,
    window_sweep TEXT,
    warnings TEXT,
    finished_utc TEXT,
    verdict TEXT,
    cleanup TEXT
);
CREATE TABLE IF NOT EXISTS results (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    idx INTEGER NOT NULL,
    protocol TEXT NOT NULL,
    client TEXT NOT NULL,
    direction TEXT NOT NULL,
    file_set TEXT NOT NULL,
    median_bytes_per_s REAL,
    doc TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
);
"""


LOCK_WAIT_S = 30.0  # a row's commit takes milliseconds; a migration of a large old database a few seconds


def _busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _with_cleanup(meta: dict[str, Any], cleanup: str | None) -> dict[str, Any]:
    """A run's metadata as read: what later runs recorded of its leftovers (Store.record_cleanup) over it."""
    if not cleanup:
        return meta
    done = json.loads(cleanup)
    merged = {**meta, **done}
    return {k: v for k, v in merged.items() if not (k in done and done[k] is None)}


@dataclass(frozen=True)
class RunSummary:
    id: int
    started_utc: str
    label: str | None
    rows: int
    finished: bool


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # the wait for another process's write lock (a row being saved, a migration) before "locked"
            self.db = sqlite3.connect(path, timeout=LOCK_WAIT_S)
            if not self._current():
                self._migrate()
        except OSError as exc:
            raise from_os_error(exc, f"opening the results database {path}") from exc
        except sqlite3.OperationalError as exc:
            if _busy(exc):
                raise WorkbenchError(
                    f"the results database {path} stayed locked by another process for {LOCK_WAIT_S:.0f} s",
                    "try again once the other workbench has finished, or choose another --db",
                ) from exc
            raise UsageError(f"{path} is not a workbench results database: {exc}", "choose another --db") from exc
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"{path} is not a workbench results database: {exc}", "choose another --db") from exc

    def _columns(self, table: str) -> set[str]:
        return {name for _, name, *_ in self.db.execute(f"PRAGMA table_info({table})")}

    def _current(self) -> bool:
        """Both tables exist with this version's columns (read without any lock: most opens stop here)."""
        runs = self._columns("runs")
        return "verdict" in runs and "cleanup" in runs and "median_bytes_per_s" in self._columns("results")

    def _migrate(self) -> None:
        """Create the tables, then add what an older version's database lacks, in one transaction that holds
        the write lock from its start (BEGIN IMMEDIATE) and looks again once it has it: two processes opening
        one old database at once take turns, and the second finds the work done instead of altering twice."""
        self.db.execute("BEGIN IMMEDIATE")  # waits up to LOCK_WAIT_S for another migration or writer
        try:
            for statement in _DDL.split(";"):
                if statement.strip():
                    self.db.execute(statement)
            if "verdict" not in self._columns("runs"):
                self.db.execute("ALTER TABLE runs ADD COLUMN verdict TEXT")
            if "cleanup" not in self._columns("runs"):
                self.db.execute("ALTER TABLE runs ADD COLUMN cleanup TEXT")
            # Schema 1 named the column like its JSON, in bytes/s despite the "bps"; the rows' JSON keeps its own
            # schema (each run's `schema` column), read by `load`.
            if "median_bps" in self._columns("results"):
                self.db.execute("ALTER TABLE results RENAME COLUMN median_bps TO median_bytes_per_s")
            self.db.commit()
        except BaseException:
            self.db.rollback()
            raise

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Cursor]:
        with self.db, closing(self.db.cursor()) as cur:
            yield cur

    def begin_run(self, meta: dict[str, Any], label: str | None = None) -> int:
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO runs (schema, started_utc, label, meta) VALUES (?, ?, ?, ?)",
                (SCHEMA, meta.get("started_utc", ""), label, json.dumps(meta)),
            )
            assert cur.lastrowid is not None  # an INSERT always sets it
            return cur.lastrowid

    def save_baseline(self, run_id: int, baseline: Baseline) -> None:
        with self._tx() as cur:
            cur.execute("UPDATE runs SET baseline = ? WHERE id = ?", (json.dumps(baseline.to_json()), run_id))

    def save_extra(self, run_id: int, link: dict | None = None, window_sweep: list | None = None) -> None:
        with self._tx() as cur:
            if link is not None:
                cur.execute("UPDATE runs SET link = ? WHERE id = ?", (json.dumps(link), run_id))
            if window_sweep is not None:
                cur.execute("UPDATE runs SET window_sweep = ? WHERE id = ?", (json.dumps(window_sweep), run_id))

    def save_result(self, run_id: int, idx: int, result: Result, explanation: RowExplanation | None = None) -> None:
        """Row `idx` of the run as it is measured, and again with its explanation once the run is explained."""
        with self._tx() as cur:
            cur.execute(
                "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    idx,
                    result.protocol,
                    result.client,
                    result.direction,
                    result.file_set,
                    result.median_bytes_per_s,
                    json.dumps(result.to_json(explanation)),
                ),
            )

    def finish_run(
        self,
        run_id: int,
        finished_utc: str,
        warnings: list[str],
        meta: dict | None = None,
        verdict: list[str] | None = None,
    ) -> None:
        with self._tx() as cur:
            cur.execute(
                "UPDATE runs SET finished_utc = ?, warnings = ?, verdict = ? WHERE id = ?",
                (finished_utc, json.dumps(warnings), json.dumps(verdict) if verdict else None, run_id),
            )
            if meta is not None:
                cur.execute("UPDATE runs SET meta = ? WHERE id = ?", (json.dumps(meta), run_id))

    def unfinished_runs(self) -> list[tuple[int, dict[str, Any]]]:
        """(id, meta) of runs that may have left files on a far host: runs that never finished (still going, or
        killed outright: SIGKILL, power cut), and finished runs against a stock server whose scratch directory
        could not be removed at the end (its meta has neither scratch_removed nor scratch_left_alone: see
        workbench.core.scratch_record)."""
        rows = self.db.execute(
            "SELECT id, meta, cleanup FROM (SELECT *, json_patch(meta, COALESCE(cleanup, '{}')) AS seen FROM runs)"
            " WHERE finished_utc IS NULL"
            " OR (json_extract(seen, '$.server.kind') = 'stock' AND json_extract(seen, '$.server.scratch') IS NOT NULL"
            " AND json_extract(seen, '$.scratch_removed') IS NULL"
            " AND json_extract(seen, '$.scratch_left_alone') IS NULL) ORDER BY id"
        ).fetchall()
        return [(int(i), _with_cleanup(json.loads(m), c)) for i, m, c in rows]

    def update_meta(self, run_id: int, meta: dict[str, Any]) -> None:
        """A run's own metadata, by the process that runs it (a fleet's controller records its members' scratch
        directories as they name them)."""
        with self._tx() as cur:
            cur.execute("UPDATE runs SET meta = ? WHERE id = ?", (json.dumps(meta), run_id))

    def record_cleanup(self, run_id: int, keys: Mapping[str, Any]) -> None:
        """What a later run did with what run `run_id` left on a far host, kept beside its metadata (never in it):
        read back over the metadata's keys of the same name (a None removes one)."""
        with self._tx() as cur:
            row = cur.execute("SELECT cleanup FROM runs WHERE id = ?", (run_id,)).fetchone()
            done = json.loads(row[0]) if row is not None and row[0] else {}
            done.update(keys)
            cur.execute("UPDATE runs SET cleanup = ? WHERE id = ?", (json.dumps(done), run_id))

    def load(self, run_id: int | None = None) -> Run:
        """A run by id, or the latest when run_id is None."""
        if run_id is not None:
            check_run_id(run_id)  # SQLite's integers stop at 2^63 - 1: a larger id overflows inside the driver
        query = "SELECT id, schema, meta, baseline, link, window_sweep, warnings, verdict, cleanup FROM runs "
        row = self.db.execute(
            query + ("WHERE id = ?" if run_id is not None else "ORDER BY id DESC LIMIT 1"),
            (run_id,) if run_id is not None else (),
        ).fetchone()
        if row is None:
            what = f"no run {run_id}" if run_id is not None else "no runs yet"
            raise NotFoundError(f"{what} in {self.path}", "list runs with 'workbench history'")
        rid, schema, meta, baseline, link, sweep, warnings, verdict, cleanup = row
        if schema not in READABLE:
            raise UsageError(
                f"run {rid} in {self.path} has schema {schema}, newer than this workbench reads", "upgrade workbench"
            )
        # A run written by an older version is read in its own schema, then renamed into the current one; a
        # schema-2 row only lacks the fleet's keys (upgrade_stored_row adds them, null).
        upgrade = upgrade_v1 if schema == 1 else (lambda value: value)
        upgrade_link = upgrade_link_v1 if schema == 1 else (lambda value: value)
        docs = [
            upgrade_stored_row(json.loads(doc), schema)
            for (doc,) in self.db.execute("SELECT doc FROM results WHERE run_id = ? ORDER BY idx", (rid,))
        ]
        return Run(
            id=rid,
            meta=_with_cleanup(upgrade(json.loads(meta)), cleanup),
            baseline=Baseline.from_json(upgrade(json.loads(baseline)) if baseline else None),
            results=tuple(Result.from_json(doc) for doc in docs),
            link=upgrade_link(json.loads(link)) if link else None,
            window_sweep=upgrade(json.loads(sweep)) if sweep else None,
            warnings=json.loads(warnings) if warnings else (),
            explanation=explanation_from_json(docs, json.loads(verdict) if verdict else ()),
        )

    def history(self, limit: int = 50) -> list[RunSummary]:
        rows = self.db.execute(
            "SELECT r.id, r.started_utc, r.label, COUNT(x.idx), r.finished_utc IS NOT NULL FROM runs r "
            "LEFT JOIN results x ON x.run_id = r.id GROUP BY r.id ORDER BY r.id DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [RunSummary(int(i), s, lbl, int(n), bool(f)) for i, s, lbl, n, f in rows]


class StoreRecorder:
    """The runner's Recorder (workbench.core.observe) backed by the results database.

    The database is opened at the run's first call, not here: a far host that does not answer, or a bad
    password, stops a run before it has touched the database. `finished` is the run as it ended (also
    after Ctrl-C or a failure), for the caller to write its JSON document from.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.finished: Run | None = None
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(self.path)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> StoreRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def unfinished_runs(self) -> list[tuple[int, dict[str, Any]]]:
        return self.store.unfinished_runs()

    def update_meta(self, run_id: int, meta: Mapping[str, Any]) -> None:
        self.store.update_meta(run_id, dict(meta))

    def record_cleanup(self, run_id: int, keys: Mapping[str, Any]) -> None:
        self.store.record_cleanup(run_id, keys)

    def begin(
        self,
        meta: Mapping[str, Any],
        label: str | None,
        link: Mapping[str, Any] | None,
        window_sweep: tuple[Mapping[str, Any], ...] | None,
    ) -> int:
        run_id = self.store.begin_run(dict(meta), label)
        self.store.save_extra(
            run_id,
            link=dict(link) if link is not None else None,
            window_sweep=[dict(w) for w in window_sweep] if window_sweep is not None else None,
        )
        return run_id

    def baseline(self, run_id: int, baseline: Baseline) -> None:
        self.store.save_baseline(run_id, baseline)

    def row(self, run_id: int, index: int, row: Result) -> None:
        self.store.save_result(run_id, index, row)

    def finish(self, run: Run) -> None:
        assert run.id is not None  # a run is recorded only once begin() gave it an id
        self.finished = run
        for index, (row, why) in enumerate(run.explained_rows()):  # again, with what each row reached
            self.store.save_result(run.id, index, row, why)
        if run.link is not None:
            self.store.save_extra(run.id, link=dict(run.link))
        verdict = list(run.explanation.verdict) if run.explanation is not None else None
        self.store.finish_run(run.id, str(run.meta["finished_utc"]), list(run.warnings), dict(run.meta), verdict)

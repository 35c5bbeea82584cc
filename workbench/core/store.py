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
from workbench.shared.errors import DiskError, NotFoundError, UsageError, WorkbenchError, from_os_error
from workbench.shared.safetext import cut, strip_controls
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


# The columns every workbench wrote since the first (schema 1: no verdict, no cleanup, the median named
# median_bps), and those of this version: a file whose tables lack them is someone else's database.
_RUNS_FIRST_COLUMNS = frozenset(
    ("id", "schema", "started_utc", "label", "meta", "baseline", "link", "window_sweep", "warnings", "finished_utc")
)
_RUNS_COLUMNS = _RUNS_FIRST_COLUMNS | {"verdict", "cleanup"}
_RESULTS_FIRST_COLUMNS = frozenset(("run_id", "idx", "protocol", "client", "direction", "file_set", "doc"))
_RESULTS_COLUMNS = _RESULTS_FIRST_COLUMNS | {"median_bytes_per_s"}
_MEDIAN_COLUMNS = frozenset(("median_bps", "median_bytes_per_s"))  # schema 1's name, then this version's
# The runs columns `load` reads, in its order.
_LOAD_COLUMNS = ("id", "schema", "meta", "baseline", "link", "window_sweep", "warnings", "verdict", "cleanup")

QUOTED_MAX_CHARS = 60  # words from a corrupt row quoted in an error: enough to recognise, not a dump

SQLITE_READONLY_ROLLBACK = 776  # a read-only connection met a hot journal it may not roll back

LOCK_WAIT_S = 30.0  # a row's commit takes milliseconds; a migration of a large old database a few seconds


def _busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _with_cleanup(meta: dict[str, Any], cleanup: str | None) -> dict[str, Any]:
    """A run's metadata as read: what later runs recorded of its leftovers (Store.record_cleanup) over it."""
    return _merged_cleanup(meta, json.loads(cleanup) if cleanup else None)


def _merged_cleanup(meta: dict[str, Any], done: dict[str, Any] | None) -> dict[str, Any]:
    if not done:
        return meta
    merged = {**meta, **done}
    return {k: v for k, v in merged.items() if not (k in done and done[k] is None)}


def _quoted(value: object) -> str:
    """A value read from the database, for an error message: its repr (control characters escaped, not sent to
    the terminal), cut short."""
    return cut(repr(value), QUOTED_MAX_CHARS)


def _said(exc: BaseException) -> str:
    """What a decoding error says, on one short line (its words may quote the database)."""
    return cut(strip_controls(f"{type(exc).__name__}: {exc}"), QUOTED_MAX_CHARS * 2)


def _is_workbench(runs: set[str], results: set[str]) -> bool:
    """The tables' columns are those of some workbench's results database (this one's or an older one's)."""
    return runs >= _RUNS_FIRST_COLUMNS and results >= _RESULTS_FIRST_COLUMNS and bool(results & _MEDIAN_COLUMNS)


@dataclass(frozen=True)
class RunSummary:
    id: int
    started_utc: str
    label: str | None
    rows: int
    finished: bool


class Store:
    """The results database at `path`. Opened to record (the default), a missing file is created and an older
    workbench's database is migrated; opened `read_only` (report, history, compare), nothing is created or
    written. Either way a file that is not a workbench results database is refused untouched."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        try:
            if read_only:
                self.db = self._open_read_only(path)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                # the wait for another process's write lock (a row being saved, a migration) before "locked"
                self.db = sqlite3.connect(path, timeout=LOCK_WAIT_S)
        except OSError as exc:
            raise from_os_error(exc, f"opening the results database {path}") from exc
        try:
            if read_only:
                self._roll_back_interrupted_write()
                # An older workbench's database is read as it is, never migrated: `load` reads a column it lacks
                # (verdict, cleanup) as NULL, which is what the migration would have put there, and nothing
                # else reads a column that changed. So `report` of an old file leaves it byte for byte as it
                # was, also on a read-only disk or someone else's file.
                if not _is_workbench(self._columns("runs"), self._columns("results")):
                    raise self._foreign()
            elif not self._current():
                self._migrate()
            self._runs_columns = self._columns("runs")
        except BaseException as exc:
            self.db.close()
            if isinstance(exc, sqlite3.Error):
                raise self._sqlite_error(exc) from exc
            raise

    @staticmethod
    def _open_read_only(path: Path) -> sqlite3.Connection:
        """`path` opened by SQLite's read-only mode, which creates no file and writes none."""
        if not path.exists():
            raise NotFoundError(
                f"no results database at {path}", "choose another --db, or record a run first with 'workbench run'"
            )
        if path.is_dir():
            raise UsageError(f"{path} is a directory, not a workbench results database", "choose another --db")
        if not path.is_file():  # a FIFO would wait for a writer, a device never ends
            raise UsageError(f"{path} is not a regular file: no workbench results database", "choose another --db")
        if path.stat().st_size == 0:  # what recording leaves when it is stopped before it made its tables
            raise NotFoundError(f"no runs yet in {path} (an empty file)", "record a run first with 'workbench run'")
        with open(path, "rb"):  # unreadable: "permission denied" (DiskError) rather than SQLite's "unable to open"
            pass
        # As a URI, so that SQLite reads mode=ro; as_uri() percent-encodes what a URI would otherwise parse in
        # a file name ('?', '#', '%', spaces).
        return sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=LOCK_WAIT_S)

    def _roll_back_interrupted_write(self) -> None:
        """A writer killed mid-transaction (SIGKILL, a power cut) leaves a hot journal beside the database, which
        a read-only connection cannot roll back (SQLITE_READONLY_ROLLBACK): SQLite rolls it back on the first
        read of a read-write connection, as every open did before reading became read-only. Done once here, so
        that report, history and compare read what the last finished write left; refused in one line where this
        process may not write there."""
        try:
            self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorcode", None) != SQLITE_READONLY_ROLLBACK:
                raise
        self.db.close()
        try:
            writer = sqlite3.connect(self.path, timeout=LOCK_WAIT_S)
            try:
                writer.execute("SELECT count(*) FROM sqlite_master").fetchone()  # rolls the hot journal back
            finally:
                writer.close()
        except sqlite3.Error as exc:
            raise WorkbenchError(
                f"an interrupted write left {self.path}-journal, and it could not be rolled back here: {exc}",
                "run any workbench command once as a user who may write that directory",
            ) from exc
        self.db = self._open_read_only(self.path)

    def _foreign(self) -> UsageError:
        return UsageError(f"{self.path} is not a workbench results database", "choose another --db")

    def _sqlite_error(self, exc: sqlite3.Error) -> WorkbenchError:
        """What SQLite said while opening (or migrating) the database, as one line."""
        text = str(exc).lower()
        if isinstance(exc, sqlite3.OperationalError) and _busy(exc):
            return WorkbenchError(
                f"the results database {self.path} stayed locked by another process for {LOCK_WAIT_S:.0f} s",
                "try again once the other workbench has finished, or choose another --db",
            )
        if not self.read_only and ("readonly" in text or "disk is full" in text):  # recording: a read-only disk
            return DiskError(f"cannot write the results database {self.path}: {exc}", "choose another --db")
        if not isinstance(exc, sqlite3.OperationalError):  # "file is not a database": not SQLite at all
            return self._foreign()
        return UsageError(f"cannot use the results database {self.path}: {exc}", "choose another --db")

    def _columns(self, table: str) -> set[str]:
        return {name for _, name, *_ in self.db.execute(f"PRAGMA table_info({table})")}

    def _current(self) -> bool:
        """Both tables exist with this version's columns (read without any lock: most opens stop here)."""
        return self._columns("runs") >= _RUNS_COLUMNS and self._columns("results") >= _RESULTS_COLUMNS

    def _migrate(self) -> None:
        """Create the tables, then add what an older version's database lacks, in one transaction that holds
        the write lock from its start (BEGIN IMMEDIATE) and looks again once it has it: two processes opening
        one old database at once take turns, and the second finds the work done instead of altering twice.

        Only an empty database (a new file) or an older workbench's is touched: one holding any other table
        is someone else's, refused before a statement writes to it."""
        self.db.execute("BEGIN IMMEDIATE")  # waits up to LOCK_WAIT_S for another migration or writer
        try:
            empty = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
            if not empty and not _is_workbench(self._columns("runs"), self._columns("results")):
                raise self._foreign()
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
        found = []
        for rid, meta, cleanup, finished in self.db.execute(
            "SELECT id, meta, cleanup, finished_utc FROM runs ORDER BY id"
        ):
            try:
                seen = _with_cleanup(json.loads(meta), cleanup)
                server = seen.get("server") or {}
                left = (
                    server.get("kind") == "stock"
                    and server.get("scratch") is not None
                    and seen.get("scratch_removed") is None
                    and seen.get("scratch_left_alone") is None
                )
            except (TypeError, ValueError, AttributeError):
                # A run whose metadata no longer reads (changed by hand or by another program) names no scratch
                # directory to look for: `report` of it says what is wrong, and later runs go on.
                continue
            if finished is None or left:
                found.append((int(rid), seen))
        return found

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
        """A run by id, or the latest when run_id is None. A run whose stored words do not read (changed by
        hand, or by another program) is refused with what is wrong in it, as a UsageError: a malformed file."""
        if run_id is not None:
            check_run_id(run_id)  # SQLite's integers stop at 2^63 - 1: a larger id overflows inside the driver
        # A column an older workbench's database lacks (opened read-only, so not migrated) reads as NULL.
        columns = ", ".join(c if c in self._runs_columns else f"NULL AS {c}" for c in _LOAD_COLUMNS)
        row = self.db.execute(
            f"SELECT {columns} FROM runs " + ("WHERE id = ?" if run_id is not None else "ORDER BY id DESC LIMIT 1"),
            (run_id,) if run_id is not None else (),
        ).fetchone()
        if row is None:
            what = f"no run {run_id}" if run_id is not None else "no runs yet"
            raise NotFoundError(f"{what} in {self.path}", "list runs with 'workbench history'")
        rid, schema, meta, baseline, link, sweep, warnings, verdict, cleanup = row
        # The column's INTEGER affinity stores any number-like text as a number: what is left is not a schema.
        if not isinstance(schema, int) or schema < min(READABLE):
            raise self._corrupt(rid, f"its schema {_quoted(schema)} is not a schema workbench writes")
        if schema not in READABLE:
            raise UsageError(
                f"run {rid} in {self.path} has schema {schema}, newer than this workbench reads", "upgrade workbench"
            )
        # A run written by an older version is read in its own schema, then renamed into the current one; a
        # schema-2 row only lacks the fleet's keys (upgrade_stored_row adds them, null).
        upgrade = upgrade_v1 if schema == 1 else (lambda value: value)
        upgrade_link = upgrade_link_v1 if schema == 1 else (lambda value: value)
        docs, results = [], []
        for idx, doc in self.db.execute("SELECT idx, doc FROM results WHERE run_id = ? ORDER BY idx", (rid,)):
            name = f"row {idx if isinstance(idx, int) else _quoted(idx)}"
            decoded = upgrade_stored_row(self._decoded(rid, name, doc, dict), schema)
            try:  # row by row, so that the row lacking a key is named
                results.append(Result.from_json(decoded))
                RowExplanation.from_json(decoded)  # read again by explanation_from_json below
            except KeyError as exc:
                raise self._corrupt(rid, f"{name} has no {_quoted(exc.args[0] if exc.args else exc)}") from exc
            except (TypeError, ValueError, AttributeError) as exc:
                raise self._corrupt(rid, f"{name} does not read ({_said(exc)})") from exc
            docs.append(decoded)
        decoded_meta = self._decoded(rid, "its meta", meta, dict)
        done = self._decoded(rid, "its cleanup", cleanup, dict) if cleanup else None
        decoded_baseline = self._decoded(rid, "its baseline", baseline, dict) if baseline else None
        decoded_link = self._decoded(rid, "its link", link, dict) if link else None
        decoded_sweep = self._decoded(rid, "its window_sweep", sweep, list) if sweep else None
        lines = {
            name: tuple(self._decoded(rid, f"its {name}", text, list)) if text else ()
            for name, text in (("warnings", warnings), ("verdict", verdict))
        }
        for name, said in lines.items():
            if not all(isinstance(line, str) for line in said):
                raise self._corrupt(rid, f"its {name} are not all text")
        try:
            return Run(
                id=rid,
                meta=_merged_cleanup(upgrade(decoded_meta), done),
                baseline=Baseline.from_json(upgrade(decoded_baseline) if decoded_baseline is not None else None),
                results=tuple(results),
                link=upgrade_link(decoded_link) if decoded_link is not None else None,
                window_sweep=upgrade(decoded_sweep) if decoded_sweep is not None else None,
                warnings=lines["warnings"],
                explanation=explanation_from_json(docs, lines["verdict"]),
            )
        except (TypeError, ValueError, AttributeError, KeyError) as exc:  # a baseline lacking a field, say
            raise self._corrupt(rid, f"it does not read ({_said(exc)})") from exc

    def _corrupt(self, rid: int, what: str) -> UsageError:
        return UsageError(
            f"run {rid} in {self.path} is corrupt: {what}",
            "it was changed outside workbench: choose another run, or record it again",
        )

    def _decoded(self, rid: int, what: str, text: object, kind: type[dict] | type[list]) -> Any:
        """The JSON held in `what` ("its meta", "row 2") of run `rid`, which must be a `kind` (object or array)."""
        try:
            value = json.loads(text)  # type: ignore[arg-type]  # a number or NULL raises TypeError: refused
        except (TypeError, ValueError, RecursionError) as exc:  # not text, not JSON, nested past Python's limit
            raise self._corrupt(rid, f"{what} is not JSON: {_quoted(text)}") from exc
        if not isinstance(value, kind):
            article = "an object" if kind is dict else "an array"
            raise self._corrupt(rid, f"{what} is not {article} but {_quoted(text)}")
        return value

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

"""Where a run starts (workbench.core.session) and what the runner keeps of a run's metadata: the session picks its
far host from the flags and combines its runs' exit codes once; the runner builds a run's metadata once and
never changes it after begin; what a run does with an earlier run's leftovers is recorded beside that run's
metadata, never in it."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeFarHost, ListRecorder, Script
from tests.unit.test_runner_orchestration import plan_of
from workbench.core import session
from workbench.core.config import resolve
from workbench.core.observe import QuietObserver, RunObserver
from workbench.core.results import Baseline, Result, Run, Sample
from workbench.core.runner import execute
from workbench.core.store import Store
from workbench.shared import procs
from workbench.shared.errors import ExitCode, NetworkError, UsageError, WorkbenchError


# ---------------------------------------------------------------- choosing the session
def test_the_flags_pick_the_far_host() -> None:
    plain = resolve("run", {})
    assert session.for_run(plain) == session.Served()
    assert session.for_run(plain, ["ftp://nas/x"]) == session.Urls(("ftp://nas/x",))
    assert session.for_run(plain, via_ssh="alice@nas") == session.ViaSsh("alice@nas", "workbench")


@pytest.mark.parametrize(
    ("typed", "urls", "via_ssh", "said"),
    [
        ({"host": "nas"}, ["ftp://nas/x"], None, "--host and server URLs"),
        ({"credentials": "c.json"}, ["ftp://nas/x"], None, "--credentials and server URLs"),
        ({"host": "nas"}, [], "alice@nas", "--via-ssh and --host"),
        ({}, ["ftp://nas/x"], "alice@nas", "--via-ssh and server URLs"),
        ({"iperf3": "nas:5201"}, [], None, "--iperf3 is for servers given by URL"),
    ],
)
def test_two_ways_of_naming_the_far_host_are_refused(
    typed: dict[str, Any], urls: list[str], via_ssh: str | None, said: str
) -> None:
    settings = resolve("run", typed, typed=set(typed))
    with pytest.raises(UsageError, match=said):
        session.for_run(settings, urls, via_ssh)


# ---------------------------------------------------------------- exit codes, combined once
class _Screen:
    """A Screen that records what it was told; `present` runs nothing, it hands back the next prepared run or
    raises the next prepared error."""

    def __init__(self, results: list[Run | WorkbenchError]) -> None:
        self.results = results
        self.said: list[tuple[str, Any]] = []

    def check_files(self, parts: Sequence[session.Part]) -> None:
        self.said.append(("check", len(parts)))

    def present(self, part: session.Part, start: session.Start) -> Run:
        self.said.append(("present", part.index))
        result = self.results.pop(0)
        if isinstance(result, WorkbenchError):
            raise result
        return result

    def status(self) -> contextlib.AbstractContextManager[RunObserver]:
        return contextlib.nullcontext(QuietObserver())

    def heading(self, part: session.Part) -> None:
        self.said.append(("heading", part.banner))

    def say(self, line: str) -> None:
        self.said.append(("say", line))

    def warn(self, line: str) -> None:
        self.said.append(("warn", line))

    def could_not(self, part: session.Part, error: WorkbenchError) -> None:
        self.said.append(("could not", part.title))

    def rows_failed(self, run: Run, failed: Sequence[Result]) -> None:
        self.said.append(("rows failed", len(failed)))


def _run(*errors: str | None) -> Run:
    rows = tuple(
        Result("fake", "scripted", "upload", "64K", 1, 1, samples=(Sample(1, 1.0, 1, True),), error=error)
        for error in errors
    )
    return Run(1, {}, Baseline(), results=rows)


def test_a_session_exits_with_its_first_failure_once_all_ran() -> None:
    outcome = session.Outcome()
    screen = _Screen([])
    outcome.ran(_run(None), screen)
    assert outcome.exit_code == 0
    outcome.ran(_run("unavailable: not on this platform"), screen)  # the platform's, not a failure
    assert outcome.exit_code == 0 and screen.said == []
    outcome.could_not(session.Part(2, 3, title="ftp://nas/x"), NetworkError("no answer"), screen)
    outcome.ran(_run("hash mismatch", None), screen)
    assert outcome.exit_code == ExitCode.NETWORK  # the first failure's, not the last's
    assert screen.said == [("could not", "ftp://nas/x"), ("rows failed", 1)]
    assert len(outcome.runs) == 3


def test_several_urls_go_on_past_one_that_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.core import stock

    monkeypatch.setattr(stock, "prepare", lambda text, plan, prompt, iperf3: (plan, None))
    urls = ("ftp://a/x", "ftp://b/x", "ftp://c/x")
    screen = _Screen([NetworkError("a is down"), _run("hash mismatch"), _run(None)])
    outcome = session.start(session.Urls(urls), resolve("run", {}), screen)
    assert outcome.exit_code == ExitCode.NETWORK and len(outcome.runs) == 2
    assert ("check", 3) in screen.said and ("could not", "ftp://a/x") in screen.said
    assert ("heading", "ftp://c/x (3 of 3)") in screen.said
    # one URL alone: its failure is the command's, raised
    with pytest.raises(NetworkError):
        session.start(session.Urls(urls[:1]), resolve("run", {}), _Screen([NetworkError("a is down")]))


class _StockSide:
    """A stock lab's side that hands each server's URL to `present` in turn, as lab/run.py does."""

    def run_stock(self, request: Any, present: Any, observer: RunObserver, label: str | None) -> list[Run]:
        found = [present(name, lambda recorder, observer: _run(None)) for name in ("ftp", "sftp", "smb")]
        return [run for run in found if run is not None]


def test_a_stock_lab_goes_on_past_a_server_that_cannot_run_and_combines_the_codes_once() -> None:
    screen = _Screen([NetworkError("ftp is down"), _run("hash mismatch"), _run(None)])
    outcome = session.start(session.StockLab(None, _StockSide()), resolve("lab", {}), screen)  # type: ignore[arg-type]
    assert outcome.exit_code == ExitCode.NETWORK and len(outcome.runs) == 2  # the first failure's code
    assert screen.said.count(("could not", "ftp")) == 1 and ("rows failed", 1) in screen.said


# ---------------------------------------------------------------- the run's metadata
class _FrozenMetaRecorder(ListRecorder):
    """Keeps the metadata begin() was given, to compare with what it holds at the end."""

    def begin(self, meta: Any, label: str | None, link: Any, window_sweep: Any) -> int:
        self.begun = meta
        self.begun_copy = json.loads(json.dumps(dict(meta)))
        return super().begin(meta, label, link, window_sweep)


def test_a_runs_metadata_is_built_once_and_never_changed_after_begin(tmp_path: Path, script: Script) -> None:
    recorder = _FrozenMetaRecorder(script.events)
    plan = plan_of(tmp_path, directions=("upload",), repeat=1, warmup=0)
    run = execute(plan, recorder, far=FakeFarHost(script.far_root))
    assert json.loads(json.dumps(dict(recorder.begun))) == recorder.begun_copy  # not mutated while it ran
    with pytest.raises(TypeError):
        recorder.begun["finished_utc"] = "now"  # read-only
    assert "finished_utc" not in recorder.begun and "upload_dir" not in recorder.begun
    # the run as it ended: its start, and the end added to it
    assert {k: run.meta[k] for k in recorder.begun_copy} == recorder.begun_copy
    assert run.meta["upload_dir"].endswith(recorder.begun_copy["upload_token"]) and run.meta["finished_utc"]


class _LeftRecorder(ListRecorder):
    """An earlier run of this far host, killed (its owner gone), for the leftovers pass to find."""

    def __init__(self, events: list[tuple[Any, ...]], earlier: dict[str, Any]) -> None:
        super().__init__(events)
        self.earlier = earlier
        self.cleanups: list[tuple[int, Mapping[str, Any]]] = []
        self.updated: list[int] = []

    def unfinished_runs(self) -> list[tuple[int, dict[str, Any]]]:
        return [(7, self.earlier)]

    def update_meta(self, run_id: int, meta: Any) -> None:
        self.updated.append(run_id)

    def record_cleanup(self, run_id: int, keys: Any) -> None:
        self.cleanups.append((run_id, dict(keys)))


def test_an_earlier_runs_leftovers_are_recorded_beside_its_metadata(tmp_path: Path, script: Script) -> None:
    plan = plan_of(tmp_path, directions=("upload",), repeat=1, warmup=0)
    far = FakeFarHost(script.far_root)
    far.target = plan.target
    (script.far_root / "incoming" / "run-7-feed").mkdir(parents=True)
    dead = {"pid": 1 << 22, "start_ticks": 1}  # above Linux's pid_max: never a live process
    target = {"host": plan.target.host, "ports": dict(plan.target.ports)}
    earlier = {"target": target, "upload_token": "feed", "owner": dead}
    recorder = _LeftRecorder(script.events, json.loads(json.dumps(earlier)))
    execute(plan, recorder, far=far)
    assert "incoming/run-7-feed" in far.deleted
    assert recorder.cleanups == [(7, {"upload_removed": True})] and recorder.updated == []
    assert recorder.earlier == earlier  # the earlier run's metadata is untouched
    assert procs.owner_state(dead) == procs.OWNER_DEAD  # what the test relies on


def test_the_store_keeps_a_cleanup_beside_the_metadata(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    server = {"kind": "stock", "url": "ftp://nas/x", "scratch": "workbench-0123456789ab"}
    with Store(db) as store:
        run_id = store.begin_run({"server": server, "upload_token": "feed"})
        store.finish_run(run_id, "2026-01-01T00:00:00Z", [], {"server": server, "finished_utc": "x"})
        assert [i for i, _ in store.unfinished_runs()] == [run_id]  # its scratch directory is pending
        store.record_cleanup(run_id, {"scratch_removed": True})
        assert store.unfinished_runs() == []
        assert store.load(run_id).meta["scratch_removed"] is True  # read back over the metadata
    with contextlib.closing(sqlite3.connect(db)) as raw:
        meta, cleanup = raw.execute("SELECT meta, cleanup FROM runs WHERE id = ?", (run_id,)).fetchone()
    assert "scratch_removed" not in json.loads(meta) and json.loads(cleanup) == {"scratch_removed": True}

"""What a run's record says about its scratch directory on a server given by URL (workbench.core.scratch_record):
removed, left alone for good (a link refusal, never tried again), or pending for the next run against the URL.
The servers' side of it runs against real servers in tests/integration/test_scratch_left_pending.py."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from workbench.core import fleet_scratch, scratch_record
from workbench.core.scratch_record import Cleanup, ScratchLeftAlone
from workbench.core.stock import scratch_left
from workbench.core.store import Store
from workbench.protocols.base import LeftInPlace
from workbench.shared.errors import NetworkError, WorkbenchError

URL = "ftp://nas/x"
SERVER = {"kind": "stock", "url": URL, "scratch": "workbench-0123456789ab"}


def test_the_end_of_a_run_records_removed_left_alone_or_pending() -> None:
    assert scratch_record.after_finish(None) == {"scratch_removed": True}
    link = scratch_left("x/workbench-0123456789ab", URL, LeftInPlace("x/workbench-0123456789ab is a link"))
    assert isinstance(link, ScratchLeftAlone)
    assert scratch_record.after_finish(link) == {"scratch_left_alone": link.one_line()}
    for cause in (NetworkError("connection refused"), WorkbenchError("DELE refused"), OSError("gone")):
        failed = scratch_left("x/workbench-0123456789ab", URL, cause)
        assert not isinstance(failed, ScratchLeftAlone)
        assert scratch_record.after_finish(failed) == {}, cause  # pending
        assert "the next run against this URL tries again" in failed.one_line()


def test_the_store_offers_a_pending_scratch_until_it_is_settled(tmp_path: Path) -> None:
    with Store(tmp_path / "runs.db") as store:
        ids = {}
        for name, extra in (
            ("pending", {}),
            ("removed", {"scratch_removed": True}),
            ("alone", {"scratch_left_alone": "x/workbench-0123456789ab is a link: left in place"}),
        ):
            meta = {"server": dict(SERVER)}
            ids[name] = store.begin_run(copy.deepcopy(meta))
            store.finish_run(ids[name], "2026-11-26T00:00:00Z", [], {**meta, **extra})
        assert [run_id for run_id, _ in store.unfinished_runs()] == [ids["pending"]]
        done = Cleanup("x/workbench-0123456789ab", URL, removed=True, deleted=True)
        store.update_meta(ids["pending"], {"server": dict(SERVER), **done.meta()})
        assert store.unfinished_runs() == []


def test_what_a_later_run_says_and_records() -> None:
    path = "x/workbench-0123456789ab"
    deleted = Cleanup(path, URL, removed=True, deleted=True)
    assert deleted.settled and deleted.meta() == {"scratch_removed": True}
    assert deleted.note("run 1's") == f"removed run 1's scratch directory {path} on {URL}, which that run had left"
    gone = Cleanup(path, URL, removed=True)
    assert gone.settled and gone.note("run 1's") is None  # someone had deleted it: nothing to say
    alone = Cleanup(path, URL, left_alone="it is a link")
    assert alone.settled and alone.meta() == {"scratch_left_alone": "it is a link"}
    assert "alone for good: it is a link" in (alone.note("run 1's") or "")
    failed = Cleanup(path, URL, failed="connection refused")
    assert not failed.settled and failed.meta() == {}
    note = failed.note("run 1's") or ""
    assert "connection refused" in note and "tries again" in note
    for cleanup in (deleted, alone, failed):
        assert "\n" not in (cleanup.note("run 1's") or "")


def test_a_fleet_members_scratch_left_alone_is_never_tried_again() -> None:
    meta = fleet_scratch.record({"fleet": {}}, "a", SERVER, False)
    meta = fleet_scratch.record(meta, "b", {**SERVER, "scratch": "workbench-ba9876543210"}, False)
    meta = fleet_scratch.mark_removed(meta, ["a"], {"b": "it is a link"})
    assert fleet_scratch.left(meta) == {}
    assert meta.get("scratch_removed") is None and meta["scratch_left_alone"] == "it is a link"

    class Recorder:
        def __init__(self) -> None:
            self.metas: list[dict] = []

        def record_cleanup(self, run_id: int, meta: dict) -> None:
            self.metas.append(meta)

    pending = fleet_scratch.record({"fleet": {}, fleet_scratch.OWNER_CHECKED: True}, "c", SERVER, False)
    recorder = Recorder()
    said = fleet_scratch.remove_left(recorder, 7, pending, lambda s: Cleanup("x/y", URL, left_alone="a link"))
    assert len(said) == 1 and "fleet run 7's (client c)" in said[0] and "alone for good" in said[0]
    assert fleet_scratch.left(recorder.metas[-1]) == {}
    assert recorder.metas[-1]["fleet"]["scratches"]["c"]["left_alone"] == "a link"
    # a failure stays pending, said in one line, and nothing is recorded
    again = Recorder()
    said = fleet_scratch.remove_left(again, 7, pending, lambda s: Cleanup("x/y", URL, failed="refused"))
    assert len(said) == 1 and "tries again" in said[0] and again.metas == []


def test_a_removal_failing_in_a_way_no_client_names_is_kept_bounded_and_safe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The record keeps why an earlier run's scratch directory is still there, and the next run prints it: an
    # exception no client translated (a library's own) must reach neither raw.
    from workbench.core import stock
    from workbench.core.plan import Plan
    from workbench.shared import login as login_mod
    from workbench.shared import urls
    from workbench.shared.credentials import Credentials
    from workbench.shared.errors import ONE_LINE_MAX_CHARS
    from workbench.shared.target import Target

    monkeypatch.setenv("WORKBENCH_PASSWORD", "pw")
    url = urls.parse("ftp://u@127.0.0.1:1/pub")
    target = Target("127.0.0.1", Credentials("u", "pw"), ports={"ftp": 1}, stock=True, prefix="pub")
    plan = Plan(target, (), ("upload",), (), (), "random", 1, 1, 0, 1.0, tmp_path)
    far = stock.StockFarHost(url, plan, "workbench-aaaaaaaaaaaa", login_mod.resolve(url, prompt=False))

    def failing(action: object) -> None:
        raise RuntimeError("\x1b]52;c;aGVsbG8=\x07\x1b[2J" + "x" * 50_000)

    monkeypatch.setattr(far, "_utility", failing)
    done = far.remove_scratch_of({"kind": "stock", "url": url.display(), "scratch": "workbench-0123456789ab"})
    assert done is not None and done.failed is not None and not done.settled
    for said in (done.failed, done.note("run 3's") or ""):
        assert "\x1b" not in said and "\x07" not in said and len(said) < ONE_LINE_MAX_CHARS + 200, said[:200]
        assert "RuntimeError" in said

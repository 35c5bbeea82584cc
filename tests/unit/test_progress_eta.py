"""The overall progress line of a run: its arithmetic (copies, bytes, the time left), what the runner tells it,
and that it renders on a terminal above the row's bar."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from tests.fakes import FAKE, FAKE_NO_HELPER, FAKE_UNAVAILABLE, FakeFarHost, ListRecorder, Script
from tests.unit.test_runner_orchestration import plan_of
from workbench.cli.eta import Pace, TimeLeft, clock
from workbench.cli.progress import RichObserver
from workbench.core.observe import QuietObserver, RunPace, pace_of
from workbench.core.runner import execute

MB = 1_000_000


def test_before_any_copy_finished_the_time_left_is_the_raw_tcp_floor() -> None:
    pace = Pace(total_copies=10, total_bytes=1000 * MB, least_s=20.0, started_s=100.0)
    assert pace.time_left(100.0) == TimeLeft(20.0, at_least=True)
    pace.under_way(250 * MB)  # a quarter of the bytes under way, no copy finished yet
    left = pace.time_left(130.0)
    assert left is not None and left.at_least and left.seconds == pytest.approx(15.0)
    assert left.text() == "≥ 15 s left"
    # no baseline: nothing honest to say until a copy has finished
    assert Pace(10, 1000 * MB, None, started_s=0.0).time_left(5.0) is None


def test_after_copies_the_time_left_is_the_bytes_left_at_the_pace_so_far() -> None:
    pace = Pace(total_copies=10, total_bytes=1000 * MB, least_s=10.0, started_s=0.0)
    pace.copy_done(100 * MB)
    pace.copy_done(100 * MB)
    left = pace.time_left(40.0)  # 200 MB in 40 s of wall time, overheads included: 5 MB/s for 800 MB
    assert left == TimeLeft(pytest.approx(160.0), at_least=False)  # type: ignore[arg-type]
    assert left is not None and left.text() == "≈ 3 min left"
    pace.under_way(50 * MB)  # the copy under way counts: 250 MB in 50 s, 750 left
    assert pace.time_left(50.0) == TimeLeft(pytest.approx(150.0), at_least=False)  # type: ignore[arg-type]
    assert pace.copies_text() == "copies 2/10" and pace.moved_bytes == 250 * MB


def test_the_pace_never_promises_less_than_the_raw_tcp_floor() -> None:
    pace = Pace(total_copies=4, total_bytes=400 * MB, least_s=100.0, started_s=0.0)
    pace.copy_done(100 * MB)  # a first copy that claims 100 MB in 1 s, faster than raw TCP's 4 MB/s
    left = pace.time_left(1.0)
    assert left is not None and not left.at_least and left.seconds == pytest.approx(75.0)


def test_dropped_copies_leave_the_totals_and_a_finished_run_has_nothing_left() -> None:
    pace = Pace(total_copies=8, total_bytes=800 * MB, least_s=None, started_s=0.0)
    for _ in range(3):
        pace.copy_done(100 * MB)
    pace.dropped(2, 200 * MB)  # a row failed and stopped
    assert (pace.total_copies, pace.total_bytes) == (6, 600 * MB)
    left = pace.time_left(30.0)  # 300 MB in 30 s: 300 MB left take 30 s
    assert left is not None and left.seconds == pytest.approx(30.0)
    for _ in range(3):
        pace.copy_done(100 * MB)
    assert pace.time_left(60.0) == TimeLeft(0.0, at_least=False) and pace.copies_text() == "copies 6/6"
    pace.dropped(5, 500 * MB)  # more dropped than are left: never below what was done
    assert (pace.total_copies, pace.total_bytes) == (6, 600 * MB)


def test_elapsed_time_reads_as_a_clock() -> None:
    assert [clock(s) for s in (0, 7.9, 75, 3599, 3600, 3 * 3600 + 62)] == [
        "0:00",
        "0:07",
        "1:15",
        "59:59",
        "1:00:00",
        "3:01:02",
    ]


def test_the_overall_line_renders_copies_bytes_elapsed_and_time_left() -> None:
    now = [1000.0]
    out = StringIO()
    console = Console(file=out, width=120, force_terminal=True, color_system=None)
    with RichObserver(console, now=lambda: now[0]) as observer:
        assert isinstance(observer, RunPace) and pace_of(observer) is observer
        now[0] = 1030.0  # the files and the baseline took 30 s
        observer.plan(total_copies=8, total_bytes=8 * 16 * MB, least_s=4.0)
        assert observer.overall_text() == "0:30 elapsed, ≥ 4 s left"
        row = observer.row_progress("http/aiohttp upload 16M", 16 * MB)
        row.restart("http/aiohttp upload 16M warm-up")
        row.advance(16 * MB)
        now[0] = 1034.0
        observer.copy_done(16 * MB)
        row.restart("http/aiohttp upload 16M 1/3")
        row.advance(8 * MB)
        now[0] = 1036.0  # 24 MB in 6 s since the copies began: 104 MB left at 4 MB/s
        assert observer.overall_text() == "0:36 elapsed, ≈ 26 s left"
        assert observer._bar is not None
        observer._bar.refresh()
        shown = out.getvalue()
    assert "copies 1/8" in shown and "24.0/128.0 MB" in shown and "0:36 elapsed, ≈ 26 s left" in shown
    assert "http/aiohttp upload 16M 1/3" in shown and "8.0/16.0 MB" in shown
    # the overall line sits above the row's bar
    assert shown.rindex("copies 1/8") < shown.rindex("http/aiohttp upload 16M 1/3")


def test_an_observer_without_the_run_wide_calls_is_left_out_of_them() -> None:
    quiet = QuietObserver()
    assert not isinstance(quiet, RunPace)
    pace_of(quiet).plan(1, 1, None)  # a no-op, not an AttributeError
    pace_of(quiet).copy_done(1)
    pace_of(quiet).copies_dropped(1, 1)


class _Counting(QuietObserver):
    def __init__(self) -> None:
        self.planned: tuple[int, int, float | None] | None = None
        self.done: list[int] = []
        self.dropped: list[tuple[int, int]] = []

    def plan(self, total_copies: int, total_bytes: int, least_s: float | None) -> None:
        self.planned = (total_copies, total_bytes, least_s)

    def copy_done(self, set_bytes: int) -> None:
        self.done.append(set_bytes)

    def copies_dropped(self, copies: int, set_bytes: int) -> None:
        self.dropped.append((copies, set_bytes))


def test_the_runner_counts_every_planned_copy_as_made_or_dropped(tmp_path: Path, script: Script) -> None:
    size = 64 << 10
    plan = plan_of(tmp_path, entries=(FAKE_UNAVAILABLE, FAKE_NO_HELPER, FAKE), sizes=(size,), repeat=3)
    script.fail_copies = {2}  # the upload row's first timed copy: its last two are not made
    observer = _Counting()
    execute(plan, ListRecorder(script.events), observer, far=FakeFarHost(script.far_root))
    # fake/absent cannot load: not planned; fake/nohelper is found out at connect: dropped, both directions
    per_client = 2 * (1 + 3)
    assert observer.planned == (2 * per_client, 2 * per_client * size, pytest.approx(2 * per_client * size / 1e9))
    assert observer.dropped == [(per_client, per_client * size), (2, 2 * size)]
    assert observer.done == [size] * script.copies and script.copies == 2 + 4
    assert len(observer.done) + sum(n for n, _ in observer.dropped) == observer.planned[0]

"""The kernel's schedstat as read per thread: run and run-queue wait, and what a copy's threads spent between two
readings."""

from __future__ import annotations

import os
import threading
import time

import pytest

from workbench.core.sampler import CopyMeter
from workbench.shared import schedstat


def test_parse_reads_the_wait_and_refuses_other_text() -> None:
    assert schedstat.parse("375733 2000 1\n") == 2000
    assert schedstat.parse("") is None
    assert schedstat.parse("x y z") is None


def test_the_most_waiting_thread_counts_new_threads_from_zero_and_skips_watchers() -> None:
    before = {1: 50, 2: 10, 9: 5}
    after = {1: 1_000_000_050, 3: 2_000_000_000, 9: 9_000_000_000, 2: 5}
    # two threads waiting at once lose the copy that time once: the most-waiting one's, not the sum
    assert schedstat.most_waited(before, after, skip={9}) == pytest.approx(2.0)
    assert schedstat.most_waited(before, after) == pytest.approx(9.0)
    assert schedstat.most_waited(before, {2: 5}) == 0.0  # a reading below the last (a reused id) is no wait


def test_this_process_threads_are_read() -> None:
    first = schedstat.threads()
    if first is None:
        pytest.skip("this kernel keeps no schedstat")
    done = threading.Event()

    def spin() -> None:
        total = 0
        while not done.is_set() and total < 10**7:
            total += 1

    worker = threading.Thread(target=spin)
    worker.start()
    worker.join(timeout=5)
    done.set()
    second = schedstat.threads()
    assert second is not None
    # the worker ended and took its figures with it; the main thread's wait never shrinks
    main = threading.main_thread().native_id
    assert main in first and main in second and second[main] >= first[main]
    # the most-waiting thread waited at least as long as the main thread did between the readings
    assert schedstat.most_waited(first, second) >= (second[main] - first[main]) / 1e9


def test_a_meter_reports_its_copys_wait_once_stopped() -> None:
    meter = CopyMeter(interval=0.01)
    assert meter.wait_s is None
    started = time.monotonic()
    meter.start()
    meter(10)
    meter.stop()
    copy_s = time.monotonic() - started
    if schedstat.threads() is None:
        assert meter.wait_s is None
    else:
        # the copy's own wait: within the copy, not the threads' waits since they started
        assert meter.wait_s is not None and 0 <= meter.wait_s <= copy_s


def test_a_process_trees_cpu_and_waits_are_read_together() -> None:
    cpu_s, waits = schedstat.tree_cpu_and_waits({os.getpgid(0)})
    assert cpu_s > 0  # this test process is in its own group's tree
    if schedstat.threads() is not None:
        # every thread, the one reading too: serve reads in any free worker thread, and one left out of a reading
        # but not of the next would seem to wait its whole life between them
        assert waits is not None and threading.main_thread().native_id in waits
        read: list[dict[int, int] | None] = []
        reader = threading.Thread(target=lambda: read.append(schedstat.tree_cpu_and_waits({os.getpgid(0)})[1]))
        reader.start()
        reader.join(timeout=10)
        assert read and read[0] is not None and {threading.main_thread().native_id, reader.native_id} <= set(read[0])
    assert schedstat.tree_cpu_and_waits({2**22 + 7}) == (0.0, None)  # no such group: nothing read


def test_run_and_wait_are_read_and_a_threads_run_time_is_counted_between_readings() -> None:
    assert schedstat.parse_run_and_wait("375733 2000 1\n") == (375733, 2000)
    assert schedstat.parse_run_and_wait("x 2000 1") is None
    before = {1: (1_000, 5), 2: (10, 5)}
    after = {1: (3_000_001_000, 5), 2: (10, 5), 3: (500_000_000, 0)}
    assert schedstat.ran(before, after, {1, 3}) == pytest.approx(3.5)  # a new thread from zero
    assert schedstat.ran(before, after, {2, 9}) == 0.0  # one that did not run, one gone


def _spin_cpu(seconds: float) -> None:
    """Keep this thread on a CPU for `seconds` of its own CPU time (never more than 10 s by the wall clock)."""
    start, deadline = time.thread_time(), time.monotonic() + 10
    while time.thread_time() - start < seconds and time.monotonic() < deadline:
        pass


@pytest.mark.parametrize("watching", ["tcp-watch", schedstat.CAPTURE_THREAD])
def test_a_meter_reads_its_copys_cpu_below_a_clock_tick_and_leaves_the_watching_threads_out(watching: str) -> None:
    """A TCP watch, or the lab's capture that counts exchanges (workbench.lab.wirecount), is the instrument's
    work, not the copy's."""
    if schedstat.threads() is None:
        pytest.skip("this kernel keeps no schedstat")
    go, spun, done = threading.Event(), threading.Event(), threading.Event()

    def watch() -> None:  # a TCP watch that runs through the copy, busier than the copy itself
        go.wait(10)
        _spin_cpu(0.03)
        spun.set()
        done.wait(10)

    watcher = threading.Thread(target=watch, name=watching)
    watcher.start()
    meter = CopyMeter(interval=0.01)
    meter.start()
    go.set()
    _spin_cpu(0.003)  # about 3 ms: clock ticks would read 0 or 10 ms
    spun.wait(10)
    meter.stop()
    done.set()
    watcher.join(timeout=10)
    assert meter.cpu_s is not None
    # the copying thread's 3 ms, not the watch's 30 ms with it, and not a whole tick's 0 or 10 ms
    assert 0.001 <= meter.cpu_s < 0.02 and meter.cpu_s != pytest.approx(0.01, abs=1e-4)


def test_a_meter_without_schedstat_leaves_the_cpu_to_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedstat, "readings", lambda pid="self": None)
    meter = CopyMeter(interval=0.01)
    meter.start()
    meter(1)
    meter.stop()
    assert meter.cpu_s is None and meter.wait_s is None

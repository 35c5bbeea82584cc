"""The kernel's schedstat as read per thread: run and run-queue wait, and what a copy's threads spent between two
readings."""

from __future__ import annotations

import threading

import pytest

from workbench.core.sampler import CopyMeter
from workbench.shared import schedstat


def test_parse_reads_run_and_wait_and_refuses_other_text() -> None:
    assert schedstat.parse("375733 2000 1\n") == (375733, 2000)
    assert schedstat.parse("") is None
    assert schedstat.parse("x y z") is None


def test_between_counts_new_threads_from_zero_skips_watchers_and_never_goes_below_zero() -> None:
    before = {1: (100, 50), 2: (10, 10), 9: (5, 5)}
    after = {1: (300, 1_000_000_050), 3: (7, 2_000_000_000), 9: (5, 9_000_000_000), 2: (5, 5)}
    assert schedstat.between(before, after, skip={9}) == pytest.approx(3.0)


def test_this_process_threads_are_read_and_a_busy_thread_ran() -> None:
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
    # the main thread ran between the readings (its run time grew); the worker ended and took its figures with it
    main = threading.main_thread().native_id
    assert main in first and main in second
    assert second[main][0] > first[main][0]
    assert schedstat.between(first, second) >= 0


def test_a_meter_reports_its_copys_wait_once_stopped() -> None:
    meter = CopyMeter(interval=0.01)
    assert meter.wait_s is None
    meter.start()
    meter(10)
    meter.stop()
    if schedstat.threads() is None:
        assert meter.wait_s is None
    else:
        assert meter.wait_s is not None and meter.wait_s >= 0


def test_a_process_trees_cpu_and_wait_are_read_together() -> None:
    import os

    cpu_s, wait_s = schedstat.tree_cpu_and_wait({os.getpgid(0)})
    assert cpu_s > 0  # this test process is in its own group's tree
    if schedstat.threads() is not None:
        assert wait_s is not None and wait_s >= 0
    assert schedstat.tree_cpu_and_wait({2**22 + 7}) == (0.0, None)  # no such group: nothing read

"""How long a process's threads ran and how long they waited for a core, from the kernel's schedstat.

/proc/<pid>/task/<tid>/schedstat holds three numbers per thread: nanoseconds on a CPU, nanoseconds runnable but
waiting on a run queue, and timeslices run. The wait is what a loaded host takes from a copy: time the copy was
ready to work and no core ran it. CPU time (utime + stime) never shows it, so a per-file CPU figure taken on a
busy host and one taken on a quiet host agree, while the copies' wall-clock times do not.

A thread that ends between two readings takes its figures with it (the kernel adds no thread's wait to its
process), so a difference is an undercount, never read below zero.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass

NS_PER_S = 1e9


@dataclass(frozen=True)
class TaskTimes:
    """Seconds on a CPU and seconds waiting on a run queue, summed over threads."""

    run_s: float
    wait_s: float


def parse(text: str) -> tuple[int, int] | None:
    """(run ns, wait ns) of one schedstat line; None when it is not one."""
    fields = text.split()
    if len(fields) < 2 or not fields[0].isdigit() or not fields[1].isdigit():
        return None
    return int(fields[0]), int(fields[1])


def threads(pid: int | str = "self") -> dict[int, tuple[int, int]] | None:
    """(run ns, wait ns) of each thread of `pid` now, by thread id; None where the kernel keeps no schedstat
    (built without it) or the process is gone."""
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return None
    found = {}
    for tid in tids:
        try:
            with open(f"{base}/{tid}/schedstat") as fh:
                read = parse(fh.read())
        except OSError:
            continue  # the thread ended, or no schedstat: said below when none reads
        if read is not None and tid.isdigit():
            found[int(tid)] = read
    return found or None


def between(
    before: Mapping[int, tuple[int, int]], after: Mapping[int, tuple[int, int]], skip: Collection[int] = ()
) -> TaskTimes:
    """What the threads of `after` ran and waited since `before` (a thread new since then from zero), those in
    `skip` left out: threads that watch the copy rather than make it."""
    run_ns = wait_ns = 0
    for tid, (run, wait) in after.items():
        if tid in skip:
            continue
        run0, wait0 = before.get(tid, (0, 0))
        run_ns += max(0, run - run0)
        wait_ns += max(0, wait - wait0)
    return TaskTimes(run_ns / NS_PER_S, wait_ns / NS_PER_S)

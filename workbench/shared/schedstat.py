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
import threading
from collections.abc import Collection, Mapping

from workbench.shared import procs

NS_PER_S = 1e9
# Threads that watch a copy rather than make it (the copy meter, the TCP triage's sampling): the time they wait
# for a core is not the copy's, on either host.
WATCHING_THREADS = frozenset({"copy-meter", "tcp-watch"})


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
) -> float:
    """Seconds the threads of `after` waited for a core since `before` (a thread new since then from zero), those
    in `skip` left out: threads that watch the copy rather than make it."""
    wait_ns = 0
    for tid, (_, wait) in after.items():
        if tid not in skip:
            wait_ns += max(0, wait - before.get(tid, (0, 0))[1])
    return wait_ns / NS_PER_S


def watching_threads() -> set[int]:
    """Thread ids of this process's threads in WATCHING_THREADS."""
    return {t.native_id for t in threading.enumerate() if t.name in WATCHING_THREADS and t.native_id is not None}


def tree_cpu_and_wait(pgids: Collection[int]) -> tuple[float, float | None]:
    """CPU seconds (user+system, reaped children included) of the given process groups and every process below
    them, and their threads' run-queue wait in seconds (None: no schedstat here), from one process snapshot.

    The wait is read after the CPU, so reading it is not in the next reading's CPU figure; this process's
    watching threads (`watching_threads`) are left out of it."""
    snap = procs.snapshot()
    groups = [pid for pid, fields in snap.items() if int(fields[2]) in pgids]
    members = procs.tree(groups, snap)
    cpu_s = procs.cpu_seconds(members, snap)
    wait_ns = 0
    read = False
    skip = watching_threads()
    for pid in members:
        found = threads(pid)
        if found is not None:
            read = True
            wait_ns += sum(wait for tid, (_, wait) in found.items() if tid not in skip)
    return cpu_s, (wait_ns / NS_PER_S if read else None)

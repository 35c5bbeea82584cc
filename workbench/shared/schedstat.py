"""How long a process's threads waited for a core, from the kernel's schedstat.

/proc/<pid>/task/<tid>/schedstat holds three numbers per thread: nanoseconds on a CPU, nanoseconds runnable but
waiting on a run queue, and timeslices run. The wait is what a loaded host takes from a copy: time the copy was
ready to work and no core ran it. CPU time (utime + stime) never shows it, so a per-file CPU figure taken on a
busy host and one taken on a quiet host agree, while the copies' wall-clock times do not.

What a copy lost is read as its most-waiting thread's wait between two readings (`most_waited`), not the sum
over threads: threads that wait at the same time (a client's receiving thread and its caller, woken by one
answer; an idle server's timer) lose the copy that time once or not at all, so a sum can exceed the copy's own
duration, while the thread that waited most waited that long on the copy's way at most. A lower bound, which
is what a ceiling may charge. A thread that ends between two readings takes its figures with it (the kernel
adds no thread's wait to its process), another undercount.

The run time (first field) is in nanoseconds, where CPU time from /proc/<pid>/stat or os.times counts 10 ms
clock ticks: over sets that differ by tens of files a tick is a millisecond per file, a small file's whole time
on a fast link. It leaves the watching threads out of a copy's CPU (`ran`). The reading thread's own figure is
the kernel's last accounting of it, up to a tick old (reading a file does not bring it up to date), so the CPU
a copy's process used is read from the process clock (time.process_time: the same nanosecond count, brought up
to date, ended threads included) and only the watchers' run time from here.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Collection, Mapping

from workbench.shared import procs

NS_PER_S = 1e9
# Threads that watch a copy rather than make it (the copy meter, the TCP triage's sampling, the lab's capture that
# counts a client's exchanges): neither their CPU nor the time they wait for a core is the copy's, on either host.
CAPTURE_THREAD = "wirecount"
WATCHING_THREADS = frozenset({"copy-meter", "tcp-watch", CAPTURE_THREAD})


def parse(text: str) -> int | None:
    """The run-queue wait (ns) of one schedstat line (run ns, wait ns, timeslices); None when it is not one."""
    both = parse_run_and_wait(text)
    return both[1] if both is not None else None


def parse_run_and_wait(text: str) -> tuple[int, int] | None:
    """The time on a CPU and the run-queue wait (ns) of one schedstat line; None when it is not one."""
    fields = text.split()
    return (
        (int(fields[0]), int(fields[1])) if len(fields) >= 2 and fields[0].isdigit() and fields[1].isdigit() else None
    )


def readings(pid: int | str = "self") -> dict[int, tuple[int, int]] | None:
    """The time on a CPU and the run-queue wait (ns) so far of each thread of `pid`, by thread id; None where the
    kernel keeps no schedstat (built without it) or the process is gone."""
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return None
    found = {}
    for tid in tids:
        try:
            with open(f"{base}/{tid}/schedstat") as fh:
                both = parse_run_and_wait(fh.read())
        except OSError:
            continue  # the thread ended, or no schedstat: said below when none reads
        if both is not None and tid.isdigit():
            found[int(tid)] = both
    if not any(run_ns for run_ns, _ in found.values()):
        return None  # a kernel that keeps no schedstat writes zeros: a process that ran has run time
    return found


def threads(pid: int | str = "self") -> dict[int, int] | None:
    """The run-queue wait (ns) so far of each thread of `pid`, by thread id; None where the kernel keeps no
    schedstat (built without it) or the process is gone."""
    found = readings(pid)
    return waits_of(found) if found is not None else None


def waits_of(found: Mapping[int, tuple[int, int]]) -> dict[int, int]:
    """The run-queue waits (ns) of a `readings` result, by thread id."""
    return {tid: wait for tid, (_, wait) in found.items()}


def ran(before: Mapping[int, tuple[int, int]], after: Mapping[int, tuple[int, int]], only: Collection[int]) -> float:
    """Seconds the threads in `only` ran on a CPU between two `readings` (a thread new since then from zero)."""
    return sum(max(0, after[tid][0] - before.get(tid, (0, 0))[0]) for tid in only if tid in after) / NS_PER_S


def most_waited(before: Mapping[int, int], after: Mapping[int, int], skip: Collection[int] = ()) -> float:
    """Seconds the most-waiting thread of `after` waited for a core since `before` (a thread new since then from
    zero), those in `skip` left out: threads that watch the copy rather than make it."""
    return (
        max((max(0, wait - before.get(tid, 0)) for tid, wait in after.items() if tid not in skip), default=0) / NS_PER_S
    )


def watching_threads() -> set[int]:
    """Thread ids of this process's threads in WATCHING_THREADS."""
    return {t.native_id for t in threading.enumerate() if t.name in WATCHING_THREADS and t.native_id is not None}


def tree_cpu_and_waits(pgids: Collection[int]) -> tuple[float, dict[int, int] | None]:
    """CPU seconds (user+system, reaped children included) of the given process groups and every process below
    them, and the run-queue wait (ns) so far of each of their threads (None: no schedstat here), from one process
    snapshot.

    Descendants matter: sshd runs each session (and its sftp-server or rsync) in a new session and process
    group, so counting the listener's group alone saw 1 % of a core while a session decrypted 60 MB/s.
    The waits are read after the CPU, so the scan that reads them falls into the next reading's CPU figure (one
    /proc scan of the tree, well inside the clock tick the ceilings take off the server's CPU); this process's
    watching threads (`watching_threads`) are left out of the waits."""
    snap = procs.snapshot()
    groups = [pid for pid, fields in snap.items() if int(fields[2]) in pgids]
    members = procs.tree(groups, snap)
    cpu_s = procs.cpu_seconds(members, snap)
    # The thread reading is not left out: serve reads in whichever worker thread is free, and a worker left out
    # of one reading and not of the next would be read as waiting its whole life between them.
    skip = watching_threads()
    waits: dict[int, int] = {}
    read = False
    for pid in members:
        found = threads(pid)
        if found is not None:
            read = True
            waits.update((tid, wait) for tid, wait in found.items() if tid not in skip)
    return cpu_s, (waits if read else None)

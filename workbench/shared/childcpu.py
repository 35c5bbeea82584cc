"""The CPU of the client processes this process starts (curl, scp, rsync, smbclient), their whole trees included.

getrusage(RUSAGE_CHILDREN) counts a child only once it is reaped, and a grandchild only once its own parent
reaped it: a tool that leaves its children unreaped (scp downloading several files starts one ssh per remote
file and never waits for them) takes their CPU out of the count (4 logins: 80 ms by getrusage, 320 ms spent).

Where the kernel lets this process make one, a cgroup v2 group holds the client processes that run_native is
asked to count whole (`count_tree`: the child joins in preexec_fn, before it runs the tool, so nothing it forks
escapes), and the group's `cpu.stat` `usage_usec` counts every task that ever ran in it, the exited and the
unreaped ones too. Joining is asked for only where a tool leaves children unreaped (scp downloading more than
one remote file): it costs the start a fork instead of a vfork and the kernel's cgroup migration, time inside
the copy's timed span (measured on a 2-core machine from a process of a workbench run's size, 60 starts each:
vfork 0.3 ms, fork 2.3 ms, fork and join 2.4 ms at the median, the join itself under 0.1 ms, 0.5 ms at most).
Every other child is counted by getrusage once reaped, as before; a joined child is reaped with wait4, whose
figure (already in getrusage's) is taken off the group's, so nothing is counted twice. What the tool left
unreaped may still run when it exits: a copy's closing reading first waits a little for the group to empty
(`wait_emptied`).

The group sits under this process's own cgroup (a limit on that one still holds for the clients), is made for
the first child that joins (or by `prepare`, where such a tool connects: scp's connect, whatever it then copies),
never in a run that uses no such tool, and a probe child that makes sure the kernel takes the move is counted in
no reading. It is named after this
process (`wb-clients-<pid>`), is removed at exit, and a run killed outright leaves one the next run removes
(its owner gone). Without cgroup v2, or where the group cannot be made or joined (not root, read-only), no
child joins and the reading is getrusage's alone; a group that refuses a child later is dropped, and that
child starts again outside it.
"""

from __future__ import annotations

import atexit
import functools
import os
import resource
import select
import subprocess
import threading
import time
from pathlib import Path

from workbench.shared.cgroupfs import MOUNTINFO, cgroup_mounts, read, remove_group, stat
from workbench.shared.procs import pid_alive

PREFIX = "wb-clients-"
OWN_CGROUP = Path("/proc/self/cgroup")
PROBE_ARGV: tuple[str, ...] = ("true",)  # the child that checks the kernel takes the move
PROBE_TIMEOUT_S = 5.0
SETTLE_S = 2.0  # the longest a copy's closing reading waits for what its tool left unreaped to end
SETTLE_POLL_S = 0.01


class _Group:
    """The group once made: its directory and an open handle on its cgroup.procs for children to join by."""

    def __init__(self, path: Path, procs_fd: int) -> None:
        self.path = path
        self.procs_fd = procs_fd
        self.owner = os.getpid()


_lock = threading.Lock()  # a reading and the first count_tree child's making of the group may be in two threads
_group: _Group | None = None
_tried = False  # made, or found impossible (or dropped), since the last remove()
# Taken off every reading: what getrusage and the group hold that is no copy's (the probe child; what an earlier
# process with this pid left in a group of that name) or that both hold (a joined child reaped with wait4), less
# what a group removed since had counted (its figure stays in the readings, so they never step back).
_uncounted_s = 0.0


def _v2_mount(mountinfo: str) -> Path | None:
    """Where the cgroup v2 file system is mounted (a hybrid machine has it beside v1's, e.g. …/unified)."""
    return next((point for kind, point, _ in cgroup_mounts(mountinfo) if kind == "cgroup2"), None)


def _own_cgroup(mount: Path, cgroup_text: str) -> Path | None:
    """This process's cgroup v2 directory (the `0::` line of /proc/self/cgroup) under `mount`."""
    for line in cgroup_text.splitlines():
        if line.startswith("0::"):
            path = mount / line[3:].strip().lstrip("/")
            return path if path.is_dir() else None
    return None


def _parent_dir() -> Path | None:
    try:
        mount = _v2_mount(MOUNTINFO.read_text())
        return _own_cgroup(mount, OWN_CGROUP.read_text()) if mount is not None else None
    except OSError:
        return None


def _usage_s(path: Path) -> float | None:
    usage_us = stat(path).get("usage_usec")
    return usage_us / 1e6 if usage_us is not None else None


def _make() -> _Group | None:
    global _uncounted_s
    parent = _parent_dir()
    if parent is None:
        return None
    remove_stale(parent)
    path = parent / f"{PREFIX}{os.getpid()}"
    try:
        path.mkdir(mode=0o755)
    except FileExistsError:
        pass  # a group of an earlier process with this pid (a reused pid): its figure is taken off below
    except OSError:
        return None
    try:
        group = _Group(path, os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
    except OSError:
        remove_group(path)
        return None
    # One child through the way every client joins: a kernel that refuses the move (a threaded subtree, a
    # delegation that stops short) says so here, not in the middle of a copy. Its CPU is no copy's.
    try:
        joined, probe_s = _probe(group.procs_fd)
        _uncounted_s += probe_s
        usage_s = _usage_s(path)
    except BaseException:  # Ctrl-C or a signal's exit meanwhile: nothing knows of the group yet but this
        os.close(group.procs_fd)
        remove_group(path)
        raise
    if not joined or usage_s is None:
        os.close(group.procs_fd)
        remove_group(path)
        return None
    _uncounted_s += usage_s  # a new group counts from here, at 0: the probe's part, or an earlier owner's
    return group


def _probe(procs_fd: int) -> tuple[bool, float]:
    """Whether a child joins through `procs_fd` and ends well, waited for through a pidfd (as run_native waits
    for a joined child: no pidfd, no joining) and reaped with wait4; its CPU seconds."""
    try:
        proc = subprocess.Popen(PROBE_ARGV, preexec_fn=_joiner(procs_fd))
    except (OSError, subprocess.SubprocessError):
        return False, 0.0
    pidfd, ended = True, False
    try:
        try:
            exit_fd = os.pidfd_open(proc.pid)
            try:
                poller = select.poll()
                poller.register(exit_fd, select.POLLIN)
                ended = bool(poller.poll(PROBE_TIMEOUT_S * 1000))
            finally:
                os.close(exit_fd)
        except (AttributeError, OSError):
            pidfd = False
    finally:  # ended, timed out or interrupted: the probe is reaped, never left behind
        if not ended:
            proc.kill()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    return pidfd and proc.returncode == 0, usage.ru_utime + usage.ru_stime


def _joiner(procs_fd: int) -> functools.partial[int]:
    # Runs in the forked child before exec: one write, "0" meaning the writer itself.
    return functools.partial(os.write, procs_fd, b"0")


def children_cpu_s() -> float:
    """CPU seconds so far of this process's client children: getrusage's reaped children, and where there is a
    group, what the joined trees used besides (their exited and unreaped descendants, and the live ones so far).
    Only the difference of two readings means anything; before the group is made it counts nothing (it starts
    at 0), and making it between two readings adds nothing of its own."""
    with _lock:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        usage_s = _usage_s(_group.path) if _group is not None else None
        return children.ru_utime + children.ru_stime + (usage_s or 0.0) - _uncounted_s


def reap(pid: int, *, block: bool) -> int | None:
    """Reap the joined child `pid` with wait4 (waiting for it if `block`); its wait status, None while it runs.
    Its figure (its own CPU, and its reaped descendants') is in getrusage's and the group's from then on: it is
    taken off under the lock a reading holds, so no reading sees it in both."""
    global _uncounted_s
    if block:  # wait for its end outside the lock (readings go on meanwhile), leaving it to reap below
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    with _lock:
        found, status, usage = os.wait4(pid, os.WNOHANG)
        if found == 0:
            return None
        _uncounted_s += usage.ru_utime + usage.ru_stime
        return status


def preexec_join() -> functools.partial[int] | None:
    """Popen's preexec_fn that puts the child in the group, made now if this process has none yet (the first
    count_tree child); None: no group can be made here, the child stays where it is and getrusage counts what is
    reaped. Decide once per child: the same answer says whether it joined."""
    global _group, _tried
    with _lock:
        if not _tried:
            _tried = True
            _group = _make()
        group = _group
    return _joiner(group.procs_fd) if group is not None and group.owner == os.getpid() else None


def prepare() -> None:
    """Make the group now, if it can be and is not yet: where a tool that will count its tree connects, outside
    the timed copies (making it forks a probe child)."""
    preexec_join()


def wait_emptied(timeout_s: float = SETTLE_S) -> bool:
    """Wait, polling, up to `timeout_s` for nothing to run in the group any more: the children a tool left
    unreaped may still be ending after it (an ssh closing its connection), and their CPU is the copy's that
    started them, not the next one's. Whether it is empty (at once when there is no group)."""
    group = _group
    if group is None:
        return True
    deadline = time.monotonic() + timeout_s
    while "populated 1" in read(group.path / "cgroup.events").splitlines():
        if time.monotonic() >= deadline:
            return False
        time.sleep(SETTLE_POLL_S)
    return True


def _discard() -> None:
    # Take the group away; what it counted stays in the readings as a constant.
    global _group, _uncounted_s
    group, _group = _group, None
    if group is None or group.owner != os.getpid():
        return
    usage_s = _usage_s(group.path)
    if usage_s is not None:
        _uncounted_s -= usage_s
    os.close(group.procs_fd)
    remove_group(group.path)


def drop() -> None:
    """The group refused a child (its directory gone, a move the kernel no longer takes): it is removed and no
    child joins one from now on in this process; getrusage counts what is reaped."""
    global _tried
    with _lock:
        _discard()
        _tried = True


def remove() -> None:
    """Remove this process's group (at exit; idempotent); a later count_tree child makes a new one. A forked
    process leaves its parent's alone."""
    global _tried
    with _lock:
        _discard()
        _tried = False


def remove_stale(parent: Path) -> list[Path]:
    """Remove the groups under `parent` whose owning process is gone (a run killed outright); what went."""
    removed: list[Path] = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for path in entries:
        owner = path.name.removeprefix(PREFIX)
        if path.name.startswith(PREFIX) and owner.isdigit() and not pid_alive(int(owner)) and path.is_dir():
            remove_group(path)
            if not path.exists():
                removed.append(path)
    return removed


def _forget_in_child() -> None:
    # A forked workbench run makes a group of its own for its first count_tree child; its parent's stays the
    # parent's. The lock may have been held by another thread at the fork: a new one.
    global _group, _tried, _uncounted_s, _lock
    _group, _tried, _uncounted_s, _lock = None, False, 0.0, threading.Lock()


atexit.register(remove)
os.register_at_fork(after_in_child=_forget_in_child)

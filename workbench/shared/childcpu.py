"""The CPU of the client processes this process starts (curl, scp, rsync, smbclient), their whole trees included.

getrusage(RUSAGE_CHILDREN) counts a child only once it is reaped, and a grandchild only once its own parent
reaped it: a tool that leaves its children unreaped (scp downloading several files starts one ssh per remote
file and never waits for them) takes their CPU out of the count (4 logins: 80 ms by getrusage, 320 ms spent).

Where the kernel lets this process make one, a cgroup v2 group holds the client processes that run_native is
asked to count whole (`count_tree`: the child joins in preexec_fn, before it runs the tool, so nothing it forks
escapes), and the group's `cpu.stat` `usage_usec` counts every task that ever ran in it, the exited and the
unreaped ones too. Joining is asked for only by the tools that leave children unreaped: it costs the start a
fork instead of a vfork (1.5-2 ms) and the kernel's cgroup migration (usually under a millisecond, tens of ms
on a loaded machine), time inside the copy's timed span. Every other child is counted by getrusage once
reaped, as before; a joined child is reaped with wait4, whose figure (already in getrusage's) is taken off
the group's, so nothing is counted twice.

The group sits under this process's own cgroup (a limit on that one still holds for the clients), is made by
the first reading (`children_cpu_s`), is named after this process (`wb-clients-<pid>`), is removed at exit,
and a run killed outright leaves one the next run removes (its owner gone). Without cgroup v2, or where the
group cannot be made or joined (not root, read-only), no child joins and the reading is getrusage's alone.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import os
import resource
import subprocess
import time
from pathlib import Path

from workbench.shared.procs import pid_alive

PREFIX = "wb-clients-"
MOUNTINFO = Path("/proc/self/mountinfo")
OWN_CGROUP = Path("/proc/self/cgroup")
REMOVE_TRIES = 50  # rmdir is refused (EBUSY) until the kernel has let go of the group's last exited task
PROBE_TIMEOUT_S = 5.0


class _Group:
    """The group once made: its directory and an open handle on its cgroup.procs for children to join by."""

    def __init__(self, path: Path, procs_fd: int) -> None:
        self.path = path
        self.procs_fd = procs_fd
        self.owner = os.getpid()


_group: _Group | None = None
_tried = False  # made or found impossible, once per process
_reaped_s = 0.0  # what getrusage already counts of the group: the joined children reaped so far, with wait4


def _v2_mount(mountinfo: str) -> Path | None:
    """Where the cgroup v2 file system is mounted (a hybrid machine has it beside v1's, e.g. …/unified)."""
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if sep and len(fields) >= 5 and rest and rest[0] == "cgroup2":
            point = fields[4]
            return Path(point.encode().decode("unicode_escape") if "\\" in point else point)
    return None


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
    try:
        text = (path / "cpu.stat").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec" and value.strip().isdigit():
            return int(value) / 1e6
    return None


def _make() -> _Group | None:
    parent = _parent_dir()
    if parent is None:
        return None
    remove_stale(parent)
    path = parent / f"{PREFIX}{os.getpid()}"
    try:
        path.mkdir(mode=0o755)
    except FileExistsError:
        pass  # a group of an earlier process with this pid (a reused pid): counted by differences, as ours
    except OSError:
        return None
    try:
        group = _Group(path, os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
    except OSError:
        _remove(path)
        return None
    # One child through the way every client joins: a kernel that refuses the move (a threaded subtree, a
    # delegation that stops short) says so here, not in the middle of a copy.
    try:
        joined = subprocess.run(
            ["true"], preexec_fn=_joiner(group.procs_fd), timeout=PROBE_TIMEOUT_S, check=False
        ).returncode == 0
    except (OSError, subprocess.SubprocessError):
        joined = False
    if not joined or _usage_s(path) is None or not _pidfd_works():
        os.close(group.procs_fd)
        _remove(path)
        return None
    atexit.register(remove)
    return group


def _pidfd_works() -> bool:
    # a joined child is waited for with wait4 once its pidfd says it ended (run_native): a pidfd must be there
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


def _joiner(procs_fd: int) -> functools.partial[int]:
    # Runs in the forked child before exec: one write, "0" meaning the writer itself.
    return functools.partial(os.write, procs_fd, b"0")


def _current() -> _Group | None:
    global _group, _tried
    if not _tried:
        _tried = True
        _group = _make()
    return _group


def children_cpu_s() -> float:
    """CPU seconds so far of this process's client children: getrusage's reaped children, and where there is a
    group, what the joined trees used besides (their exited and unreaped descendants, and the live ones so far).
    Only the difference of two readings means anything; the first reading makes the group."""
    group = _current()  # first: making it reaps a probe child, whose CPU belongs to no copy
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped_s = children.ru_utime + children.ru_stime
    usage = _usage_s(group.path) if group is not None else None
    return reaped_s + usage - _reaped_s if usage is not None else reaped_s


def note_reaped(usage: resource.struct_rusage) -> None:
    """A joined child was reaped with wait4: `usage` (its own, and its reaped descendants') is now in getrusage's
    figure as well as the group's."""
    global _reaped_s
    _reaped_s += usage.ru_utime + usage.ru_stime


def join_fd() -> int | None:
    """The open cgroup.procs a client child writes "0" to before exec to join the group; None: no group (never
    made by a reading here, or impossible), the child stays where it is and getrusage counts what is reaped."""
    return _group.procs_fd if _group is not None and _group.owner == os.getpid() else None


def preexec_join() -> functools.partial[int] | None:
    """Popen's preexec_fn that puts the child in the group (None: no group)."""
    fd = join_fd()
    return _joiner(fd) if fd is not None else None


def _remove(path: Path) -> None:
    """Move what still runs in `path` to its parent, then remove it (refused until its last exited task is let go)."""
    for _ in range(REMOVE_TRIES):
        with contextlib.suppress(OSError):
            for pid in (path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (path.parent / "cgroup.procs").write_text(pid)
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return
        time.sleep(0.02)


def remove() -> None:
    """Remove this process's group (at exit; idempotent). A forked process leaves its parent's alone."""
    global _group
    group, _group = _group, None
    if group is None or group.owner != os.getpid():
        return
    with contextlib.suppress(OSError):
        os.close(group.procs_fd)
    _remove(group.path)


def remove_stale(parent: Path) -> list[Path]:
    """Remove the groups under `parent` whose owning process is gone (a run killed outright); what went."""
    removed = []
    with contextlib.suppress(OSError):
        for path in parent.iterdir():
            owner = path.name.removeprefix(PREFIX)
            if path.name.startswith(PREFIX) and owner.isdigit() and not pid_alive(int(owner)) and path.is_dir():
                _remove(path)
                if not path.exists():
                    removed.append(path)
    return removed


def _forget_in_child() -> None:
    # A forked workbench run makes a group of its own at its first reading; its parent's stays the parent's.
    global _group, _tried, _reaped_s
    _group, _tried, _reaped_s = None, False, 0.0


os.register_at_fork(after_in_child=_forget_in_child)

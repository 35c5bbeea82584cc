"""The CPU of the client processes this process starts (curl, scp, rsync, smbclient), their whole trees included.

getrusage(RUSAGE_CHILDREN) counts a child only once it is reaped, and a grandchild only once its own parent
reaped it: a tool that leaves its children unreaped (scp downloading several files starts one ssh per remote
file and never waits for them) takes their CPU out of the count (4 logins: 80 ms by getrusage, 320 ms spent).

Where the kernel lets this process make one, a cgroup v2 group holds every client process run_native starts
(`join_fd`: the child joins before it runs the tool, so nothing it forks escapes), and the group's
`cpu.stat` `usage_usec` counts every task that ever ran in it, the exited and the unreaped ones too. The group
sits under this process's own cgroup (a limit on that one still holds for the clients), is made by the first
reading (`children_cpu_s`), is named after this process (`wb-clients-<pid>`), is removed at exit, and a run
killed outright leaves one the next run removes (its owner gone). Without cgroup v2, or where the group cannot
be made or joined (not root, read-only), the reading is getrusage's, as it always was.
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
    if not joined or _usage_s(path) is None:
        os.close(group.procs_fd)
        _remove(path)
        return None
    atexit.register(remove)
    return group


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
    """CPU seconds so far of this process's client children: the group's (all of every tree run_native started,
    exited and unreaped descendants included) where there is one, else getrusage's reaped children. Only the
    difference of two readings means anything; the first reading makes the group."""
    group = _current()
    if group is not None:
        usage = _usage_s(group.path)
        if usage is not None:
            return usage
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def join_fd() -> int | None:
    """The open cgroup.procs a client child writes "0" to before exec to join the group; None: no group (never
    made by a reading here, or impossible), the child stays where it is and getrusage counts it."""
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
    global _group, _tried
    _group, _tried = None, False


os.register_at_fork(after_in_child=_forget_in_child)

"""The cgroup file systems as files: where they are mounted, a group's processes and CPU figures, and taking a
group away again. Shared by the lab server host's group (workbench.lab.cpucap) and the group of this process's
client children (workbench.shared.childcpu)."""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Iterator
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
REMOVE_TRIES = 50  # rmdir is refused (EBUSY) until the kernel has let go of the group's last exited task


def _unescape(path: str) -> str:
    """A mountinfo path with its octal escapes (a space is \\040) undone."""
    return path.encode().decode("unicode_escape") if "\\" in path else path


def cgroup_mounts(mountinfo: str) -> Iterator[tuple[str, Path, list[str]]]:
    """Each cgroup file system a /proc/self/mountinfo text mounts: its type (`cgroup` or `cgroup2`), where, and
    its super options (on v1, the controllers of that hierarchy)."""
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if sep and len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
            yield rest[0], Path(_unescape(fields[4])), rest[2].split(",")


def read(path: Path) -> str:
    """A cgroup file's text; "" when it cannot be read (the group is gone)."""
    try:
        return path.read_text()
    except OSError:
        return ""


def stat(group: Path) -> dict[str, int]:
    """A group's cpu.stat (v2: `usage_usec`, `throttled_usec`, …; v1: `throttled_time`); {} when unreadable."""
    found = {}
    for line in read(group / "cpu.stat").splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            found[key] = int(value)
    return found


def pids(group: Path) -> list[int]:
    """The processes in a group now."""
    return [int(p) for p in read(group / "cgroup.procs").split()]


def write_pid(procs_file: Path, pid: int) -> None:
    """Move `pid` (all its threads) into the group of `procs_file`; ProcessLookupError when it is gone."""
    # one pid per write: the kernel takes no list
    fd = os.open(procs_file, os.O_WRONLY)
    try:
        os.write(fd, str(pid).encode())
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            raise ProcessLookupError(pid) from exc
        raise
    finally:
        os.close(fd)


def remove_group(group: Path) -> None:
    """Move what still runs in `group` to its parent, then remove it (refused until its last exited task is let
    go: a bounded number of tries); gone already is fine."""
    for _ in range(REMOVE_TRIES):
        for pid in pids(group):
            with contextlib.suppress(OSError):
                write_pid(group.parent / "cgroup.procs", pid)
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return
        time.sleep(0.02)

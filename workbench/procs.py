"""Process facts read from /proc: is a pid alive, and which processes run below it."""

from __future__ import annotations

import contextlib
import os


def pid_alive(pid: int) -> bool:
    """True while pid runs; a zombie counts as dead (it can no longer clean up after itself)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as fh:
        if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def descendants(pid: int) -> list[int]:
    """Every process below pid (children first found, then theirs)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found

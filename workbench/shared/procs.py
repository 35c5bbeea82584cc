"""Process facts read from /proc: is a pid alive, which processes run below it, what CPU they used, and
whether the owner a run recorded (pid, start time, host, boot) still runs."""

from __future__ import annotations

import collections
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping


def pid_alive(pid: int) -> bool:
    """True while pid runs; a zombie counts as dead (it can no longer clean up after itself)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = stat_fields(pid)
    return not (fields and fields[0] == "Z")


def stat_fields(pid: int | str) -> list[str] | None:
    """/proc/PID/stat after the command name, so fields[i] is proc(5) field i + 3; None if gone.

    fields[0] state, [1] ppid, [2] pgrp, [3] session, [11:15] utime, stime, cutime, cstime.
    """
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def snapshot() -> dict[int, list[str]]:
    """The stat fields of every process now."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = stat_fields(entry)
            if fields:
                found[int(entry)] = fields
    return found


def tree(roots: Iterable[int], snap: dict[int, list[str]]) -> list[int]:
    """The roots (those still running) and every process below them, each once, parents first."""
    children: dict[int, list[int]] = {}
    for pid, fields in snap.items():
        children.setdefault(int(fields[1]), []).append(pid)
    found: list[int] = []
    seen: set[int] = set()
    todo = collections.deque(pid for pid in roots if pid in snap)
    while todo:
        pid = todo.popleft()
        if pid not in seen:
            seen.add(pid)
            found.append(pid)
            todo.extend(children.get(pid, []))
    return found


def descendants(pid: int) -> list[int]:
    """Every process below pid (children first found, then theirs)."""
    return [p for p in tree([pid], snapshot()) if p != pid]


def in_session(sid: int, snap: dict[int, list[str]] | None = None) -> list[int]:
    """Processes of session `sid`, including its leader if it still runs."""
    snap = snap if snap is not None else snapshot()
    return [pid for pid, fields in snap.items() if int(fields[3]) == sid]


def cpu_ticks(fields: list[str]) -> int:
    """utime + stime + cutime + cstime: the process and the children it reaped."""
    return sum(int(x) for x in fields[11:15])


def cpu_seconds(pids: Iterable[int], snap: dict[int, list[str]] | None = None) -> float:
    """CPU seconds the given processes (and the children they reaped) have used; gone ones count 0.

    A live child's CPU is not yet in its parent's cutime, so a process and its children never count twice.
    """
    snap = snap if snap is not None else snapshot()
    return sum(cpu_ticks(snap[pid]) for pid in set(pids) if pid in snap) / os.sysconf("SC_CLK_TCK")


def with_argument(argument: str) -> list[int]:
    """Processes (other than this one) that were started with `argument` as one of their arguments."""
    found = []
    wanted = argument.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                args = fh.read().split(b"\0")
        except OSError:
            continue
        if wanted in args[1:]:
            found.append(int(entry))
    return found


def start_ticks(pid: int) -> int | None:
    """When pid started, in clock ticks since boot (proc(5) field 22); None if it is gone.

    A pid can be reused by an unrelated process; (pid, start time) cannot, so this is what proves a
    recorded pid still names the process that was started.
    """
    fields = stat_fields(pid)
    return int(fields[19]) if fields else None


def cmdline(pid: int) -> list[str] | None:
    """The argv of pid (empty for a zombie or a kernel thread); None if it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]] if raw else []


def executable(pid: int) -> str | None:
    """The program file pid runs (/proc/PID/exe); None if it is gone or not ours to read."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def identity(pid: int) -> dict[str, object] | None:
    """What `servers up` records of a process it started: start time, command line and program file."""
    ticks = start_ticks(pid)
    args = cmdline(pid)
    if ticks is None or args is None:
        return None
    return {"start_ticks": ticks, "cmdline": args, "exe": executable(pid)}


def same_process(pid: int, start: int, args: list[str] | None, exe: str | None = None) -> bool:
    """True when pid is still the process that started at `start` ticks with argv `args` (not a reuse).

    The command line may also differ from the one recorded when the program file is the same: sshd
    rewrites its own ("sshd: ... [listener] 1 of 10-100 startups") as connections come and go. A zombie
    keeps its start time but loses both: it counts as the same (dead) process.
    """
    fields = stat_fields(pid)
    if fields is None or int(fields[19]) != start:
        return False
    if fields[0] == "Z" or args is None:
        return True
    return cmdline(pid) == args or (exe is not None and executable(pid) == exe)


def recorded_is(pid: int, start: int | None, args: list[str] | None, exe: str | None = None) -> str:
    """What a recorded pid names now: 'unknown' (no start time was recorded), 'reused' (another process has
    the pid), 'gone' (nothing has it) or 'same' (the recorded process, possibly a zombie)."""
    if start is None:
        return "unknown"
    if stat_fields(pid) is None:
        return "gone"
    return "same" if same_process(pid, start, args, exe) else "reused"


def in_group(pgid: int, snap: dict[int, list[str]] | None = None) -> list[int]:
    """Processes of process group `pgid` (zombies excluded: they are already dead)."""
    snap = snap if snap is not None else snapshot()
    return [pid for pid, fields in snap.items() if int(fields[2]) == pgid and fields[0] != "Z"]


# ---------------------------------------------------------------- who owns a run's leftovers
# A run records its owner so that a later run can tell a killed run's leftovers (remove them) from a live
# run's (keep them). pid + start time name a process only on one host during one boot: a data directory
# shared between hosts (an NFS home, a bind mount) holds runs of other hosts, whose pids mean nothing here,
# and a reboot restarts the clock the start time counts from. So the owner also names its host and boot.
OWNER_ALIVE = "alive"  # this host, this boot, the same process still runs
OWNER_DEAD = "dead"  # this host, and the process is gone (or the host rebooted since)
OWNER_ELSEWHERE = "elsewhere"  # another host's run: it cannot be known here, so it is never taken for dead
OWNER_UNKNOWN = "unknown"  # the record names no pid


def hostname() -> str:
    return socket.gethostname()


def boot_id() -> str | None:
    """What names this boot of this host: Linux's random boot id; on macOS the boot time; else None."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip() or None
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            done = subprocess.run(
                ["sysctl", "-n", "kern.boottime"], capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        found = re.search(r"sec\s*=\s*(\d+)", done.stdout)  # "{ sec = 1700000000, usec = 123 } ..."
        return f"boottime-{found.group(1)}" if found else None
    return None


def owner_record(pid: int | None = None) -> dict[str, object]:
    """Who runs this (or `pid`'s) run, as its metadata keeps it: pid, start time, host name and boot id."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "start_ticks": start_ticks(pid), "host": hostname(), "boot_id": boot_id()}


def owner_state(record: object) -> str:
    """What an owner record names now (OWNER_*). A record written before host and boot were kept is taken
    to be this host's, as it always was."""
    if not isinstance(record, Mapping) or not isinstance(record.get("pid"), int):
        return OWNER_UNKNOWN
    host = record.get("host")
    if isinstance(host, str) and host != hostname():
        return OWNER_ELSEWHERE
    recorded_boot, now_boot = record.get("boot_id"), boot_id()
    if isinstance(recorded_boot, str) and now_boot is not None and recorded_boot != now_boot:
        return OWNER_DEAD  # every process of an earlier boot is gone, whatever has its pid now
    return OWNER_ALIVE if start_ticks(record["pid"]) == record.get("start_ticks") else OWNER_DEAD


def elsewhere_note(record: Mapping[str, object], what: str) -> str:
    """One line saying `what` was left because another host owns it."""
    return (
        f"{what} was left alone: its run was started on host {record.get('host')}, which shares this data "
        "directory; only a run there can tell whether it still runs"
    )

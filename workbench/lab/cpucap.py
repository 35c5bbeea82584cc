"""The lab server host's CPU: one private cgroup per lab holding every process of that host, a CPU quota on it
when asked (a NAS's small CPU: `lab --server-cpu 0.25` is a quarter of one core), and the CPU it used.

Which cgroup interface this machine has is read from its mount table, never assumed: version 1 (a hierarchy
with the `cpu` controller: `cpu.cfs_quota_us` over `cpu.cfs_period_us`; the CPU used from `cpuacct.usage`, a
hierarchy of its own or mounted with `cpu`) or version 2 (`cpu.max`; the CPU used from `cpu.stat`'s
`usage_usec`). The group is named after the lab's namespaces (`wb-lab-<owner pid>-<n>`), so a lab killed
outright leaves one the next lab recognises and removes (`cleanup_stale`).

The client host's CPU is the measuring process's own (getrusage), with the clients it started and waited for,
and what those left unreaped (workbench.shared.childcpu): the lab's client host is that process.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.lab import netns
from workbench.shared import childcpu
from workbench.shared.cgroupfs import MOUNTINFO, cgroup_mounts, remove_group, stat, write_pid
from workbench.shared.cgroupfs import read as _read
from workbench.shared.errors import UnavailableError, UsageError
from workbench.shared.procs import pid_alive

PERIOD_US = 100_000  # the kernel's default CFS period: the quota is this share of it
MIN_QUOTA_US = 1_000  # the least quota the kernel takes
CAP_HINT = "drop --server-cpu, or run the lab on a Linux host with the cgroup CPU controller mounted"


@dataclass(frozen=True)
class Controllers:
    """Where this machine's cgroup file systems let a lab make its group."""

    version: int  # 1 or 2
    cpu: Path | None  # the root of the hierarchy holding the CPU controller (None: no controller)
    usage: Path | None  # the root of the one that counts CPU time (v1: cpuacct's; v2: the same as cpu)

    def roots(self, capped: bool) -> tuple[Path, ...]:
        """The hierarchies a lab's group goes in: the capping one when capped, and the counting one."""
        found = [self.cpu] if capped and self.cpu is not None else []
        if self.usage is not None and self.usage not in found:
            found.append(self.usage)
        return tuple(found)


def parse_mountinfo(text: str) -> Controllers | None:
    """The cgroup hierarchies of a /proc/self/mountinfo text; None when it mounts no cgroup file system."""
    v1: dict[str, Path] = {}
    v2: Path | None = None
    for kind, point, options in cgroup_mounts(text):
        if kind == "cgroup2" and v2 is None:
            v2 = point
        elif kind == "cgroup":
            for option in options:
                v1.setdefault(option, point)
    if "cpu" in v1 or "cpuacct" in v1:
        # a controller bound to a v1 hierarchy is absent from v2: v1 is the interface here
        return Controllers(1, v1.get("cpu"), v1.get("cpuacct"))
    if v2 is not None:
        controllers = _read(v2 / "cgroup.controllers").split()
        return Controllers(2, v2 if "cpu" in controllers else None, v2)
    return None


def detect() -> Controllers | None:
    """This machine's cgroup hierarchies (None: none mounted, or not Linux)."""
    text = _read(MOUNTINFO)
    return parse_mountinfo(text) if text else None


MIN_CORES, MAX_CORES = MIN_QUOTA_US / PERIOD_US, 1024.0


def check_cores(cores: float | None) -> None:
    """Refuse a cap the kernel cannot set (None: no cap)."""
    if cores is not None and not MIN_CORES <= cores <= MAX_CORES:
        raise UsageError(
            f"--server-cpu {cores:g} is out of range", f"use {MIN_CORES:g} to {MAX_CORES:g} cores, e.g. 0.25"
        )


def quota_us(cores: float) -> int:
    """The CPU time per PERIOD_US that `cores` cores amount to (at least the kernel's least)."""
    return max(MIN_QUOTA_US, round(cores * PERIOD_US))


class CpuCap:
    """One lab's cgroup on the server host: `add` moves processes in, `usage_s` reads what they used (their
    children forked later are in it too), `remove` takes it away again. `cores` None: counted, not capped."""

    def __init__(self, name: str, cores: float | None, controllers: Controllers) -> None:
        self.name = name
        self.cores = cores
        self.controllers = controllers
        self.groups = tuple(root / name for root in controllers.roots(cores is not None))
        self._made: list[Path] = []
        self._enabled_cpu = False  # cgroup v2: this cap turned the root's CPU controller on (undone at removal)

    @classmethod
    def make(cls, name: str, cores: float | None) -> CpuCap | None:
        """The group made (and capped to `cores`); None when this machine has no cgroups and no cap was asked.
        A cap that cannot be set is an UnavailableError: a lab asked for a small CPU must not run on a big one."""
        controllers = detect()
        if controllers is None or (cores is not None and controllers.cpu is None):
            if cores is None:
                return None
            raise UnavailableError("--server-cpu needs the cgroup CPU controller, and none is mounted here", CAP_HINT)
        cap = cls(name, cores, controllers)
        try:
            cap._create()
        except BaseException as exc:  # Ctrl-C or SIGTERM between two writes too: no group left behind
            cap.remove()
            if not isinstance(exc, OSError):
                raise
            if cores is None:
                return None  # counting is a nicety; a cap is what was asked for
            raise UnavailableError(
                f"cannot cap the server host's CPU: {exc.strerror} ({exc.filename})", CAP_HINT
            ) from exc
        return cap

    def _create(self) -> None:
        root, cores = self.controllers.cpu, self.cores
        if root is not None and cores is not None and self.controllers.version == 2:
            self._enabled_cpu = _enable_cpu(root)
        for group in self.groups:
            group.mkdir(mode=0o755)
            self._made.append(group)
        if root is None or cores is None:
            return
        if self.controllers.version == 1:
            (root / self.name / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (root / self.name / "cpu.cfs_quota_us").write_text(str(quota_us(cores)))
        else:
            (root / self.name / "cpu.max").write_text(f"{quota_us(cores)} {PERIOD_US}")

    def describe(self) -> str:
        """The mechanism in words: 'cgroup v1 cpu.cfs_quota_us 25000 per cpu.cfs_period_us 100000'."""
        if self.cores is None:
            return f"cgroup v{self.controllers.version}, not capped"
        if self.controllers.version == 1:
            return f"cgroup v1 cpu.cfs_quota_us {quota_us(self.cores)} per cpu.cfs_period_us {PERIOD_US}"
        return f"cgroup v2 cpu.max {quota_us(self.cores)} {PERIOD_US}"

    def add(self, pids: Iterable[int]) -> int:
        """Move these processes (with all their threads) into the group; how many moved (gone ones are not)."""
        moved = 0
        for pid in pids:
            try:
                for group in self.groups:
                    write_pid(group / "cgroup.procs", pid)
            except ProcessLookupError:
                continue
            except OSError as exc:  # EINVAL/EBUSY (a v2 group with children of its own): the cap cannot hold
                raise UnavailableError(
                    f"cannot move process {pid} under the server host's CPU cap: {exc.strerror}", CAP_HINT
                ) from exc
            moved += 1
        return moved

    def usage_s(self) -> float | None:
        """CPU seconds every process that was ever in the group used (the exited ones' included)."""
        if self.controllers.usage is None:
            return None
        group = self.controllers.usage / self.name
        if self.controllers.version == 1:
            text = _read(group / "cpuacct.usage").strip()
            return int(text) / 1e9 if text else None
        usage_us = stat(group).get("usage_usec")
        return usage_us / 1e6 if usage_us is not None else None

    def throttled_s(self) -> float | None:
        """Seconds the cap held the group's processes back (None uncapped)."""
        if self.cores is None or self.controllers.cpu is None:
            return None
        found = stat(self.controllers.cpu / self.name)
        if self.controllers.version == 1:
            return found["throttled_time"] / 1e9 if "throttled_time" in found else None
        return found["throttled_usec"] / 1e6 if "throttled_usec" in found else None

    def remove(self) -> None:
        """Move what is still inside out to the hierarchy's root, then remove the group (idempotent)."""
        for group in reversed(self._made):
            remove_group(group)
        self._made = []
        if self._enabled_cpu and self.controllers.cpu is not None:
            # the machine as it was; refused (EBUSY) while another group uses the controller, which then stays
            with contextlib.suppress(OSError):
                (self.controllers.cpu / "cgroup.subtree_control").write_text("-cpu")
            self._enabled_cpu = False


def _enable_cpu(root: Path) -> bool:
    """On cgroup v2 the CPU controller must be enabled for the root's children (systemd usually has); whether
    this call enabled it."""
    if "cpu" in _read(root / "cgroup.subtree_control").split():
        return False
    (root / "cgroup.subtree_control").write_text("+cpu")
    return True


def cleanup_stale() -> list[str]:
    """Remove every lab group whose owning process is gone; what went."""
    controllers = detect()
    if controllers is None:
        return []
    removed = []
    for root in controllers.roots(capped=True):
        with contextlib.suppress(OSError):
            for group in root.iterdir():
                owner = netns.owner_of(group.name)
                if group.is_dir() and owner is not None and not pid_alive(owner):
                    remove_group(group)
                    if not group.exists():
                        removed.append(f"cgroup {group}")
    return removed


# A server's supervisor that does no copy's work but forks on its own: netatalk's master restarts its cnid_metad,
# which the lab's afpd never uses ("cnid scheme = last") and which exits at once, every second, at about 5 ms of
# CPU each time; counted, it would land in one copy's server CPU in a few. afpd itself (started by then) and the
# sessions it forks stay in the group.
OUTSIDE = (b"netatalk",)


def server_host_pids(server_ns: str) -> list[int]:
    """Every process of the lab's server host: those in its namespace, except this process (a thread of it may
    be visiting), the link emulator (it returns to this host's namespace once its devices are made) and the
    supervisors in OUTSIDE."""
    own = os.getpid()
    found = []
    for pid in netns.pids_in(server_ns):
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            program = os.path.basename(cmdline.split(b"\0")[0])
            if pid == own or b"workbench.lab.linkemu" in cmdline or program in OUTSIDE:
                continue
            found.append(pid)
    return found


def _own_cpu_s() -> float:
    """This process's CPU seconds and those of its client children (childcpu: the reaped ones, and what the
    tools in their cgroup left unreaped)."""
    children_s = childcpu.children_cpu_s()
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime + children_s


class HostCpuWatch:
    """The CPU both hosts used from start() (the first copy) to report() (after the last), per second of wall
    time: the server host's from its cgroup, the client host's from this process and its client children."""

    def __init__(self, cap: CpuCap | None) -> None:
        self._cap = cap
        self._start: tuple[float, float | None, float, float | None] | None = None

    def server_usage(self) -> Callable[[], float | None] | None:
        """What reads the server host's CPU seconds so far (its cgroup's `usage_s`); None: no cgroup here."""
        return self._cap.usage_s if self._cap is not None else None

    def start(self) -> None:
        cap = self._cap
        server, throttled = (cap.usage_s(), cap.throttled_s()) if cap else (None, None)
        self._start = (time.monotonic(), server, _own_cpu_s(), throttled)

    def report(self) -> dict[str, Any] | None:
        """The JSON `link.host_cpu` object; None before start()."""
        if self._start is None:
            return None
        wall0, server0, client0, throttled0 = self._start
        cap = self._cap
        wall = max(1e-9, time.monotonic() - wall0)
        server1 = cap.usage_s() if cap else None
        throttled1 = cap.throttled_s() if cap else None
        server = max(0.0, server1 - server0) if server1 is not None and server0 is not None else None
        client = max(0.0, _own_cpu_s() - client0)
        throttled = throttled1 - throttled0 if throttled1 is not None and throttled0 is not None else None
        return {
            "seconds": round(wall, 3),
            "server_cpu_s": _rounded(server),
            "server_cpu_s_per_s": _rounded(server / wall if server is not None else None),
            "server_throttled_s": _rounded(max(0.0, throttled) if throttled is not None else None),
            "client_cpu_s": _rounded(client),
            "client_cpu_s_per_s": _rounded(client / wall),
        }


def _rounded(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None

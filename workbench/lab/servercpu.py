"""The lab server host's CPU per copy, read from its cgroup: to the nanosecond (cgroup v1 `cpuacct.usage`) or the
microsecond (v2 `cpu.stat` usage_usec), with the processes that ended mid-copy included.

Outside the lab the runner asks serve (`/ctl/cpu`): the sum over the servers' live process trees, in clock
ticks of 10 ms, which loses the CPU of a per-connection child (sshd's, smbd's, rsyncd's, afpd's) that ends
before the copy's last reading. In a lab every process of the server host is in one cgroup (lab.cpucap), whose
counter keeps what its exited tasks used; `CgroupFarHost` answers the runner's readings from it instead.

Two things in that group are no server's work on the copy, and are left out:
- the control call that takes each reading (serve's handler and its walk over /proc): the group's CPU from just
  before the call to just after it is kept apart, so the difference of two readings covers only the time between
  the calls, the copy. Whatever else the group did in those few milliseconds (a server's process ending just
  after the copy) is left out with it, and serve's sampling in them is taken off twice: both err low, by at most
  the calls' own length;
- the TCP triage's sampling thread in serve, which watches a download's sockets while it runs: serve reports its
  CPU (thread CPU time, current to the last sample) with each answer.
Everything else in the group idles during a copy (the other servers, iperf3): its CPU is the servers' own.
"""

from __future__ import annotations

from collections.abc import Callable

from workbench.core.farhost import ServedFarHost
from workbench.shared.target import Target

CGROUP = "cgroup"  # the run's link document says which way its copies' server CPU was read
PROCESS_TREES = "process trees"


class CgroupFarHost(ServedFarHost):
    """serve on the lab's server host, whose CPU per copy is read from the host's cgroup (`usage_s`: its CPU
    seconds so far). serve is still asked at each reading: for its threads' waits, and its sampling's CPU."""

    def __init__(self, target: Target, usage_s: Callable[[], float | None], timeout: float) -> None:
        super().__init__(target, timeout=timeout)
        self._usage_s = usage_s
        self._calls_s = 0.0  # the group's CPU during the readings' own control calls, so far

    def cpu_seconds(self) -> float | None:
        """The server host's CPU seconds so far, less the readings' own calls and serve's sampling: only the
        difference of two readings means anything."""
        before = self._usage_s()
        super().cpu_seconds()  # serve's threads' waits, and what its sampling used
        after = self._usage_s()
        sampling_s = self.sampling_cpu_s
        if before is None or after is None or sampling_s is None:
            return None  # never one reading of a copy's pair from the cgroup and the other from serve
        self._calls_s += after - before
        return after - self._calls_s - sampling_s


def far_host(target: Target, usage_s: Callable[[], float | None] | None, timeout: float) -> ServedFarHost:
    """The lab's serve as the runner's far host: read through the server host's cgroup when the lab has one
    that counts (`usage_s` answers), else as any far serve is."""
    if usage_s is None or usage_s() is None:
        return ServedFarHost(target, timeout=timeout)
    return CgroupFarHost(target, usage_s, timeout)


def method(far: ServedFarHost) -> str:
    """How `far`'s CPU per copy is read: CGROUP or PROCESS_TREES (serve's own sum, in clock ticks)."""
    return CGROUP if isinstance(far, CgroupFarHost) else PROCESS_TREES

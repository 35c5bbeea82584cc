"""Which side of a copy to watch, and the watch itself: the TCP triage of every copy and of the probe.

The sender's counters say why a flow went no faster (workbench.shared.triage), so each copy is watched on
the host that sends: this one for an upload; for a download the far host, when it runs `workbench serve`
(it samples its own sockets and answers over the control API). A far host that cannot (a stock server)
leaves the receiver's view, sampled here; the triage says which side and host it saw.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from workbench.shared.tcpwatch import TcpWatch
from workbench.shared.triage import TcpTriage

T = TypeVar("T")


class WatchingFarHost(Protocol):
    def tcp_watch_start(self, role: str) -> str | None: ...

    def tcp_watch_stop(self, watch_id: str) -> dict | None: ...


def addresses_of(host: str) -> frozenset[str]:
    """Every address `host` resolves to (a name may have v4 and v6 ones); empty if it does not resolve."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return frozenset()
    return frozenset(str(info[4][0]).split("%")[0] for info in infos)


# Set to 0 to measure without the triage (bench/bench_triage.py compares runs with and without it).
ENABLE_ENV = "WORKBENCH_TCP_TRIAGE"


class CopyWatcher:
    """Watches copies to one far host; `watch(direction)` around the timed part of each copy."""

    def __init__(self, far: WatchingFarHost | None, far_host: str) -> None:
        self.enabled = os.environ.get(ENABLE_ENV, "1") != "0"
        self.far = far if self.enabled else None
        self.peers = addresses_of(far_host) if self.enabled else frozenset()

    @contextlib.contextmanager
    def watch(self, direction: str) -> Iterator[Watched]:
        """Yields a Watched that holds the copy's triage (or None) once the block ends. The triage is
        optional: a watch that fails leaves it None (with the reason) and never fails the copy."""
        found = Watched()
        far_id = None
        local = None
        try:
            if direction == "download" and self.far is not None:
                far_id = self.far.tcp_watch_start("sender")
        except Exception as exc:  # a far host that answered something unreadable: watch this side instead
            found.problem = f"the far host's TCP triage could not start: {exc}"
        try:
            if far_id is None and self.peers:
                role = "sender" if direction == "upload" else "receiver"
                local = TcpWatch(self.peers, role, "client").start()
        except Exception as exc:  # OSError (no inet_diag here), or anything a broken dump raised
            found.problem = f"the TCP triage could not start: {exc}"
        try:
            yield found
        finally:
            try:
                if local is not None:
                    found.triage = local.stop()
                    found.sampling_cpu_s = local.thread_cpu_s
                if far_id is not None and self.far is not None:
                    found.triage = TcpTriage.from_json(self.far.tcp_watch_stop(far_id))
            except Exception as exc:
                found.problem = f"the TCP triage failed: {exc}"
            if found.triage is None and found.problem is not None:
                # an empty triage that says why, rather than none at all: the row shows the watch was tried
                side = "sender" if direction == "upload" or far_id is not None else "receiver"
                host = "server" if far_id is not None else "client"
                found.triage = TcpTriage(side, host, 0.0, 0, 0, incomplete=found.problem)

    def measured(self, direction: str, measure: Callable[[], T]) -> tuple[T, dict[str, Any] | None]:
        """`measure()` (a raw-TCP measurement) under a watch of `direction`: its result and the triage as JSON."""
        with self.watch(direction) as seen:
            result = measure()
        return result, seen.triage.to_json() if seen.triage is not None else None


@dataclass
class Watched:
    """What a watch saw: the triage, and the CPU this process's sampling thread spent while the copy ran,
    which the runner leaves out of the client's CPU."""

    triage: TcpTriage | None = None
    sampling_cpu_s: float = 0.0
    problem: str | None = None

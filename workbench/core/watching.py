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
from collections.abc import Iterator
from typing import Protocol

from workbench.shared.tcpwatch import TcpWatch
from workbench.shared.triage import TcpTriage


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
    def watch(self, direction: str) -> Iterator[list[TcpTriage | None]]:
        """Yields a one-item list that holds the copy's triage (or None) once the block ends."""
        found: list[TcpTriage | None] = [None]
        far_id = None
        if direction == "download" and self.far is not None:
            far_id = self.far.tcp_watch_start("sender")
        local = None
        if far_id is None and self.peers:
            role = "sender" if direction == "upload" else "receiver"
            with contextlib.suppress(OSError):
                local = TcpWatch(self.peers, role, "client").start()
        try:
            yield found
        finally:
            if local is not None:
                found[0] = local.stop()
            if far_id is not None and self.far is not None:
                found[0] = TcpTriage.from_json(self.far.tcp_watch_stop(far_id))

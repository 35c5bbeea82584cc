"""serve's side of the TCP triage: watches of its own sockets to a client, started and stopped over the
control API, so a download's sender (this host) is what the runner learns about.

An authenticated client may be hostile, so every watch is bounded:
- it covers only the sockets between the address the client came from and the address it reached;
- at most MAX_PER_PEER watches per client address (a new one ends that address's oldest) and MAX_WATCHES in
  all (a new one is refused when they are all taken by other addresses);
- each ends by itself after MAX_WATCH_S;
- its sampling thread's CPU is left out of what /ctl/cpu reports (`sampling_cpu_s`).
A client that reached serve over loopback while serve listens on another address came through a tunnel or a
proxy: its "own" connections cannot be told from every other loopback connection of this host, so it gets
no watch.
"""

from __future__ import annotations

import ipaddress
import secrets
import threading
from collections import OrderedDict
from typing import Any

from workbench.shared.tcpwatch import TcpWatch
from workbench.shared.triage import TcpTriage

MAX_WATCHES = 16
MAX_PER_PEER = 2
MAX_WATCH_S = 3600.0
ROLES = ("sender", "receiver")


class WatchRefused(Exception):
    """A watch this client may not have (said in one line)."""


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


class Watches:
    def __init__(self, bind: str = "127.0.0.1") -> None:
        self.bind = bind
        self._watches: OrderedDict[str, tuple[str, TcpWatch]] = OrderedDict()  # id -> (peer, watch)
        self._lock = threading.Lock()
        self._retired_cpu_s = 0.0

    def start(self, peer: str, local: str, role: str) -> str:
        """A new watch of this host's sockets between `local` and `peer`; its id. Raises WatchRefused, or
        OSError where sockets cannot be dumped."""
        if role not in ROLES:
            raise WatchRefused(f"role must be one of {', '.join(ROLES)}")
        if _is_loopback(peer) and not _is_loopback(self.bind):
            raise WatchRefused("a client reaching serve over loopback (a tunnel or a proxy) cannot be watched")
        dropped = None
        with self._lock:
            mine = [i for i, (p, _) in self._watches.items() if p == peer]
            if len(mine) >= MAX_PER_PEER:
                dropped = self._watches.pop(mine[0])[1]
            elif len(self._watches) >= MAX_WATCHES:
                raise WatchRefused(f"{MAX_WATCHES} watches are running already")
            watch_id = secrets.token_hex(8)
            watch = TcpWatch([peer], role, "server", max_s=MAX_WATCH_S, local=local)
            self._watches[watch_id] = (peer, watch)
        if dropped is not None:
            self._retire(dropped)
        try:
            watch.start()
        except BaseException:
            with self._lock:
                self._watches.pop(watch_id, None)
            raise
        return watch_id

    def stop(self, peer: str, watch_id: str) -> dict[str, Any] | None:
        """The triage of watch `watch_id` as JSON (None if it saw too little); KeyError for an id unknown, or
        another address's."""
        with self._lock:
            owner, watch = self._watches[watch_id]
            if owner != peer:
                raise KeyError(watch_id)
            del self._watches[watch_id]
        triage = self._retire(watch)
        return triage.to_json() if triage is not None else None

    def _retire(self, watch: TcpWatch) -> TcpTriage | None:
        triage = watch.stop()
        with self._lock:
            self._retired_cpu_s += watch.thread_cpu_s
        return triage

    def sampling_cpu_s(self) -> float:
        """CPU seconds every watch's sampling thread has used so far (not the servers' work)."""
        with self._lock:
            return self._retired_cpu_s + sum(w.thread_cpu_s for _, w in self._watches.values())

    def close(self) -> None:
        with self._lock:
            watches, self._watches = [w for _, w in self._watches.values()], OrderedDict()
        for watch in watches:
            watch.stop()

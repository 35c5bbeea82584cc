"""serve's side of the TCP triage: watches of its own sockets to a client, started and stopped over the
control API, so a download's sender (this host) is what the runner learns about.

Bounded against a client that starts watches and never stops them: at most MAX_WATCHES at once (the oldest
is dropped for a new one), and each ends by itself after MAX_WATCH_S.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from typing import Any

from workbench.shared.tcpwatch import TcpWatch

MAX_WATCHES = 8
MAX_WATCH_S = 3 * 3600.0
ROLES = ("sender", "receiver")


class Watches:
    def __init__(self) -> None:
        self._watches: OrderedDict[str, TcpWatch] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, peer: str, role: str) -> str:
        """A new watch of this host's sockets to `peer`; its id. Raises OSError where sockets cannot be dumped."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}")
        watch = TcpWatch([peer], role, "server", max_s=MAX_WATCH_S).start()
        watch_id = secrets.token_hex(8)
        with self._lock:
            self._watches[watch_id] = watch
            dropped = self._watches.popitem(last=False)[1] if len(self._watches) > MAX_WATCHES else None
        if dropped is not None:
            dropped.stop()
        return watch_id

    def stop(self, watch_id: str) -> dict[str, Any] | None:
        """The triage of watch `watch_id` as JSON (None if it saw too little); KeyError for an unknown id."""
        with self._lock:
            watch = self._watches.pop(watch_id)
        triage = watch.stop()
        return triage.to_json() if triage is not None else None

    def close(self) -> None:
        with self._lock:
            watches, self._watches = list(self._watches.values()), OrderedDict()
        for watch in watches:
            watch.stop()

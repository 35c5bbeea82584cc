"""Watch the TCP sockets to one peer while a copy runs: a sample of their counters every 100 ms.

The netlink socket is opened by the thread that calls `start()`, so a watch sees that thread's network
namespace (in the lab, the namespace of the host whose sockets matter); the sampling thread only reads it.
One sample costs a socket dump of this namespace; the header of a socket to another peer is all that is
parsed of it. Sockets destroyed since the last sample are added with their final counters (where this
process may listen for them), so a connection shorter than the interval still counts.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable

from workbench.shared.inetdiag import DestroyListener, DiagReader
from workbench.shared.triage import Tally, TcpTriage

INTERVAL_S = 0.1


class TcpWatch:
    """Samples the sockets whose remote address is one of `peers`, as `role` on `host` ("client"/"server").

    `max_s` bounds a watch nobody stops (a client that went away): the thread ends by itself after it.
    """

    def __init__(
        self, peers: Iterable[str], role: str, host: str, interval_s: float = INTERVAL_S, max_s: float = 4 * 3600
    ) -> None:
        self.peers = frozenset(peers)
        self.tally = Tally(role, host)
        self.interval_s = interval_s
        self.max_s = max_s
        self._reader: DiagReader | None = None
        self._destroyed: DestroyListener | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.error: str | None = None

    def start(self) -> TcpWatch:
        """Open the netlink socket here, take the first sample and start sampling; raises OSError if it cannot."""
        self._reader = DiagReader()
        with contextlib.suppress(OSError):  # without CAP_NET_ADMIN: only what the samples catch
            self._destroyed = DestroyListener()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="tcp-watch", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        assert self._reader is not None
        sockets = self._reader.sockets(self.peers)
        if self._destroyed is not None:
            # after the dump: a socket both dumped and destroyed since is counted once, by its final counters
            sockets += self._destroyed.drain(self.peers)
        with self._lock:
            self.tally.add(time.monotonic(), sockets)

    def _run(self) -> None:
        t0 = time.monotonic()
        tick = 1
        while not self._stop.wait(max(0.0, t0 + tick * self.interval_s - time.monotonic())):
            if time.monotonic() - t0 > self.max_s:
                break
            try:
                self._sample()
            except OSError as exc:
                self.error = str(exc)
                break
            tick += 1

    def stop(self) -> TcpTriage | None:
        """Take a last sample, stop, and return the triage (None if too little was seen to say anything)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._reader is None:
            return None
        try:
            if self.error is None:
                self._sample()
        except OSError as exc:
            self.error = str(exc)
        finally:
            self._reader.close()
            self._reader = None
            if self._destroyed is not None:
                self._destroyed.close()
        with self._lock:
            return self.tally.result()

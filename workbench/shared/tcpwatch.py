"""Watch the TCP sockets to one peer while a copy runs: a sample of their counters every 100 ms.

The netlink socket is opened by the thread that calls `start()`, so a watch sees that thread's network
namespace (in the lab, the namespace of the host whose sockets matter); the sampling thread only reads it.
One sample costs a socket dump of this namespace; the header of a socket to another peer is all that is
parsed of it. Sockets destroyed since the last sample are added with their final counters (where this
process may listen for them), so a connection shorter than the interval still counts.

A sender's watch also reads the counters of the interface that carries the path to the peer (workbench.shared.
wire), once when it starts and once when it stops, beside the connections' own count of the wire.
"""

from __future__ import annotations

import contextlib
import struct
import threading
import time
from collections.abc import Iterable

from workbench.shared.inetdiag import DestroyListener, DiagReader
from workbench.shared.triage import Tally, TcpTriage, with_iface
from workbench.shared.wire import IfaceCounters, IfaceWatch, path_peer

INTERVAL_S = 0.1
# The kernel announces a destroyed socket from a work queue, a moment after the close: the last sample
# waits this long for the copy's last connections (the wait is outside the watched span).
DESTROY_GRACE_S = 0.01


class TcpWatch:
    """Samples the sockets whose remote address is one of `peers`, as `role` on `host` ("client"/"server").

    `max_s` bounds a watch nobody stops (a client that went away): the thread ends by itself after it.
    `local`, when given, keeps only the sockets on that local address (serve: the address the client reached).
    A watch that lost part of the copy (a failed sample, destroy events dropped, the time limit) says so
    in its triage's `incomplete`, and then names no limit. `interface_counters` False leaves the interface's
    counters unread (bench/bench_wire_overhead.py measures what reading them costs).
    """

    def __init__(
        self,
        peers: Iterable[str],
        role: str,
        host: str,
        interval_s: float = INTERVAL_S,
        max_s: float = 4 * 3600,
        local: str | None = None,
        interface_counters: bool = True,
    ) -> None:
        self.peers = frozenset(p.split("%", 1)[0] for p in peers)  # a link-local address's scope is not reported
        self.local = local.split("%", 1)[0] if local else None  # only sockets on this local address, when given
        self.tally = Tally(role, host)
        self.interval_s = interval_s
        self.max_s = max_s
        self._reader: DiagReader | None = None
        self._destroyed: DestroyListener | None = None
        self._iface: IfaceWatch | None = None
        self._interface_counters = interface_counters and role == "sender"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.error: str | None = None
        self.thread_cpu_s = 0.0  # CPU the sampling thread used (the samples at start and stop are the caller's)

    def start(self) -> TcpWatch:
        """Open the netlink sockets here, take the first sample and start sampling; raises OSError if it cannot
        (and leaves nothing open)."""
        self._reader = DiagReader()
        try:
            with contextlib.suppress(OSError):  # without CAP_NET_ADMIN: only what the samples catch
                self._destroyed = DestroyListener()
            peer = path_peer(self.peers)
            if self._interface_counters and peer is not None:
                # no route or no counters: the connections' own wire figures stand alone
                with contextlib.suppress(OSError, ValueError, struct.error):
                    self._iface = IfaceWatch(peer)
            self._sample(congestion=True)
            self._thread = threading.Thread(target=self._run, name="tcp-watch", daemon=True)
            self._thread.start()
        except BaseException:
            self._close()
            raise
        return self

    def _sample(self, at: float | None = None, congestion: bool = False) -> None:
        """One sample; with `congestion`, the sockets' congestion control and BBR state too, which only the first
        and the last sample ask for: they are taken before and after the copy's timed span (the runner's watch
        wraps it), so its cost stays out of what is measured."""
        assert self._reader is not None
        sockets = self._reader.sockets(self.peers, congestion)
        if self._destroyed is not None:
            # after the dump: a socket both dumped and destroyed since is counted once, by its final counters
            sockets += self._destroyed.drain(self.peers)
        if self.local is not None:
            sockets = [s for s in sockets if s.local == self.local]
        with self._lock:
            self.tally.add(time.monotonic() if at is None else at, sockets)

    def _run(self) -> None:
        cpu0 = time.thread_time()
        t0 = time.monotonic()
        tick = 1
        try:
            while not self._stop.wait(max(0.0, t0 + tick * self.interval_s - time.monotonic())):
                if time.monotonic() - t0 > self.max_s:
                    self.error = f"the watch ended after its {self.max_s:.0f} s limit"
                    return
                self._sample()
                self.thread_cpu_s = time.thread_time() - cpu0  # kept current: serve subtracts it from its CPU
                # A sample that took longer than the interval (a namespace with very many sockets) skips the
                # ticks it overran rather than sampling back to back.
                tick = max(tick + 1, int((time.monotonic() - t0) / self.interval_s) + 1)
        except Exception as exc:  # a failed dump (OSError) or a message it could not read
            self.error = f"a sample failed: {exc}"
        finally:
            self.thread_cpu_s = time.thread_time() - cpu0

    def stop(self) -> TcpTriage | None:
        """Take a last sample, stop, and return the triage (None if too little was seen to say anything)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._reader is None:
            return None
        counted: IfaceCounters | None = None
        try:
            end = time.monotonic()
            if self._iface is not None:
                counted = self._iface.stop()  # at the end of the interval, as the last sample is taken at
            if self.error is None:
                if self._destroyed is not None:
                    time.sleep(DESTROY_GRACE_S)
                self._sample(at=end, congestion=True)
        except Exception as exc:
            self.error = f"the last sample failed: {exc}"
        finally:
            if self._destroyed is not None and self._destroyed.overflowed:
                self.error = self.error or "destroy events were dropped (too many connections closed at once)"
            self._close()
        with self._lock:
            self.tally.incomplete = self.error
            found = self.tally.result()
        return with_iface(found, counted) if found is not None else None

    def _close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._destroyed is not None:
            self._destroyed.close()
            self._destroyed = None
        if self._iface is not None:
            self._iface.close()
            self._iface = None

"""Client of `serve`'s control API: prepare files on the far host, verify uploads, read its CPU and info.

Plain http.client (blocking, tiny requests, connections kept between calls); the password goes in an
Authorization header, never a URL.
"""

from __future__ import annotations

import base64
import http.client
import json
import select
import socket
import threading
import urllib.parse
from typing import Any, Self

from workbench.shared.errors import AuthError, NetworkError, NotFoundError, WorkbenchError, from_os_error
from workbench.shared.jsontypes import JSONValue
from workbench.shared.target import Target, url_host

# Deadlines: nothing hangs. A reachable host answers a TCP connect in milliseconds, so a few
# seconds separate "unreachable" from "slow"; every call then waits at most CALL_TIMEOUT_S per read.
CONNECT_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 30.0
# /ctl/files writes the test files before it answers: several GiB on a slow far disk (an SD card, a NAS on
# USB 2) legitimately take minutes, so that one call's deadline grows with the bytes asked for, assuming
# the far host writes at least this fast (first-touch tmpfs here is ~370 MB/s, a USB 2 disk ~30 MB/s).
SLOWEST_GENERATE_BYTES_PER_S = 10_000_000
# /ctl/hash reads the uploaded file once (xxh3 runs at GB/s; the far disk is the bound).
SLOWEST_HASH_BYTES_PER_S = 20_000_000


class _DeadlineConnection(http.client.HTTPConnection):
    """An HTTP connection whose connect has its own, short deadline (the call's own may be far longer)."""

    def __init__(self, host: str, port: int, connect_timeout_s: float) -> None:
        super().__init__(host, port)
        self.connect_timeout_s = connect_timeout_s

    def connect(self) -> None:
        limit = self.connect_timeout_s if self.timeout is None else min(self.connect_timeout_s, self.timeout)
        self.sock = socket.create_connection((self.host, self.port), limit)
        self.sock.settimeout(self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def set_call_timeout(self, timeout_s: float) -> None:
        """This call's deadline per read (and the connect's, if it is shorter)."""
        self.timeout = timeout_s
        if self.sock is not None:
            self.sock.settimeout(timeout_s)


def _dropped(conn: _DeadlineConnection) -> bool:
    """An idle connection the far host has closed (its idle timeout, a restart): it is readable, with nothing to
    read but the end. Nothing else may arrive on an idle HTTP connection."""
    sock = conn.sock
    if sock is None:
        return True
    poller = select.poll()  # not select(): it refuses descriptors above 1023
    try:
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


# What a kept connection that the far host closed meanwhile fails with, before any answer. The call is made again,
# once, on a new connection where that cannot do it twice: the request was not all sent, or it only reads (GET).
# A POST that was sent may have been done (files made, a watch started): its failure is the call's.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class _ConnectionPool:
    """serve's connections kept open between calls, so each call after the first costs one round trip, not two
    (a connection per call added a handshake to every call, and 40 ms apiece on a long link). Threads that call
    at once (a set's uploads verified together) take one each; at most MAX_IDLE wait for the next call."""

    MAX_IDLE = 8

    def __init__(self, host: str, port: int, connect_timeout_s: float) -> None:
        self._host = host
        self._port = port
        self._connect_timeout_s = connect_timeout_s
        self._idle: list[_DeadlineConnection] = []
        self._lock = threading.Lock()

    def new(self) -> _DeadlineConnection:
        return _DeadlineConnection(self._host, self._port, self._connect_timeout_s)

    def take(self) -> tuple[_DeadlineConnection, bool]:
        """A connection for one call, and whether it was used before (it may then have been closed meanwhile)."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self.new(), False
            if not _dropped(conn):
                return conn, True
            conn.close()

    def give_back(self, conn: _DeadlineConnection) -> None:
        with self._lock:
            if len(self._idle) < self.MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class Control:
    """serve's control API at `target`. Its connections are kept open between calls: `close()` (or a `with`
    block) closes them."""

    def __init__(
        self, target: Target, timeout: float = CALL_TIMEOUT_S, connect_timeout: float = CONNECT_TIMEOUT_S
    ) -> None:
        self.target = target
        self.base = "/ctl/"  # the path every call's name is added to
        token = base64.b64encode(f"{target.credentials.user}:{target.credentials.password}".encode()).decode()
        self._auth = f"Basic {token}"
        self.timeout = min(timeout, CALL_TIMEOUT_S)
        self._where = (target.host, target.port("http"))
        self._pool = _ConnectionPool(target.host, target.port("http"), connect_timeout)
        # each server thread's run-queue wait (ns) as of the last cpu_seconds(), by thread id; None: unread
        self.waits_ns: dict[int, int] | None = None
        # CPU seconds serve's TCP-watch sampling has used so far, as of the last cpu_seconds(); None: unread
        self.sampling_cpu_s: float | None = None

    def close(self) -> None:
        """Close the connections kept for later calls (a later call opens a new one)."""
        self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self,
        method: str,
        name: str,
        params: dict[str, str] | None = None,
        body: JSONValue = None,
        raw: bool = False,
        timeout: float | None = None,
    ) -> Any:
        path = self.base + name + ("?" + urllib.parse.urlencode(params) if params else "")
        data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
        headers = {"Authorization": self._auth, "Content-Type": "application/json"}
        try:
            status, payload = self._exchange(method, path, data, headers, timeout or self.timeout)
        except http.client.HTTPException as exc:  # before OSError: RemoteDisconnected is both
            raise self._not_serve(name, exc) from exc
        except OSError as exc:
            raise from_os_error(exc, "talking to workbench serve", self.target.host, self.target.port("http")) from exc
        if not 200 <= status < 300:
            if status == 401:
                raise AuthError("the server refused the credentials", "check --credentials / WORKBENCH_PASSWORD")
            if status == 404:
                raise NotFoundError(f"not found on the server: {params}", "check the path")
            text = payload.decode(errors="replace")[:200]
            raise WorkbenchError(f"server control call {name} failed: HTTP {status} {text}")
        if raw:
            return payload
        try:
            return json.loads(payload or b"null")
        except ValueError as exc:
            raise NetworkError("the server's control API answered garbage", "is it workbench serve?") from exc

    def _exchange(
        self, method: str, path: str, data: bytes | None, headers: dict[str, str], timeout_s: float
    ) -> tuple[int, bytes]:
        """One request and its whole answer: (status, body). A kept connection the far host closed meanwhile
        is replaced once (_STALE says when); a connection is kept for the next call only after a whole answer
        that leaves it open."""
        conn, reused = self._pool.take()
        while True:
            sent = False
            try:
                conn.set_call_timeout(timeout_s)
                conn.request(method, path, body=data, headers=headers)
                sent = True
                response = conn.getresponse()
                payload = response.read()
            except _STALE:
                conn.close()
                if reused and (not sent or method == "GET"):
                    conn, reused = self._pool.new(), False
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            if response.will_close:
                conn.close()
            else:
                self._pool.give_back(conn)
            return response.status, payload

    def _not_serve(self, name: str, exc: http.client.HTTPException) -> NetworkError:
        """Something listens on the HTTP port but did not answer HTTP as serve does (BadStatusLine and kin)."""
        host, port = self._where
        where = f"{url_host(host)}:{port}"
        if isinstance(exc, http.client.RemoteDisconnected):
            return NetworkError(
                f"control call {name} on {where} got no HTTP answer (the connection closed)",
                "is another service on that port, or did workbench serve stop?",
            )
        return NetworkError(
            f"control call {name} on {where} did not answer as workbench serve ({type(exc).__name__})",
            "is another service on that port?",
        )

    def mkdir(self, path: str) -> None:
        self._call("POST", "mkdir", {"path": path})

    def hash(self, path: str, size_bytes: int = 0) -> dict[str, Any]:
        return self._call("GET", "hash", {"path": path}, timeout=self.timeout + size_bytes / SLOWEST_HASH_BYTES_PER_S)

    def delete(self, path: str) -> None:
        self._call("POST", "delete", {"path": path})

    def make_files(self, sizes: list[int], small: list[tuple[int, int]], profile: str, seed: int) -> dict[str, Any]:
        total_bytes = sum(sizes) + sum(count * size for count, size in small)
        return self._call(
            "POST",
            "files",
            body={"sizes": sizes, "small": small, "profile": profile, "seed": seed},
            timeout=self.timeout + total_bytes / SLOWEST_GENERATE_BYTES_PER_S,
        )

    def info(self) -> dict[str, Any]:
        return self._call("GET", "info")

    def iperf3_key(self) -> bytes | None:
        """The public key of the far host's authenticated iperf3 server, or None if it runs none."""
        try:
            return self._call("GET", "iperf3-key", raw=True)
        except NotFoundError:
            return None

    def cpu_seconds(self) -> float | None:
        """CPU seconds of the far host's servers so far; their threads' run-queue waits, read with it, are kept
        in waits_ns."""
        self.waits_ns = self.sampling_cpu_s = None
        try:
            answer = self._call("GET", "cpu")
            cpu_s = float(answer["cpu_s"])
            waits = answer.get("waits_ns")  # an older serve says none
            self.waits_ns = {int(t): int(ns) for t, ns in waits.items()} if isinstance(waits, dict) else None
            sampling = answer.get("sampling_cpu_s")  # an older serve says none
            self.sampling_cpu_s = float(sampling) if isinstance(sampling, int | float) else None
            return cpu_s
        except (WorkbenchError, KeyError, TypeError, ValueError, AttributeError):
            return None

    def cpu_waits_ns(self) -> dict[int, int] | None:
        """The server threads' run-queue waits read with the last cpu_seconds() (None: not known)."""
        return self.waits_ns

    def crypto_costs(self) -> dict[str, Any] | None:
        """The far host's own CPU cost per byte of SMB's signing and encryption (workbench.shared.cryptocost, as
        JSON), or None where it cannot say (an older serve)."""
        try:
            answer = self._call("GET", "crypto-cost")
        except WorkbenchError:
            return None
        return answer if isinstance(answer, dict) else None

    def tcp_watch_start(self, role: str) -> str | None:
        """Start sampling the far host's sockets to this client as `role`; the watch id, or None where the far
        host cannot (an older serve, or no socket diagnostics there)."""
        try:
            return str(self._call("POST", "tcp-watch", {"role": role})["id"])
        except (WorkbenchError, KeyError, TypeError):
            return None

    def tcp_watch_stop(self, watch_id: str) -> dict[str, Any] | None:
        """The far host's triage of the watch (workbench.shared.triage.TcpTriage as JSON), or None."""
        try:
            answer = self._call("POST", "tcp-watch/stop", {"id": watch_id})
        except WorkbenchError:
            return None
        return answer.get("tcp") if isinstance(answer, dict) else None

"""The raw-TCP probe's far-host half: a threaded, authenticated source/sink that `workbench serve` runs.

It speaks workbench.probe.wire and runs the same timed loops as the client (probe.transfer); every
request is bounded (duration, bytes, sessions, handshake time) because anyone may connect to it.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVarTuple

from workbench.probe.transfer import (
    drain_to_eof,
    lock_window,
    new_buffer,
    random_payload,
    receive,
    set_poll_timeouts,
    transmit,
)
from workbench.probe.wire import (
    GRACE_S,
    HANDSHAKE_TIMEOUT,
    MAGIC,
    MAX_BYTES,
    MAX_PING_COUNT,
    NONCE_LEN,
    READY,
    SideCount,
    handshake_mac,
    recv_exact,
    recv_msg,
    send_msg,
)
from workbench.shared.errors import NetworkError, UsageError, from_os_error
from workbench.shared.jsontypes import JSONValue
from workbench.shared.tcpinfo import read_tcp_info
from workbench.shared.validate import MAX_PROBE_DURATION_S as MAX_DURATION  # every load obeys it
from workbench.shared.validate import MIN_WINDOW_BYTES as MIN_WINDOW

_Args = TypeVarTuple("_Args")


class ProbeServer:
    """Threaded, authenticated raw-TCP source/sink: `start()` returns the bound port (0 picks one)."""

    def __init__(self, bind: str, port: int, secret: str, max_sessions: int = 8) -> None:
        if not secret:
            raise UsageError("the TCP probe server needs a secret", "pass the password from the credentials file")
        self.bind = bind
        self.port = port
        self._secret = secret.encode()
        self._slots = threading.BoundedSemaphore(max_sessions * 2)  # control + data connections
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._threads: set[threading.Thread] = set()
        self._socks: set[socket.socket] = set()
        self._pending: dict[bytes, list[socket.socket]] = {}
        self._lock = threading.Lock()
        self._payload = b""

    def start(self) -> int:
        """Bind, listen, start accepting in a thread; returns the real port."""
        try:
            family, kind, proto, _, addr = socket.getaddrinfo(
                self.bind, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
            listener = socket.socket(family, kind, proto)
        except OSError as exc:
            raise from_os_error(exc, "starting the TCP probe server", self.bind, self.port) from exc
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(addr)
            listener.listen(64)
        except OSError as exc:
            listener.close()
            raise NetworkError(
                f"cannot listen on {self.bind}:{self.port} for the TCP probe: {exc.strerror or exc}",
                "choose another --tcp-port or stop whatever uses it",
            ) from exc
        listener.settimeout(0.2)  # accept() wakes up to notice stop()
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._payload = random_payload()
        self._stop.clear()
        self._spawn(self._accept_loop)
        return self.port

    def stop(self) -> None:
        """Stop accepting, cut every open connection and wait for the threads."""
        self._stop.set()
        with self._lock:
            socks = list(self._socks)
            threads = list(self._threads)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def __enter__(self) -> ProbeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- plumbing

    def _spawn(self, target: Callable[[*_Args], None], *args: *_Args) -> None:
        def run() -> None:
            try:
                target(*args)
            finally:
                with self._lock:
                    self._threads.discard(threading.current_thread())

        thread = threading.Thread(target=run, name=f"tcpprobe-{target.__name__}", daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                time.sleep(0.05)  # e.g. EMFILE: back off instead of spinning
                continue
            if not self._slots.acquire(blocking=False):
                conn.close()  # too many sessions: refuse rather than queue unbounded work
                continue
            with self._lock:
                self._socks.add(conn)
            self._spawn(self._serve_connection, conn)

    def _serve_connection(self, conn: socket.socket) -> None:
        handed_over = False
        # One deadline for the whole handshake, not one per recv: a client sending a byte every few
        # seconds would otherwise hold a slot for minutes without ever authenticating.
        deadline = time.monotonic() + HANDSHAKE_TIMEOUT
        try:
            conn.settimeout(HANDSHAKE_TIMEOUT)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            nonce = secrets.token_bytes(NONCE_LEN)
            conn.sendall(MAGIC + nonce)
            kind = _recv_exact_by(conn, 1, deadline)
            if kind == b"C":
                self._control(conn, nonce, deadline)
            elif kind == b"D":
                handed_over = self._data(conn, deadline)
        except (OSError, ValueError):
            pass  # a peer that misbehaves or vanishes just loses its connection
        finally:
            if not handed_over:
                self._forget(conn)
            self._slots.release()

    def _forget(self, conn: socket.socket) -> None:
        with self._lock:
            self._socks.discard(conn)
        conn.close()

    def _data(self, conn: socket.socket, deadline: float) -> bool:
        token = _recv_exact_by(conn, NONCE_LEN, deadline)
        with self._lock:
            waiting = self._pending.pop(token, None) if token else None
        if waiting is None:
            return False  # unknown token: unauthenticated, gets nothing
        waiting.append(conn)
        return True

    def _control(self, conn: socket.socket, nonce: bytes, deadline: float) -> None:
        answer = _recv_exact_by(conn, 2 * NONCE_LEN, deadline)
        if len(answer) != 2 * NONCE_LEN:
            return
        client_nonce, mac = answer[:NONCE_LEN], answer[NONCE_LEN:]
        if not hmac.compare_digest(mac, handshake_mac(self._secret, b"client", nonce, client_nonce)):
            return  # wrong secret: close without a word
        conn.sendall(handshake_mac(self._secret, b"server", client_nonce, nonce))
        conn.settimeout(MAX_DURATION + 2 * GRACE_S + HANDSHAKE_TIMEOUT)  # idle control sessions end too
        while not self._stop.is_set():
            msg = recv_msg(conn)
            if msg is None:
                return
            try:
                self._command(conn, msg)
            except _Refused as exc:
                send_msg(conn, {"ok": False, "error": str(exc)})

    def _command(self, conn: socket.socket, msg: dict[str, Any]) -> None:
        cmd = msg.get("cmd")
        if cmd == "ping":
            count = _bounded_int(msg.get("count"), 1, MAX_PING_COUNT, "count")
            send_msg(conn, {"ok": True})
            conn.settimeout(HANDSHAKE_TIMEOUT)
            for _ in range(count):
                data = recv_exact(conn, 8)
                if not data:
                    return
                conn.sendall(data)
            conn.settimeout(MAX_DURATION + 2 * GRACE_S + HANDSHAKE_TIMEOUT)
        elif cmd in ("sink", "source"):
            self._transfer(conn, cmd, msg)
        else:
            raise _Refused(f"unknown command {cmd!r}")

    def _transfer(self, conn: socket.socket, cmd: str, msg: dict[str, Any]) -> None:
        duration = float(msg.get("duration") or 0)
        if not 0 < duration <= MAX_DURATION:
            raise _Refused(f"duration must be within (0, {MAX_DURATION:.0f}] s")
        max_bytes = _bounded_int(msg.get("max_bytes") or MAX_BYTES, 1, MAX_BYTES, "max_bytes")
        window = msg.get("window")
        if window is not None:
            window = _bounded_int(window, MIN_WINDOW, 1 << 30, "window")
        token = secrets.token_bytes(NONCE_LEN)
        slot: list[socket.socket] = []
        with self._lock:
            self._pending[token] = slot
        send_msg(conn, {"ok": True, "token": token.hex()})
        deadline = time.monotonic() + HANDSHAKE_TIMEOUT
        while not slot and time.monotonic() < deadline and not self._stop.is_set():
            time.sleep(0.002)
        with self._lock:
            self._pending.pop(token, None)
        if not slot:
            raise _Refused("the data connection did not arrive")
        data = slot[0]
        try:
            if cmd == "sink" and window is not None:
                lock_window(data, window)
            set_poll_timeouts(data)
            data.sendall(READY)
            if cmd == "sink":
                count = receive(data, new_buffer(), time.monotonic() + duration + GRACE_S, max_bytes, window)
            else:
                count = transmit(data, self._payload, time.monotonic() + duration, max_bytes)
                data.shutdown(socket.SHUT_WR)
                drain_to_eof(data)
            count = SideCount(count.bytes, count.seconds, count.timed_bytes, read_tcp_info(data))
        except OSError as exc:
            raise _Refused(f"data connection failed: {exc}") from exc
        finally:
            self._forget(data)
        send_msg(conn, {"ok": True, "count": count.to_json()})


class _Refused(Exception):
    """A request the server answers with an error message instead of doing it."""


def _recv_exact_by(sock: socket.socket, n: int, deadline: float) -> bytes:
    """Like recv_exact, but the whole read must finish by `deadline` (time.monotonic()): TimeoutError."""
    chunks = bytearray()
    while len(chunks) < n:
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            raise TimeoutError("handshake deadline passed")
        sock.settimeout(left_s)
        part = sock.recv(n - len(chunks))
        if not part:
            return b""
        chunks += part
    return bytes(chunks)


def _bounded_int(value: JSONValue, low: int, high: int, name: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise _Refused(f"{name} must be an integer") from None
    if not low <= number <= high:
        raise _Refused(f"{name} must be within [{low}, {high}]")
    return number

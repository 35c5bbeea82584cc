"""workbench's own raw-TCP source/sink (memory to memory) and its client: the raw TCP limit of a path.

Wire protocol (iperf3-like: one control connection, one data connection per measurement):

- every connection starts with the server's hello: MAGIC + a 32-byte random nonce;
- control: the client sends b"C", its own nonce and HMAC-SHA256(secret, "client" + both nonces);
  the server closes without a word on a bad MAC, else proves itself with HMAC(secret, "server" + ...).
  The secret itself never crosses the wire. Then length-prefixed JSON requests: sink, source, ping;
- data: the client sends b"D" + a one-time token the server issued over the authenticated control
  connection; the server answers one byte once the socket is ready (window clamp applied), then the
  bytes flow one way until the sender shuts its side; the server reports its counts over control.

Throughput is timed at the receiving side from the first to the last byte, both sides' counts are
reported, and every load is capped in duration and bytes by both ends.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import socket
import statistics
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from workbench.shared.errors import AuthError, NetworkError, UsageError, WorkbenchError, from_os_error
from workbench.shared.tcpinfo import TcpInfo, read_tcp_info
from workbench.shared.validate import MAX_PROBE_DURATION_S as MAX_DURATION  # every load obeys it
from workbench.shared.validate import MIN_WINDOW_BYTES as MIN_WINDOW

Direction = Literal["upload", "download"]

MAGIC = b"WBTCP1\n"
NONCE_LEN = 32
MAX_BYTES = 256 << 30
MAX_PING_COUNT = 10_000
BUF_SIZE = 4 << 20  # large buffers so Python's per-call cost stays far below the wire time
POLL_S = 0.1  # OS-level send/recv timeout: how often a blocked loop looks at its deadline
STALL_S = 5.0  # no progress for this long ends a transfer with an error
GRACE_S = 3.0  # extra time a receiver waits beyond the sender's duration
HANDSHAKE_TIMEOUT = 5.0
_MAX_MSG = 64 * 1024
_READY = b"K"
_SO_RCVBUFFORCE = 33 if hasattr(socket, "SO_BINDTODEVICE") else socket.SO_RCVBUF  # Linux; Python lacks the name
_TCP_WINDOW_CLAMP = getattr(socket, "TCP_WINDOW_CLAMP", None)
_RECLAMP_FIRST = 64  # receives during which the clamp is re-applied every time (see _receive)
_RECLAMP_S = 0.05


@dataclass(frozen=True)
class SideCount:
    """What one end of a data connection counted."""

    bytes: int
    seconds: float  # first to last byte moved on this side
    timed_bytes: int  # bytes moved after the first chunk, the ones `seconds` spans
    tcp_info: TcpInfo | None = None

    @property
    def bps(self) -> float:
        return self.timed_bytes / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "bytes": self.bytes,
            "seconds": self.seconds,
            "timed_bytes": self.timed_bytes,
            "tcp_info": self.tcp_info.to_json() if self.tcp_info else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SideCount:
        return cls(
            bytes=int(data["bytes"]),
            seconds=float(data["seconds"]),
            timed_bytes=int(data["timed_bytes"]),
            tcp_info=TcpInfo.from_json(data.get("tcp_info")),
        )


@dataclass(frozen=True)
class ProbeResult:
    """One raw-TCP measurement; rates in bytes/s, timed at the receiver from its first to its last byte."""

    direction: str
    bytes: int  # received by the receiving side
    seconds: float
    bps: float
    sender: SideCount
    receiver: SideCount
    window_requested: int | None = None
    window_bytes: int | None = None  # advertised receive window in use, from TCP_INFO

    @property
    def tcp_info(self) -> TcpInfo | None:
        """The sender's TCP_INFO: its cwnd, RTT and limited-times explain the rate."""
        return self.sender.tcp_info

    @property
    def rtt_s(self) -> float | None:
        info = self.sender.tcp_info
        return info.rtt_us / 1e6 if info and info.rtt_us is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "direction": self.direction,
            "bytes": self.bytes,
            "seconds": self.seconds,
            "bps": self.bps,
            "window_requested": self.window_requested,
            "window_bytes": self.window_bytes,
            "sender": self.sender.to_json(),
            "receiver": self.receiver.to_json(),
        }


@dataclass(frozen=True)
class RttResult:
    """Round-trip times in seconds: TCP connect (SYN to SYN-ACK) and an application-level echo."""

    connect_median: float
    connect_min: float
    ping_median: float
    ping_min: float
    connect_samples: tuple[float, ...] = field(default=(), repr=False)
    ping_samples: tuple[float, ...] = field(default=(), repr=False)


# ---------------------------------------------------------------- shared helpers


def _mac(secret: bytes, role: bytes, first: bytes, second: bytes) -> bytes:
    return hmac.new(secret, b"workbench-tcp " + role + first + second, hashlib.sha256).digest()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    """Read exactly n bytes; b'' when the peer closed first."""
    chunks = bytearray()
    while len(chunks) < n:
        part = sock.recv(n - len(chunks))
        if not part:
            return b""
        chunks += part
    return bytes(chunks)


def _send_msg(sock: socket.socket, msg: dict[str, Any]) -> None:
    data = json.dumps(msg).encode()
    sock.sendall(struct.pack("!I", len(data)) + data)


def _recv_msg(sock: socket.socket) -> dict[str, Any] | None:
    head = _recv_exact(sock, 4)
    if not head:
        return None
    (length,) = struct.unpack("!I", head)
    if length > _MAX_MSG:
        raise ValueError("control message too long")
    body = _recv_exact(sock, length)
    if len(body) != length:
        return None
    msg = json.loads(body)
    if not isinstance(msg, dict):
        raise ValueError("control message is not an object")
    return msg


def _set_poll_timeouts(sock: socket.socket, seconds: float = POLL_S) -> None:
    """Blocking socket with OS-level timeouts: calls return (EAGAIN or a partial count) every `seconds`.

    Python's own settimeout() adds a poll() before every call; this keeps the hot loop to one syscall.
    """
    sock.settimeout(None)
    whole = int(seconds)
    tv = struct.pack("ll", whole, int((seconds - whole) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


def _lock_window(sock: socket.socket, window: int) -> None:
    """Make the receive window this socket advertises `window` bytes (kept so by `_receive`).

    Autotuning rewrites the clamp whenever it grows the buffer, so the buffer is locked first (Linux
    doubles SO_RCVBUF and grants only part of it to the window: 2x leaves room). The clamp goes on the
    connected socket: one set before listen()/connect() is recomputed by the kernel.
    """
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, 2 * window)
    except OSError:
        # Unprivileged: capped at net.core.rmem_max, which may leave large windows short.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2 * window)
    _clamp(sock, window)


def _clamp(sock: socket.socket, window: int) -> None:
    if _TCP_WINDOW_CLAMP is not None:
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_WINDOW_CLAMP, window)


def _prefault(buf: bytearray) -> None:
    # Fresh pages are slow to touch the first time (~1.7 s of kernel CPU per GiB on this VM: a first 1 GiB
    # dd from /dev/zero ran at 374 MB/s, the second at 3.1 GB/s): fault them in before anything is timed.
    buf[::4096] = b"\x01" * len(range(0, len(buf), 4096))


def _new_buffer(size: int = BUF_SIZE) -> bytearray:
    buf = bytearray(size)
    _prefault(buf)
    return buf


def _payload(size: int = BUF_SIZE) -> bytes:
    # Incompressible, in case a middlebox or a tunnel compresses; made once per server or measure().
    return os.urandom(size)


def _receive(
    sock: socket.socket, buf: bytearray, deadline: float, max_bytes: int, window: int | None = None
) -> SideCount:
    """Count and discard bytes until EOF, the deadline or max_bytes; raises TimeoutError on a stall.

    With `window`, the clamp is re-applied as data flows: Linux resets it to the buffer-derived value
    each time its payload/truesize ratio estimate changes, which happens mostly on the first segments.
    """
    view = memoryview(buf)
    size = len(view)
    recv_into = sock.recv_into
    clock = time.monotonic
    total = first_n = receives = 0
    first_t = last_t = last_clamp = 0.0
    last_progress = clock()
    while total < max_bytes:
        try:
            n = recv_into(view, min(size, max_bytes - total))
        except BlockingIOError:
            now = clock()
            if now > deadline:
                break
            if now - last_progress > STALL_S:
                raise TimeoutError("no data for too long") from None
            continue
        if not n:
            break
        now = clock()
        if not total:
            first_t, first_n = now, n
        total += n
        last_t = last_progress = now
        if window is not None and (receives < _RECLAMP_FIRST or now - last_clamp > _RECLAMP_S):
            _clamp(sock, window)
            receives += 1
            last_clamp = now
        if now > deadline:
            break
    seconds = last_t - first_t if total else 0.0
    return SideCount(total, seconds, total - first_n if total else 0)


def _transmit(sock: socket.socket, payload: bytes, deadline: float, max_bytes: int) -> SideCount:
    """Send payload repeatedly until the deadline or max_bytes; raises TimeoutError on a stall."""
    view = memoryview(payload)
    size = len(view)
    send = sock.send
    clock = time.monotonic
    total = 0
    offset = 0
    start = last_progress = clock()
    first_n = 0
    while total < max_bytes:
        now = clock()
        if now >= deadline:
            break
        want = min(size - offset, max_bytes - total)
        try:
            n = send(view[offset : offset + want])
        except BlockingIOError:
            if clock() - last_progress > STALL_S:
                raise TimeoutError("the receiver stopped reading") from None
            continue
        if not total:
            first_n = n
            start = clock()
        total += n
        offset = (offset + n) % size
        last_progress = clock()
    return SideCount(total, last_progress - start if total else 0.0, total - first_n)


def _drain_to_eof(sock: socket.socket, timeout: float = GRACE_S) -> None:
    """After shutting our sending side, wait for the peer to close so TCP_INFO covers every ACK."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if not sock.recv(65536):
                return
        except BlockingIOError:
            continue
        except OSError:
            return


# ---------------------------------------------------------------- server


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
        self._payload = _payload()
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

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
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
        if not hmac.compare_digest(mac, _mac(self._secret, b"client", nonce, client_nonce)):
            return  # wrong secret: close without a word
        conn.sendall(_mac(self._secret, b"server", client_nonce, nonce))
        conn.settimeout(MAX_DURATION + 2 * GRACE_S + HANDSHAKE_TIMEOUT)  # idle control sessions end too
        while not self._stop.is_set():
            msg = _recv_msg(conn)
            if msg is None:
                return
            try:
                self._command(conn, msg)
            except _Refused as exc:
                _send_msg(conn, {"ok": False, "error": str(exc)})

    def _command(self, conn: socket.socket, msg: dict[str, Any]) -> None:
        cmd = msg.get("cmd")
        if cmd == "ping":
            count = _bounded_int(msg.get("count"), 1, MAX_PING_COUNT, "count")
            _send_msg(conn, {"ok": True})
            conn.settimeout(HANDSHAKE_TIMEOUT)
            for _ in range(count):
                data = _recv_exact(conn, 8)
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
        _send_msg(conn, {"ok": True, "token": token.hex()})
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
                _lock_window(data, window)
            _set_poll_timeouts(data)
            data.sendall(_READY)
            if cmd == "sink":
                count = _receive(data, _new_buffer(), time.monotonic() + duration + GRACE_S, max_bytes, window)
            else:
                count = _transmit(data, self._payload, time.monotonic() + duration, max_bytes)
                data.shutdown(socket.SHUT_WR)
                _drain_to_eof(data)
            count = SideCount(count.bytes, count.seconds, count.timed_bytes, read_tcp_info(data))
        except OSError as exc:
            raise _Refused(f"data connection failed: {exc}") from exc
        finally:
            self._forget(data)
        _send_msg(conn, {"ok": True, "count": count.to_json()})


class _Refused(Exception):
    """A request the server answers with an error message instead of doing it."""


def _recv_exact_by(sock: socket.socket, n: int, deadline: float) -> bytes:
    """Like _recv_exact, but the whole read must finish by `deadline` (time.monotonic()): TimeoutError."""
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


def _bounded_int(value: Any, low: int, high: int, name: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise _Refused(f"{name} must be an integer") from None
    if not low <= number <= high:
        raise _Refused(f"{name} must be within [{low}, {high}]")
    return number


# ---------------------------------------------------------------- client


class _Session:
    """An authenticated control connection to a ProbeServer."""

    def __init__(self, host: str, port: int, secret: str, timeout: float = HANDSHAKE_TIMEOUT) -> None:
        self.host, self.port = host, port
        self.sock = _connect(host, port, timeout)
        try:
            server_nonce = self._hello(self.sock)
            client_nonce = secrets.token_bytes(NONCE_LEN)
            key = secret.encode()
            self.sock.sendall(b"C" + client_nonce + _mac(key, b"client", server_nonce, client_nonce))
            proof = _recv_exact(self.sock, NONCE_LEN)
        except OSError as exc:
            self.close()
            raise from_os_error(exc, "authenticating to the TCP probe", host, port) from exc
        except BaseException:
            self.close()
            raise
        if not proof:
            self.close()
            raise AuthError(
                f"the TCP probe at {host}:{port} refused the secret",
                "use the password from the server's credentials file",
            )
        if not hmac.compare_digest(proof, _mac(key, b"server", client_nonce, server_nonce)):
            self.close()
            raise AuthError(
                f"the TCP probe at {host}:{port} could not prove it knows the secret",
                "is another workbench server with other credentials listening there?",
            )

    def _hello(self, sock: socket.socket) -> bytes:
        hello = _recv_exact(sock, len(MAGIC) + NONCE_LEN)
        if not hello.startswith(MAGIC):
            raise NetworkError(
                f"{self.host}:{self.port} is not a workbench TCP probe",
                "check the port: 'workbench serve' prints the probe's port",
            )
        return hello[len(MAGIC) :]

    def request(self, msg: dict[str, Any], timeout: float = HANDSHAKE_TIMEOUT) -> dict[str, Any]:
        try:
            self.sock.settimeout(timeout)
            _send_msg(self.sock, msg)
        except OSError as exc:
            raise from_os_error(exc, "talking to the TCP probe", self.host, self.port) from exc
        return self.reply(timeout)

    def reply(self, timeout: float = HANDSHAKE_TIMEOUT) -> dict[str, Any]:
        try:
            self.sock.settimeout(timeout)
            reply = _recv_msg(self.sock)
        except (OSError, ValueError) as exc:
            if isinstance(exc, OSError):
                raise from_os_error(exc, "talking to the TCP probe", self.host, self.port) from exc
            raise NetworkError(f"garbled reply from the TCP probe at {self.host}:{self.port}: {exc}") from exc
        if reply is None:
            raise NetworkError(
                f"the TCP probe at {self.host}:{self.port} closed the connection", "see the server's output"
            )
        if not reply.get("ok"):
            raise WorkbenchError(f"the TCP probe refused: {reply.get('error', 'no reason given')}")
        return reply

    def open_data(self, token: str, window: int | None) -> socket.socket:
        sock = _connect(self.host, self.port, HANDSHAKE_TIMEOUT)
        try:
            self._hello(sock)
            if window is not None:
                _lock_window(sock, window)
            sock.sendall(b"D" + bytes.fromhex(token))
            if _recv_exact(sock, 1) != _READY:
                raise NetworkError(
                    f"the TCP probe at {self.host}:{self.port} dropped the data connection",
                    "the server may be busy or stopping",
                )
        except OSError as exc:
            sock.close()
            raise from_os_error(exc, "opening the TCP probe's data connection", self.host, self.port) from exc
        except BaseException:
            sock.close()
            raise
        return sock

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _connect(host: str, port: int, timeout: float) -> socket.socket:
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise from_os_error(exc, "connecting to the TCP probe", host, port) from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _check_args(direction: str, duration: float, window: int | None, max_bytes: int | None) -> None:
    if direction not in ("upload", "download"):
        raise UsageError(f"unknown direction {direction!r}", "use upload or download")
    if not 0 < duration <= MAX_DURATION:
        raise UsageError(f"probe duration {duration} s is out of range", f"use 0 < duration <= {MAX_DURATION:.0f}")
    if window is not None and not MIN_WINDOW <= window <= 1 << 30:
        raise UsageError(f"window {window} bytes is out of range", f"use {MIN_WINDOW} bytes to 1 GiB")
    if max_bytes is not None and not 1 <= max_bytes <= MAX_BYTES:
        raise UsageError(f"max_bytes {max_bytes} is out of range", f"use 1 to {MAX_BYTES} bytes")


def measure(
    host: str,
    port: int,
    secret: str,
    direction: Direction,
    duration: float = 5.0,
    window: int | None = None,
    max_bytes: int | None = None,
) -> ProbeResult:
    """Push bytes one way for `duration` s (or `max_bytes`) and time them at the receiver.

    upload = client to server, download = server to client. `window` clamps the receive window the
    receiving side advertises (bytes).
    """
    _check_args(direction, duration, window, max_bytes)
    cmd = "sink" if direction == "upload" else "source"
    limit = max_bytes or MAX_BYTES
    with _Session(host, port, secret) as session:
        reply = session.request({"cmd": cmd, "duration": duration, "max_bytes": max_bytes, "window": window})
        data = session.open_data(str(reply["token"]), window if direction == "download" else None)
        try:
            _set_poll_timeouts(data)
            if direction == "upload":
                local = _transmit(data, _payload(), time.monotonic() + duration, limit)
                data.shutdown(socket.SHUT_WR)
                _drain_to_eof(data)
            else:
                local = _receive(data, _new_buffer(), time.monotonic() + duration + GRACE_S, limit, window)
            local = SideCount(local.bytes, local.seconds, local.timed_bytes, read_tcp_info(data))
        except OSError as exc:
            raise from_os_error(exc, f"measuring raw TCP ({direction})", host, port) from exc
        finally:
            data.close()
        remote = SideCount.from_json(session.reply(timeout=duration + 2 * GRACE_S + HANDSHAKE_TIMEOUT)["count"])
    sender, receiver = (local, remote) if direction == "upload" else (remote, local)
    return ProbeResult(
        direction=direction,
        bytes=receiver.bytes,
        seconds=receiver.seconds,
        bps=receiver.bps,
        sender=sender,
        receiver=receiver,
        window_requested=window,
        window_bytes=_window_in_use(sender.tcp_info, receiver.tcp_info),
    )


def _window_in_use(sender: TcpInfo | None, receiver: TcpInfo | None) -> int | None:
    """The advertised receive window: what the sender saw (Linux >= 6.2), else what the receiver offered."""
    for value in (
        sender.snd_wnd if sender else None,
        receiver.rcv_wnd if receiver else None,
        receiver.rcv_space if receiver else None,
    ):
        if value:
            return value
    return None


def rtt(host: str, port: int, secret: str, count: int = 20) -> RttResult:
    """TCP connect time and application-level echo time, `count` samples each (median and minimum)."""
    if not 1 <= count <= MAX_PING_COUNT:
        raise UsageError(f"rtt count {count} is out of range", f"use 1 to {MAX_PING_COUNT}")
    connects: list[float] = []
    for _ in range(count):
        start = time.perf_counter()
        sock = _connect(host, port, HANDSHAKE_TIMEOUT)
        connects.append(time.perf_counter() - start)
        sock.close()
    pings: list[float] = []
    with _Session(host, port, secret) as session:
        session.request({"cmd": "ping", "count": count})
        sock = session.sock
        try:
            for i in range(count):
                message = struct.pack("!Q", i)
                start = time.perf_counter()
                sock.sendall(message)
                echo = _recv_exact(sock, 8)
                pings.append(time.perf_counter() - start)
                if echo != message:
                    raise NetworkError(f"the TCP probe at {host}:{port} echoed garbage", "see the server's output")
        except OSError as exc:
            raise from_os_error(exc, "pinging the TCP probe", host, port) from exc
    return RttResult(
        connect_median=statistics.median(connects),
        connect_min=min(connects),
        ping_median=statistics.median(pings),
        ping_min=min(pings),
        connect_samples=tuple(connects),
        ping_samples=tuple(pings),
    )


@dataclass(frozen=True)
class SweepPoint:
    """One window of a sweep: what was asked, what the kernel advertised, what flowed, what W/RTT predicts."""

    window_bytes: int
    effective_window_bytes: int | None
    measured_bps: float
    predicted_bps: float  # window / RTT, bytes/s
    result: ProbeResult | None = field(default=None, repr=False, compare=False)


def window_sweep(
    host: str,
    port: int,
    secret: str,
    windows: list[int],
    rtt_ms: float,
    duration: float,
    direction: Direction,
) -> list[SweepPoint]:
    """Measure once per clamped window; the gap to window/RTT shows where the window stops being the limit."""
    if rtt_ms <= 0:
        raise UsageError(f"RTT {rtt_ms} ms must be above zero", "measure it first with rtt()")
    if not windows:
        raise UsageError("no windows to sweep", "give sizes like 64K,256K,1M")
    if duration * len(windows) > 10 * MAX_DURATION:
        raise UsageError("the sweep would run too long", "use fewer windows or a shorter duration")
    points = []
    for window in windows:
        result = measure(host, port, secret, direction, duration=duration, window=window)
        points.append(
            SweepPoint(
                window_bytes=window,
                effective_window_bytes=result.window_bytes,
                measured_bps=result.bps,
                predicted_bps=window / (rtt_ms / 1e3),
                result=result,
            )
        )
    return points

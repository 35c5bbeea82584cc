"""The raw-TCP probe's client: measure one direction, RTT, and a window sweep against a ProbeServer.

Throughput is timed at the receiving side from its first to its last byte; both sides' counts are
reported. The far host's half is workbench.server.probe; the wire format is probe.wire.
"""

from __future__ import annotations

import hmac
import secrets
import socket
import statistics
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Literal

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
from workbench.shared.errors import AuthError, NetworkError, UsageError, WorkbenchError, from_os_error
from workbench.shared.tcpinfo import TcpInfo, read_tcp_info
from workbench.shared.validate import MAX_PROBE_DURATION_S as MAX_DURATION  # every load obeys it
from workbench.shared.validate import MIN_WINDOW_BYTES as MIN_WINDOW

Direction = Literal["upload", "download"]
DIRECTIONS: tuple[Direction, ...] = ("upload", "download")


@dataclass(frozen=True)
class ProbeResult:
    """One raw-TCP measurement; rates in bytes/s, timed at the receiver from its first to its last byte."""

    direction: str
    bytes: int  # received by the receiving side
    seconds: float
    bytes_per_s: float
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
            "bytes_per_s": self.bytes_per_s,
            "window_requested": self.window_requested,
            "window_bytes": self.window_bytes,
            "sender": self.sender.to_json(),
            "receiver": self.receiver.to_json(),
        }


@dataclass(frozen=True)
class RttResult:
    """Round-trip times in seconds: TCP connect (SYN to SYN-ACK) and an application-level echo."""

    connect_median_s: float
    connect_min_s: float
    ping_median_s: float
    ping_min_s: float
    connect_samples_s: tuple[float, ...] = field(default=(), repr=False)
    ping_samples_s: tuple[float, ...] = field(default=(), repr=False)


class _Session:
    """An authenticated control connection to a ProbeServer."""

    def __init__(self, host: str, port: int, secret: str, timeout: float = HANDSHAKE_TIMEOUT) -> None:
        self.host, self.port = host, port
        self.sock = _connect(host, port, timeout)
        try:
            server_nonce = self._hello(self.sock)
            client_nonce = secrets.token_bytes(NONCE_LEN)
            key = secret.encode()
            self.sock.sendall(b"C" + client_nonce + handshake_mac(key, b"client", server_nonce, client_nonce))
            proof = recv_exact(self.sock, NONCE_LEN)
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
        if not hmac.compare_digest(proof, handshake_mac(key, b"server", client_nonce, server_nonce)):
            self.close()
            raise AuthError(
                f"the TCP probe at {host}:{port} could not prove it knows the secret",
                "is another workbench server with other credentials listening there?",
            )

    def _hello(self, sock: socket.socket) -> bytes:
        hello = recv_exact(sock, len(MAGIC) + NONCE_LEN)
        if not hello.startswith(MAGIC):
            raise NetworkError(
                f"{self.host}:{self.port} is not a workbench TCP probe",
                "check the port: 'workbench serve' prints the probe's port",
            )
        return hello[len(MAGIC) :]

    def request(self, msg: dict[str, Any], timeout: float = HANDSHAKE_TIMEOUT) -> dict[str, Any]:
        try:
            self.sock.settimeout(timeout)
            send_msg(self.sock, msg)
        except OSError as exc:
            raise from_os_error(exc, "talking to the TCP probe", self.host, self.port) from exc
        return self.reply(timeout)

    def reply(self, timeout: float = HANDSHAKE_TIMEOUT) -> dict[str, Any]:
        try:
            self.sock.settimeout(timeout)
            reply = recv_msg(self.sock)
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
                lock_window(sock, window)
            sock.sendall(b"D" + bytes.fromhex(token))
            if recv_exact(sock, 1) != READY:
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
            set_poll_timeouts(data)
            if direction == "upload":
                local = transmit(data, random_payload(), time.monotonic() + duration, limit)
                data.shutdown(socket.SHUT_WR)
                drain_to_eof(data)
            else:
                local = receive(data, new_buffer(), time.monotonic() + duration + GRACE_S, limit, window)
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
        bytes_per_s=receiver.bytes_per_s,
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
                echo = recv_exact(sock, 8)
                pings.append(time.perf_counter() - start)
                if echo != message:
                    raise NetworkError(f"the TCP probe at {host}:{port} echoed garbage", "see the server's output")
        except OSError as exc:
            raise from_os_error(exc, "pinging the TCP probe", host, port) from exc
    return RttResult(
        connect_median_s=statistics.median(connects),
        connect_min_s=min(connects),
        ping_median_s=statistics.median(pings),
        ping_min_s=min(pings),
        connect_samples_s=tuple(connects),
        ping_samples_s=tuple(pings),
    )


@dataclass(frozen=True)
class SweepPoint:
    """One window of a sweep: what was asked, what the kernel advertised, what flowed, what W/RTT predicts."""

    window_bytes: int
    effective_window_bytes: int | None
    measured_bytes_per_s: float
    predicted_bytes_per_s: float  # bytes/s: window / RTT, or the path's ceiling when that is lower
    predicted_by: str = "window"  # "window" or "path": which of the two the prediction is
    result: ProbeResult | None = field(default=None, repr=False, compare=False)


def window_sweep(
    host: str,
    port: int,
    secret: str,
    windows: list[int],
    rtt_ms: float,
    duration: float,
    direction: Direction,
    path_bytes_per_s: float | None = None,
) -> list[SweepPoint]:
    """Measure once per clamped window; the gap to window/RTT shows where the window stops being the limit.

    The prediction is min(window / RTT, `path_bytes_per_s`): past the bandwidth-delay product a larger
    window cannot beat the path (the link's goodput in the lab).
    """
    if rtt_ms <= 0:
        raise UsageError(f"RTT {rtt_ms} ms must be above zero", "measure it first with rtt()")
    if not windows:
        raise UsageError("no windows to sweep", "give sizes like 64K,256K,1M")
    if duration * len(windows) > 10 * MAX_DURATION:
        raise UsageError("the sweep would run too long", "use fewer windows or a shorter duration")
    points = []
    for window in windows:
        result = measure(host, port, secret, direction, duration=duration, window=window)
        by_window = window / (rtt_ms / 1e3)
        by_path = path_bytes_per_s is not None and path_bytes_per_s < by_window
        points.append(
            SweepPoint(
                window_bytes=window,
                effective_window_bytes=result.window_bytes,
                measured_bytes_per_s=result.bytes_per_s,
                predicted_bytes_per_s=path_bytes_per_s if path_bytes_per_s is not None and by_path else by_window,
                predicted_by="path" if by_path else "window",
                result=result,
            )
        )
    return points

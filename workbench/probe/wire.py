"""The raw-TCP probe's wire format, shared by its client (probe.client) and server (server.probe).

One control connection and one data connection per measurement, iperf3-like:

- every connection starts with the server's hello: MAGIC + a 32-byte random nonce;
- control: the client sends b"C", its own nonce and HMAC-SHA256(secret, "client" + both nonces);
  the server closes without a word on a bad MAC, else proves itself with HMAC(secret, "server" + ...).
  The secret itself never crosses the wire. Then length-prefixed JSON requests: sink, source, ping;
- data: the client sends b"D" + a one-time token the server issued over the authenticated control
  connection; the server answers READY once the socket is ready (window clamp applied), then the
  bytes flow one way until the sender shuts its side; the server reports its SideCount over control.

Both ends cap every load in duration and bytes with the limits defined here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import struct
from dataclasses import dataclass
from typing import Any

from workbench.shared.tcpinfo import TcpInfo

MAGIC = b"WBTCP1\n"
NONCE_LEN = 32
MAX_BYTES = 256 << 30
MAX_PING_COUNT = 10_000
GRACE_S = 3.0  # extra time a receiver waits beyond the sender's duration
HANDSHAKE_TIMEOUT = 5.0
MAX_MSG = 64 * 1024
READY = b"K"


@dataclass(frozen=True)
class SideCount:
    """What one end of a data connection counted."""

    bytes: int
    seconds: float  # first to last byte moved on this side
    timed_bytes: int  # bytes moved after the first chunk, the ones `seconds` spans
    tcp_info: TcpInfo | None = None

    @property
    def bytes_per_s(self) -> float:
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


def handshake_mac(secret: bytes, role: bytes, first: bytes, second: bytes) -> bytes:
    return hmac.new(secret, b"workbench-tcp " + role + first + second, hashlib.sha256).digest()


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Read exactly n bytes; b'' when the peer closed first."""
    chunks = bytearray()
    while len(chunks) < n:
        part = sock.recv(n - len(chunks))
        if not part:
            return b""
        chunks += part
    return bytes(chunks)


def send_msg(sock: socket.socket, msg: dict[str, Any]) -> None:
    data = json.dumps(msg).encode()
    sock.sendall(struct.pack("!I", len(data)) + data)


def recv_msg(sock: socket.socket) -> dict[str, Any] | None:
    head = recv_exact(sock, 4)
    if not head:
        return None
    (length,) = struct.unpack("!I", head)
    if length > MAX_MSG:
        raise ValueError("control message too long")
    body = recv_exact(sock, length)
    if len(body) != length:
        return None
    msg = json.loads(body)
    if not isinstance(msg, dict):
        raise ValueError("control message is not an object")
    return msg

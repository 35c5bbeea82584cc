"""Linux TCP_INFO for one socket: RTT, congestion window, windows and the times that say WHY a flow was limited.

Parsed by the Linux `struct tcp_info` layout (include/uapi/linux/tcp.h). The kernel returns only as
much of the struct as it knows, so fields added by newer kernels are None on older ones
(`snd_wnd` needs Linux 6.2, `rcv_wnd` 6.10). On other platforms `read_tcp_info` returns None.
"""

from __future__ import annotations

import socket
import struct
import sys
from dataclasses import asdict, dataclass
from typing import Any

_TCP_INFO = getattr(socket, "TCP_INFO", None)
_BUFLEN = 512
TCPI_OPT_TIMESTAMPS = 1  # tcpi_options' bit for the timestamps option (include/uapi/linux/tcp.h)

# (name, offset, struct format) in the Linux layout; offsets are fixed by the kernel ABI.
_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("state", 0, "B"),
    ("ca_state", 1, "B"),
    ("retransmits", 2, "B"),
    ("options", 5, "B"),
    ("rto_us", 8, "I"),
    ("snd_mss", 16, "I"),
    ("rcv_mss", 20, "I"),
    ("unacked", 24, "I"),
    ("lost", 32, "I"),
    ("pmtu", 60, "I"),
    ("rcv_ssthresh", 64, "I"),
    ("rtt_us", 68, "I"),
    ("rttvar_us", 72, "I"),
    ("snd_ssthresh", 76, "I"),
    ("snd_cwnd", 80, "I"),
    ("advmss", 84, "I"),
    ("rcv_rtt_us", 92, "I"),
    ("rcv_space", 96, "I"),
    ("total_retrans", 100, "I"),
    ("pacing_rate", 104, "Q"),
    ("bytes_acked", 120, "Q"),
    ("bytes_received", 128, "Q"),
    ("segs_out", 136, "I"),
    ("notsent_bytes", 144, "I"),
    ("min_rtt_us", 148, "I"),
    ("data_segs_out", 156, "I"),
    ("delivery_rate", 160, "Q"),
    ("busy_time_us", 168, "Q"),
    ("rwnd_limited_us", 176, "Q"),
    ("sndbuf_limited_us", 184, "Q"),
    ("bytes_sent", 200, "Q"),
    ("bytes_retrans", 208, "Q"),
    ("snd_wnd", 228, "I"),
    ("rcv_wnd", 232, "I"),
)


@dataclass(frozen=True)
class TcpInfo:
    """One TCP_INFO snapshot; rates in bytes/s, times in µs, windows in bytes, cwnd in segments."""

    state: int | None = None
    ca_state: int | None = None
    retransmits: int | None = None
    options: int | None = None  # TCPI_OPT_* bits the connection negotiated (timestamps, SACK, window scaling)
    snd_wscale: int | None = None
    rcv_wscale: int | None = None
    # The kernel's flag on its latest delivery-rate sample: the sender had less than a congestion window in
    # flight and nothing more queued, i.e. the application, not the network, set the pace (what BBR reads).
    delivery_rate_app_limited: bool | None = None
    rto_us: int | None = None
    snd_mss: int | None = None
    rcv_mss: int | None = None
    unacked: int | None = None
    lost: int | None = None
    pmtu: int | None = None
    rcv_ssthresh: int | None = None
    rtt_us: int | None = None
    rttvar_us: int | None = None
    snd_ssthresh: int | None = None
    snd_cwnd: int | None = None
    advmss: int | None = None
    rcv_rtt_us: int | None = None
    rcv_space: int | None = None
    total_retrans: int | None = None
    pacing_rate: int | None = None
    bytes_acked: int | None = None
    bytes_received: int | None = None
    # Segments this socket sent (every one: data, pure ACKs, SYN/FIN, retransmissions), and those of them that
    # carried data; counted per MSS-sized segment even when the stack hands the device one TSO/GSO
    # super-packet, so they are what went on the wire (Linux 4.2+ and 4.6+; 32-bit, they wrap).
    segs_out: int | None = None
    notsent_bytes: int | None = None
    min_rtt_us: int | None = None
    data_segs_out: int | None = None
    delivery_rate: int | None = None
    busy_time_us: int | None = None
    rwnd_limited_us: int | None = None
    sndbuf_limited_us: int | None = None
    bytes_sent: int | None = None
    bytes_retrans: int | None = None
    snd_wnd: int | None = None  # peer's advertised receive window after scaling (sender side)
    rcv_wnd: int | None = None  # window this socket advertises (receiver side)

    @property
    def timestamps(self) -> bool:
        """Whether the connection carries the TCP timestamps option (12 bytes of every segment's header)."""
        return bool((self.options or 0) & TCPI_OPT_TIMESTAMPS)

    @property
    def rwnd_limited_fraction(self) -> float | None:
        """Share of the busy sending time spent waiting for the peer's receive window."""
        return _fraction(self.rwnd_limited_us, self.busy_time_us)

    @property
    def sndbuf_limited_fraction(self) -> float | None:
        """Share of the busy sending time spent with the local send buffer full."""
        return _fraction(self.sndbuf_limited_us, self.busy_time_us)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> TcpInfo | None:
        if not data:
            return None
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def _fraction(part: int | None, whole: int | None) -> float | None:
    if part is None or not whole:
        return None
    return min(1.0, part / whole)


def _layout(fields: tuple[tuple[str, int, str], ...]) -> tuple[tuple[str, ...], struct.Struct]:
    """One struct over every field, padding the gaps: a buffer that holds them all is decoded in one call."""
    fmt, at = "=", 0
    for _, offset, code in fields:
        fmt += "x" * (offset - at) + code
        at = offset + struct.calcsize("=" + code)
    return tuple(name for name, _, _ in fields), struct.Struct(fmt)


_NAMES, _WHOLE = _layout(_FIELDS)


def parse_tcp_info(raw: bytes) -> TcpInfo:
    """Decode a Linux `struct tcp_info` buffer; fields beyond its length stay None."""
    values: dict[str, Any]
    if len(raw) >= _WHOLE.size:  # a current kernel: every field at once (a dump parses this per socket)
        values = dict(zip(_NAMES, _WHOLE.unpack_from(raw), strict=True))
    else:
        values = {}
        for name, offset, fmt in _FIELDS:
            if offset + struct.calcsize(fmt) <= len(raw):
                values[name] = struct.unpack_from("=" + fmt, raw, offset)[0]
    if len(raw) > 6:
        # Two 4-bit fields share one byte; little-endian bitfield order puts snd_wscale low.
        values["snd_wscale"] = raw[6] & 0x0F
        values["rcv_wscale"] = raw[6] >> 4
    if len(raw) > 7:
        values["delivery_rate_app_limited"] = bool(raw[7] & 0x01)
    return TcpInfo(**values)


def read_tcp_info(sock: socket.socket) -> TcpInfo | None:
    """TCP_INFO of a connected socket, or None where the platform has no Linux TCP_INFO (macOS)."""
    if _TCP_INFO is None or not sys.platform.startswith("linux"):
        # macOS has a TCP_INFO-like option with another layout (TCP_CONNECTION_INFO): not parsed here.
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _BUFLEN)
    except OSError:
        return None
    if len(raw) < 104:
        return None
    return parse_tcp_info(raw)

"""Linux's route netlink (rtnetlink), the two questions workbench asks it: which interface the kernel would send a
packet to an address through (RTM_GETROUTE, as `ip route get`), and what one interface is (RTM_GETLINK: its name,
type, MTU, qdisc, queue length, GSO/GRO/TSO size limits and 64-bit counters, which come in the same answer).

Written against the kernel's UAPI (linux/netlink.h, linux/rtnetlink.h, linux/if_link.h) rather than through a
library, as inetdiag.py is. A netlink socket belongs to the network namespace of the thread that opens it, so a
lab thread that entered a host's namespace with setns reads that host's interfaces; sysfs would not (it shows
the namespace it was mounted in, so a lab thread would read the wrong host's counters).

One `Rtnetlink` is one socket: open one per question, or hold one for a watch that asks the same thing again
(the counters read at a copy's start and at its end), which saves the socket's set-up on the second reading.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct
import sys
from dataclasses import dataclass, field, fields
from typing import Any

NETLINK_ROUTE = 0
RTM_NEWLINK = 16
RTM_GETLINK = 18
RTM_NEWROUTE = 24
RTM_GETROUTE = 26
NLM_F_REQUEST = 0x01
NLMSG_ERROR = 2
IFLA_IFNAME = 3
IFLA_MTU = 4
IFLA_QDISC = 6
IFLA_TXQLEN = 13
IFLA_STATS64 = 23
IFLA_GSO_MAX_SEGS = 40
IFLA_GSO_MAX_SIZE = 41
IFLA_GRO_MAX_SIZE = 58
IFLA_TSO_MAX_SIZE = 59
IFLA_TSO_MAX_SEGS = 60
RTA_DST = 1
RTA_OIF = 4
ARPHRD_ETHER = 1
ARPHRD_LOOPBACK = 772
ARPHRD_NONE = 65534  # a TUN device: IP packets, no link header
NETLINK_TIMEOUT_S = 2.0
_ANSWER_BYTES = 1 << 16

_NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_IFINFOMSG = struct.Struct("=BxHiII")  # family, (pad), type, index, flags, change
_RTMSG = struct.Struct("=BBBBBBBBI")  # family, dst_len, src_len, tos, table, protocol, scope, type, flags
_RTA = struct.Struct("=HH")  # len, type
_U32 = struct.Struct("=I")
_ERROR = struct.Struct("=i")  # nlmsgerr's error: a negative errno
_STATS64_HEAD = struct.Struct("=QQQQ")  # rtnl_link_stats64: rx_packets, tx_packets, rx_bytes, tx_bytes
_KINDS = {ARPHRD_ETHER: "ethernet", ARPHRD_LOOPBACK: "loopback", ARPHRD_NONE: "ip"}


@dataclass(frozen=True)
class Stats64:
    """Of an interface's 64-bit counters (rtnl_link_stats64), since the device was created, those read here."""

    tx_packets: int
    rx_bytes: int
    tx_bytes: int


def _limit(ifla: int) -> Any:
    return field(default=None, metadata={"ifla": ifla})


@dataclass(frozen=True, kw_only=True)
class SizeLimits:
    """The largest packets the kernel builds for one device (GSO, TSO) and assembles from it (GRO), each read from
    its RTM_GETLINK attribute; None where the kernel did not say (an older kernel has no TSO limits). The one list
    of these fields: the netlink Link and offloads.Offloads both hold them."""

    gso_max_size_bytes: int | None = _limit(IFLA_GSO_MAX_SIZE)
    gso_max_segs: int | None = _limit(IFLA_GSO_MAX_SEGS)
    gro_max_size_bytes: int | None = _limit(IFLA_GRO_MAX_SIZE)
    tso_max_size_bytes: int | None = _limit(IFLA_TSO_MAX_SIZE)
    tso_max_segs: int | None = _limit(IFLA_TSO_MAX_SEGS)

    def size_limits(self) -> dict[str, int | None]:
        """The limits by field name, in SIZE_LIMITS order."""
        return {name: getattr(self, name) for name in SIZE_LIMITS}


SIZE_LIMITS = tuple(f.name for f in fields(SizeLimits))


@dataclass(frozen=True)
class Link(SizeLimits):
    """One interface as RTM_GETLINK tells it; None where the kernel did not say (a device without 64-bit counters
    has no `stats`)."""

    index: int
    name: str
    kind: str  # "ethernet", "loopback", "ip" (a TUN: no link header) or "other"
    mtu_bytes: int | None = None
    qdisc: str | None = None
    tx_queue_len: int | None = None
    stats: Stats64 | None = None


def attributes(data: bytes, start: int, end: int) -> dict[int, bytes]:
    """The netlink attributes from `start` to `end`: type (the nested and byte-order flags masked off) to
    payload. An attribute that claims more than is left ends the reading."""
    found: dict[int, bytes] = {}
    while start + _RTA.size <= end:
        length, kind = _RTA.unpack_from(data, start)
        if length < _RTA.size or start + length > end:
            break
        found[kind & 0x3FFF] = data[start + _RTA.size : start + length]
        start += (length + 3) & ~3
    return found


def attribute(kind: int, payload: bytes) -> bytes:
    """One netlink attribute, padded to 4 bytes."""
    length = _RTA.size + len(payload)
    return _RTA.pack(length, kind) + payload + b"\0" * (((length + 3) & ~3) - length)


def _text(payload: bytes) -> str:
    return payload.split(b"\0", 1)[0].decode(errors="replace")


def _u32(attrs: dict[int, bytes], kind: int) -> int | None:
    payload = attrs.get(kind, b"")
    return int(_U32.unpack_from(payload)[0]) if len(payload) >= _U32.size else None


def parse_link(payload: bytes) -> Link:
    """An RTM_NEWLINK payload (ifinfomsg, then attributes)."""
    _family, arphrd, index, _flags, _change = _IFINFOMSG.unpack_from(payload, 0)
    attrs = attributes(payload, _IFINFOMSG.size, len(payload))
    stats = attrs.get(IFLA_STATS64, b"")
    return Link(
        index=index,
        name=_text(attrs[IFLA_IFNAME]) if IFLA_IFNAME in attrs else "",
        kind=_KINDS.get(arphrd, "other"),
        mtu_bytes=_u32(attrs, IFLA_MTU),
        qdisc=_text(attrs[IFLA_QDISC]) if IFLA_QDISC in attrs else None,
        tx_queue_len=_u32(attrs, IFLA_TXQLEN),
        **{f.name: _u32(attrs, f.metadata["ifla"]) for f in fields(SizeLimits)},
        stats=Stats64(*_STATS64_HEAD.unpack_from(stats)[1:]) if len(stats) >= _STATS64_HEAD.size else None,
    )


def parse_route_oif(payload: bytes) -> int | None:
    """The output interface index (RTA_OIF) of an RTM_NEWROUTE payload (rtmsg, then attributes)."""
    oif = attributes(payload, _RTMSG.size, len(payload)).get(RTA_OIF)
    return int(_U32.unpack_from(oif)[0]) if oif and len(oif) >= 4 else None


class Rtnetlink:
    """A route-netlink socket opened in the calling thread's network namespace. Raises OSError where there is
    none (not Linux)."""

    def __init__(self) -> None:
        if not sys.platform.startswith("linux"):
            raise OSError(errno.ENOTSUP, "route netlink is Linux's")
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
        try:
            self._sock.bind((0, 0))
            self._sock.settimeout(NETLINK_TIMEOUT_S)
        except OSError:
            self._sock.close()
            raise
        self._seq = 0

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Rtnetlink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ask(self, request: int, body: bytes, answer: int) -> bytes:
        """Send one request; the payload (after its nlmsghdr) of the answer of type `answer` to it. A refusal is
        an OSError with the kernel's errno (ENODEV: no such interface)."""
        self._seq += 1
        self._sock.send(_NLMSGHDR.pack(_NLMSGHDR.size + len(body), request, NLM_F_REQUEST, self._seq, 0) + body)
        while True:  # a datagram may hold several messages, and an earlier request's late answer is passed over
            data = self._sock.recv(_ANSWER_BYTES)
            offset = 0
            while offset + _NLMSGHDR.size <= len(data):
                length, got, _flags, seq, _pid = _NLMSGHDR.unpack_from(data, offset)
                if length < _NLMSGHDR.size or offset + length > len(data):
                    raise OSError(errno.EBADMSG, "a route netlink answer that could not be read")
                start, end = offset + _NLMSGHDR.size, offset + length
                if seq == self._seq:
                    if got == NLMSG_ERROR:
                        code = -_ERROR.unpack_from(data, start)[0] or errno.ENOENT
                        raise OSError(code, os.strerror(code))
                    if got == answer:
                        return data[start:end]
                offset += (length + 3) & ~3

    def route_interface(self, address: str) -> int:
        """The index of the interface the kernel would send a packet to `address` (an IP address, a scope
        `%…` ignored) through. ValueError for what is no address; OSError where no route is."""
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
        body = _RTMSG.pack(family, ip.max_prefixlen, 0, 0, 0, 0, 0, 0, 0) + attribute(RTA_DST, ip.packed)
        oif = parse_route_oif(self.ask(RTM_GETROUTE, body, RTM_NEWROUTE))
        if oif is None:
            raise OSError(errno.ENETUNREACH, f"no interface carries the route to {ip}")
        return oif

    def link(self, index: int = 0, name: str | None = None) -> Link:
        """Interface `index` (or the one called `name`). Its counters come with it whatever is asked: the
        kernel's RTEXT_FILTER_SKIP_STATS leaves out only its virtual functions' counters, which are not asked
        for either."""
        body = _IFINFOMSG.pack(socket.AF_UNSPEC, 0, index, 0, 0)
        if name is not None:
            body += attribute(IFLA_IFNAME, name.encode() + b"\0")
        return parse_link(self.ask(RTM_GETLINK, body, RTM_NEWLINK))

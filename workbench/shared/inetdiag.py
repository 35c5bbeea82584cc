"""Every TCP socket of this network namespace with its TCP_INFO, read from outside its process.

The kernel's socket-diagnostics interface (netlink, NETLINK_SOCK_DIAG, `inet_diag`) dumps the TCP sockets
of the namespace the netlink socket was opened in, whichever process owns them: curl, smbclient, sshd or a
Python client alike. This is what `ss -ti` reads. Two attributes are asked for, the `struct tcp_info`
(parsed by workbench.shared.tcpinfo) and the socket's buffer sizes, and on request two more, its congestion
control's name and that one's own state, of which BBR's pacing gain is kept (whether the sender is still in
start-up); the request is answered in one dump.

Written against the kernel's UAPI (linux/inet_diag.h, linux/sock_diag.h, linux/netlink.h) rather than
through a netlink library: a sample must cost well under a millisecond of Python, and the parsing here
touches only the header of a socket that is not to the peer being watched.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from workbench.shared.tcpinfo import TcpInfo, parse_tcp_info

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x01
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
INET_DIAG_REQ_BYTECODE = 1  # the request's attribute that carries a filter program
INET_DIAG_BC_JMP = 1  # filter op: jump by its "no" offset, always
INET_DIAG_BC_D_COND = 8  # filter op: the remote address (and port) matches a host condition
INET_DIAG_INFO = 2
INET_DIAG_SKMEMINFO = 7
# Asking for Vegas's info asks every congestion control for its own (the kernel's tcp_bbr.c answers it): BBR's
# comes back as INET_DIAG_BBRINFO, struct tcp_bbr_info (bw_lo, bw_hi, min_rtt, pacing_gain, cwnd_gain: __u32 each,
# the gains in units of 1/256); CUBIC's has none.
INET_DIAG_VEGASINFO = 3
INET_DIAG_CONG = 4  # the congestion control's name, NUL-terminated
INET_DIAG_BBRINFO = 16
BBR_GAIN_UNIT = 256
_BBR_INFO = struct.Struct("=5I")
DUMP_TIMEOUT_S = 2.0
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
SKNLGRP_INET_TCP_DESTROY = 1
SKNLGRP_INET6_TCP_DESTROY = 3
SK_MEMINFO_RCVBUF = 1
SK_MEMINFO_SNDBUF = 3

TCP_LISTEN = 10
TCP_TIME_WAIT = 6
# Every state but LISTEN and TIME_WAIT (a time-wait socket keeps no tcp_info): a closing data connection
# (FIN_WAIT, CLOSE_WAIT, LAST_ACK) still holds the counters of the copy it carried.
_STATES = ((1 << 12) - 1) & ~(1 << TCP_LISTEN) & ~(1 << TCP_TIME_WAIT)

_NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_REQ = struct.Struct("=BBBxI")  # family, protocol, ext, pad, states; then a zeroed inet_diag_sockid (48 bytes)
_MSG = struct.Struct("=BBBB")  # family, state, timer, retrans; then inet_diag_sockid
_SOCKID = struct.Struct(">HH16s16s")  # sport, dport (network order), src, dst (each up to 16 bytes)
_MSG_LEN = 72  # inet_diag_msg: 4 + sockid 48 + expires, rqueue, wqueue, uid, inode (5 × 4)
_RTA = struct.Struct("=HH")
_BC_OP = struct.Struct("=BBH")  # inet_diag_bc_op: code, yes (jump if true), no (jump if false)
_HOSTCOND = struct.Struct("=BBxxi")  # inet_diag_hostcond: family, prefix_len, (pad), port (-1: any); then the address


@dataclass(frozen=True)
class DiagSocket:
    """One TCP socket as the kernel reports it; addresses as text, buffers in bytes."""

    local: str
    local_port: int
    remote: str
    remote_port: int
    state: int
    info: TcpInfo
    sndbuf_bytes: int | None = None
    rcvbuf_bytes: int | None = None
    cookie: int = 0  # the kernel's socket cookie: one socket's for all its life, closed and orphaned included
    # BBR's pacing gain (2.89 in start-up, about 1 once it has found the path's rate); None: not BBR, or not said
    bbr_pacing_gain: float | None = None
    # The congestion control's name ("bbr", "cubic"); None: not said (the kernel leaves it and the state out of a
    # socket's destroy event and of a closing socket's entry)
    congestion: str | None = None

    @property
    def key(self) -> tuple[str, int, str, int, int]:
        """Identity across samples: the 4-tuple plus the cookie (a reused port is another connection). Not
        the inode: a socket its program closed is orphaned, and reported with inode 0 from then on."""
        return (self.local, self.local_port, self.remote, self.remote_port, self.cookie)


def available() -> str | None:
    """None when this platform can dump sockets, else why not."""
    if not sys.platform.startswith("linux"):
        return "socket diagnostics (inet_diag) are Linux's"
    return None


class DiagReader:
    """A netlink socket opened in the calling thread's network namespace; `sockets()` dumps the TCP sockets."""

    def __init__(self) -> None:
        if available() is not None:
            raise OSError(errno.ENOTSUP, available())
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
        try:
            self._sock.bind((0, 0))
            self._sock.settimeout(DUMP_TIMEOUT_S)  # a dump that never ends (never seen) fails the sample, not hangs
        except OSError:
            self._sock.close()
            raise
        self._seq = 0
        self.kernel_filter = True  # until the kernel refuses the bytecode filter

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> DiagReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sockets(self, peers: frozenset[str] | None = None, congestion: bool = False) -> list[DiagSocket]:
        """Every TCP socket (v4 and v6) not listening nor in time-wait; only those to `peers` when given.

        With `peers`, the kernel itself leaves the other sockets out (a filter in inet_diag's bytecode), so a
        host with many unrelated connections costs a sample little more than one with none; where the kernel
        refuses the filter, every socket is dumped and the others are dropped here. With `congestion`, each socket's
        congestion control and BBR's state are asked for too: not in every sample, since on the gige lab asking in
        every sample made FTP's small-file copies (a data connection per file) use measurably more CPU per file.
        """
        found: list[DiagSocket] = []
        for family in (socket.AF_INET, socket.AF_INET6):
            bytecode = _remote_filter(peers) if peers and self.kernel_filter else b""
            try:
                found.extend(self._dump(family, peers, bytecode, congestion))
            except OSError as exc:
                if not bytecode or exc.errno != errno.EINVAL:
                    raise
                self.kernel_filter = False  # an old kernel's bytecode check: filter here from now on
                found.extend(self._dump(family, peers, b"", congestion))
        return found

    def _dump(
        self, family: int, peers: frozenset[str] | None, bytecode: bytes = b"", congestion: bool = False
    ) -> list[DiagSocket]:
        self._seq += 1
        ext = (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_SKMEMINFO - 1))
        if congestion:
            ext |= (1 << (INET_DIAG_VEGASINFO - 1)) | (1 << (INET_DIAG_CONG - 1))
        body = _REQ.pack(family, socket.IPPROTO_TCP, ext, _STATES) + bytes(48)
        if bytecode:
            body += _RTA.pack(_RTA.size + len(bytecode), INET_DIAG_REQ_BYTECODE) + bytecode
        header = _NLMSGHDR.pack(
            _NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, self._seq, 0
        )
        self._sock.send(header + body)
        found: list[DiagSocket] = []
        malformed = False
        while True:  # read to the end of the dump, whatever it holds: a dump left unread makes the next one fail
            data = self._sock.recv(1 << 16)
            for message in _messages(data):
                if message is None:
                    malformed = True
                    break
                kind, seq, start, end = message
                if seq != self._seq:
                    continue
                if kind == NLMSG_DONE:
                    return _checked(found, malformed)
                if kind == NLMSG_ERROR:
                    code = -struct.unpack_from("=i", data, start)[0]
                    if code:
                        raise OSError(code, os.strerror(code))
                    return _checked(found, malformed)
                parsed, readable = _read_socket(data, start, end, peers)
                malformed = malformed or not readable
                if parsed is not None:
                    found.append(parsed)


def _messages(data: bytes) -> Iterator[tuple[int, int, int, int] | None]:
    """Each whole netlink message of one datagram as (type, sequence, payload start, end); None for a header
    that cannot be read, after which nothing more of the datagram can be."""
    offset = 0
    while offset + _NLMSGHDR.size <= len(data):
        length, kind, _flags, seq, _pid = _NLMSGHDR.unpack_from(data, offset)
        if length < _NLMSGHDR.size or offset + length > len(data):
            yield None
            return
        yield kind, seq, offset + _NLMSGHDR.size, offset + length
        offset += (length + 3) & ~3


def _read_socket(data: bytes, start: int, end: int, peers: frozenset[str] | None) -> tuple[DiagSocket | None, bool]:
    """One socket message: the socket (None if it is not to `peers`), and whether the message could be read."""
    try:
        return _parse(data, start, end, peers), True
    except (struct.error, ValueError):
        return None, False


def _remote_filter(peers: frozenset[str]) -> bytes:
    """inet_diag bytecode that keeps a socket whose remote address is one of `peers` (any port).

    Laid out as `ss` compiles an OR, which is what the kernel's check of a program accepts (every jump must
    land on an op reached by following the "yes" jumps from the start): each condition falls through to an
    unconditional jump to the end (keep) when it matches, and skips that jump to the next condition when it
    does not; the last condition falls through to the end, or jumps past it (drop). A v4 condition also
    matches a v4-mapped v6 socket.
    """
    conditions = []
    for peer in sorted(peers):
        address = ipaddress.ip_address(peer)
        family = socket.AF_INET if address.version == 4 else socket.AF_INET6
        conditions.append(_HOSTCOND.pack(family, address.max_prefixlen, -1) + address.packed)
    total = sum(_BC_OP.size + len(c) for c in conditions) + _BC_OP.size * (len(conditions) - 1)
    program = b""
    for index, condition in enumerate(conditions):
        size = _BC_OP.size + len(condition)
        program += _BC_OP.pack(INET_DIAG_BC_D_COND, size, size + 4) + condition
        if index < len(conditions) - 1:
            program += _BC_OP.pack(INET_DIAG_BC_JMP, 4, total - len(program))  # to the end exactly: keep
    return program


def _checked(found: list[DiagSocket], malformed: bool) -> list[DiagSocket]:
    if malformed:
        raise OSError(errno.EBADMSG, "the kernel's socket dump held a message that could not be read")
    return found


class DestroyListener:
    """The final counters of every TCP socket of this namespace as it is destroyed (the sock_diag
    "destroy" multicast groups): a connection that opens and closes between two samples (one FTP data
    connection per small file, a client process that exits) is seen all the same. Needs CAP_NET_ADMIN;
    raises OSError without it."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_NONBLOCK, NETLINK_SOCK_DIAG)
        try:
            # many short connections may close within one sample: room for thousands of messages (FORCE, as
            # root, passes net.core.rmem_max, which would cap it at a few hundred)
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 1 << 20)
            except OSError:
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            self._sock.bind((0, (1 << (SKNLGRP_INET_TCP_DESTROY - 1)) | (1 << (SKNLGRP_INET6_TCP_DESTROY - 1))))
        except OSError:
            self._sock.close()
            raise
        self.overflowed = False  # some destroyed sockets were not read in time (their counters are missing)

    def close(self) -> None:
        self._sock.close()

    def drain(self, peers: frozenset[str] | None = None) -> list[DiagSocket]:
        """The sockets (to `peers`) destroyed since the last call, with their final counters."""
        found: list[DiagSocket] = []
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except BlockingIOError:
                return found
            except OSError as exc:
                if exc.errno != errno.ENOBUFS:
                    raise
                self.overflowed = True
                continue
            for message in _messages(data):
                if message is None:
                    break
                kind, _seq, start, end = message
                if kind != SOCK_DIAG_BY_FAMILY:
                    continue
                parsed, readable = _read_socket(data, start, end, peers)
                if not readable:
                    self.overflowed = True  # a message it could not read: its socket's counters are lost
                if parsed is not None:
                    found.append(parsed)


def _address(family: int, raw: bytes) -> str:
    if family == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, raw[:4])
    address = ipaddress.IPv6Address(raw)
    mapped = address.ipv4_mapped  # a dual-stack socket talking IPv4 reports ::ffff:a.b.c.d
    return str(mapped) if mapped is not None else str(address)


def _parse(data: bytes, start: int, end: int, peers: frozenset[str] | None) -> DiagSocket | None:
    if end - start < _MSG_LEN:
        raise ValueError("a socket message shorter than inet_diag_msg")
    family, state, _timer, _retrans = _MSG.unpack_from(data, start)
    if family not in (socket.AF_INET, socket.AF_INET6):
        return None
    sport, dport, src, dst = _SOCKID.unpack_from(data, start + 4)
    remote = _address(family, dst)
    if peers is not None and remote not in peers:
        return None
    cookie = struct.unpack_from("=Q", data, start + 44)[0]
    info: TcpInfo | None = None
    sndbuf = rcvbuf = None
    pacing_gain: float | None = None
    congestion: str | None = None
    offset = start + _MSG_LEN
    while offset + _RTA.size <= end:
        rta_len, rta_type = _RTA.unpack_from(data, offset)
        if rta_len < _RTA.size or offset + rta_len > end:
            break
        payload = data[offset + _RTA.size : offset + rta_len]
        if rta_type == INET_DIAG_INFO:
            info = parse_tcp_info(payload)
        elif rta_type == INET_DIAG_SKMEMINFO and len(payload) >= 4 * (SK_MEMINFO_SNDBUF + 1):
            meminfo = struct.unpack_from(f"={SK_MEMINFO_SNDBUF + 1}I", payload)
            rcvbuf, sndbuf = meminfo[SK_MEMINFO_RCVBUF], meminfo[SK_MEMINFO_SNDBUF]
        elif rta_type == INET_DIAG_BBRINFO and len(payload) >= _BBR_INFO.size:
            pacing_gain = _BBR_INFO.unpack_from(payload)[3] / BBR_GAIN_UNIT
        elif rta_type == INET_DIAG_CONG:
            congestion = payload.split(b"\0", 1)[0].decode("ascii", "replace") or None
        offset += (rta_len + 3) & ~3
    if info is None:
        return None
    return DiagSocket(
        _address(family, src), sport, remote, dport, state, info, sndbuf, rcvbuf, cookie, pacing_gain, congestion
    )

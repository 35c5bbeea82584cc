"""Count a client's request/response exchanges on the lab link: the round trips it waits for, seen on the wire.

A capture on the client host's link device (an AF_PACKET socket in the client namespace, so nothing to
install) keeps, per IPv4 packet, its kernel timestamp, its connection, whether it carries payload or a SYN,
and the first bytes of its payload. An exchange is a turn of the conversation: the client speaks (payload or
SYN) after the server spoke, and after a pause of at least half the idle RTT since the client last spoke. A
client that streams on while the server answers (pipelined requests, window updates) waited for nothing and
counts nothing; a pure ACK or a FIN is no one speaking. Every connection between the two hosts counts (an
FTP data connection's SYN is a round trip too), except the workbench control API's (requests to /ctl/),
which the runner calls around a copy, not in it.

A wait for a delayed ACK is counted apart, in seconds: a side that spoke and then heard nothing but the other
side's ACK, tens of milliseconds later (the receiver's delayed-ACK timer: 40 ms at least on Linux), and spoke
again as soon as that ACK reached it, was waiting for it (its next small segment held by Nagle's algorithm until
everything it sent was acknowledged). Such a wait lasts the timer's time, not a round trip (40-48 ms on each lab
link, from 0.2 to 40 ms of RTT): every OpenSSH login (scp, sftp, rsync over SSH) waits twice, since OpenSSH turns
Nagle's algorithm off only once the session starts, after the key exchange and the authentication; an rsync
daemon's greeting waits two or three times.
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from workbench.shared import schedstat

ETH_P_ALL = 0x0003  # a packet socket sees a device's outgoing packets only when it asks for every protocol
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SNAP_BYTES = 160  # IP and TCP headers (at most 120 bytes) and the first bytes of payload
CAPTURE_BUFFER_BYTES = 64 << 20  # a burst of small-file copies queues here while the thread sleeps
CONTROL_MARK = b" /ctl/"  # the control API's requests: "GET /ctl/…", "POST /ctl/…"
REQUEST_LINE = re.compile(rb"[A-Z]{3,9} /")  # a packet that starts an HTTP request: "PUT /f/…", "GET /ctl/…"
MAX_PACKETS = 2_000_000  # bounded memory: a capture stops keeping packets beyond this

Connection = tuple[str, int, str, int]  # client address, client port, server address, server port


@dataclass(frozen=True)
class Packet:
    """One TCP packet on the link, as the client host saw it."""

    t_s: float  # kernel receive/send timestamp (CLOCK_REALTIME, seconds)
    from_client: bool
    conn: Connection
    payload_bytes: int
    syn: bool
    head: bytes = b""  # the first bytes of its payload

    @property
    def speaks(self) -> bool:
        return self.payload_bytes > 0 or self.syn


def parse_ipv4_tcp(data: bytes, t_s: float, client_addr: str) -> Packet | None:
    """A Packet from an IPv4 datagram (no link header), or None for anything not TCP from or to `client_addr`."""
    if len(data) < 20 or data[0] >> 4 != 4 or data[9] != socket.IPPROTO_TCP:
        return None
    ihl = (data[0] & 0x0F) * 4
    total = struct.unpack_from("!H", data, 2)[0] or len(data)  # 0: a super-packet too large to say its length
    src, dst = socket.inet_ntoa(data[12:16]), socket.inet_ntoa(data[16:20])
    if len(data) < ihl + 14 or client_addr not in (src, dst):
        return None
    sport, dport = struct.unpack_from("!HH", data, ihl)
    offset = (data[ihl + 12] >> 4) * 4
    flags = data[ihl + 13]
    payload = max(0, total - ihl - offset)
    from_client = src == client_addr
    conn = (src, sport, dst, dport) if from_client else (dst, dport, src, sport)
    head = bytes(data[ihl + offset : ihl + offset + 24]) if payload else b""
    return Packet(t_s, from_client, conn, payload, bool(flags & 0x02), head)


def control_connections(packets: Iterable[Packet]) -> set[Connection]:
    """Connections that carry requests to the control API (/ctl/) and nothing else.

    Every HTTP request a connection carries is read (a client packet whose payload starts with a method and a
    path), not only its first: an HTTP client may ask the control API on its own kept connection (aiohttp asks
    /ctl/info as it logs in, /ctl/mkdir for a directory) before it copies on that same connection, whose copies
    then count."""
    control: dict[Connection, bool] = {}
    for p in packets:
        if p.from_client and p.payload_bytes and REQUEST_LINE.match(p.head):
            control[p.conn] = control.get(p.conn, True) and CONTROL_MARK in p.head
    return {conn for conn, only_control in control.items() if only_control}


@dataclass(frozen=True)
class Counted:
    """The round trips in a stretch of conversation: the client's turns and the flights a sender waited for."""

    turns: int  # the client spoke again after hearing the server's answer
    flights: int  # a sender's data resumed after waiting a round trip for ACKs only (slow start, a small window)


def count_round_trips(packets: Sequence[Packet], min_gap_s: float) -> Counted:
    """The round trips in `packets` (any order), counted where a side resumes speaking after a pause of at
    least `min_gap_s` (half the idle RTT: a real wait lasts a whole one) with something heard meanwhile:

    - a turn: the client speaks after the server spoke (an answer, a SYN-ACK);
    - a flight: one side's data resumes having heard only ACKs from the other (the client's upload, or the
      server's answer, held by its congestion window on a fresh connection).
    """
    turns = flights = 0
    heard_answer = True  # the first thing the client says in a window starts an exchange
    heard_ack_by = {True: False, False: False}  # since each side last spoke: the other side's ACKs
    spoke_since = {True: False, False: False}  # since each side last spoke: the other side's payload
    last = {True: float("-inf"), False: float("-inf")}
    for p in sorted(packets, key=lambda p: p.t_s):
        side, other = p.from_client, not p.from_client
        if not p.speaks:
            heard_ack_by[other] = True
            continue
        paused = p.t_s - last[side] >= min_gap_s
        if side and heard_answer and paused:
            turns += 1
        elif paused and heard_ack_by[side] and not spoke_since[side] and last[side] > float("-inf"):
            flights += 1
        if side:
            heard_answer = False
        else:
            heard_answer = True
        heard_ack_by[side] = False
        spoke_since[side] = False
        spoke_since[other] = True
        last[side] = p.t_s
    return Counted(turns, flights)


DELAYED_ACK_MIN_S = 0.03  # below Linux's 40 ms minimum delayed-ACK timeout, far above a busy side's few ms
DELAYED_ACK_MAX_S = 0.5  # above the longest delayed-ACK timer in use (200 ms): a longer silence is no ACK's
RESUMED_WITHIN_S = 0.001  # the waiting side speaks this soon after the ACK reaches it (plus a tenth of an RTT)


def delayed_ack_waits(packets: Sequence[Packet], rtt_s: float) -> list[float]:
    """The waits for a delayed ACK in `packets` (any order), each in seconds beyond its round trip.

    On one connection: a side speaks; the next packet is the other side's pure ACK, DELAYED_ACK_MIN_S to
    DELAYED_ACK_MAX_S later (less the round trip when the ACK comes from the server: the capture is on the
    client's side of the link); and the first side speaks next, as soon as that ACK can have reached it. The
    round trip itself is counted by count_round_trips (a flight: data resumed after hearing only an ACK), so only
    the timer's time is counted here."""
    by_conn: dict[Connection, list[Packet]] = {}
    for p in sorted(packets, key=lambda p: p.t_s):
        by_conn.setdefault(p.conn, []).append(p)
    waits = []
    for conn_packets in by_conn.values():
        for spoke, ack, resumed in zip(conn_packets, conn_packets[1:], conn_packets[2:], strict=False):
            if not spoke.speaks or ack.speaks or ack.from_client == spoke.from_client:
                continue
            if resumed.from_client != spoke.from_client or not resumed.speaks:
                continue
            # the client's side of the link: a server's ACK arrives a round trip after what it acknowledges, and
            # the server's next packet a round trip after the client's ACK left
            held_s = ack.t_s - spoke.t_s - (rtt_s if spoke.from_client else 0.0)
            resumed_after_s = resumed.t_s - ack.t_s - (0.0 if spoke.from_client else rtt_s)
            # as soon as the ACK reached the waiting side, and not before: a server packet that arrives less than a
            # round trip after the client's ACK left was sent before that ACK reached the server (a slow-start
            # flight on a link whose round trip is as long as the timer), so it did not wait for it
            promptly = abs(resumed_after_s) <= RESUMED_WITHIN_S + rtt_s / 10
            if DELAYED_ACK_MIN_S <= held_s <= DELAYED_ACK_MAX_S and promptly:
                waits.append(held_s)
    return waits


def within(packets: Sequence[Packet], start_s: float, end_s: float, skip: set[Connection]) -> list[Packet]:
    """The packets of [start_s, end_s) not on a connection in `skip`."""
    return [p for p in packets if start_s <= p.t_s < end_s and p.conn not in skip]


class Capture:
    """Packets on `device` of the namespace the calling thread is in when `start` is called (the client's)."""

    def __init__(self, device: str, client_addr: str) -> None:
        self.device = device
        self.client_addr = client_addr
        self.packets: list[Packet] = []
        self.dropped = False  # more than MAX_PACKETS: the capture stopped keeping them
        self._sock: socket.socket | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
        with contextlib.suppress(OSError):  # as root the buffer may exceed rmem_max
            sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), CAPTURE_BUFFER_BYTES)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.bind((self.device, ETH_P_ALL))
        sock.settimeout(0.1)
        self._sock = sock
        self._thread = threading.Thread(target=self._read, name=schedstat.CAPTURE_THREAD, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        sock = self._sock
        assert sock is not None
        ancillary = socket.CMSG_SPACE(16)
        while not self._stop.is_set():
            try:
                data, cmsgs, _, _ = sock.recvmsg(SNAP_BYTES, ancillary)
            except TimeoutError:
                continue
            except OSError:
                return
            t_s = time.time()
            for level, kind, value in cmsgs:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
                    sec, nsec = struct.unpack("qq", value[:16])
                    t_s = sec + nsec / 1e9
            packet = parse_ipv4_tcp(data, t_s, self.client_addr)
            if packet is None:
                continue
            if len(self.packets) >= MAX_PACKETS:
                self.dropped = True
                continue
            self.packets.append(packet)

    def stop(self) -> list[Packet]:
        """Stop after what the kernel queued so far is read; the packets captured."""
        time.sleep(0.2)  # the last packets are in the socket's queue, not yet read
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._sock is not None:
            self._sock.close()
        return list(self.packets)

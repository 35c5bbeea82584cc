"""The link emulator: a userspace delay line between two TUN devices, one in each lab namespace.

Run as its own process (``python -m workbench.lab.linkemu --config -``) so the measuring process
is never disturbed. Each direction is an emulated wire: a packet waits in a drop-tail queue,
is serialised at the link rate (its direction's, when they differ) by its on-wire size, then held for
the one-way delay. A super-packet is delivered in pieces, each when its own last frame is off the wire
(`split_burst`): delivered whole it would add its serialisation to every byte's round trip. A stall
pauses a direction's serialiser and delivery; the window clamp (windowclamp.py) rewrites the receive
window the client host advertises. A line that breaks offloaded packets (`breaks="offloaded"`) drops every
GSO super-packet of more than one segment and passes the rest (`breaks_offloaded`).

On-wire size: TUN hands over whole GSO super-packets (up to 64 KiB, thanks to IFF_VNET_HDR and
TSO offload); each counts as ``ceil(payload / gso_size)`` segments of ``headers + 38`` bytes plus
the payload, 38 being Ethernet's preamble, header, FCS and inter-frame gap. A full-size TCP
segment with timestamps carries MSS = MTU − 52 bytes, so the expected TCP goodput is
``rate × (MTU − 52) / (MTU + 38)`` (94.1 % of the rate at MTU 1500).

Control, one line each on stdin: ``stats`` (answers one JSON line on stdout), ``delay SECONDS``
(sets the one-way delay), ``loss P``, ``stalls`` (starts the configured stalls),
``clamp-ports P,P|all`` (which server ports the window clamp applies to), ``quit``.
It exits by itself when stdin closes or its parent dies.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import fcntl
import gc
import json
import math
import os
import random
import resource
import select
import signal
import struct
import sys
import time
from dataclasses import asdict, dataclass

from workbench.lab.checksum import fold16, ipv4_header_checksum
from workbench.lab.windowclamp import WindowClamp

TUNSETIFF = 0x400454CA
TUNSETOFFLOAD = 0x400454D0
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
IFF_VNET_HDR = 0x4000
TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6, TUN_F_TSO_ECN = 0x01, 0x02, 0x04, 0x08
VNET_HDR = 10  # struct virtio_net_hdr: flags, gso_type, hdr_len, gso_size, csum_start, csum_offset
ETHERNET_OVERHEAD = 38  # preamble 8 + header 14 + FCS 4 + inter-frame gap 12
CLONE_NEWNET = 0x40000000
PR_SET_TIMERSLACK = 29
READ_SIZE = 65536 + VNET_HDR + 256
BATCH = 64  # packets read per wake-up and direction, so one busy direction cannot starve the other
PARENT_CHECK_S = 0.25
SPIN_S = 0.0002  # wake this early and poll: timer wake-ups on a VM can land 50-150 µs late, spinning is exact
# spinning is rationed (a token bucket of CPU time) so a busy link cannot turn it into a core's load:
# idle-RTT probes get exact timing, bulk transfers get timer wake-ups (their lateness never accumulates)
SPIN_SHARE = 0.1
SPIN_BURST_S = 0.05


@dataclass(frozen=True)
class EmuConfig:
    """What the forwarder needs: where the two TUNs live and the link's properties."""

    client_ns: str
    server_ns: str
    client_dev: str
    server_dev: str
    rate_bits_per_s: int
    delay_s: float  # one way
    queue_bytes: int
    loss: float = 0.0
    owner_pid: int = 0
    seed: int | None = None
    realtime: bool = True
    burst_segments: int = 1 << 16  # deliver super-packets in pieces of at most this many segments
    rate_up_bits_per_s: int | None = None  # client to server, when it differs from rate_bits_per_s
    rate_down_bits_per_s: int | None = None  # server to client
    client_window_bytes: int | None = None  # cap on the receive window the client host advertises
    client_window_ports: tuple[int, ...] | None = None  # ... only on connections to these server ports
    stall_every_s: float = 0.0  # 0: the line never stalls
    stall_s: float = 0.0
    stall_random: bool = False  # exponential gaps with mean stall_every_s, else periodic
    stall_direction: str = "both"  # "up" (client to server), "down" or "both"
    mtu: int = 1500  # the kernel link scales its limiter by it (the delay line reads sizes from packets)
    client_addr: str = ""  # the kernel link nudges its limiter after a stall with a datagram to the far end
    server_addr: str = ""
    breaks: str = ""  # "offloaded": drop every super-packet of more than one segment (see breaks_offloaded)


BREAKS = ("offloaded",)  # what a line can be asked to mishandle


def expected_goodput_bits_per_s(rate_bits_per_s: float, mtu: int) -> float:
    """TCP goodput of a link: rate × MSS / (MTU + 38), with MSS = MTU − 52 (IPv4, TCP timestamps)."""
    return rate_bits_per_s * (mtu - 52) / (mtu + ETHERNET_OVERHEAD)


def _ip_header(pkt: bytes) -> tuple[int, int]:
    """(IP header length, protocol) of the packet after the vnet header; IPv6 without extension headers."""
    if pkt[VNET_HDR] >> 4 == 4:
        return (pkt[VNET_HDR] & 0x0F) * 4, pkt[VNET_HDR + 9]
    return 40, pkt[VNET_HDR + 6]


def wire_bytes(pkt: bytes) -> tuple[int, int]:
    """(bytes on the wire, segments) of one TUN read: vnet header + IP packet, maybe a GSO super-packet."""
    ip_len = len(pkt) - VNET_HDR
    gso_type = pkt[1] & 0x7F
    gso_size = pkt[4] | (pkt[5] << 8)
    if gso_type == 0 or gso_size == 0:
        return ip_len + ETHERNET_OVERHEAD, 1
    # hdr_len from the kernel is the skb's linear length, not the headers': parse them instead
    l3, proto = _ip_header(pkt)
    l4 = (pkt[VNET_HDR + l3 + 12] >> 4) * 4 if proto == 6 else 8
    headers = l3 + l4
    payload = ip_len - headers
    segments = max(1, math.ceil(payload / gso_size))
    return payload + segments * (headers + ETHERNET_OVERHEAD), segments


def breaks_offloaded(pkt: bytes) -> bool:
    """Whether a line that breaks offloaded packets loses this TUN read: a GSO super-packet of more than one
    segment, what a TSO/GSO sender hands its device in one piece. An MTU-sized packet (no GSO type, or a GSO
    packet whose payload fits one segment) passes.

    Dropped whole, not cut to a first segment: a bridge or switch port drops a frame larger than its MTU (the
    published cases: forwarded TSO frames on a USB4/Thunderbolt bridge, an r8169 NIC), and a drop is what the
    sender then lives with: every flight of two or more segments is lost, and only the single segments of a
    retransmission timeout or a tail-loss probe get through. On wifi-ac that gave 0.4 Mbit/s with 66 % of
    the bytes sent again and 3.2 bytes sent per byte delivered (the r8169 case: 67 %, under 1 kbit/s);
    cutting each super-packet to its first segment collapsed too, a little less (0.9 Mbit/s, 53 %, 2.1), as
    one segment of every flight still arrived. With the sender's TSO and GSO off the same line carried 503.
    """
    if len(pkt) <= VNET_HDR or pkt[1] & 0x7F == 0:
        return False
    return wire_bytes(pkt)[1] > 1


def segments_first_frame(wire: int, segments: int) -> int:
    """Wire bytes of the first frame of a (super-)packet."""
    return -(-wire // segments)


def split_burst(pkt: bytes, max_segments: int) -> list[tuple[bytes, int, int]]:
    """Cut a GSO super-packet into pieces of at most `max_segments` segments: [(piece, wire, segments)].

    A real link hands the receiver each frame as its last bit arrives; the TUN hands over up to 64 KiB
    at once, so delivering a super-packet whole adds its serialisation time (about 1 ms at 533 Mbit/s)
    to the round trip of every byte in it, and a window-limited flow falls short of window/RTT by that
    much. Each piece is a valid smaller GSO packet (IP length, IPv4 header checksum, TCP sequence,
    flags and the pseudo-header sum of a checksum-offloaded packet adjusted), delivered when its own
    last frame is off the wire. Anything that is not TCP GSO comes back whole.
    """
    wire, segments = wire_bytes(pkt)
    if segments <= max_segments:
        return [(pkt, wire, segments)]
    version = pkt[VNET_HDR] >> 4
    l3, proto = _ip_header(pkt)
    if proto != 6:
        return [(pkt, wire, segments)]
    tcp = VNET_HDR + l3
    headers_end = tcp + (pkt[tcp + 12] >> 4) * 4
    gso_size = pkt[4] | (pkt[5] << 8)
    flags0, gso_type, _, _, csum_start, csum_offset = struct.unpack_from("<BBHHHH", pkt)
    if not flags0 & 0x01:
        # not VIRTIO_NET_HDR_F_NEEDS_CSUM: a full checksum over the whole payload, which no piece could keep
        return [(pkt, wire, segments)]
    payload = memoryview(pkt)[headers_end:]
    total = len(payload)
    step = gso_size * max_segments
    seq0 = struct.unpack_from("!I", pkt, tcp + 4)[0]
    ip_id0 = struct.unpack_from("!H", pkt, VNET_HDR + 4)[0] if version == 4 else 0
    old_l4_len = len(pkt) - tcp
    check0 = struct.unpack_from("!H", pkt, tcp + 16)[0]
    pieces = []
    for offset in range(0, total, step):
        body = payload[offset : offset + step]
        count = -(-len(body) // gso_size)
        head = bytearray(pkt[:headers_end])
        struct.pack_into(
            "<BBHHHH",
            head,
            0,
            flags0,
            gso_type if count > 1 else 0,
            headers_end - VNET_HDR,
            gso_size if count > 1 else 0,
            csum_start,
            csum_offset,
        )
        ip_len = headers_end - VNET_HDR + len(body)
        if version == 4:
            struct.pack_into("!H", head, VNET_HDR + 2, ip_len)
            struct.pack_into("!H", head, VNET_HDR + 4, (ip_id0 + offset // gso_size) & 0xFFFF)
            struct.pack_into("!H", head, VNET_HDR + 10, 0)
            struct.pack_into("!H", head, VNET_HDR + 10, ipv4_header_checksum(head[VNET_HDR:tcp]))
        else:
            struct.pack_into("!H", head, VNET_HDR + 4, ip_len - 40)
        struct.pack_into("!I", head, tcp + 4, (seq0 + offset) & 0xFFFFFFFF)
        flags = head[tcp + 13]
        if offset:
            flags &= ~0x80  # CWR only on the first piece, as GSO does
        if offset + step < total:
            flags &= ~0x09  # FIN and PSH only on the last
        head[tcp + 13] = flags
        # the check field holds the pseudo-header sum, which covers the TCP length: follow the shorter one
        l4_len = headers_end - tcp + len(body)
        struct.pack_into("!H", head, tcp + 16, fold16(check0 + (~old_l4_len & 0xFFFF) + l4_len))
        piece = bytes(head) + body
        pieces.append((piece, len(body) + count * (headers_end - tcp + l3 + ETHERNET_OVERHEAD), count))
    return pieces


def _setns_path(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def open_tun(netns: str, name: str) -> int:
    """Create TUN device `name` inside namespace `netns` (vnet headers, TSO) and return its fd."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        # the device is born in the namespace of whoever opens /dev/net/tun
        _setns_path(f"/run/netns/{netns}")
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        ifr = struct.pack("16sH22x", name.encode(), IFF_TUN | IFF_NO_PI | IFF_VNET_HDR)
        fcntl.ioctl(fd, TUNSETIFF, ifr)
        fcntl.ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN)
    finally:
        # go home so this process never pins a lab namespace
        libc = ctypes.CDLL(None, use_errno=True)
        libc.setns(home, CLONE_NEWNET)
        os.close(home)
    return fd


class Direction:
    """One way of the link: a drop-tail queue, a serialiser at the link rate, then the delay line."""

    def __init__(
        self,
        name: str,
        rate_bits_per_s: int,
        delay_s: float,
        queue_bytes: int,
        loss: float,
        rng: random.Random,
        burst_segments: int = 1 << 16,
        breaks: str = "",
    ):
        self.name = name
        self.breaks_offloaded = breaks == "offloaded"
        self.burst_segments = max(1, burst_segments)  # super-packets are delivered in pieces of at most this many
        self.sec_per_byte = 8.0 / rate_bits_per_s
        self.delay_s = delay_s
        self.queue_bytes = queue_bytes
        self.loss = loss
        self.rng = rng
        self.wire_free_at = 0.0  # when the serialiser finishes what it holds
        self.stall_until = 0.0  # a stalled line neither serialises nor delivers before this instant
        self.stalls = 0
        self.stalled_s = 0.0
        self.line: collections.deque[tuple[float, bytes]] = collections.deque()
        self.packets = self.segments = self.wire = 0
        self.dropped_queue = self.dropped_loss = self.dropped_offloaded = self.write_errors = 0
        self.max_queue = 0
        self.late_sum = 0.0
        self.late_max = 0.0
        self.delivered = 0

    def offer(self, pkt: bytes, now: float) -> None:
        wire, segments = wire_bytes(pkt)
        if self.breaks_offloaded and segments > 1 and breaks_offloaded(pkt):
            self.dropped_offloaded += 1  # the line's fault, not the queue's: counted apart from drops
            return
        if self.loss and self.rng.random() < self.loss:
            self.dropped_loss += 1
            return
        # a stalled line serialises nothing: the queue holds what it held, and fills, until the stall ends
        base = now if now >= self.stall_until else self.stall_until
        backlog = (self.wire_free_at - base) / self.sec_per_byte if self.wire_free_at > base else 0.0
        # admit a super-packet whole when its first frame fits, as a real queue would take the first
        # frames of a burst: an all-or-nothing drop of 45 segments would punish TCP far harder than a link
        if backlog + segments_first_frame(wire, segments) > self.queue_bytes:
            self.dropped_queue += 1
            return
        queued = int(backlog + wire)
        if queued > self.max_queue:
            self.max_queue = queued
        free_at = self.wire_free_at if self.wire_free_at > base else base
        if segments > self.burst_segments:
            for piece, piece_wire, _ in split_burst(pkt, self.burst_segments):
                free_at += piece_wire * self.sec_per_byte
                self.line.append((free_at + self.delay_s, piece))
        else:
            free_at += wire * self.sec_per_byte
            self.line.append((free_at + self.delay_s, pkt))
        self.wire_free_at = free_at
        self.packets += 1
        self.segments += segments
        self.wire += wire

    def stall(self, now: float, seconds: float) -> None:
        """Pause the line for `seconds` from `now`: nothing is serialised or delivered meanwhile."""
        until = now + seconds
        if until <= self.stall_until:
            return
        pause = until - max(now, self.stall_until)  # what this adds to a stall already under way, if any
        if now >= self.stall_until:
            self.stalls += 1
        self.stalled_s += pause
        # everything on the line waits the pause out: each packet arrives that much later, spaced as it was
        # (what was already due arrives as the stall ends), and the serialiser resumes where it stopped
        self.line = collections.deque((max(due, now) + pause, pkt) for due, pkt in self.line)
        if self.wire_free_at > now:
            self.wire_free_at += pause
        self.stall_until = until

    def next_due(self) -> float | None:
        """When this direction next has something to deliver (after any stall), or None."""
        if not self.line:
            return None
        due = self.line[0][0]
        return due if due >= self.stall_until else self.stall_until

    def deliver(self, fd: int, now: float) -> None:
        line = self.line
        if now < self.stall_until:
            return
        while line and line[0][0] <= now:
            due, pkt = line.popleft()
            try:
                os.write(fd, pkt)
            except OSError:
                self.write_errors += 1
                continue
            late = now - (due if due >= self.stall_until else self.stall_until)
            self.late_sum += late
            self.delivered += 1
            if late > self.late_max:
                self.late_max = late

    def stats(self) -> dict:
        return {
            "packets": self.packets,
            "segments": self.segments,
            "wire_bytes": self.wire,
            "dropped_queue": self.dropped_queue,
            "dropped_loss": self.dropped_loss,
            "dropped_offloaded": self.dropped_offloaded,
            "write_errors": self.write_errors,
            "max_queue_bytes": self.max_queue,
            "stalls": self.stalls,
            "stalled_s": round(self.stalled_s, 4),
            "late_mean_ms": 1000 * self.late_sum / self.delivered if self.delivered else 0.0,
            "late_max_ms": 1000 * self.late_max,
        }


class Forwarder:
    """Moves packets between the two TUN fds through one Direction each way."""

    def __init__(self, cfg: EmuConfig, tun_client: int, tun_server: int) -> None:
        self.cfg = cfg
        self.fds = (tun_client, tun_server)
        rng = self.rng = random.Random(cfg.seed)
        up, down = cfg.rate_up_bits_per_s or cfg.rate_bits_per_s, cfg.rate_down_bits_per_s or cfg.rate_bits_per_s
        tail = (cfg.delay_s, cfg.queue_bytes, cfg.loss, rng, cfg.burst_segments, cfg.breaks)
        self.dirs = (Direction("client_to_server", up, *tail), Direction("server_to_client", down, *tail))
        self.clamp = None
        if cfg.client_window_bytes:
            ports = frozenset(cfg.client_window_ports) if cfg.client_window_ports else None
            self.clamp = WindowClamp(cfg.client_window_bytes, ports)
        self.stalled = [
            d for d, way in zip(self.dirs, ("up", "down"), strict=True) if cfg.stall_direction in (way, "both")
        ]
        self.next_stall = math.inf  # armed by the "stalls" command, once the lab has calibrated its RTT
        self.started = time.monotonic()
        self.ctl_buf = b""
        self.running = True
        self.spin_s = 0.0  # CPU time spent polling for punctual delivery

    def _stall_gap(self) -> float:
        every = self.cfg.stall_every_s
        return self.rng.expovariate(1 / every) if self.cfg.stall_random else every

    def _maybe_stall(self, now: float) -> None:
        if now >= self.next_stall:
            for d in self.stalled:
                d.stall(now, self.cfg.stall_s)
            # the next gap counts from the end of this stall, so stalls never merge into one
            self.next_stall = now + self.cfg.stall_s + self._stall_gap()

    def stats(self) -> dict:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic() - self.started
        cpu = usage.ru_utime + usage.ru_stime
        both = [d.stats() for d in self.dirs]
        return {
            "packets": sum(s["packets"] for s in both),
            "bytes": sum(s["wire_bytes"] for s in both),
            "drops": sum(s["dropped_queue"] + s["dropped_loss"] for s in both),
            "offloaded_drops": sum(s["dropped_offloaded"] for s in both),  # a broken line's, apart from drops
            "max_queue_bytes": max(s["max_queue_bytes"] for s in both),
            "cpu_seconds": round(cpu, 3),
            "wall_seconds": round(wall, 3),
            "spin_seconds": round(self.spin_s, 3),
            "delay_ms": 1000 * self.dirs[0].delay_s,
            "windows_clamped": self.clamp.clamped if self.clamp else 0,
            **{d.name: s for d, s in zip(self.dirs, both, strict=True)},
        }

    def control(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return
        if not chunk:
            self.running = False  # the lab closed our stdin: it is gone or done
            return
        self.ctl_buf += chunk
        while b"\n" in self.ctl_buf:
            line, self.ctl_buf = self.ctl_buf.split(b"\n", 1)
            words = line.decode().split()
            if not words:
                continue
            if words[0] == "stats":
                _say(self.stats())
            elif words[0] == "delay" and len(words) == 2:
                for d in self.dirs:
                    d.delay_s = max(0.0, float(words[1]))
                _say({"delay_ms": 1000 * self.dirs[0].delay_s})
            elif words[0] == "loss" and len(words) == 2:
                for d in self.dirs:
                    d.loss = min(1.0, max(0.0, float(words[1])))
                _say({"loss": self.dirs[0].loss})
            elif words[0] == "clamp-ports" and len(words) == 2 and self.clamp is not None:
                # the servers' ports are known only once they listen, after the link is up
                self.clamp.ports = None if words[1] == "all" else frozenset(int(p) for p in words[1].split(","))
                _say({"clamp_ports": sorted(self.clamp.ports or [])})
            elif words[0] == "stalls":
                armed = self.cfg.stall_every_s > 0
                if armed:
                    self.next_stall = time.monotonic() + self._stall_gap()
                _say({"stalls": armed})
            elif words[0] == "quit":
                self.running = False

    def run(self, ctl: int) -> None:
        fds = self.fds
        pairs = ((fds[0], self.dirs[0], fds[1]), (fds[1], self.dirs[1], fds[0]))
        watch = [fds[0], fds[1], ctl]
        next_parent_check = 0.0
        monotonic = time.monotonic
        credit, last = SPIN_BURST_S, monotonic()
        clamp = self.clamp
        while self.running:
            now = monotonic()
            self._maybe_stall(now)
            wake = min(now + PARENT_CHECK_S, self.next_stall)
            for d, out in ((self.dirs[0], fds[1]), (self.dirs[1], fds[0])):
                if d.line:
                    d.deliver(out, now)
                    due = d.next_due()
                    if due is not None and due < wake:
                        wake = due
            if now >= next_parent_check:
                next_parent_check = now + PARENT_CHECK_S
                if self.cfg.owner_pid and os.getppid() != self.cfg.owner_pid:
                    return  # orphaned: the lab died without tearing us down
            credit = min(SPIN_BURST_S, credit + (now - last) * SPIN_SHARE)
            last = now
            timeout = wake - monotonic()
            if credit > 0:
                timeout -= SPIN_S
            if timeout > 0:
                ready = select.select(watch, [], [], timeout)[0]
            else:
                ready = select.select(watch, [], [], 0)[0]
                self.spin_s += monotonic() - now
                credit -= monotonic() - now
            if not ready:
                continue
            now = monotonic()
            for src, d, _ in pairs:
                if src in ready:
                    for _ in range(BATCH):
                        try:
                            pkt = os.read(src, READ_SIZE)
                        except BlockingIOError:
                            break
                        if clamp is not None:
                            if src == fds[0]:
                                pkt = clamp.from_client(pkt)
                            else:
                                clamp.from_server(pkt)
                        d.offer(pkt, now)
            if ctl in ready:
                self.control(ctl)


def _say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _tune_process(realtime: bool) -> list[str]:
    """Make wake-ups punctual; returns notes about what could not be done."""
    notes = []
    gc.disable()  # the loop makes no cycles; a collection pause would stall every packet in flight
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(1), 0, 0, 0)
    if realtime:
        try:
            # a low real-time priority: ahead of the measured processes, still behind kernel threads
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
        except (OSError, AttributeError) as exc:
            notes.append(f"no SCHED_FIFO ({exc}): expect occasional stalls under CPU load")
    return notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.lab.linkemu", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="JSON EmuConfig file, or '-' for the first line of stdin")
    parser.add_argument("--owner", type=int, help="pid of the lab that owns this forwarder (for stale cleanup)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the lab tears us down; Ctrl-C on its terminal is its job
    ctl = sys.stdin.fileno()
    try:
        if args.config == "-":
            raw = b""
            while not raw.endswith(b"\n"):
                chunk = os.read(ctl, 4096)
                if not chunk:
                    return 1
                raw += chunk
            cfg = EmuConfig(**json.loads(raw))
        else:
            with open(args.config) as fh:
                cfg = EmuConfig(**json.load(fh))
        tun_c = open_tun(cfg.client_ns, cfg.client_dev)
        tun_s = open_tun(cfg.server_ns, cfg.server_dev)
    except (OSError, ValueError, TypeError) as exc:
        _say({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    notes = _tune_process(cfg.realtime)
    os.set_blocking(ctl, False)
    fwd = Forwarder(cfg, tun_c, tun_s)
    _say({"ready": True, "pid": os.getpid(), "config": asdict(cfg), "notes": notes})
    with contextlib.suppress(BrokenPipeError):
        fwd.run(ctl)
    return 0


if __name__ == "__main__":
    sys.exit(main())

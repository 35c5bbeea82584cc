"""TCP triage: why a copy's connections went no faster, from the kernel's own counters (pure logic).

Linux keeps, per TCP socket, the time the sender was busy (it had data in flight or queued) and, within it,
the time it was limited by the peer's receive window (`tcpi_rwnd_limited`) and by its own send buffer
(`tcpi_sndbuf_limited`). Over a copy's elapsed time that splits into four parts, as NDT classifies flows:

- application: the sender had nothing to send (the client or server was waiting: a round trip, a disk,
  its own CPU, a process starting), or had data in flight but less than the congestion window allowed and
  nothing more queued: the kernel flags such delivery-rate samples "app-limited". A request/response
  client (one 64 KiB read per round trip) keeps its socket busy almost all the time, yet it is this case;
- receive-window: the receiver's advertised window was full (also when the kernel did not count it: a
  sender whose bytes in flight fill the window at a sample was held by it over that interval);
- send-buffer: the sender's socket buffer was full of unacknowledged data;
- network: busy and not limited otherwise: congestion control and the path set the pace.

The app-limited flag is read at each 100 ms sample; the busy time of an interval that is neither window-
nor buffer-limited is split between application and network by the bytes of the sockets flagged and not.

`Tally` folds successive samples of the sockets to one peer (workbench.shared.inetdiag) into a `TcpTriage`.
Only the side that sends knows those times. Where only the receiver could be watched (a download from a
server workbench did not start), the triage says so (`side` "receiver") and reports what the receiver
knows: its receive RTT and the window it advertised; the time fractions are then None.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeVar

from workbench.shared.inetdiag import DiagSocket
from workbench.shared.tcpinfo import TcpInfo
from workbench.shared.wire import IfaceCounters, header_bytes, iface_wire_bytes, link_header_bytes, ratio, wire_bytes

LIMITS = ("application", "receive-window", "send-buffer", "network", "mixed")
DOMINANT = 0.8  # a cause named alone must hold at least 80 % of the elapsed time; below that, "mixed"
# A sender with this share of the peer's window in flight at a sample is held by that window (see Tally._fold).
WINDOW_FULL = 0.8
# A receiver that saw its advertised window bound the rate: window / RTT within this factor of the rate.
WINDOW_EXPLAINS = 1.25
# A triage that saw less than this share of the copy's bytes (connections that opened and closed between two
# 100 ms samples, where destroy events cannot be read) names no limit: the time of what it missed would
# count as idle.
MIN_SEEN = 0.9
# BBR's pacing gain is 2.89 in start-up, 1/2.89 while it drains the queue start-up built, and 0.75 to 1.25 once it
# has found the path's rate: above 2, the sender is in start-up.
BBR_STARTUP_GAIN_ABOVE = 2.0
T = TypeVar("T")
SHORT = {"application": "app", "receive-window": "rwnd", "send-buffer": "sndbuf", "network": "net"}


@dataclass(frozen=True)
class TcpTriage:
    """What the kernel saw of one copy's connections (or of several copies, merged). Seconds and bytes are
    kept so the fractions can be recomputed; fractions are of `elapsed_s` and add up to 1."""

    side: str  # "sender" or "receiver": whose counters these are
    host: str  # "client" or "server": the host whose sockets were sampled
    elapsed_s: float
    connections: int  # sockets that moved data during the copy
    bytes_seen: int  # bytes those sockets moved (acknowledged, or received) while watched
    copy_bytes: int | None = None  # bytes the copy (or copies) moved: how much of it the watch saw
    incomplete: str | None = None  # why part of the copy went unwatched (then no limit is named)
    busy_s: float | None = None
    app_limited_busy_s: float | None = None  # busy, but flagged app-limited by the kernel (counted as application)
    rwnd_limited_s: float | None = None
    sndbuf_limited_s: float | None = None
    app_limited: float | None = None
    rwnd_limited: float | None = None
    sndbuf_limited: float | None = None
    network_limited: float | None = None
    rtt_ms: float | None = None  # median smoothed RTT while data moved (the receiver's estimate on its side)
    min_rtt_ms: float | None = None
    retrans_fraction: float | None = None
    bytes_sent: int | None = None
    bytes_retrans: int | None = None
    max_window_bytes: int | None = None  # sender: the largest window the peer advertised; receiver: its own
    max_sndbuf_bytes: int | None = None
    max_rcvbuf_bytes: int | None = None
    limit: str | None = None  # one of LIMITS; None when the counters cannot say
    # The wire (workbench.shared.wire), sender only: segments sent (every one, per MSS-sized segment), those
    # carrying data, their IP + TCP header bytes in all, the link header each one adds (14 on Ethernet), and
    # wire_bytes = bytes_sent + header_bytes + segs_out * link_header_bytes. None where the kernel keeps no
    # segment counts or only the receiver was seen.
    segs_out: int | None = None
    data_segs_out: int | None = None
    header_bytes: int | None = None
    link_header_bytes: int | None = None
    wire_bytes: int | None = None
    # The sender's interface toward the peer over the watch: its name and kind (wire.IfaceCounters), the bytes
    # and packets it sent, the bytes it received (all traffic it carried, not only the copy's).
    iface_name: str | None = None
    iface_kind: str | None = None
    iface_bytes: int | None = None
    iface_packets: int | None = None
    iface_rx_bytes: int | None = None
    # Sender only: the bytes acknowledged to sockets whose congestion control the watch read (in its first and last
    # samples, outside the timed copy: each socket's bytes count by its state as last read, a socket first read at
    # the end only its last interval's), and of them those a BBR socket sent in start-up (pacing at 2.89 times the
    # rate it has measured, as it does until it sees the path's rate stop growing: a connection that only sends a
    # burst per turn stays there). None: not read.
    cc_known_bytes: int | None = None
    bbr_startup_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> TcpTriage | None:
        if not data or "side" not in data:
            return None
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    @property
    def wire_bytes_per_file_byte(self) -> float | None:
        """What the sender put on the wire per byte the copy moved; None from a receiver, a watch that saw too
        little of the copy, or a kernel without the counts."""
        if self.side != "sender" or not self.seen_enough:
            return None
        return ratio(self.wire_bytes, self.copy_bytes)

    @property
    def iface_to_wire(self) -> float | None:
        """The interface's sent bytes (super-packets' headers added back) over the connections' wire bytes."""
        if self.side != "sender" or self.iface_bytes is None or self.wire_bytes is None:
            return None
        if self.segs_out is None or self.header_bytes is None:
            return None
        counted = iface_wire_bytes(
            self.iface_bytes, self.iface_packets, self.segs_out, self.header_bytes, self.link_header_bytes or 0
        )
        return ratio(counted, self.wire_bytes)

    @property
    def bbr_in_startup(self) -> bool | None:
        """Whether most of the bytes were sent by BBR in start-up; None where the congestion control was read for
        under half the bytes seen (connections shorter than a sample, whose destroy event leaves it out: one FTP
        data connection per file, whose control channel alone must not decide)."""
        if self.side != "sender" or not self.cc_known_bytes or self.bbr_startup_bytes is None:
            return None
        if self.cc_known_bytes * 2 < self.bytes_seen:
            return None
        return self.bbr_startup_bytes * 2 > self.cc_known_bytes

    @property
    def seen_enough(self) -> bool:
        """Whether the watch saw enough of the copy for its figures to stand for it."""
        return _seen_enough(self.connections, self.bytes_seen, self.copy_bytes, self.incomplete)

    def short(self) -> str:
        """The table's cell: 'rwnd 92 %', 'app 71 %', 'mix net 60/app 40'; a receiver's view is 'rx rwnd' or
        'rx —' (only the receiving side was seen); '—' when nothing can be said."""
        if self.side == "receiver":
            return "rx rwnd" if self.limit == "receive-window" else "rx —"
        if self.limit is None:
            return "—"
        if self.limit == "mixed":
            parts = sorted(self.fractions().items(), key=lambda kv: kv[1], reverse=True)
            return "mix " + "/".join(f"{SHORT[k]} {v * 100:.0f}" for k, v in parts[:2] if v)
        share = self.fractions().get(self.limit)
        return f"{SHORT[self.limit]} {share * 100:.0f} %" if share is not None else SHORT[self.limit]

    def fractions(self) -> dict[str, float]:
        """The sender's shares of the elapsed time by cause (LIMITS' names); empty for a receiver."""
        values = {
            "application": self.app_limited,
            "receive-window": self.rwnd_limited,
            "send-buffer": self.sndbuf_limited,
            "network": self.network_limited,
        }
        return {k: v for k, v in values.items() if v is not None}


def classify(app: float, rwnd: float, sndbuf: float, network: float) -> str:
    """The cause holding at least DOMINANT of the time, else 'mixed'."""
    named = {"application": app, "receive-window": rwnd, "send-buffer": sndbuf, "network": network}
    cause, share = max(named.items(), key=lambda kv: kv[1])
    return cause if share >= DOMINANT else "mixed"


def classified(totals: TcpTriage, elapsed_s: float, copy_bytes: int | None) -> TcpTriage:
    """`totals` (what a watch, or several copies, summed: seconds, bytes, the median RTT) over `elapsed_s` of a
    copy that moved `copy_bytes`: the fractions and the limit, every derived field computed afresh.

    A sender's busy time splits into the four fractions; `busy_s` None means the kernel keeps none (Linux
    before 4.10), so there are no fractions and no limit. A receiver names the receive window as the limit
    when window / RTT is within WINDOW_EXPLAINS of the rate it received at; otherwise it cannot say (the
    sender's side holds the answer).
    """
    positive = elapsed_s > 0
    elapsed_s = max(elapsed_s, 1e-9)
    enough = _seen_enough(totals.connections, totals.bytes_seen, copy_bytes, totals.incomplete)
    common = replace(
        totals,
        elapsed_s=round(elapsed_s, 4),
        copy_bytes=copy_bytes,
        rtt_ms=round(totals.rtt_ms, 3) if totals.rtt_ms is not None else None,
        app_limited=None,
        rwnd_limited=None,
        sndbuf_limited=None,
        network_limited=None,
        retrans_fraction=None,
        limit=None,
    )
    if totals.side == "receiver":
        # Only a sender keeps busy and limited times (the kernel's chrono), retransmissions and a send buffer.
        common = replace(
            common,
            busy_s=None,
            app_limited_busy_s=None,
            rwnd_limited_s=None,
            sndbuf_limited_s=None,
            min_rtt_ms=None,
            bytes_sent=None,
            bytes_retrans=None,
            max_sndbuf_bytes=None,
            **_NO_WIRE,
        )
        window, rtt_ms = totals.max_window_bytes, totals.rtt_ms
        explains = bool(
            enough
            and positive
            and rtt_ms
            and window
            and window / (rtt_ms / 1e3) <= WINDOW_EXPLAINS * totals.bytes_seen / elapsed_s
        )
        return replace(common, limit="receive-window") if explains else common
    sent = totals.bytes_sent or 0
    common = replace(common, retrans_fraction=round((totals.bytes_retrans or 0) / sent, 5) if sent > 0 else None)
    if totals.busy_s is None:  # no chrono in this kernel: no times to split
        return replace(common, app_limited_busy_s=None, rwnd_limited_s=None, sndbuf_limited_s=None)
    busy = min(max(totals.busy_s, 0.0), elapsed_s)
    # Each limited time is part of the busy time; the kernel counts them in whole jiffies, so clamp.
    rwnd = min(max(totals.rwnd_limited_s or 0.0, 0.0), busy)
    sndbuf = min(max(totals.sndbuf_limited_s or 0.0, 0.0), busy - rwnd)
    app_busy = min(max(totals.app_limited_busy_s or 0.0, 0.0), busy - rwnd - sndbuf)
    app = (elapsed_s - busy + app_busy) / elapsed_s
    network = (busy - rwnd - sndbuf - app_busy) / elapsed_s
    return replace(
        common,
        busy_s=round(busy, 4),
        app_limited_busy_s=round(app_busy, 4),
        rwnd_limited_s=round(rwnd, 4),
        sndbuf_limited_s=round(sndbuf, 4),
        app_limited=round(app, 4),
        rwnd_limited=round(rwnd / elapsed_s, 4),
        sndbuf_limited=round(sndbuf / elapsed_s, 4),
        network_limited=round(network, 4),
        limit=classify(app, rwnd / elapsed_s, sndbuf / elapsed_s, network) if enough else None,
    )


# A receiver's triage knows nothing of what the sender put on the wire.
_NO_WIRE: dict[str, Any] = {
    name: None
    for name in (
        "segs_out", "data_segs_out", "header_bytes", "link_header_bytes", "wire_bytes",
        "iface_name", "iface_kind", "iface_bytes", "iface_packets", "iface_rx_bytes",
    )
}  # fmt: skip


def with_iface(triage: TcpTriage, counted: IfaceCounters | None) -> TcpTriage:
    """A sender's `triage` with what the interface carrying its path counted over the same interval, and the
    link headers of its segments (Ethernet's where the interface is Ethernet) added to its wire bytes."""
    if counted is None or triage.side != "sender":
        return triage
    link = link_header_bytes(counted.kind)
    wire = None
    if triage.bytes_sent is not None and triage.header_bytes is not None and triage.segs_out is not None:
        wire = wire_bytes(triage.bytes_sent, triage.header_bytes, triage.segs_out, link)
    return replace(
        triage,
        link_header_bytes=link,
        wire_bytes=wire,
        iface_name=counted.name,
        iface_kind=counted.kind,
        iface_bytes=counted.tx_bytes,
        iface_packets=counted.tx_packets,
        iface_rx_bytes=counted.rx_bytes,
    )


def window_full(info: TcpInfo) -> bool:
    """Whether a sender's bytes in flight filled at least WINDOW_FULL of the window its peer advertised."""
    if not (info.unacked and info.snd_mss and info.snd_wnd):
        return False
    return info.unacked * info.snd_mss >= WINDOW_FULL * info.snd_wnd


def _seen_enough(connections: int, bytes_seen: int, copy_bytes: int | None, incomplete: str | None) -> bool:
    return connections > 0 and incomplete is None and (copy_bytes is None or bytes_seen >= MIN_SEEN * copy_bytes)


def seen(triage: TcpTriage | None, copy_bytes: int, copy_seconds: float | None = None) -> TcpTriage | None:
    """`triage` of a copy that moved `copy_bytes` in `copy_seconds`: the fractions taken over the copy's own
    time (the watch starts a little before it and ends a little after), and the limit withdrawn if the
    watch saw under MIN_SEEN of the bytes."""
    if triage is None:
        return None
    elapsed = triage.elapsed_s
    if copy_seconds and copy_seconds > 0:
        # Busy time outside the copy (the watch's own control calls) is clamped to the copy's time.
        elapsed = copy_seconds
    return classified(triage, elapsed, copy_bytes)


def _delta32(now: int, was: int | None) -> int:
    """Growth of a 32-bit kernel counter since `was` (from zero for a socket first seen now), across a wrap."""
    return (now - (was or 0)) % (1 << 32)


def _max(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


class Tally:
    """Folds samples of the sockets to one peer into a triage for `role` ("sender" or "receiver").

    The first sample is the starting point: the counters of a socket seen then count from there on; a socket
    that appears later was opened during the copy, so its counters count from zero. A socket that opens and
    closes between two samples is seen only through its destroy event (workbench.shared.inetdiag), where
    this process may listen for them; `bytes_seen` tells how much of the copy was seen. Within one
    interval, a socket counts for the sender when it acknowledged at least as much as it received and it
    moved data or was busy, and for the receiver when it received more than it sent: on loopback both ends of
    each connection are in the same namespace, and a request channel must not count as the data's.

    Memory stays bounded however long a watch runs and however many connections come and go: a socket is
    forgotten two samples after it was last listed, and RTTs are kept as one median per sample.
    """

    FORGET_AFTER = 2  # samples a socket may go unlisted (its destroy event arrives late) before it is forgotten

    def __init__(self, role: str, host: str) -> None:
        if role not in ("sender", "receiver"):
            raise ValueError(f"role {role!r}")
        self.role = role
        self.host = host
        # key -> (its counters when last listed, samples since, whether it moved data while watched)
        self._known: dict[tuple[str, int, str, int, int], tuple[TcpInfo, int, bool]] | None = None
        self._last_t = 0.0
        self._first_t = 0.0
        self.connections = 0
        self.bytes_seen = 0
        self.busy_s = self.rwnd_s = self.sndbuf_s = self.app_busy_s = 0.0
        self.bytes_sent = self.bytes_retrans = 0
        self.segs_out = self.data_segs_out = self.header_bytes = 0
        self.no_segs = False  # a sender socket without segment or sent-byte counts (Linux before 4.19)
        self.rtts_ms: list[float] = []  # the median RTT of each sample's active sockets
        self.min_rtt_us: int | None = None
        self.max_window: int | None = None
        self.max_sndbuf: int | None = None
        self.max_rcvbuf: int | None = None
        self.no_chrono = False  # a sender socket without busy/limited times (Linux before 4.10): no fractions
        self.cc_known_bytes = self.bbr_startup_bytes = 0
        # each socket's congestion control and BBR gain as last read: a closing socket's entry and its destroy
        # event carry neither, and its last bytes count by what it was
        self._congestion: dict[tuple[str, int, str, int, int], tuple[str, float | None]] = {}
        self.incomplete: str | None = None  # why some of the copy went unwatched (set by the watch)

    def add(self, t: float, sockets: Sequence[DiagSocket]) -> None:
        """One sample taken at monotonic time `t` (seconds)."""
        latest = {s.key: s for s in sockets}  # a key listed twice: its last entry (a destroyed socket's final one)
        if self._known is None:
            self._known = {key: (s.info, 0, False) for key, s in latest.items()}
            for sock in latest.values():
                self._remember_congestion(sock)
            self._first_t = self._last_t = t
            return
        dt = max(t - self._last_t, 0.0)
        busy = rwnd = sndbuf = 0.0
        flagged_bytes = moved_bytes = 0  # bytes of sender sockets whose latest rate sample was app-limited
        rtts: list[float] = []
        known: dict[tuple[str, int, str, int, int], tuple[TcpInfo, int, bool]] = {}
        for key, sock in latest.items():
            before, _, counted = self._known.get(key, (None, 0, False))
            active = self._fold(sock, before, rtts)
            if active is not None:
                busy += active[0]
                rwnd += active[1]
                sndbuf += active[2]
                moved_bytes += active[3]
                flagged_bytes += active[3] if sock.info.delivery_rate_app_limited else 0
                if not counted:
                    self.connections += 1
                counted = True
            known[key] = (sock.info, 0, counted)
        for key, (info, age, counted) in self._known.items():
            if key not in known and age + 1 < self.FORGET_AFTER:
                known[key] = (info, age + 1, counted)
        if busy > dt > 0:
            # Parallel connections are busy at the same time: the copy was busy for at most the interval.
            scale = dt / busy
            busy, rwnd, sndbuf = dt, rwnd * scale, sndbuf * scale
        self.busy_s += busy
        self.rwnd_s += rwnd
        self.sndbuf_s += sndbuf
        if moved_bytes:
            self.app_busy_s += max(busy - rwnd - sndbuf, 0.0) * flagged_bytes / moved_bytes
        if rtts:
            self.rtts_ms.append(statistics.median(rtts))
        self._known = known
        self._congestion = {key: state for key, state in self._congestion.items() if key in known}
        self._last_t = t

    def _fold(
        self, sock: DiagSocket, before: TcpInfo | None, rtts: list[float]
    ) -> tuple[float, float, float, int] | None:
        """Add one socket's progress since `before`; (busy, rwnd, sndbuf seconds, bytes) if it was active."""
        info = sock.info

        def delta(name: str) -> int:
            now_v = getattr(info, name) or 0
            was = (getattr(before, name) or 0) if before is not None else 0
            return max(now_v - was, 0)

        acked, received = delta("bytes_acked"), delta("bytes_received")
        times = (0.0, 0.0, 0.0)
        if self.role == "sender":
            d_busy = delta("busy_time_us") / 1e6
            if acked < received or (acked == 0 and d_busy == 0):
                return None
            if info.busy_time_us is None or info.rwnd_limited_us is None or info.sndbuf_limited_us is None:
                self.no_chrono = True
            d_rwnd, d_sndbuf = delta("rwnd_limited_us") / 1e6, delta("sndbuf_limited_us") / 1e6
            if window_full(info):
                # Its bytes in flight fill the peer's window: whatever else it was waiting on, the window would
                # have stopped it. The kernel counts window-limited time only when its send loop meets the
                # window; a paced sender (BBR) stops at its pacing timer first, just short of it, and that time
                # reads as network though the window set the pace (a 64 KiB window read 61 % network).
                d_rwnd = max(d_rwnd, d_busy - d_sndbuf)
            times = (d_busy, d_rwnd, d_sndbuf)
            self._count_congestion(sock, acked)
            self.bytes_seen += acked
            self.bytes_sent += delta("bytes_sent")
            self.bytes_retrans += delta("bytes_retrans")
            if info.segs_out is None or info.data_segs_out is None or info.bytes_sent is None:
                self.no_segs = True
            else:
                segs = _delta32(info.segs_out, before.segs_out if before is not None else None)
                self.segs_out += segs
                self.data_segs_out += _delta32(info.data_segs_out, before.data_segs_out if before is not None else None)
                # a v4-mapped address is reported as IPv4 text (inetdiag), and is IPv4 on the wire
                self.header_bytes += segs * header_bytes(":" in sock.local, info.timestamps)
            window, rtt_us, moved = info.snd_wnd, info.rtt_us, acked
        else:
            if received <= acked:
                return None
            self.bytes_seen += received
            # The window this socket advertises (Linux 6.10+). Not rcv_space: that is the receiver's estimate
            # of what arrives per round trip, which over the RTT is the rate itself and would explain anything.
            window, rtt_us, moved = info.rcv_wnd, info.rcv_rtt_us, received
        if rtt_us:
            rtts.append(rtt_us / 1e3)
        if info.min_rtt_us and (self.min_rtt_us is None or info.min_rtt_us < self.min_rtt_us):
            self.min_rtt_us = info.min_rtt_us
        self.max_window = _max((self.max_window, window))
        self.max_sndbuf = _max((self.max_sndbuf, sock.sndbuf_bytes))
        self.max_rcvbuf = _max((self.max_rcvbuf, sock.rcvbuf_bytes))
        return (*times, moved)

    def _remember_congestion(self, sock: DiagSocket) -> None:
        """Keep the socket's congestion control and BBR gain where this listing says them."""
        if sock.congestion is not None:
            self._congestion[sock.key] = (sock.congestion, sock.bbr_pacing_gain)

    def _count_congestion(self, sock: DiagSocket, acked: int) -> None:
        self._remember_congestion(sock)
        known = self._congestion.get(sock.key)
        if known is None or not acked:
            return
        self.cc_known_bytes += acked
        name, gain = known
        if name == "bbr" and gain is not None and gain > BBR_STARTUP_GAIN_ABOVE:
            self.bbr_startup_bytes += acked

    def result(self) -> TcpTriage | None:
        """The triage over the samples so far; None before two samples."""
        if self._known is None or self._last_t <= self._first_t:
            return None
        elapsed = self._last_t - self._first_t
        sender = self.role == "sender"
        totals = TcpTriage(
            side=self.role,
            host=self.host,
            elapsed_s=elapsed,
            connections=self.connections,
            bytes_seen=self.bytes_seen,
            incomplete=self.incomplete,
            busy_s=None if self.no_chrono or not sender else self.busy_s,
            app_limited_busy_s=self.app_busy_s,
            rwnd_limited_s=self.rwnd_s,
            sndbuf_limited_s=self.sndbuf_s,
            rtt_ms=statistics.median(self.rtts_ms) if self.rtts_ms else None,
            min_rtt_ms=self.min_rtt_us / 1e3 if self.min_rtt_us else None,
            bytes_sent=self.bytes_sent,
            bytes_retrans=self.bytes_retrans,
            max_window_bytes=self.max_window,
            max_sndbuf_bytes=self.max_sndbuf,
            max_rcvbuf_bytes=self.max_rcvbuf,
            cc_known_bytes=self.cc_known_bytes if sender and self.cc_known_bytes else None,
            bbr_startup_bytes=self.bbr_startup_bytes if sender and self.cc_known_bytes else None,
        )
        if sender and not self.no_segs:
            totals = replace(
                totals,
                segs_out=self.segs_out,
                data_segs_out=self.data_segs_out,
                header_bytes=self.header_bytes,
                link_header_bytes=None,  # not known until the interface is (with_iface): none counted
                wire_bytes=wire_bytes(self.bytes_sent, self.header_bytes, self.segs_out, 0),
            )
        return classified(totals, elapsed, None)


def _sum(values: Iterable[int | None]) -> int | None:
    """The total, or None when any part lacks the figure (a sum over part of the copies would read low)."""
    listed = list(values)
    return None if not listed or None in listed else sum(v for v in listed if v is not None)


def _sum_seen(values: Iterable[int | None]) -> int | None:
    """The total over the parts that have the figure, None where none has (a count of what was seen, not a
    measure of the whole: the bytes of the copies whose senders' congestion control was read)."""
    seen = [v for v in values if v is not None]
    return sum(seen) if seen else None


def _same(values: Iterable[T]) -> T | None:
    """The value every part agrees on, else None (copies that went out by different interfaces)."""
    found = set(values)
    return found.pop() if len(found) == 1 else None


def merge(parts: Sequence[TcpTriage]) -> TcpTriage | None:
    """Several copies' triages (one row's repeats) as one: times and bytes summed, RTT the median of medians.
    The sender's parts when there are any (a far host that answered for some copies and not others), else
    the receiver's."""
    if not parts:
        return None
    same = [p for p in parts if p.side == "sender"] or list(parts)
    rtts = [p.rtt_ms for p in same if p.rtt_ms is not None]
    min_rtts = [p.min_rtt_ms for p in same if p.min_rtt_ms is not None]
    copied = [p.copy_bytes for p in same]
    elapsed = sum(p.elapsed_s for p in same)
    totals = TcpTriage(
        side=same[0].side,
        host=same[0].host,
        elapsed_s=elapsed,
        connections=max(p.connections for p in same),
        bytes_seen=sum(p.bytes_seen for p in same),
        incomplete="; ".join(sorted({p.incomplete for p in same if p.incomplete})) or None,
        busy_s=None if any(p.busy_s is None for p in same) else sum(p.busy_s or 0.0 for p in same),
        app_limited_busy_s=sum(p.app_limited_busy_s or 0.0 for p in same),
        rwnd_limited_s=sum(p.rwnd_limited_s or 0.0 for p in same),
        sndbuf_limited_s=sum(p.sndbuf_limited_s or 0.0 for p in same),
        rtt_ms=statistics.median(rtts) if rtts else None,
        min_rtt_ms=min(min_rtts) if min_rtts else None,
        bytes_sent=sum(p.bytes_sent or 0 for p in same),
        bytes_retrans=sum(p.bytes_retrans or 0 for p in same),
        max_window_bytes=_max(p.max_window_bytes for p in same),
        max_sndbuf_bytes=_max(p.max_sndbuf_bytes for p in same),
        max_rcvbuf_bytes=_max(p.max_rcvbuf_bytes for p in same),
        segs_out=_sum(p.segs_out for p in same),
        data_segs_out=_sum(p.data_segs_out for p in same),
        header_bytes=_sum(p.header_bytes for p in same),
        link_header_bytes=_same(p.link_header_bytes for p in same),
        wire_bytes=_sum(p.wire_bytes for p in same),
        iface_name=_same(p.iface_name for p in same),
        iface_kind=_same(p.iface_kind for p in same),
        iface_bytes=_sum(p.iface_bytes for p in same),
        iface_packets=_sum(p.iface_packets for p in same),
        iface_rx_bytes=_sum(p.iface_rx_bytes for p in same),
        cc_known_bytes=_sum_seen(p.cc_known_bytes for p in same),
        bbr_startup_bytes=_sum_seen(p.bbr_startup_bytes for p in same),
    )
    return classified(totals, elapsed, None if None in copied else sum(c or 0 for c in copied))

"""The wire: what a copy's sender put on it per byte of file, and what the interface carrying the path counted.

The kernel counts, per TCP connection, the payload bytes it sent (retransmissions included, `bytes_sent`)
and the segments it sent (`segs_out`: data, pure ACKs, SYN and FIN, each MSS-sized segment of a TSO/GSO
super-packet counted as the segment it becomes on the wire). The headers are counted from the segments:

- IP: 20 bytes (IPv4, v4-mapped included) or 40 (IPv6), no options;
- TCP: 20 bytes, plus 12 when the connection negotiated timestamps (the option padded to 12 as Linux
  sends it). SACK blocks, which only ACKs after a loss carry, are not counted;
- Ethernet: the 14-byte header, where the interface carrying the path is Ethernet (`iface_kind`
  "ethernet"). The preamble, frame check sequence and inter-frame gap are not: interface counters leave
  them out too (the lab's link model counts them as the link's framing).

So `wire_bytes` = `bytes_sent` + `header_bytes` (IP + TCP, per connection as it uses them) + `segs_out` x
`link_header_bytes`; each term is kept so the figure can be recomputed.

Beside it, the interface's own counters over the same interval (tx bytes and packets, rx bytes), read by
route netlink (workbench.shared.rtnetlink) in the namespace the watch was started in (sysfs would show the
namespace it was mounted in, not a lab host's). They count everything the interface carried, so they agree
with the connection's figure only where the copy had the interface to itself, within IFACE_TOLERANCE; a device
handed super-packets (a TUN, a veth, a bridge) counts each one with a single set of headers, which
`iface_wire_bytes` adds back. On loopback the interface counts both directions of every loopback connection of
the host, each packet once as sent and once as received: kept, never compared.
"""

from __future__ import annotations

import errno
import statistics
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from workbench.shared.rtnetlink import Rtnetlink

IPV4_HEADER_BYTES = 20
IPV6_HEADER_BYTES = 40
TCP_HEADER_BYTES = 20
TIMESTAMPS_OPTION_BYTES = 12
ETHERNET_HEADER_BYTES = 14

# The interface's bytes (super-packets' headers added back) and the connections' wire bytes within 15 % of
# each other agree: what stays between them is other traffic on the interface (the control API's calls
# around a copy: a few KiB; on a real host, whatever else it sends meanwhile) and the ACKs' SACK blocks. On the
# lab's links alone (a TUN on wifi-ac, a veth on 10ge) they agreed within 0.01 %. A bridge and its port both
# counting reads 2x.
IFACE_TOLERANCE = 0.15
# Below this many wire bytes a few KiB of other traffic is a large share: no comparison is made.
IFACE_MIN_WIRE_BYTES = 1 << 20


def header_bytes(ipv6: bool, timestamps: bool) -> int:
    """IP + TCP header bytes of one segment of a connection (no IP options, SACK blocks not counted)."""
    ip = IPV6_HEADER_BYTES if ipv6 else IPV4_HEADER_BYTES
    return ip + TCP_HEADER_BYTES + (TIMESTAMPS_OPTION_BYTES if timestamps else 0)


def link_header_bytes(kind: str | None) -> int:
    """Link-layer header bytes per packet that an interface of `kind` counts (Ethernet's 14, else none)."""
    return ETHERNET_HEADER_BYTES if kind == "ethernet" else 0


@dataclass(frozen=True)
class IfaceCounters:
    """One interface's counters at one moment (or the difference of two readings)."""

    name: str
    kind: str  # "ethernet", "loopback", "ip" (a TUN: no link header) or "other"
    tx_bytes: int
    rx_bytes: int
    tx_packets: int

    def since(self, before: IfaceCounters) -> IfaceCounters:
        """What the interface counted between `before` and this reading (64-bit counters: no wrap)."""
        return IfaceCounters(
            self.name,
            self.kind,
            max(self.tx_bytes - before.tx_bytes, 0),
            max(self.rx_bytes - before.rx_bytes, 0),
            max(self.tx_packets - before.tx_packets, 0),
        )


class LinkReader(Rtnetlink):
    """A route-netlink socket opened in the calling thread's network namespace: which interface carries the
    path to an address (route_interface), and that interface's counters."""

    def counters(self, index: int) -> IfaceCounters:
        """Interface `index`'s name, kind and 64-bit counters now."""
        link = self.link(index)
        if link.stats is None:
            raise OSError(errno.ENODATA, f"interface {index} has no 64-bit counters")
        # the sender's received packets are its peer's ACKs: not compared
        return IfaceCounters(link.name, link.kind, link.stats.tx_bytes, link.stats.rx_bytes, link.stats.tx_packets)


def path_peer(peers: Iterable[str]) -> str | None:
    """The peer address whose route is looked up: an IPv4 one first (a name's v4 and v6 addresses usually
    share the interface), the same one every time."""
    ordered = sorted(peers, key=lambda p: (":" in p, p))
    return ordered[0] if ordered else None


class IfaceWatch:
    """The counters of the interface carrying the path to `peer`, read when started and when stopped, on a
    netlink socket of the namespace of the thread that started it. Raises OSError where it cannot."""

    def __init__(self, peer: str) -> None:
        self._reader: LinkReader | None = LinkReader()
        try:
            self._index = self._reader.route_interface(peer)
            self._first = self._reader.counters(self._index)
        except BaseException:
            self.close()
            raise

    def stop(self) -> IfaceCounters | None:
        """What the interface counted since the start (None if the last reading failed); closes the socket."""
        if self._reader is None:
            return None
        try:
            return self._reader.counters(self._index).since(self._first)
        except (OSError, struct.error):
            return None
        finally:
            self.close()

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


# --- the figures, from a triage's raw numbers -------------------------------------------------------------


def wire_bytes(bytes_sent: int, header_total_bytes: int, segs_out: int, link_bytes_per_segment: int) -> int:
    """Payload + IP/TCP headers + link headers: what the sender put on the wire."""
    return bytes_sent + header_total_bytes + segs_out * link_bytes_per_segment


def iface_wire_bytes(
    iface_bytes: int, iface_packets: int | None, segs_out: int, header_total_bytes: int, link_bytes_per_segment: int
) -> int:
    """The interface's tx bytes as the wire carries them: a super-packet counted once with one set of headers
    is segs_out - packets segments short of its headers, added back at the connections' mean header size."""
    if iface_packets is None or segs_out <= iface_packets or segs_out <= 0:
        return iface_bytes
    per_segment = header_total_bytes / segs_out + link_bytes_per_segment
    return iface_bytes + round((segs_out - iface_packets) * per_segment)


def ratio(part: int | None, whole: int | None) -> float | None:
    """`part` / `whole`, None when either is missing or `whole` is not positive."""
    if part is None or whole is None or whole <= 0:
        return None
    return part / whole


def iface_disagrees(iface_to_wire: float | None, wire: int | None, kind: str | None) -> bool:
    """Whether an interface's count (as `iface_to_wire`, its ratio to the wire bytes) is off by more than the
    tolerance; never on loopback, nor for a copy too small to tell."""
    if iface_to_wire is None or wire is None or kind == "loopback" or wire < IFACE_MIN_WIRE_BYTES:
        return False
    return abs(iface_to_wire - 1.0) > IFACE_TOLERANCE


@dataclass(frozen=True)
class RowWire:
    """One row's wire figures, as the run's notes need them."""

    protocol: str
    label: str  # 'sftp/paramiko download 64MiB'
    per_file_byte: float | None
    iface_to_wire: float | None
    wire_bytes: int | None
    iface_kind: str | None
    iface_name: str | None
    retransmitted_share: float | None = None


RETRANSMITTED_SAID = 0.001  # a protocol's median retransmitted share is named from 0.1 %


def _protocol_figure(protocol: str, rows: Sequence[RowWire]) -> str:
    """'smb 1.012', with the median retransmitted share where it is worth naming: 'smb 1.270 (14.9 % retransmitted)'."""
    text = f"{protocol} {statistics.median(r.per_file_byte for r in rows if r.per_file_byte is not None):.3f}"
    shares = [r.retransmitted_share for r in rows if r.retransmitted_share is not None]
    if shares and (share := statistics.median(shares)) >= RETRANSMITTED_SAID:
        text += f" ({100 * share:.1f} % retransmitted)"
    return text


def overhead_notes(rows: Sequence[RowWire]) -> list[str]:
    """The run's notes on the wire: each protocol's wire bytes per file byte (the median of its rows), the rows
    whose interface counters disagree with it, and what loopback's counters are left for."""
    by_protocol: dict[str, list[RowWire]] = {}
    for row in rows:
        if row.per_file_byte is not None:
            by_protocol.setdefault(row.protocol, []).append(row)
    notes: list[str] = []
    if by_protocol:
        figures = "; ".join(_protocol_figure(protocol, found) for protocol, found in sorted(by_protocol.items()))
        notes.append(
            f"wire bytes per file byte (what the sender put on the wire: payload, retransmissions, IP/TCP headers "
            f"per segment, Ethernet's where the path is Ethernet; the median of each protocol's rows): {figures}"
        )
    for row in rows:
        if iface_disagrees(row.iface_to_wire, row.wire_bytes, row.iface_kind) and row.iface_to_wire is not None:
            cause = (
                "a bridge and its port both counting, or other traffic on it"
                if row.iface_to_wire > 1
                else "traffic that left by another interface, or counters that missed part of the copy"
            )
            notes.append(
                f"{row.label}: interface {row.iface_name or '?'} counted {row.iface_to_wire:.1f}× the "
                f"connections' wire bytes ({cause})"
            )
    if any(row.iface_kind == "loopback" and row.iface_to_wire is not None for row in rows):
        notes.append(
            "loopback: its interface counters hold both directions of every loopback connection of this host, so "
            "they are kept in the JSON but not compared with the connections' wire bytes"
        )
    return notes

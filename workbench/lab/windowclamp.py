"""The client host's receive-window clamp, applied on the emulated wire (`workbench lab --client-window`).

A host whose connections never scale their receive window past 64 KiB (the laptop of the 802.11ac story)
caps every download at 64 KiB per round trip, whatever the application asks for. The clamp cannot be
put inside the client host: a route's `window` metric sets the socket's window clamp at connect time,
but Linux raises that clamp again with the receive buffer as data flows (measured: 128 KiB advertised
under a 64 KiB route metric), and an application may set its own buffer. So the link emulator lowers
the window field of every TCP segment the client host sends, the way a middlebox rewriting windows
would: the server then never sees more than the clamp, for native and Python clients alike, with no
help from either end.

To read a scaled window field the clamp needs each connection's window scale, which only its SYNs
carry: the client host's shift from its SYN (or SYN-ACK when it accepts), in effect only if the other
side offered scaling too (RFC 7323). Connections whose handshake it did not see are left alone.
"""

from __future__ import annotations

import struct

from workbench.lab.checksum import fold16

VNET_HDR = 10
NEEDS_CSUM = 0x01  # virtio_net_hdr flag: the checksum is left to the receiver (it holds the pseudo-header sum)
SYN = 0x02
WSCALE_OPTION = 3
MAX_FLOWS = 65536  # handshakes remembered; the oldest is forgotten first


def _tcp_offsets(pkt: bytes) -> tuple[int, bytes, bytes] | None:
    """(offset of the TCP header, source address, destination address), or None if not TCP."""
    if len(pkt) < VNET_HDR + 40:
        return None
    version = pkt[VNET_HDR] >> 4
    if version == 4:
        if pkt[VNET_HDR + 9] != 6 or struct.unpack_from("!H", pkt, VNET_HDR + 6)[0] & 0x1FFF:
            return None  # not TCP, or a fragment after the first: what follows the IP header is not a TCP header
        tcp = VNET_HDR + (pkt[VNET_HDR] & 0x0F) * 4
        src, dst = pkt[VNET_HDR + 12 : VNET_HDR + 16], pkt[VNET_HDR + 16 : VNET_HDR + 20]
    elif version == 6:
        if pkt[VNET_HDR + 6] != 6:
            return None
        tcp = VNET_HDR + 40
        src, dst = pkt[VNET_HDR + 8 : VNET_HDR + 24], pkt[VNET_HDR + 24 : VNET_HDR + 40]
    else:
        return None
    if len(pkt) < tcp + 20:
        return None
    return tcp, src, dst


def window_shift(pkt: bytes, tcp: int) -> int | None:
    """The window-scale option of a SYN at TCP offset `tcp`, or None when it offers none."""
    end = min(len(pkt), tcp + (pkt[tcp + 12] >> 4) * 4)
    i = tcp + 20
    while i < end:
        kind = pkt[i]
        if kind == 0:  # end of options
            return None
        if kind == 1:  # no-op
            i += 1
            continue
        if i + 1 >= end or pkt[i + 1] < 2:
            return None  # malformed: stop reading rather than loop
        if kind == WSCALE_OPTION and pkt[i + 1] == 3 and i + 2 < end:
            return min(pkt[i + 2], 14)
        i += pkt[i + 1]
    return None


class WindowClamp:
    """Caps the receive window the client host advertises at `window_bytes`.

    `ports`, when given, limits the clamp to connections with the server host on those ports (the
    server's side): the story's file-sharing connections stayed at 64 KiB while its HTTP and iperf
    connections scaled. A window field counts units of 2^shift bytes: a cap under one unit (a connection
    scaling by 2^14 and a cap under 16 KiB) is held at one unit, the least a window can say and stay open.
    """

    def __init__(self, window_bytes: int, ports: frozenset[int] | None = None) -> None:
        self.window_bytes = window_bytes
        self.ports = ports
        # (client addr, client port, server addr, server port) -> [client's shift, peer offered scaling]
        self._flows: dict[tuple[bytes, int, bytes, int], list] = {}
        self.clamped = 0  # segments whose window was lowered

    def _remember(self, key: tuple[bytes, int, bytes, int]) -> list:
        flow = self._flows.get(key)
        if flow is None:
            if len(self._flows) >= MAX_FLOWS:
                del self._flows[next(iter(self._flows))]
            flow = self._flows[key] = [None, None]
        return flow

    def _key(self, src: bytes, sport: int, dst: bytes, dport: int) -> tuple[bytes, int, bytes, int] | None:
        if self.ports is not None and dport not in self.ports:
            return None
        return (src, sport, dst, dport)

    def from_server(self, pkt: bytes) -> None:
        """See a segment the server host sent: only its SYNs matter (do they offer window scaling?)."""
        found = _tcp_offsets(pkt)
        if found is None:
            return
        tcp, src, dst = found
        if not pkt[tcp + 13] & SYN:
            return
        sport, dport = struct.unpack_from("!HH", pkt, tcp)
        key = self._key(dst, dport, src, sport)
        if key is not None:
            self._remember(key)[1] = window_shift(pkt, tcp) is not None

    def from_client(self, pkt: bytes) -> bytes:
        """A segment the client host sent, with its window field lowered to the clamp where it was above."""
        found = _tcp_offsets(pkt)
        if found is None:
            return pkt
        tcp, src, dst = found
        sport, dport = struct.unpack_from("!HH", pkt, tcp)
        key = self._key(src, sport, dst, dport)
        if key is None:
            return pkt
        flags = pkt[tcp + 13]
        if flags & SYN:
            flow = self._remember(key)
            flow[0] = window_shift(pkt, tcp)
            shift = 0  # a SYN's window is never scaled
        else:
            seen = self._flows.get(key)
            if seen is None:
                return pkt  # handshake not seen: its scale is unknown
            shift = seen[0] if seen[0] is not None and seen[1] is not False else 0
        limit = max(1, self.window_bytes >> shift)
        old = struct.unpack_from("!H", pkt, tcp + 14)[0]
        if old <= limit:
            return pkt
        out = bytearray(pkt)
        struct.pack_into("!H", out, tcp + 14, limit)
        if not pkt[0] & NEEDS_CSUM:
            # a full checksum covers the window field: update it in place (RFC 1624, eqn. 3)
            check = struct.unpack_from("!H", pkt, tcp + 16)[0]
            struct.pack_into("!H", out, tcp + 16, ~fold16((~check & 0xFFFF) + (~old & 0xFFFF) + limit) & 0xFFFF)
        self.clamped += 1
        return bytes(out)  # the line holds bytes: a clamped segment is copied once

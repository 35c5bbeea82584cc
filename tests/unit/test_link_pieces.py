"""The delay line's packet handling as pure logic: super-packets cut into pieces, and a stalled line."""

from __future__ import annotations

import os
import random
import struct

import pytest

from tests.helpers import sum16
from workbench.lab.linkemu import VNET_HDR, Direction, split_burst, wire_bytes

SRC4, DST4 = bytes([10, 77, 0, 2]), bytes([10, 77, 0, 1])
SRC6, DST6 = bytes(15) + b"\x02", bytes(15) + b"\x01"


def _pseudo_sum(version: int, src: bytes, dst: bytes, l4_len: int) -> int:
    """The folded pseudo-header sum a checksum-offloaded TCP segment carries in its check field."""
    if version == 4:
        return sum16(src + dst + struct.pack("!BBH", 0, 6, l4_len))
    return sum16(src + dst + struct.pack("!I3xB", l4_len, 6))


def _super_packet(version: int, payload: bytes, gso_size: int, seq: int, flags: int, needs_csum: bool = True) -> bytes:
    tcp = bytearray(32)
    struct.pack_into("!HHII", tcp, 0, 5201, 40000, seq, 99)
    tcp[12], tcp[13] = 8 << 4, flags
    if version == 4:
        ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 52 + len(payload), 7, 0x4000, 64, 6, 0, SRC4, DST4))
        struct.pack_into("!H", ip, 10, ~sum16(bytes(ip)) & 0xFFFF)
        src, dst = SRC4, DST4
    else:
        ip = bytearray(struct.pack("!IHBB16s16s", 6 << 28, 32 + len(payload), 6, 64, SRC6, DST6))
        src, dst = SRC6, DST6
    struct.pack_into("!H", tcp, 16, _pseudo_sum(version, src, dst, 32 + len(payload)))
    gso_type = 1 if version == 4 else 4
    vnet = struct.pack("<BBHHHH", 1 if needs_csum else 0, gso_type, len(ip) + 32, gso_size, len(ip), 16)
    return vnet + bytes(ip) + bytes(tcp) + payload


@pytest.mark.parametrize("version", [4, 6])
def test_pieces_are_valid_smaller_gso_packets_that_add_up_to_the_burst(version: int) -> None:
    payload = os.urandom(25_600)  # 17 segments of 1448 and one of 984
    pkt = _super_packet(version, payload, 1448, seq=0xFFFFF000, flags=0x18 | 0x80 | 0x01)  # PSH ACK CWR FIN
    whole_wire, whole_segments = wire_bytes(pkt)
    pieces = split_burst(pkt, 4)
    assert [count for _, _, count in pieces] == [4, 4, 4, 4, 2]
    assert sum(wire for _, wire, _ in pieces) == whole_wire and sum(c for _, _, c in pieces) == whole_segments
    l3 = 20 if version == 4 else 40
    src, dst = (SRC4, DST4) if version == 4 else (SRC6, DST6)
    joined = b""
    for i, (piece, _, count) in enumerate(pieces):
        ip, tcp = piece[VNET_HDR : VNET_HDR + l3], piece[VNET_HDR + l3 : VNET_HDR + l3 + 32]
        body = piece[VNET_HDR + l3 + 32 :]
        if version == 4:
            assert struct.unpack_from("!H", ip, 2)[0] == l3 + 32 + len(body)
            assert sum16(ip) == 0xFFFF  # a valid header checksum
        else:
            assert struct.unpack_from("!H", ip, 4)[0] == 32 + len(body)
        assert struct.unpack_from("!I", tcp, 4)[0] == (0xFFFFF000 + len(joined)) & 0xFFFFFFFF  # wraps
        last = i == len(pieces) - 1
        assert bool(tcp[13] & 0x80) == (i == 0) and bool(tcp[13] & 0x09) == last and tcp[13] & 0x10
        if last:
            assert tcp[13] & 0x09 == 0x09  # FIN and PSH both
        # the check field is the true pseudo-header sum for the piece's own TCP length
        assert struct.unpack_from("!H", tcp, 16)[0] == _pseudo_sum(version, src, dst, 32 + len(body))
        _, gso_type, _, gso_size, _, _ = struct.unpack_from("<BBHHHH", piece)
        assert (gso_type, gso_size) == (((1 if version == 4 else 4), 1448) if count > 1 else (0, 0))
        joined += body
    assert joined == payload


def test_what_cannot_be_cut_comes_back_whole() -> None:
    pkt = _super_packet(4, os.urandom(14_480), 1448, seq=1, flags=0x10)
    assert split_burst(pkt, 10) == [(pkt, *wire_bytes(pkt))]  # no more segments than a piece holds
    full_checksum = _super_packet(4, os.urandom(14_480), 1448, seq=1, flags=0x10, needs_csum=False)
    assert split_burst(full_checksum, 2) == [(full_checksum, *wire_bytes(full_checksum))]  # no piece could keep it


def _frame(n: int) -> bytes:
    return struct.pack("<BBHHHH", 0, 0, 0, 0, 0, 0) + bytes([0x45]) + bytes(n - 1)  # no GSO: n bytes of IP


def test_a_stall_holds_the_line_and_everything_on_it_for_its_duration() -> None:
    line = Direction("down", 8_000_000, 0.010, 1 << 20, 0.0, random.Random(1))  # 1 byte per µs, 10 ms delay
    for _ in range(3):
        line.offer(_frame(962), 0.0)  # 1000 bytes on the wire each: 1 ms apiece
    due = [d for d, _ in line.line]
    assert due == pytest.approx([0.011, 0.012, 0.013])
    line.stall(0.0105, 0.1)
    assert [d for d, _ in line.line] == pytest.approx([0.111, 0.112, 0.113])  # 100 ms later, spaced as they were
    assert line.wire_free_at == pytest.approx(0.003)  # the serialiser had finished: nothing to push back
    line.offer(_frame(962), 0.05)  # offered during the stall: serialised once it ends
    assert line.line[-1][0] == pytest.approx(0.1105 + 0.001 + 0.010)
    read_end, write_end = os.pipe()
    try:
        line.deliver(write_end, 0.1)  # still stalled: nothing leaves
        assert line.delivered == 0
        line.deliver(write_end, 0.113)
        assert line.delivered == 3 and line.next_due() == pytest.approx(0.1215)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert (line.stalls, line.stalled_s) == (1, pytest.approx(0.1))

"""Ones' complement arithmetic for the IP and TCP checksum fields the lab's link rewrites (RFC 1071, 1624)."""

from __future__ import annotations

import struct


def fold16(total: int) -> int:
    """A sum of 16-bit words folded to 16 bits, carries added back in (not inverted)."""
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def ipv4_header_checksum(header: bytes | bytearray) -> int:
    """The checksum field an IPv4 header should carry, whatever its checksum field holds now."""
    words = struct.unpack(f"!{len(header) // 2}H", header)
    return ~fold16(sum(words) - words[5]) & 0xFFFF  # words[5] is the checksum field itself

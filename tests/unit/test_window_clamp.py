"""The lab's receive-window clamp (pure logic on hand-built segments) and the link's stall and rate options."""

from __future__ import annotations

import struct

import pytest

from tests.helpers import sum16
from workbench.lab.link import LinkSpec, Stall
from workbench.lab.windowclamp import VNET_HDR, WindowClamp, window_shift
from workbench.shared.errors import UsageError

CLIENT, SERVER = bytes([10, 77, 0, 1]), bytes([10, 77, 0, 2])


def _segment(
    src: bytes,
    dst: bytes,
    sport: int,
    dport: int,
    flags: int,
    window: int,
    wscale: int | None = None,
    full_checksum: bool = False,
) -> bytes:
    options = b"" if wscale is None else bytes([1, 3, 3, wscale])
    tcp = bytearray(struct.pack("!HHIIBBHHH", sport, dport, 1, 2, (5 + len(options) // 4) << 4, flags, window, 0, 0))
    tcp += options
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, src, dst)
    if full_checksum:
        pseudo = src + dst + struct.pack("!BBH", 0, 6, len(tcp))
        struct.pack_into("!H", tcp, 16, ~sum16(pseudo + bytes(tcp)) & 0xFFFF)
    vnet = struct.pack("<BBHHHH", 0 if full_checksum else 1, 0, 0, 0, 20, 16)
    return vnet + ip + bytes(tcp)


def _window(pkt: bytes) -> int:
    return struct.unpack_from("!H", pkt, VNET_HDR + 20 + 14)[0]


def test_window_shift_reads_the_option_and_survives_malformed_ones() -> None:
    assert window_shift(_segment(CLIENT, SERVER, 4000, 445, 0x02, 64240, wscale=7), VNET_HDR + 20) == 7
    assert window_shift(_segment(CLIENT, SERVER, 4000, 445, 0x02, 64240), VNET_HDR + 20) is None
    bad = bytearray(_segment(CLIENT, SERVER, 4000, 445, 0x02, 64240, wscale=7))
    bad[VNET_HDR + 20 + 21] = 0  # an option of length 0 would loop forever if trusted
    assert window_shift(bytes(bad), VNET_HDR + 20) is None


def test_the_client_window_is_lowered_to_the_clamp_in_its_scale() -> None:
    clamp = WindowClamp(64 * 1024)
    syn = _segment(CLIENT, SERVER, 4000, 445, 0x02, 64240, wscale=7)
    assert clamp.from_client(syn) == syn  # a SYN's unscaled window is under 64 KiB already
    clamp.from_server(_segment(SERVER, CLIENT, 445, 4000, 0x12, 65160, wscale=9))
    ack = _segment(CLIENT, SERVER, 4000, 445, 0x10, 0xFFFF)  # 0xFFFF << 7: 8 MiB offered
    out = clamp.from_client(ack)
    assert _window(out) == 65536 >> 7 and clamp.clamped == 1
    small = _segment(CLIENT, SERVER, 4000, 445, 0x10, 100)  # already under the clamp: untouched
    assert clamp.from_client(small) is small


def test_a_full_checksum_is_kept_valid_and_unknown_or_unscaled_flows_handled() -> None:
    clamp = WindowClamp(16 * 1024)
    clamp.from_client(_segment(CLIENT, SERVER, 4000, 80, 0x02, 64240, wscale=2))
    clamp.from_server(_segment(SERVER, CLIENT, 80, 4000, 0x12, 65160))  # the server offers no scaling
    out = clamp.from_client(_segment(CLIENT, SERVER, 4000, 80, 0x10, 60000, full_checksum=True))
    assert _window(out) == 16384  # no scaling in effect: the field is the window itself
    tcp = bytes(out[VNET_HDR + 20 :])
    assert sum16(CLIENT + SERVER + struct.pack("!BBH", 0, 6, len(tcp)) + tcp) == 0xFFFF
    unseen = _segment(CLIENT, SERVER, 5000, 80, 0x10, 60000)
    assert clamp.from_client(unseen) is unseen  # its scale is unknown: left alone


def test_the_clamp_can_be_limited_to_some_server_ports() -> None:
    clamp = WindowClamp(64 * 1024, frozenset({445}))
    for port in (445, 80):
        clamp.from_client(_segment(CLIENT, SERVER, 4000, port, 0x02, 64240, wscale=7))
        clamp.from_server(_segment(SERVER, CLIENT, port, 4000, 0x12, 65160, wscale=7))
    assert _window(clamp.from_client(_segment(CLIENT, SERVER, 4000, 445, 0x10, 0xFFFF))) == 512
    assert _window(clamp.from_client(_segment(CLIENT, SERVER, 4000, 80, 0x10, 0xFFFF))) == 0xFFFF


def test_stall_parsing_and_bounds() -> None:
    assert Stall.parse("5s:300ms") == Stall(5.0, 0.3, False, "both")
    assert Stall.parse("~2s:10ms:down") == Stall(2.0, 0.01, True, "down")
    assert Stall.parse("1s:500ms:up").describe() == "500 ms stalls, every 1 s, up"
    for bad in ("5s", "5s:300ms:sideways", "1s:800ms", "x:1ms", "1s:0ms", "1:2:3:4"):
        with pytest.raises(UsageError):
            Stall.parse(bad)


def test_rates_by_direction_and_the_client_window_are_validated() -> None:
    spec = LinkSpec(rate_bits_per_s=100_000_000, rtt_ms=4, rate_down_bits_per_s=400_000_000)
    assert (spec.up_bits_per_s, spec.down_bits_per_s, spec.fastest_bits_per_s) == (
        100_000_000,
        400_000_000,
        400_000_000,
    )
    assert spec.queue() == max(256 * 1024, int(400_000_000 / 8 * 0.004))
    for bad in (
        LinkSpec(rate_bits_per_s=1_000_000, rtt_ms=1, rate_up_bits_per_s=0),
        LinkSpec(rate_bits_per_s=1_000_000, rtt_ms=1, client_window_bytes=100),
        LinkSpec(rate_bits_per_s=1_000_000, rtt_ms=1, burst=0),
    ):
        with pytest.raises(UsageError):
            bad.validate()

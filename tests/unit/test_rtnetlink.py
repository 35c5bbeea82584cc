"""Route netlink: the attribute parser and the link and route answers on crafted messages; the exchange's
choice of its own answer among others on crafted datagrams; and real lookups on this host's loopback."""

from __future__ import annotations

import errno
import socket
import struct
import sys

import pytest

from workbench.shared import rtnetlink
from workbench.shared.rtnetlink import Link, Rtnetlink, Stats64, attribute, attributes, parse_link, parse_route_oif

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="route netlink is Linux's")


def _u32(kind: int, value: int) -> bytes:
    return attribute(kind, struct.pack("=I", value))


def _ifinfo(arphrd: int, index: int) -> bytes:
    return struct.pack("=BxHiII", 0, arphrd, index, 0, 0)


def test_attributes_are_padded_and_read_back_with_their_flags_masked_off() -> None:
    raw = attribute(3, b"eth0\0") + attribute(0x8000 | 7, b"\1\2") + _u32(4, 1500)
    assert len(attribute(3, b"eth0\0")) == 12  # 4 + 5, padded to 12
    assert attributes(raw, 0, len(raw)) == {3: b"eth0\0", 7: b"\1\2", 4: struct.pack("=I", 1500)}


def test_an_attribute_that_claims_more_than_is_left_ends_the_reading() -> None:
    whole = _u32(4, 1500)
    overlong = struct.pack("=HH", 64, 6) + b"fq\0\0"
    assert attributes(whole + overlong, 0, len(whole + overlong)) == {4: struct.pack("=I", 1500)}
    assert attributes(struct.pack("=HH", 2, 6) + whole, 0, 12) == {}  # shorter than its own header: stop
    assert attributes(whole, 0, 6) == {}  # the end given cuts it


def test_a_link_answer_gives_name_kind_limits_and_counters() -> None:
    stats = struct.pack("=QQQQ", 11, 22, 3_000, 4_000) + bytes(8 * 20)  # the rest of rtnl_link_stats64
    payload = _ifinfo(rtnetlink.ARPHRD_ETHER, 7) + attribute(rtnetlink.IFLA_IFNAME, b"veth0\0")
    payload += attribute(rtnetlink.IFLA_QDISC, b"fq_codel\0") + _u32(rtnetlink.IFLA_MTU, 9000)
    payload += _u32(rtnetlink.IFLA_TXQLEN, 1000) + _u32(rtnetlink.IFLA_GSO_MAX_SIZE, 65536)
    payload += _u32(rtnetlink.IFLA_GSO_MAX_SEGS, 64) + _u32(rtnetlink.IFLA_GRO_MAX_SIZE, 65536)
    payload += _u32(rtnetlink.IFLA_TSO_MAX_SIZE, 524280) + _u32(rtnetlink.IFLA_TSO_MAX_SEGS, 65535)
    payload += attribute(rtnetlink.IFLA_STATS64, stats)
    assert parse_link(payload) == Link(
        index=7,
        name="veth0",
        kind="ethernet",
        mtu_bytes=9000,
        qdisc="fq_codel",
        tx_queue_len=1000,
        gso_max_size_bytes=65536,
        gso_max_segs=64,
        gro_max_size_bytes=65536,
        tso_max_size_bytes=524280,
        tso_max_segs=65535,
        stats=Stats64(tx_packets=22, rx_bytes=3_000, tx_bytes=4_000),
    )


def test_a_link_answer_without_what_an_older_kernel_leaves_out_says_none() -> None:
    tun = parse_link(_ifinfo(rtnetlink.ARPHRD_NONE, 3) + attribute(rtnetlink.IFLA_IFNAME, b"tun0\0"))
    assert (tun.name, tun.kind, tun.mtu_bytes, tun.tso_max_size_bytes, tun.stats) == ("tun0", "ip", None, None, None)
    short_counters = attribute(rtnetlink.IFLA_STATS64, bytes(16))  # less than the four counters read
    assert parse_link(_ifinfo(rtnetlink.ARPHRD_LOOPBACK, 1) + short_counters).stats is None
    assert parse_link(_ifinfo(1234, 1)).kind == "other"


def test_a_route_answer_gives_its_output_interface() -> None:
    head = struct.pack("=BBBBBBBBI", 2, 32, 0, 0, 254, 0, 0, 1, 0)
    assert parse_route_oif(head + attribute(rtnetlink.RTA_DST, bytes(4)) + _u32(rtnetlink.RTA_OIF, 7)) == 7
    assert parse_route_oif(head) is None


def _message(kind: int, seq: int, body: bytes) -> bytes:
    return struct.pack("=IHHII", 16 + len(body), kind, 0, seq, 0) + body


@linux_only
def test_the_exchange_takes_its_own_answer_and_says_the_kernels_refusal() -> None:
    netlink = Rtnetlink()
    kernel, ours = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    netlink._sock.close()
    netlink._sock = ours  # crafted datagrams stand for the kernel's
    try:
        link = _ifinfo(rtnetlink.ARPHRD_LOOPBACK, 1) + attribute(rtnetlink.IFLA_IFNAME, b"lo\0")
        late = _message(rtnetlink.RTM_NEWLINK, 0, _ifinfo(1, 9))  # an earlier request's answer, in the same datagram
        kernel.send(late + _message(rtnetlink.RTM_NEWLINK, 1, link))
        assert netlink.ask(rtnetlink.RTM_GETLINK, b"", rtnetlink.RTM_NEWLINK) == link
        kernel.send(_message(rtnetlink.NLMSG_ERROR, 2, struct.pack("=i", -errno.ENODEV) + bytes(16)))
        with pytest.raises(OSError) as refused:
            netlink.ask(rtnetlink.RTM_GETLINK, b"", rtnetlink.RTM_NEWLINK)
        assert refused.value.errno == errno.ENODEV
        kernel.send(struct.pack("=IHHII", 400, rtnetlink.RTM_NEWLINK, 0, 3, 0))  # claims more than it holds
        with pytest.raises(OSError) as unreadable:
            netlink.ask(rtnetlink.RTM_GETLINK, b"", rtnetlink.RTM_NEWLINK)
        assert unreadable.value.errno == errno.EBADMSG
    finally:
        netlink.close()
        kernel.close()


@linux_only
def test_the_route_to_loopback_is_lo_and_lo_read_by_name_is_the_same() -> None:
    with Rtnetlink() as netlink:
        for address in ("127.0.0.1", "::1"):
            lo = netlink.link(netlink.route_interface(address))
            assert (lo.name, lo.kind, lo.index) == ("lo", "loopback", socket.if_nametoindex("lo"))
            assert lo.mtu_bytes is not None and lo.mtu_bytes > 0 and lo.stats is not None
        by_name = netlink.link(name="lo")
    assert (by_name.name, by_name.index, by_name.mtu_bytes, by_name.qdisc) == ("lo", lo.index, lo.mtu_bytes, lo.qdisc)


@linux_only
def test_an_interface_that_is_not_there_or_no_address_is_said() -> None:
    with Rtnetlink() as netlink:
        with pytest.raises(OSError) as missing:
            netlink.link(name="wb-none0")
        assert missing.value.errno == errno.ENODEV
        with pytest.raises(OSError):
            netlink.link(0x7FFFFFF0)
        with pytest.raises(ValueError):
            netlink.route_interface("not an address")

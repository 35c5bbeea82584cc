"""A line that breaks offloaded packets, as pure logic: which TUN reads it drops (GSO super-packets of more than one
segment) and which it passes (MTU-sized packets), on crafted vnet-header packets; and how the lab asks for it."""

from __future__ import annotations

import dataclasses
import random
import struct

import pytest

from workbench.core.explain import explain
from workbench.core.results import Baseline, Result, Run, Sample
from workbench.lab.link import PRESETS, LinkSpec
from workbench.lab.linkemu import Direction, breaks_offloaded, wire_bytes
from workbench.shared.errors import UsageError
from workbench.shared.triage import TcpTriage

GSO_NONE, GSO_TCPV4, GSO_TCPV6 = 0, 1, 4


def _packet(version: int, payload_bytes: int, gso_size: int, gso_type: int | None = None) -> bytes:
    """One TUN read: a virtio-net header, an IPv4 or IPv6 header and a 32-byte TCP header, then the payload."""
    tcp = bytearray(32)
    struct.pack_into("!HHII", tcp, 0, 5201, 40000, 1000, 1)
    tcp[12], tcp[13] = 8 << 4, 0x10  # ACK
    if version == 4:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 52 + payload_bytes, 1, 0x4000, 64, 6, 0, bytes(4), bytes(4))
        kind = GSO_TCPV4
    else:
        ip = struct.pack("!IHBB16s16s", 6 << 28, 32 + payload_bytes, 6, 64, bytes(16), bytes(16))
        kind = GSO_TCPV6
    kind = kind if gso_type is None else gso_type
    vnet = struct.pack("<BBHHHH", 1, kind, len(ip) + 32, gso_size if kind else 0, len(ip), 16)
    return vnet + ip + bytes(tcp) + bytes(payload_bytes)


@pytest.mark.parametrize("version", [4, 6])
def test_a_super_packet_of_two_or_more_segments_is_broken(version: int) -> None:
    for payload in (1449, 2 * 1448, 45 * 1448, 65_000):
        pkt = _packet(version, payload, 1448)
        assert wire_bytes(pkt)[1] >= 2
        assert breaks_offloaded(pkt), payload


@pytest.mark.parametrize("version", [4, 6])
def test_mtu_sized_packets_pass(version: int) -> None:
    assert not breaks_offloaded(_packet(version, 1448, 1448))  # a GSO packet of one full segment
    assert not breaks_offloaded(_packet(version, 100, 1448))  # ... or of a short one
    assert not breaks_offloaded(_packet(version, 1448, 0, gso_type=GSO_NONE))  # what a sender with TSO/GSO off sends
    assert not breaks_offloaded(_packet(version, 0, 0, gso_type=GSO_NONE))  # a pure ACK
    assert not breaks_offloaded(_packet(version, 8000, 0, gso_type=GSO_NONE))  # a jumbo frame is one segment
    assert not breaks_offloaded(b"\x00" * 5)  # shorter than a vnet header: nothing to judge


def _direction(breaks: str) -> Direction:
    return Direction("server_to_client", 533_000_000, 0.0014, 1 << 20, 0.0, random.Random(1), 8, breaks)


def test_the_broken_line_drops_super_packets_apart_from_queue_and_loss_drops() -> None:
    line = _direction("offloaded")
    big, small = _packet(4, 10 * 1448, 1448), _packet(4, 1448, 0, gso_type=GSO_NONE)
    line.offer(big, 0.0)
    line.offer(small, 0.0)
    stats = line.stats()
    assert stats["dropped_offloaded"] == 1 and stats["dropped_queue"] == stats["dropped_loss"] == 0
    assert [pkt for _, pkt in line.line] == [small]  # only the MTU-sized packet is on its way
    assert stats["packets"] == 1 and stats["segments"] == 1


def test_a_sound_line_carries_the_same_super_packet() -> None:
    line = _direction("")
    line.offer(_packet(4, 10 * 1448, 1448), 0.0)
    assert line.stats()["dropped_offloaded"] == 0 and line.stats()["segments"] == 10
    assert len(line.line) == 2  # delivered in pieces of at most 8 segments, as ever


def test_a_broken_line_is_never_built_in_the_kernel() -> None:
    fast = PRESETS["10ge"]
    assert fast.kernel_link()  # veth would pass super-packets whole: the line must see them to break them
    assert not dataclasses.replace(fast, breaks="offloaded").kernel_link()


def test_an_unknown_breakage_is_refused_in_one_line() -> None:
    with pytest.raises(UsageError) as caught:
        LinkSpec(rate_bits_per_s=1_000_000_000, rtt_ms=1.0, breaks="everything").validate()
    assert "\n" not in caught.value.message and "offloaded" in caught.value.hint


# -- the verdict names offloads from the measurement ---------------------------------------------------------------

MIB = 1 << 20


def _collapsed_row(resent: float) -> Result:
    """An HTTP download of 1 MiB from the server at 60 KB/s, the server's sender resending `resent` of its bytes."""
    sent = int(MIB / (1 - resent))
    tcp = TcpTriage(
        side="sender",
        host="server",
        elapsed_s=17.0,
        connections=1,
        bytes_seen=MIB,
        copy_bytes=MIB,
        busy_s=17.0,
        rwnd_limited_s=0.0,
        sndbuf_limited_s=0.0,
        app_limited_busy_s=0.0,
        bytes_sent=sent,
        bytes_retrans=sent - MIB,
        retrans_fraction=(sent - MIB) / sent,
        segs_out=sent // 1448,
        header_bytes=52 * (sent // 1448),
        link_header_bytes=14,
        wire_bytes=sent + 66 * (sent // 1448),
    )
    sample = Sample(bytes=MIB, seconds=17.0, verified=True, tcp=tcp)
    return Result("http", "aiohttp", "download", "1M", MIB, 1, samples=(sample,))


def _broken_run(resent: float = 0.66, tso: str = "on", loss: float = 0.0, drops: int = 0) -> Run:
    device = {"interface": "wbs0", "offloads": {"tso": tso, "gso": tso, "gro": "on"}}
    link = {"rate_bits_per_s": 1e9, "loss": loss, "emulator": {"drops": drops}, "offloads": {"server": device}}
    return Run(
        id=1,
        meta={"client": {}, "server": {}},
        baseline=Baseline(up_bytes_per_s=50e3, down_bytes_per_s=60e3, rtt_ms=0.2),
        results=(_collapsed_row(resent),),
        link=link,
    )


def test_the_verdict_names_the_senders_offloads_and_the_fix() -> None:
    said = explain(_broken_run(), "10.77.0.1").verdict
    assert 3 <= len(said) <= 6, said
    (cause,) = [s for s in said if "TSO" in s]
    assert "http/aiohttp download resent 66 % of its bytes, 3.1 wire bytes per file byte" in cause
    assert "with no loss set and no queue overflow" in cause and "TSO and GSO on (wbs0)" in cause
    assert "`ethtool -K wbs0 tso off gso off`" in cause and "`sysctl net.inet.tcp.tso=0`" in cause


def test_offloads_are_not_blamed_when_something_else_explains_the_retransmissions() -> None:
    for run in (
        _broken_run(tso="off"),  # the sender's TSO and GSO were off
        _broken_run(resent=0.02),  # congestion's few %
        _broken_run(loss=0.01),  # the link was asked to lose packets
        _broken_run(drops=40),  # its queue overflowed
    ):
        assert not any("TSO" in s for s in explain(run, "10.77.0.1").verdict)
    unknown = _broken_run(tso="not known")
    assert any("its offloads not known" in s for s in explain(unknown, "10.77.0.1").verdict)


def test_the_broken_tso_story_breaks_the_line_in_both_variants_and_switches_the_servers_offloads_in_one() -> None:
    from workbench.lab import scenarios
    from workbench.lab.run import link_spec

    for quick in (False, True):
        planned = scenarios.requests(scenarios.find("broken-tso"), {}, set(), quick)
        specs = {variant.name: link_spec(request) for variant, request in planned}
        assert all(s.breaks == "offloaded" and not s.kernel_link() for s in specs.values())
        on, off = specs["server TSO and GSO on"], specs["server TSO and GSO off"]
        assert on.offloads == () and off.offloads == (("server", (("tso", False), ("gso", False))),)
        for _, request in planned:  # downloads only, bounded: one copy, a capped file where the flow collapses
            assert request.settings["directions"] == "download" and request.settings["repeat"] == 1


def test_an_unknown_link_breaks_is_refused_in_one_wording_from_the_flag_and_from_a_spec_built_in_code() -> None:
    import dataclasses

    from workbench.lab import scenarios
    from workbench.lab.link import LinkSpec
    from workbench.lab.run import link_spec
    from workbench.shared.errors import UsageError

    [(_, request), *_] = scenarios.requests(scenarios.find("broken-tso"), {}, set(), True)
    where = request.settings.where("link_breaks")
    with pytest.raises(UsageError) as from_flag:
        link_spec(dataclasses.replace(request, link_breaks="sometimes"))
    with pytest.raises(UsageError) as from_code:
        LinkSpec(rate_bits_per_s=100_000_000, rtt_ms=1.0, breaks="sometimes").validate()
    assert from_flag.value.message == f"{where}: unknown 'sometimes'"
    assert from_code.value.message == "--link-breaks: unknown 'sometimes'"
    assert from_flag.value.hint == from_code.value.hint == "choose from offloaded"

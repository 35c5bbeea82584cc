"""The wire: headers counted from segment counts, the interface's counters beside them, and the run's notes;
the arithmetic on made-up samples, the counters on this host's own loopback (a real kernel, a real socket)."""

from __future__ import annotations

import dataclasses
import socket
import struct

import pytest

from workbench.cli.export_html import render_html
from workbench.core.results import Baseline, Result, Run, Sample
from workbench.shared import inetdiag, wire
from workbench.shared.inetdiag import DiagSocket
from workbench.shared.tcpinfo import TCPI_OPT_TIMESTAMPS, TcpInfo, parse_tcp_info
from workbench.shared.triage import Tally, TcpTriage, merge, seen, with_iface
from workbench.shared.wire import IfaceCounters, RowWire, overhead_notes

MIB = 1 << 20


def _sock(local: str, segs: int, sent: int, data_segs: int | None = None, timestamps: bool = True) -> DiagSocket:
    info = TcpInfo(
        bytes_acked=sent,
        bytes_sent=sent,
        bytes_retrans=0,
        segs_out=segs,
        data_segs_out=segs if data_segs is None else data_segs,
        options=TCPI_OPT_TIMESTAMPS if timestamps else 0,
        busy_time_us=1000,
        rwnd_limited_us=0,
        sndbuf_limited_us=0,
    )
    remote = "::2" if ":" in local else "10.0.0.2"
    return DiagSocket(local, 40000, remote, 445, 1, info)


def _sender(*samples: list[DiagSocket]) -> TcpTriage:
    tally = Tally("sender", "client")
    for t, sockets in enumerate(samples):
        tally.add(float(t), sockets)
    found = tally.result()
    assert found is not None
    return found


def test_header_bytes_per_segment_are_ip_and_tcp_with_the_options_in_use() -> None:
    assert wire.header_bytes(ipv6=False, timestamps=True) == 20 + 20 + 12
    assert wire.header_bytes(ipv6=True, timestamps=False) == 40 + 20
    assert wire.link_header_bytes("ethernet") == 14
    assert wire.link_header_bytes("ip") == wire.link_header_bytes("loopback") == wire.link_header_bytes(None) == 0


def test_tcp_info_carries_the_options_and_the_segment_counts_at_their_kernel_offsets() -> None:
    raw = bytearray(240)
    raw[5] = TCPI_OPT_TIMESTAMPS | 0x2  # timestamps and SACK
    struct.pack_into("=I", raw, 136, 1000)  # tcpi_segs_out
    struct.pack_into("=I", raw, 156, 990)  # tcpi_data_segs_out
    struct.pack_into("=Q", raw, 200, 1_448_000)  # tcpi_bytes_sent
    info = parse_tcp_info(bytes(raw))
    assert (info.options, info.segs_out, info.data_segs_out, info.bytes_sent) == (3, 1000, 990, 1_448_000)
    assert info.timestamps and not parse_tcp_info(bytes(104)).timestamps


def test_a_sender_counts_its_segments_headers_from_zero_for_a_new_socket_and_from_the_start_for_an_old_one() -> None:
    old_before = _sock("10.0.0.1", segs=500, sent=700_000)
    old_after = _sock("10.0.0.1", segs=1500, sent=2_148_000)
    new = dataclasses.replace(_sock("fd00::1", segs=100, sent=140_000, timestamps=False), local_port=40001)
    found = _sender([old_before], [old_after, new])
    assert found.segs_out == 1000 + 100 and found.bytes_sent == 1_448_000 + 140_000
    assert found.header_bytes == 1000 * 52 + 100 * 60
    assert found.link_header_bytes is None  # the interface is not known yet: no link header counted
    assert found.wire_bytes == found.bytes_sent + found.header_bytes


def test_a_32_bit_segment_count_that_wraps_still_grows() -> None:
    before = _sock("10.0.0.1", segs=(1 << 32) - 10, sent=1000)
    after = _sock("10.0.0.1", segs=20, sent=1000 + 30 * 1448)
    assert _sender([before], [after]).segs_out == 30


def test_a_kernel_without_segment_counts_gives_no_wire_figure() -> None:
    plain = _sock("10.0.0.1", segs=0, sent=1000)
    later = dataclasses.replace(plain, info=dataclasses.replace(plain.info, segs_out=None, bytes_acked=5000))
    found = _sender([plain], [later])
    assert found.wire_bytes is None and found.segs_out is None and found.bytes_sent == 0


def test_the_interface_adds_its_link_headers_and_a_receiver_has_no_wire() -> None:
    found = _sender([_sock("10.0.0.1", 0, 0)], [_sock("10.0.0.1", segs=1000, sent=1_448_000)])
    counted = IfaceCounters("eth0", "ethernet", tx_bytes=1_514_000, rx_bytes=70_000, tx_packets=1000)
    with_eth = with_iface(found, counted)
    assert with_eth.link_header_bytes == 14 and with_eth.wire_bytes == 1_448_000 + 52_000 + 14_000
    assert (with_eth.iface_name, with_eth.iface_bytes, with_eth.iface_packets) == ("eth0", 1_514_000, 1000)
    assert with_eth.iface_to_wire == pytest.approx(1.0)
    receiver = dataclasses.replace(with_eth, side="receiver")
    assert with_iface(receiver, counted) is receiver
    classified = seen(receiver, 1_448_000)
    assert classified is not None and classified.wire_bytes is None and classified.iface_bytes is None
    assert classified.wire_bytes_per_file_byte is None


def test_a_device_handed_super_packets_has_their_headers_added_back_before_comparing() -> None:
    # 1000 segments went out as 25 GSO packets of 40: the TUN counted 25 sets of headers, the wire 1000
    assert wire.iface_wire_bytes(1_448_000 + 25 * 52, 25, 1000, 52_000, 0) == 1_448_000 + 52_000
    assert wire.iface_wire_bytes(500, None, 1000, 52_000, 0) == 500  # no packet count: as counted
    found = with_iface(
        _sender([_sock("10.0.0.1", 0, 0)], [_sock("10.0.0.1", segs=1000, sent=1_448_000)]),
        IfaceCounters("tun0", "ip", tx_bytes=2 * (1_448_000 + 25 * 52), rx_bytes=0, tx_packets=50),
    )
    assert found.iface_to_wire == pytest.approx(2.0, rel=0.05)  # counted twice, as a bridge and its port do


def test_per_file_byte_is_wire_over_the_copy_and_needs_the_copy_seen() -> None:
    found = with_iface(
        _sender([_sock("10.0.0.1", 0, 0)], [_sock("10.0.0.1", segs=1000, sent=1_448_000)]),
        IfaceCounters("lo", "loopback", 0, 0, 0),
    )
    copy = seen(found, 1_400_000, 1.0)
    assert copy is not None and copy.wire_bytes_per_file_byte == pytest.approx((1_448_000 + 52_000) / 1_400_000)
    missed = seen(found, 10 * 1_448_000, 1.0)  # the watch saw a tenth of the copy
    assert missed is not None and missed.wire_bytes_per_file_byte is None


def test_a_rows_copies_merge_by_summing_and_a_copy_without_the_figure_withdraws_it() -> None:
    one = seen(_sender([_sock("10.0.0.1", 0, 0)], [_sock("10.0.0.1", segs=100, sent=144_800)]), 144_800, 1.0)
    assert one is not None
    both = merge([one, one])
    assert both is not None and both.wire_bytes == 2 * (144_800 + 5200) and both.segs_out == 200
    assert both.wire_bytes_per_file_byte == pytest.approx(150_000 / 144_800)
    old = dataclasses.replace(one, wire_bytes=None, segs_out=None, header_bytes=None)
    mixed = merge([one, old])
    assert mixed is not None and mixed.wire_bytes is None and mixed.wire_bytes_per_file_byte is None


def _row(
    protocol: str, per_file: float, iface: float | None = None, kind: str = "ip", wire_bytes: int = 64 * MIB
) -> RowWire:
    return RowWire(protocol, f"{protocol}/x download 64MiB", per_file, iface, wire_bytes, kind, "tun0", 0.0)


def test_the_notes_give_each_protocols_median_and_name_a_disagreeing_interface() -> None:
    notes = overhead_notes(
        [
            _row("smb", 1.010, 1.0),
            _row("smb", 1.012, 1.02),
            _row("smb", 1.500, 2.0),
            _row("sftp", 1.031),
            dataclasses.replace(_row("http", 1.2), per_file_byte=None),
        ]
    )
    assert "smb 1.012" in notes[0] and "sftp 1.031" in notes[0] and "http" not in notes[0]
    assert len(notes) == 2 and "interface tun0 counted 2.0×" in notes[1] and "a bridge and its port" in notes[1]
    assert "retransmitted" not in notes[0].split(":", 1)[1]


def test_loopback_and_small_copies_are_never_compared_and_retransmissions_are_named() -> None:
    notes = overhead_notes(
        [
            _row("http", 1.02, 2.0, kind="loopback"),
            _row("ftp", 1.02, 3.0, wire_bytes=64 * 1024),
            dataclasses.replace(_row("smb", 1.3), retransmitted_share=0.15),
        ]
    )
    assert not any("counted" in n for n in notes)
    assert any(n.startswith("loopback: its interface counters") for n in notes)
    assert "smb 1.300 (15.0 % retransmitted)" in notes[0]
    assert overhead_notes([]) == []


@pytest.mark.skipif(inetdiag.available() is not None, reason="route netlink is Linux's")
def test_the_route_to_a_loopback_address_is_lo_and_its_counters_grow_with_what_is_sent() -> None:
    reader = wire.LinkReader()
    try:
        index = reader.route_interface("127.0.0.1")
        before = reader.counters(index)
        listener = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
        client.sendall(b"x" * MIB)
        got = 0
        while got < MIB:
            got += len(server.recv(1 << 20))
        for s in (client, server, listener):
            s.close()
        grown = reader.counters(index).since(before)
    finally:
        reader.close()
    assert before.name == "lo" and before.kind == "loopback"
    assert grown.tx_bytes >= MIB and grown.rx_bytes >= MIB and grown.tx_packets >= 1
    with pytest.raises(OSError):
        wire.LinkReader().counters(0x7FFFFFF0)  # no such interface: said, not a wrong reading


def test_the_html_report_shows_each_senders_wire_and_its_interface_beside_it() -> None:
    def copy(kind: str, name: str) -> TcpTriage:
        found = _sender([_sock("10.0.0.1", 0, 0)], [_sock("10.0.0.1", segs=1000, sent=1_448_000)])
        counted = IfaceCounters(name, kind, tx_bytes=1_448_000 + 52_000, rx_bytes=0, tx_packets=1000)
        watched = seen(with_iface(found, counted), 1_400_000, 1.0)
        assert watched is not None
        return watched

    rows = [
        Result("http", "curl", direction, "1M", 1_400_000, 1, (Sample(1_400_000, 1.0, tcp=copy(kind, name)),))
        for direction, kind, name in (("upload", "ip", "<b>tun"), ("download", "loopback", "lo"))
    ]
    page = render_html(Run(1, {}, Baseline(), tuple(rows)))
    section = page[page.index("<h2>The wire") :].split("</section>", 1)[0]
    assert section.count("<tr><td") == 2 and f"{1_500_000 / 1_400_000:.3f}" in section
    assert "&lt;b&gt;tun" in section and "<b>tun" not in section  # a name from outside, escaped
    assert ">1.000<" in section and section.count(">1.000<") == 1  # the loopback row is not compared
    bare = render_html(Run(1, {}, Baseline(), (dataclasses.replace(rows[0], samples=()),)))
    assert "<h2>The wire" not in bare


def test_a_rows_figure_is_taken_over_the_copies_whose_sender_was_seen_whole() -> None:
    found = _sender([_sock("10.0.0.1", 0, 0)], [_sock("10.0.0.1", segs=1000, sent=1_448_000)])
    whole, partial = seen(found, 1_400_000, 1.0), seen(found, 10 * 1_400_000, 1.0)  # the second saw a tenth
    assert whole is not None and partial is not None and partial.wire_bytes_per_file_byte is None
    samples = (Sample(1_400_000, 1.0, tcp=whole), Sample(10 * 1_400_000, 1.0, tcp=partial))
    row = Result("afp", "x", "download", "1M", 1_400_000, 1, samples)
    merged = row.tcp
    assert merged is not None and merged.wire_bytes_per_file_byte is None  # under 90 % of both copies was seen
    assert row.wire_bytes_per_file_byte == pytest.approx(1_500_000 / 1_400_000)
    assert row.retransmitted_share == 0.0
    unwatched = Result("afp", "x", "download", "1M", 1_400_000, 1, (Sample(1_400_000, 1.0),))
    assert unwatched.wire_bytes_per_file_byte is None and unwatched.retransmitted_share is None

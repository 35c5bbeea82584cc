"""TCP_INFO parsing: by layout on synthetic buffers, and live on a loopback connection."""

from __future__ import annotations

import socket
import struct
import sys

import pytest

from workbench.shared.tcpinfo import TcpInfo, parse_tcp_info, read_tcp_info

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux TCP_INFO")


def synthetic(length: int) -> bytes:
    raw = bytearray(280)
    raw[0] = 1  # ESTABLISHED
    raw[6] = 0x7A  # rcv_wscale 7, snd_wscale 10
    struct.pack_into("=I", raw, 68, 1234)  # rtt
    struct.pack_into("=I", raw, 80, 42)  # snd_cwnd
    struct.pack_into("=Q", raw, 168, 1_000_000)  # busy_time
    struct.pack_into("=Q", raw, 176, 250_000)  # rwnd_limited
    struct.pack_into("=Q", raw, 184, 500_000)  # sndbuf_limited
    struct.pack_into("=I", raw, 228, 65536)  # snd_wnd
    struct.pack_into("=I", raw, 232, 131072)  # rcv_wnd
    return bytes(raw[:length])


def test_parse_full_struct() -> None:
    info = parse_tcp_info(synthetic(280))
    assert (info.state, info.snd_wscale, info.rcv_wscale) == (1, 10, 7)
    assert (info.rtt_us, info.snd_cwnd, info.snd_wnd, info.rcv_wnd) == (1234, 42, 65536, 131072)
    assert info.rwnd_limited_fraction == pytest.approx(0.25)
    assert info.sndbuf_limited_fraction == pytest.approx(0.5)


def test_shorter_struct_leaves_newer_fields_none() -> None:
    old = parse_tcp_info(synthetic(192))  # a kernel before snd_wnd and bytes_sent
    assert old.rtt_us == 1234 and old.busy_time_us == 1_000_000
    assert old.snd_wnd is None and old.rcv_wnd is None and old.bytes_sent is None
    very_old = parse_tcp_info(synthetic(104))
    assert very_old.busy_time_us is None and very_old.rwnd_limited_fraction is None


def test_json_round_trip() -> None:
    info = parse_tcp_info(synthetic(280))
    assert TcpInfo.from_json(info.to_json()) == info
    assert TcpInfo.from_json(None) is None


@linux_only
def test_live_socket_reports_rtt_and_bytes() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
        with client, server:
            client.sendall(b"x" * 100_000)
            got = 0
            while got < 100_000:
                got += len(server.recv(100_000))
            sender, receiver = read_tcp_info(client), read_tcp_info(server)
    assert sender is not None and receiver is not None
    assert sender.state == 1
    assert sender.rtt_us is not None and 0 < sender.rtt_us < 1_000_000
    assert sender.bytes_sent == 100_000
    assert receiver.bytes_received == 100_000
    assert sender.snd_mss and sender.snd_cwnd


def test_non_tcp_socket_gives_none() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        assert read_tcp_info(udp) is None

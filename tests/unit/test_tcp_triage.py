"""TCP triage on real sockets (loopback), read from outside the sending code through inet_diag, and the
folding logic on made-up samples."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from workbench.shared import inetdiag
from workbench.shared.inetdiag import DiagSocket
from workbench.shared.tcpinfo import TcpInfo
from workbench.shared.tcpwatch import TcpWatch
from workbench.shared.triage import Tally, classify, merge, seen

pytestmark = pytest.mark.skipif(inetdiag.available() is not None, reason="inet_diag is Linux's")


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected pair on loopback addresses of its own (127.77.x.y to 127.78.x.y), so that a watch of one
    peer sees these sockets only, whatever else runs on loopback meanwhile."""
    tail = f"{random.randrange(1, 255)}.{random.randrange(1, 255)}"
    listener = socket.create_server((f"127.78.{tail}", 0))
    client = socket.create_connection(listener.getsockname(), source_address=(f"127.77.{tail}", 0))
    server, _ = listener.accept()
    listener.close()
    yield client, server
    client.close()
    server.close()


def _peer(sock: socket.socket) -> list[str]:
    return [sock.getpeername()[0]]


def _drain(sock: socket.socket, until: float, pause_s: float = 0.0, chunk: int = 65536) -> None:
    sock.settimeout(0.2)
    while time.monotonic() < until:
        try:
            if not sock.recv(chunk):
                return
        except TimeoutError:
            continue
        if pause_s:
            time.sleep(pause_s)


def test_a_slow_reader_with_a_small_buffer_makes_the_sender_receive_window_limited(pair: tuple) -> None:
    client, server = pair
    server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    watch = TcpWatch(_peer(client), "sender", "client").start()
    until = time.monotonic() + 1.5
    reader = threading.Thread(target=_drain, args=(server, until + 0.3, 0.002, 4096))
    reader.start()
    client.setblocking(False)
    while time.monotonic() < until:
        try:
            client.send(b"x" * 65536)
        except BlockingIOError:
            time.sleep(0.001)
    triage = watch.stop()
    reader.join()
    assert triage is not None and triage.side == "sender" and triage.connections == 1
    assert triage.limit == "receive-window" and triage.rwnd_limited >= 0.8, triage
    if triage.max_window_bytes is not None:  # the peer's window is in tcp_info from Linux 6.2 on
        assert triage.max_window_bytes <= 32 * 1024


def test_a_sender_that_sleeps_between_writes_is_application_limited(pair: tuple) -> None:
    client, server = pair
    watch = TcpWatch(_peer(client), "sender", "client").start()
    until = time.monotonic() + 1.5
    reader = threading.Thread(target=_drain, args=(server, until + 0.3))
    reader.start()
    sent = 0
    while time.monotonic() < until:
        client.sendall(b"x" * 1000)
        sent += 1000
        time.sleep(0.02)
    time.sleep(0.1)  # the last write acknowledged
    triage = watch.stop()
    reader.join()
    assert triage is not None and triage.limit == "application" and triage.app_limited >= 0.8, triage
    assert triage.bytes_seen == sent  # every write seen: one connection, open throughout


def test_the_receiver_side_sees_the_bytes_and_its_own_window(pair: tuple) -> None:
    client, server = pair
    watch = TcpWatch(_peer(server), "receiver", "server").start()
    until = time.monotonic() + 0.6
    reader = threading.Thread(target=_drain, args=(server, until + 0.3))
    reader.start()
    sent = 0
    while time.monotonic() < until:
        client.sendall(b"x" * 65536)
        sent += 65536
    time.sleep(0.2)
    triage = watch.stop()
    reader.join()
    assert triage is not None and triage.side == "receiver" and triage.app_limited is None
    assert triage.short().startswith("rx ")  # the table says only the receiving side was seen
    assert triage.bytes_seen == pytest.approx(sent, rel=0.05) and triage.max_window_bytes


def _sock(port: int, **info: int) -> DiagSocket:
    """A sender's socket on a current kernel: the limited times are there (0 unless given)."""
    return DiagSocket(
        "10.0.0.1", port, "10.0.0.2", 445, 1, TcpInfo(**{"rwnd_limited_us": 0, "sndbuf_limited_us": 0, **info})
    )


def test_parallel_connections_are_busy_at_most_the_interval() -> None:
    tally = Tally("sender", "client")
    tally.add(0.0, [])
    # two connections opened after the first sample, each busy the whole 0.1 s, one of them window-limited
    busy = {"busy_time_us": 100_000, "bytes_acked": 1_000_000, "bytes_sent": 1_000_000}
    tally.add(0.1, [_sock(1, **busy, rwnd_limited_us=100_000), _sock(2, **busy)])
    result = tally.result()
    assert result is not None and result.busy_s == pytest.approx(0.1)
    assert result.rwnd_limited == pytest.approx(0.5) and result.network_limited == pytest.approx(0.5)
    assert result.limit == "mixed" and result.connections == 2 and result.bytes_seen == 2_000_000


def test_a_socket_that_mostly_receives_is_not_the_sender() -> None:
    # loopback: both ends of a connection are in one namespace, the receiving end must not count
    tally = Tally("sender", "client")
    tally.add(0.0, [])
    tally.add(0.1, [_sock(1, busy_time_us=1000, bytes_acked=10, bytes_received=1_000_000)])
    result = tally.result()
    assert result is not None and result.connections == 0 and result.limit is None


def test_busy_but_app_limited_time_counts_as_application() -> None:
    # one request per round trip keeps data in flight all the time; the kernel flags its rate samples
    tally = Tally("sender", "server")
    tally.add(0.0, [])
    tally.add(1.0, [_sock(1, busy_time_us=990_000, bytes_acked=16_000_000, delivery_rate_app_limited=True)])
    result = tally.result()
    assert result is not None and result.limit == "application"
    assert result.app_limited == pytest.approx(1.0) and result.app_limited_busy_s == pytest.approx(0.99)


def test_a_watch_that_saw_little_of_the_copy_names_no_limit() -> None:
    tally = Tally("sender", "client")
    tally.add(0.0, [])
    tally.add(0.5, [_sock(1, busy_time_us=500_000, bytes_acked=100_000)])
    triage = tally.result()
    assert triage is not None and triage.limit == "network"
    assert seen(triage, 105_000).limit == "network"
    assert seen(triage, 150_000).limit is None  # a third of the copy unseen: its time would count as idle
    both = merge([seen(triage, 10_000_000), seen(triage, 105_000)])
    assert both is not None and both.copy_bytes == 10_105_000 and both.limit is None
    # the fractions are taken over the copy's own time, not the watch's (which starts and ends around it)
    assert seen(triage, 105_000, copy_seconds=1.0).app_limited == pytest.approx(0.5)


def test_an_old_kernel_without_busy_times_gets_no_fractions_and_no_limit() -> None:
    # Linux before 4.10 has no tcpi_busy_time: a zero there must not read as "idle 100 %"
    tally = Tally("sender", "client")
    tally.add(0.0, [])
    tally.add(1.0, [DiagSocket("10.0.0.1", 1, "10.0.0.2", 445, 1, TcpInfo(bytes_acked=1_000_000, rtt_us=3000))])
    triage = tally.result()
    assert triage is not None and triage.connections == 1 and triage.bytes_seen == 1_000_000
    assert triage.limit is None and triage.app_limited is None and triage.rtt_ms == 3.0


def test_a_receiver_without_its_advertised_window_names_no_window() -> None:
    # before Linux 6.10 there is no tcpi_rcv_wnd; rcv_space (bytes per round trip) would explain any rate
    info = TcpInfo(bytes_received=10_000_000, rcv_rtt_us=3000, rcv_space=30_000)
    tally = Tally("receiver", "client")
    tally.add(0.0, [])
    tally.add(1.0, [DiagSocket("10.0.0.1", 1, "10.0.0.2", 445, 1, info)])
    triage = tally.result()
    assert triage is not None and triage.max_window_bytes is None and triage.limit is None


def test_a_watch_forgets_closed_sockets() -> None:
    tally = Tally("sender", "server")
    tally.add(0.0, [])
    for i in range(1, 50):  # a new short connection each sample, as a client looping over connections would
        tally.add(i * 0.1, [_sock(1000 + i, busy_time_us=1000, bytes_acked=1000)])
    assert len(tally._known or {}) <= Tally.FORGET_AFTER + 1 and tally.connections == 49
    assert len(tally.rtts_ms) <= 49


def test_classify_names_a_cause_only_at_80_percent() -> None:
    assert classify(0.8, 0.1, 0.0, 0.1) == "application"
    assert classify(0.1, 0.85, 0.0, 0.05) == "receive-window"
    assert classify(0.5, 0.3, 0.0, 0.2) == "mixed"


def test_a_connection_that_opens_and_closes_between_two_samples_is_counted_once() -> None:
    """The final counters of a destroyed socket arrive through the sock_diag destroy group (as root)."""
    try:
        inetdiag.DestroyListener().close()
    except OSError as exc:
        pytest.skip(f"no sock_diag destroy events here: {exc}")
    tail = f"{random.randrange(1, 255)}.{random.randrange(1, 255)}"
    listener = socket.create_server((f"127.78.{tail}", 0))
    watch = TcpWatch([f"127.78.{tail}"], "sender", "client", interval_s=30.0).start()  # no sample in between
    client = socket.create_connection(listener.getsockname(), source_address=(f"127.77.{tail}", 0))
    server, _ = listener.accept()
    client.sendall(b"x" * 300_000)
    client.shutdown(socket.SHUT_WR)
    while server.recv(65536):
        pass
    client.close()
    server.close()
    listener.close()
    time.sleep(0.2)  # the kernel destroys the closed socket once its FIN is acknowledged
    triage = watch.stop()
    assert triage is not None and triage.incomplete is None
    assert triage.connections == 1 and triage.bytes_seen == pytest.approx(300_000, abs=2)


def test_a_watch_that_cannot_start_leaves_the_copy_alone_and_says_why() -> None:
    from workbench.core.copy_watcher import CopyWatcher

    class BrokenFarHost:
        def tcp_watch_start(self, role: str) -> str | None:
            raise RuntimeError("a far host that answers garbage")

        def tcp_watch_stop(self, watch_id: str) -> dict | None:
            return None

    # this side is watched instead, as for a far host without the triage
    with CopyWatcher(BrokenFarHost(), "127.0.0.1").watch("download") as seen:
        pass  # the copy: nothing here depends on the watch
    assert seen.triage is not None and seen.triage.side == "receiver" and seen.triage.host == "client"
    # nothing to watch on this side either (a far host name that resolved to nothing): a triage that says why
    watcher = CopyWatcher(BrokenFarHost(), "127.0.0.1")
    watcher.peers = frozenset()
    with watcher.watch("download") as seen:
        pass
    assert seen.triage is not None and seen.triage.limit is None and seen.triage.connections == 0
    assert "could not start" in (seen.triage.incomplete or "") and "garbage" in (seen.triage.incomplete or "")


def test_the_kernel_filters_the_dump_by_remote_address() -> None:
    tail = f"{random.randrange(1, 255)}.{random.randrange(1, 255)}"
    held = []
    for server_address, client_address in ((f"127.79.{tail}", f"127.80.{tail}"), (f"127.81.{tail}", f"127.82.{tail}")):
        server = socket.create_server((server_address, 0))
        held += [socket.create_connection(server.getsockname(), source_address=(client_address, 0)), server]
        held.append(server.accept()[0])
    try:
        with inetdiag.DiagReader() as reader:
            one = reader.sockets(frozenset({f"127.79.{tail}"}))
            two = reader.sockets(frozenset({f"127.79.{tail}", f"127.82.{tail}", "::1"}))
            assert reader.kernel_filter  # the program passed the kernel's check
        assert [(s.local, s.remote) for s in one] == [(f"127.80.{tail}", f"127.79.{tail}")]
        assert sorted((s.local, s.remote) for s in two) == [
            (f"127.80.{tail}", f"127.79.{tail}"),
            (f"127.81.{tail}", f"127.82.{tail}"),
        ]
    finally:
        for sock in held:
            sock.close()


def test_a_sender_with_the_window_in_flight_is_window_limited_even_when_the_kernel_says_busy() -> None:
    # BBR paces: its send loop stops at the pacing timer just short of the window, and the kernel counts that
    # time as busy, not window-limited; 44 segments of 1448 in flight fill a 64 KiB window (97 %)
    tally = Tally("sender", "server")
    tally.add(0.0, [])
    full = {"busy_time_us": 100_000, "bytes_acked": 2_200_000, "unacked": 44, "snd_mss": 1448, "snd_wnd": 65536}
    tally.add(0.1, [_sock(1, **full, rwnd_limited_us=35_000)])
    result = tally.result()
    assert result is not None and result.limit == "receive-window" and result.rwnd_limited == pytest.approx(1.0)
    # half the window in flight: the window did not hold it back, the kernel's own split stands
    tally = Tally("sender", "server")
    tally.add(0.0, [])
    tally.add(0.1, [_sock(1, **{**full, "unacked": 22}, rwnd_limited_us=35_000)])
    result = tally.result()
    assert result is not None and result.rwnd_limited == pytest.approx(0.35) and result.limit == "mixed"
    # a bulk flow whose window is far larger than what it has in flight stays network-limited
    tally = Tally("sender", "server")
    tally.add(0.0, [])
    tally.add(0.1, [_sock(1, **{**full, "unacked": 300, "snd_wnd": 6 << 20})])
    result = tally.result()
    assert result is not None and result.limit == "network"


def _cc_sock(port: int, acked: int, congestion: str | None = "bbr", gain: float | None = None) -> DiagSocket:
    return DiagSocket(
        "10.0.0.1", port, "10.0.0.2", 80, 1,
        TcpInfo(busy_time_us=50_000, rwnd_limited_us=0, sndbuf_limited_us=0, bytes_acked=acked, bytes_sent=acked),
        bbr_pacing_gain=gain, congestion=congestion,
    )  # fmt: skip


STARTUP_GAIN = 739 / 256  # tcp_bbr.c's bbr_high_gain


def test_a_senders_bytes_are_counted_by_its_congestion_control_and_bbrs_start_up() -> None:
    tally = Tally("sender", "client")
    tally.add(0.0, [_cc_sock(1, 0, gain=STARTUP_GAIN)])
    tally.add(0.1, [_cc_sock(1, 300_000, gain=STARTUP_GAIN)])
    tally.add(0.2, [_cc_sock(1, 400_000, gain=1.25)])
    # its destroy event: no congestion control said, its last 100 kB count by what it was when last read
    tally.add(0.3, [_cc_sock(1, 500_000, congestion=None)])
    first = tally.result()
    assert first is not None and (first.cc_known_bytes, first.bbr_startup_bytes) == (500_000, 300_000)
    assert first.bbr_in_startup is True
    cubic = Tally("sender", "client")
    cubic.add(0.0, [])
    cubic.add(0.1, [_cc_sock(2, 500_000, congestion="cubic")])
    second = cubic.result()
    assert second is not None and (second.cc_known_bytes, second.bbr_startup_bytes) == (500_000, 0)
    assert second.bbr_in_startup is False  # a sender seen running CUBIC paces nothing
    merged = merge([first, second])
    assert merged is not None and (merged.cc_known_bytes, merged.bbr_startup_bytes) == (1_000_000, 300_000)
    assert merged.bbr_in_startup is False


def test_a_congestion_control_read_for_few_of_the_bytes_says_nothing() -> None:
    """One FTP data connection per file, each opened and closed between two samples: only its destroy event, which
    carries no congestion control, is seen; the control channel's few bytes alone must not decide."""
    tally = Tally("sender", "server")
    tally.add(0.0, [_cc_sock(21, 0, gain=STARTUP_GAIN)])
    tally.add(0.1, [_cc_sock(21, 2_000, gain=STARTUP_GAIN), _cc_sock(5000, 65536, congestion=None)])
    result = tally.result()
    assert result is not None and result.cc_known_bytes == 2_000 and result.bytes_seen == 67_536
    assert result.bbr_in_startup is None
    plain = Tally("sender", "client")
    plain.add(0.0, [])
    plain.add(0.1, [_cc_sock(3, 65536, congestion=None)])
    unread = plain.result()
    assert unread is not None and unread.cc_known_bytes is None and unread.bbr_in_startup is None


def test_the_dump_parser_reads_the_congestion_controls_name_and_bbrs_pacing_gain() -> None:
    """A socket message as the kernel writes it (inet_diag_msg, then attributes): BBR's tcp_bbr_info carries the
    pacing gain in 1/256 (739 in start-up); a short one is left unread."""
    msg = struct.pack("=BBBB", socket.AF_INET, 1, 0, 0)
    msg += struct.pack(">HH16s16s", 40000, 80, socket.inet_aton("10.0.0.1"), socket.inet_aton("10.0.0.2"))
    msg += struct.pack("=IQ", 0, 7) + bytes(20)  # interface, cookie; expires, rqueue, wqueue, uid, inode

    def attribute(kind: int, payload: bytes) -> bytes:
        padded = payload + bytes(-len(payload) % 4)
        return struct.pack("=HH", 4 + len(payload), kind) + padded

    info = attribute(inetdiag.INET_DIAG_INFO, bytes(104))
    bbr = attribute(inetdiag.INET_DIAG_BBRINFO, struct.pack("=5I", 1000, 0, 40000, 739, 739))
    cong = attribute(inetdiag.INET_DIAG_CONG, b"bbr\0")
    parsed = inetdiag._parse(msg + info + cong + bbr, 0, len(msg + info + cong + bbr), None)
    assert parsed is not None and parsed.congestion == "bbr" and parsed.cookie == 7
    assert parsed.bbr_pacing_gain == pytest.approx(STARTUP_GAIN)
    short = attribute(inetdiag.INET_DIAG_BBRINFO, struct.pack("=3I", 1000, 0, 40000))
    cubic = attribute(inetdiag.INET_DIAG_CONG, b"cubic\0")
    other = inetdiag._parse(msg + info + cubic + short, 0, len(msg + info + cubic + short), None)
    assert other is not None and other.congestion == "cubic" and other.bbr_pacing_gain is None


def _turns(client: socket.socket, server: socket.socket, until: float, burst_bytes: int) -> None:
    """One burst per turn: the client sends `burst_bytes`, the server reads them all and answers one byte."""
    while time.monotonic() < until:
        client.sendall(b"x" * burst_bytes)
        got = 0
        while got < burst_bytes:
            got += len(server.recv(burst_bytes - got))
        server.sendall(b"k")
        assert client.recv(1) == b"k"


def _read_exactly(sock: socket.socket, nbytes: int) -> None:
    while nbytes > 0:
        nbytes -= len(sock.recv(min(nbytes, 1 << 20)))


def test_a_bbr_sender_taking_turns_is_seen_in_start_up_and_after_a_bulk_copy_is_not(pair: tuple) -> None:
    """What the kernel itself says of a real BBR socket, read before and after each watched span: bursts per turn
    keep it in start-up (pacing gain 2.89); a bulk send on the same connection makes it leave start-up."""
    client, server = pair
    try:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"bbr")
    except OSError as exc:  # tcp_bbr not built, or not loaded and this user may not load it
        pytest.skip(f"BBR is not available here: {exc}")
    server.settimeout(10.0)
    client.settimeout(10.0)
    _turns(client, server, time.monotonic() + 0.1, 65536)  # a warm-up, as a run's: BBR says little before data
    watch = TcpWatch(_peer(client), "sender", "client").start()
    _turns(client, server, time.monotonic() + 0.5, 65536)
    turns = watch.stop()
    assert turns is not None and turns.cc_known_bytes and turns.bbr_in_startup is True, turns
    chunk = 1 << 20
    bulk = threading.Thread(target=lambda: client.sendall(b"x" * chunk * 200))
    bulk.start()  # 200 MiB, read whole before the next turn, so no byte of it is left in a buffer
    _read_exactly(server, chunk * 200)
    bulk.join()
    watch = TcpWatch(_peer(client), "sender", "client").start()
    _turns(client, server, time.monotonic() + 0.5, 65536)
    after_bulk = watch.stop()
    assert after_bulk is not None and after_bulk.cc_known_bytes and after_bulk.bbr_in_startup is False, after_bulk

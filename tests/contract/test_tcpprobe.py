"""The raw-TCP probe against its real server on loopback: auth, counts, caps, window clamp, RTT."""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading
import time

import pytest

from workbench.probe.client import _Session, measure, rtt, window_sweep
from workbench.probe.wire import MAGIC, NONCE_LEN
from workbench.server.probe import ProbeServer
from workbench.shared.errors import AuthError, NetworkError, UsageError, WorkbenchError

HOST = "127.0.0.1"


@pytest.fixture
def secret() -> str:
    return secrets.token_hex(16)


@pytest.fixture
def server(secret: str):
    with ProbeServer(HOST, 0, secret) as srv:
        yield srv
    leftovers = [t for t in threading.enumerate() if t.name.startswith("tcpprobe-")]
    assert not leftovers, f"threads left running: {leftovers}"


def closed_without_a_word(sock: socket.socket) -> bool:
    """True when the server closed (FIN, or RST because our bytes were left unread) and sent nothing."""
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:
        return True


def raw_connection(port: int) -> tuple[socket.socket, bytes]:
    sock = socket.create_connection((HOST, port), timeout=5)
    hello = sock.recv(len(MAGIC) + NONCE_LEN, socket.MSG_WAITALL)
    return sock, hello


@pytest.mark.parametrize("direction", ["upload", "download"])
def test_both_directions_count_bytes_on_both_sides(server: ProbeServer, secret: str, direction: str) -> None:
    start = time.monotonic()
    result = measure(HOST, server.port, secret, direction, duration=1.0)
    wall_s = time.monotonic() - start
    assert result.direction == direction
    assert result.bytes > 1_000_000
    # Every byte the sender counted arrived: the connection ended with a clean EOF.
    assert result.sender.bytes == result.receiver.bytes == result.bytes
    assert 0.5 < result.seconds <= min(1.5, wall_s)
    assert 0.5 < result.sender.seconds <= min(1.5, wall_s)
    assert result.bytes_per_s == pytest.approx(result.receiver.timed_bytes / result.seconds)
    assert result.sender.tcp_info is not None and result.receiver.tcp_info is not None
    assert result.sender.tcp_info.bytes_sent is None or result.sender.tcp_info.bytes_sent >= result.bytes
    # The sender's smoothed RTT, in seconds: not the receiver's rcv_rtt, not min_rtt, not microseconds. On loopback
    # it read 60-850 us under this load; 0.1 s leaves room for a busy 2-core machine and is still below the
    # 0.2 s minimum retransmission timeout, which a figure from the wrong field or a unit slip would pass.
    info = result.sender.tcp_info
    assert info.rtt_us is not None and result.rtt_s == info.rtt_us / 1e6
    assert 1e-6 <= result.rtt_s < 0.1
    if info.min_rtt_us is not None:  # every sample the smoothed RTT averages is at least the minimum
        assert info.min_rtt_us <= info.rtt_us + 1


@pytest.mark.parametrize("direction", ["upload", "download"])
def test_max_bytes_stops_the_load(server: ProbeServer, secret: str, direction: str) -> None:
    start = time.monotonic()
    result = measure(HOST, server.port, secret, direction, duration=30.0, max_bytes=8 << 20)
    assert result.bytes == 8 << 20
    assert time.monotonic() - start < 10


def test_duration_stops_the_load(server: ProbeServer, secret: str) -> None:
    start = time.monotonic()
    measure(HOST, server.port, secret, "download", duration=0.5)
    assert time.monotonic() - start < 3


@pytest.mark.parametrize("direction", ["upload", "download"])
def test_window_clamp_sets_the_advertised_window(server: ProbeServer, secret: str, direction: str) -> None:
    window = 256 * 1024
    result = measure(HOST, server.port, secret, direction, duration=0.5, window=window)
    assert result.window_requested == window
    assert result.window_bytes is not None
    assert window * 0.9 <= result.window_bytes <= window * 1.1
    # Seen from both ends, where the kernel reports it (snd_wnd: Linux 6.2, rcv_wnd: 6.10). Both are the window the
    # receiver advertised last, the clamp less what it had not read yet: a reader slowed by a busy machine leaves
    # less (190 KiB of 256 once), so they are held under the clamp and above half of it.
    for seen in (result.sender.tcp_info.snd_wnd, result.receiver.tcp_info.rcv_wnd):
        if seen is not None:
            assert window * 0.5 <= seen <= window * 1.1


def test_window_sweep_reports_requested_effective_and_predicted(server: ProbeServer, secret: str) -> None:
    windows = [256 * 1024, 1 << 20]
    start = time.monotonic()
    points = window_sweep(HOST, server.port, secret, windows, rtt_ms=2.0, duration=0.3, direction="upload")
    wall_s = time.monotonic() - start
    assert [p.window_bytes for p in points] == windows
    for point in points:
        assert point.predicted_bytes_per_s == pytest.approx(point.window_bytes / 0.002)
        assert point.effective_window_bytes is not None
        assert point.window_bytes * 0.9 <= point.effective_window_bytes <= point.window_bytes * 1.1
        # What flowed with this window, in bytes/s timed at the receiver: both ends agree on the bytes, the
        # seconds are the ~0.3 s asked for and inside the sweep's wall clock, and the rate is bytes / seconds.
        result = point.result
        assert result is not None and result.window_requested == point.window_bytes
        assert result.sender.bytes == result.receiver.bytes == result.bytes > 1_000_000
        assert 0.15 < result.receiver.seconds <= min(0.3 + 0.5, wall_s)
        assert point.measured_bytes_per_s == result.bytes_per_s
        assert point.measured_bytes_per_s == pytest.approx(result.receiver.timed_bytes / result.receiver.seconds)


def test_rtt_returns_sane_values(server: ProbeServer, secret: str) -> None:
    result = rtt(HOST, server.port, secret, count=10)
    assert len(result.connect_samples_s) == len(result.ping_samples_s) == 10
    assert 0 < result.connect_min_s <= result.connect_median_s < 0.5
    assert 0 < result.ping_min_s <= result.ping_median_s < 0.5


def test_wrong_secret_is_refused_cleanly(server: ProbeServer, secret: str) -> None:
    with pytest.raises(AuthError, match="refused the secret"):
        measure(HOST, server.port, "not-" + secret, "upload", duration=0.5)
    with pytest.raises(AuthError):
        rtt(HOST, server.port, "wrong", count=2)
    # The server is unharmed: a load capped by bytes (not time) arrives whole, counted alike on both ends.
    after = measure(HOST, server.port, secret, "upload", duration=10.0, max_bytes=4 << 20)
    assert after.sender.bytes == after.receiver.bytes == after.bytes == 4 << 20


def test_unauthenticated_peer_gets_nothing(server: ProbeServer) -> None:
    sock, hello = raw_connection(server.port)
    with sock:
        assert hello.startswith(MAGIC) and len(hello) == len(MAGIC) + NONCE_LEN
        sock.sendall(b"C" + bytes(2 * NONCE_LEN))  # a made-up MAC
        assert closed_without_a_word(sock)
    sock, _ = raw_connection(server.port)
    with sock:
        sock.sendall(b"D" + bytes(NONCE_LEN))  # a data connection with a token never issued
        assert closed_without_a_word(sock)
    sock, _ = raw_connection(server.port)
    with sock:
        sock.sendall(b'{"cmd": "source", "duration": 5}')  # straight to a command
        assert closed_without_a_word(sock)


def test_server_refuses_loads_beyond_its_caps(server: ProbeServer, secret: str) -> None:
    with _Session(HOST, server.port, secret) as session:
        with pytest.raises(WorkbenchError, match="duration"):
            session.request({"cmd": "source", "duration": 3600})
        with pytest.raises(WorkbenchError, match="max_bytes"):
            session.request({"cmd": "sink", "duration": 1, "max_bytes": 1 << 50})
        with pytest.raises(WorkbenchError, match="unknown command"):
            session.request({"cmd": "shell"})


def test_client_checks_arguments(server: ProbeServer, secret: str) -> None:
    with pytest.raises(UsageError):
        measure(HOST, server.port, secret, "sideways", duration=1)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        measure(HOST, server.port, secret, "upload", duration=600)
    with pytest.raises(UsageError):
        measure(HOST, server.port, secret, "upload", duration=1, window=10)


def test_session_count_is_bounded(secret: str) -> None:
    with ProbeServer(HOST, 0, secret, max_sessions=1) as srv:
        held = [raw_connection(srv.port) for _ in range(2)]  # the two slots: one control, one data
        try:
            assert all(hello.startswith(MAGIC) for _, hello in held)
            extra, hello = raw_connection(srv.port)
            with extra:
                assert hello == b""
        finally:
            for sock, _ in held:
                sock.close()


def test_refused_port_is_a_network_error(secret: str) -> None:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port = sock.getsockname()[1]  # bound but not listening: refused
        with pytest.raises(NetworkError, match="refused"):
            measure(HOST, port, secret, "upload", duration=0.5)


def test_another_service_is_not_mistaken_for_the_probe(secret: str) -> None:
    with socket.create_server((HOST, 0)) as listener:

        def speak_ssh() -> None:
            conn, _ = listener.accept()
            with conn, contextlib.suppress(OSError):
                conn.sendall(b"SSH-2.0-OpenSSH_9.2 Debian\r\n" + bytes(32))
                conn.recv(100)

        thread = threading.Thread(target=speak_ssh)
        thread.start()
        with pytest.raises(NetworkError, match="not a workbench TCP probe"):
            measure(HOST, listener.getsockname()[1], secret, "upload", duration=0.5)
        thread.join(5)


def test_busy_port_is_a_clean_error(server: ProbeServer, secret: str) -> None:
    with pytest.raises(NetworkError, match="cannot listen"):
        ProbeServer(HOST, server.port, secret).start()


def test_empty_secret_is_refused() -> None:
    with pytest.raises(UsageError):
        ProbeServer(HOST, 0, "")

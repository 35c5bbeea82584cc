"""N client hosts behind the lab's switch (workbench.lab.client_hosts): every client crosses the one shared link both
ways with the link's RTT, logs in over SSH to its own namespace and home with verified host keys, and nothing it
started outlives it, not even when its owner is killed outright."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import lab_unavailable
from workbench.lab import PRESETS, Lab, cleanup_stale, client_hosts, netns
from workbench.lab.client_hosts import MAX_CLIENTS, ClientHosts, FleetClient
from workbench.shared.errors import UsageError, WorkbenchError
from workbench.shared.procs import pid_alive

REPO = Path(__file__).resolve().parents[2]
UP_BYTES = 3 * 1024 * 1024
DOWN_BYTES = 2 * 1024 * 1024

needs_lab = pytest.mark.skipif(lab_unavailable() is not None, reason=lab_unavailable() or "")
needs_ssh = pytest.mark.skipif(
    not os.path.exists("/usr/sbin/sshd") or shutil.which("ssh") is None, reason="OpenSSH server or client missing"
)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(min(1 << 20, size - len(buf)))
        if not chunk:
            raise ConnectionError(f"peer closed after {len(buf)} of {size} bytes")
        buf += chunk
    return bytes(buf)


@contextlib.contextmanager
def _sink(lab: Lab, count: int) -> Iterator[tuple[int, dict[str, bytes], list[BaseException]]]:
    """A listener at lab.server_addr in the server namespace: each connection sends a length and that many bytes;
    it answers with their SHA-256 and then DOWN_BYTES derived from them. Yields (port, {peer addr: upload}, errors).
    """
    with lab.in_server():
        listener = socket.socket()
    got: dict[str, bytes] = {}
    errors: list[BaseException] = []

    def serve(conn: socket.socket, peer: str) -> None:
        try:
            with conn:
                conn.settimeout(20)
                (size,) = struct.unpack("!Q", _recv_exactly(conn, 8))
                data = _recv_exactly(conn, size)
                got[peer] = data
                digest = hashlib.sha256(data).digest()
                conn.sendall(digest + _down_payload(digest))
        except BaseException as exc:
            errors.append(exc)

    def accept_all() -> None:
        workers = []
        try:
            for _ in range(count):
                conn, (peer, _port) = listener.accept()
                workers.append(threading.Thread(target=serve, args=(conn, peer), daemon=True))
                workers[-1].start()
        except OSError as exc:
            errors.append(exc)
        for w in workers:
            w.join(30)

    with listener:
        listener.bind((lab.server_addr, 0))
        listener.listen(count)
        listener.settimeout(30)
        acceptor = threading.Thread(target=accept_all, daemon=True)
        acceptor.start()
        yield listener.getsockname()[1], got, errors
        acceptor.join(30)


def _down_payload(digest: bytes) -> bytes:
    return (digest * (DOWN_BYTES // len(digest) + 1))[:DOWN_BYTES]


def _exchange(fleet: ClientHosts, client: FleetClient, host: str, port: int, upload: bytes) -> None:
    """From inside `client`'s namespace: send `upload`, check the sink's digest and the bytes it sends back."""
    with fleet.in_client(client.alias):
        sock = socket.socket()  # belongs to the client's namespace from birth
    with sock:
        sock.settimeout(20)
        sock.connect((host, port))
        sock.sendall(struct.pack("!Q", len(upload)) + upload)
        digest = _recv_exactly(sock, 32)
        assert digest == hashlib.sha256(upload).digest(), f"{client.alias}: the upload arrived changed"
        assert _recv_exactly(sock, DOWN_BYTES) == _down_payload(digest), f"{client.alias}: the download arrived changed"


def _all_exchange(lab: Lab, fleet: ClientHosts) -> None:
    """Every client at once moves UP_BYTES up and DOWN_BYTES down across the link, and the link carried it."""
    uploads = {c.addr: os.urandom(UP_BYTES) for c in fleet.clients}
    before = lab.forwarder_stats()
    failures: list[BaseException] = []

    def run(client: FleetClient) -> None:
        try:
            _exchange(fleet, client, lab.server_addr, port, uploads[client.addr])
        except BaseException as exc:
            failures.append(exc)

    with _sink(lab, len(fleet.clients)) as (port, got, errors):
        threads = [threading.Thread(target=run, args=(c,)) for c in fleet.clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not failures and not errors, (failures, errors)
    # the server saw each client's own address (routed, not translated) and exactly its bytes
    assert got == uploads
    after = lab.forwarder_stats()
    for way, moved in (("client_to_server", UP_BYTES), ("server_to_client", DOWN_BYTES)):
        delta = after[way]["wire_bytes"] - before[way]["wire_bytes"]
        # every byte crossed the lab link (delay line or kernel limiter), with its headers on top
        assert delta >= len(fleet.clients) * moved, (way, delta)


def _connect_rtts_ms(fleet: ClientHosts, client: FleetClient, host: str, port: int, count: int = 5) -> list[float]:
    times = []
    for _ in range(count):
        with fleet.in_client(client.alias):
            sock = socket.socket()
        with sock:
            sock.settimeout(5)
            t0 = time.perf_counter()
            sock.connect((host, port))
            times.append(1000 * (time.perf_counter() - t0))
        time.sleep(0.005)
    return times


def _assert_all_gone(namespaces: list[str], sshd_pids: list[int]) -> None:
    left = set(namespaces) & set(netns.lab_namespaces())
    assert not left, f"namespaces left: {left}"
    assert [pid for pid in sshd_pids if pid_alive(pid)] == []


# -- pure logic ------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, MAX_CLIENTS + 1, -1])
def test_client_count_out_of_range_is_a_usage_error(count: int, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="client hosts is out of range"):
        ClientHosts(Lab(PRESETS["wifi-ac"]), count, tmp_path)


def test_client_names_carry_the_labs_prefix(tmp_path: Path) -> None:
    lab = Lab(PRESETS["wifi-ac"])
    fleet = ClientHosts(lab, 3, tmp_path)
    prefix = lab.client_ns.rsplit("-", 1)[0]
    assert [c.alias for c in fleet.clients] == ["client1", "client2", "client3"]
    assert [c.addr for c in fleet.clients] == ["10.78.1.2", "10.78.2.2", "10.78.3.2"]
    for i, c in enumerate(fleet.clients, start=1):
        assert c.namespace == f"{prefix}-k{i}" and netns.owner_of(c.namespace) == os.getpid()
        assert c.home.is_relative_to(tmp_path)
    assert len({c.home for c in fleet.clients}) == 3


# -- with a lab ------------------------------------------------------------------------------------


@pytest.mark.lab
@needs_lab
@needs_ssh
def test_an_unstarted_lab_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="started lab"), ClientHosts(Lab(PRESETS["wifi-ac"]), 1, tmp_path):
        pass


@pytest.fixture(scope="module")
def three_clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, ClientHosts]]:
    """One wifi-ac lab with three client hosts for the tests that only look at them; once they end, the clients'
    namespaces and sshds are gone."""
    with Lab(PRESETS["wifi-ac"]) as lab, ClientHosts(lab, 3, tmp_path_factory.mktemp("fleet") / "fleet") as fleet:
        namespaces = [c.namespace for c in fleet.clients]
        pids = list(fleet.sshd_pids().values())
        yield lab, fleet
    _assert_all_gone(namespaces, pids)


@pytest.mark.lab
@needs_lab
@needs_ssh
def test_three_clients_share_the_delay_line_with_its_rtt(three_clients: tuple[Lab, ClientHosts]) -> None:
    lab, fleet = three_clients
    assert lab.idle_rtt_ms is not None
    with lab.in_server():
        listener = socket.socket()
    with listener:
        listener.bind((lab.server_addr, 0))
        listener.listen(64)
        port = listener.getsockname()[1]
        for client in fleet.clients:
            rtt = min(_connect_rtts_ms(fleet, client, lab.server_addr, port))
            # the link's round trip (2.8 ms), plus at most a little for the veth hop and a busy machine
            assert 2.0 <= rtt <= lab.idle_rtt_ms + 1.0, (client.alias, rtt, lab.idle_rtt_ms)
    _all_exchange(lab, fleet)
    namespaces = [c.namespace for c in fleet.clients]
    pids = list(fleet.sshd_pids().values())
    assert all(netns.exists(n) for n in namespaces) and all(pid_alive(p) for p in pids)


@pytest.mark.lab
@needs_lab
@needs_ssh
def test_ssh_lands_in_each_client_with_its_home_and_checks_host_keys(
    three_clients: tuple[Lab, ClientHosts], tmp_path: Path
) -> None:
    _, fleet = three_clients
    assert fleet.hosts_file.read_text().split() == ["client1", "client2", "client3"]
    assert fleet.work.stat().st_mode & 0o077 == 0
    script = 'stat -L -c %i /proc/self/ns/net; ip -o -4 addr show scope global; echo "home=$WORKBENCH_HOME"'
    with fleet.in_switch():
        for client in fleet.clients:
            done = subprocess.run(
                ["ssh", "-F", str(fleet.ssh_config), client.alias, script],
                capture_output=True,
                text=True,
                timeout=20,
            )
            assert done.returncode == 0, done.stderr
            inode, *addrs, home = done.stdout.strip().splitlines()
            assert int(inode) == os.stat(netns.NETNS_DIR / client.namespace).st_ino, client.alias
            assert len(addrs) == 1 and f"inet {client.addr}/24" in addrs[0], done.stdout
            assert home == f"home={client.home}"
        # the far workbench runs on a client host as the fleet will start it
        done = subprocess.run(
            ["ssh", "-F", str(fleet.ssh_config), "client2", f"{fleet.remote_workbench} --help"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0 and "Usage" in done.stdout, done.stdout + done.stderr
        # client1's address with client2's host key: refused, never skipped
        wrong = tmp_path / "wrong_known_hosts"
        keys = fleet.known_hosts.read_text().splitlines()
        wrong.write_text(f"{fleet.clients[0].addr} {keys[1].split(' ', 1)[1]}\n")
        done = subprocess.run(
            ["ssh", "-F", str(fleet.ssh_config), "-o", f"UserKnownHostsFile={wrong}", "client1", "true"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        assert done.returncode == 255 and "host key" in done.stderr.lower(), done.stderr


@pytest.mark.lab
@needs_lab
@needs_ssh
def test_an_exception_takes_down_clients_sshds_and_sessions(tmp_path: Path) -> None:
    with (
        pytest.raises(RuntimeError, match="boom"),
        Lab(PRESETS["wifi-ac"]) as lab,
        ClientHosts(lab, 2, tmp_path / "fleet") as fleet,
    ):
        namespaces = [c.namespace for c in fleet.clients]
        pids = list(fleet.sshd_pids().values())
        with fleet.in_switch():
            session = subprocess.Popen(
                ["ssh", "-F", str(fleet.ssh_config), "client2", "echo $$; exec sleep 60"],
                stdout=subprocess.PIPE,
                text=True,
            )
        remote = int(session.stdout.readline())  # type: ignore[union-attr]
        pids.append(remote)  # the session's own process, in client2's namespace
        assert pid_alive(remote)
        switch_forwarding = netns.read_sysctl(lab.client_ns, "net.ipv4.ip_forward")
        raise RuntimeError("boom")
    assert session.wait(timeout=10) != 0  # its connection went with the client
    assert switch_forwarding == "1"
    _assert_all_gone(namespaces, pids)


@pytest.mark.lab
@needs_lab
@needs_ssh
def test_the_switch_and_server_are_restored_after_exit(tmp_path: Path) -> None:
    with Lab(PRESETS["wifi-ac"]) as lab:
        before = netns.ip("-n", lab.server_ns, "route"), netns.read_sysctl(lab.client_ns, "net.ipv4.ip_forward")
        with ClientHosts(lab, 1, tmp_path / "fleet"):
            assert "10.78.0.0/16" in netns.ip("-n", lab.server_ns, "route")
        after = netns.ip("-n", lab.server_ns, "route"), netns.read_sysctl(lab.client_ns, "net.ipv4.ip_forward")
        assert after == before and "wbk1" not in netns.ip("-n", lab.client_ns, "link")


@pytest.mark.lab
@needs_lab
@needs_ssh
def test_two_clients_cross_the_kernel_link(tmp_path: Path) -> None:
    with Lab(PRESETS["10ge"]) as lab, ClientHosts(lab, 2, tmp_path / "fleet") as fleet:
        assert lab.describe()["kernel_link"]
        _all_exchange(lab, fleet)
        namespaces = [c.namespace for c in fleet.clients]
    _assert_all_gone(namespaces, [])


def _spawn_fleet_owner(work: Path) -> subprocess.Popen[str]:
    code = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from workbench.lab import Lab, PRESETS
        from workbench.lab.client_hosts import ClientHosts
        with Lab(PRESETS["10ge"]) as lab, ClientHosts(lab, 2, Path({str(work)!r})) as fleet:
            print(*[c.namespace for c in fleet.clients], flush=True)
            print(*fleet.sshd_pids().values(), flush=True)
            time.sleep(60)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)


@pytest.mark.lab
@needs_lab
@needs_ssh
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_signalled_owner_leaves_no_clients(sig: signal.Signals, tmp_path: Path) -> None:
    owner = _spawn_fleet_owner(tmp_path / "fleet")
    try:
        namespaces = owner.stdout.readline().split()  # type: ignore[union-attr]
        pids = [int(p) for p in owner.stdout.readline().split()]  # type: ignore[union-attr]
        assert len(namespaces) == 2 and len(pids) == 2
        assert all(netns.exists(n) for n in namespaces) and all(pid_alive(p) for p in pids)
        owner.send_signal(sig)  # SIGKILL: no teardown runs, the clients and their sshds stay behind
        assert owner.wait(timeout=15) != 0
    finally:
        owner.kill()
        owner.wait()
    if sig == signal.SIGKILL:
        assert all(netns.exists(n) for n in namespaces)
        removed = cleanup_stale()
        assert all(any(n in r for r in removed) for n in namespaces), removed
    deadline = time.monotonic() + 3
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)  # an orphaned sshd is reaped by init, not by us
    _assert_all_gone(namespaces, pids)


@pytest.mark.lab
@needs_lab
@needs_ssh
def test_an_sshd_that_cannot_start_is_one_line_naming_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_hosts, "SSHD", "/bin/false")  # exits at once, as an sshd refusing its config would
    with Lab(PRESETS["10ge"]) as lab:
        fleet = ClientHosts(lab, 2, tmp_path / "fleet")
        with pytest.raises(WorkbenchError) as raised, fleet:
            pass
        assert "client1's sshd exited" in raised.value.one_line() and "\n" not in raised.value.one_line()
        assert fleet.sshd_pids() == {}
        assert "wbk1" not in netns.ip("-n", lab.client_ns, "link")
        assert netns.read_sysctl(lab.client_ns, "net.ipv4.ip_forward") == "0"
    _assert_all_gone([c.namespace for c in fleet.clients], [])

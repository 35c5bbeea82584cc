"""rsync over SSH and to the rsync daemon against the real servers: the client contract and confinement."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.contract.suite import ClientContract, Counter
from tests.helpers import write_random
from workbench.protocols.base import ClientOptions
from workbench.protocols.rsync import RsyncDaemonClient, RsyncSshClient
from workbench.shared.errors import NotFoundError, WorkbenchError

if TYPE_CHECKING:
    from tests.ssh_fixtures import Served


class TestRsyncSshContract(ClientContract):
    client_class = RsyncSshClient

    @pytest.fixture
    def served_root(self, sshd: Served) -> Path:
        return sshd.root

    @pytest.fixture
    def make_client(self, sshd: Served):
        return lambda **opts: RsyncSshClient(sshd.target, ClientOptions(**opts))

    @pytest.fixture
    def bad_client(self, sshd: Served):
        return RsyncSshClient(sshd.bad_target)

    @pytest.fixture
    def stop_server(self, sshd: Served):
        return sshd.stop


class TestRsyncDaemonContract(ClientContract):
    client_class = RsyncDaemonClient

    @pytest.fixture
    def served_root(self, rsyncd: Served) -> Path:
        return rsyncd.root

    @pytest.fixture
    def make_client(self, rsyncd: Served):
        return lambda **opts: RsyncDaemonClient(rsyncd.target, ClientOptions(**opts))

    @pytest.fixture
    def bad_client(self, rsyncd: Served):
        return RsyncDaemonClient(rsyncd.bad_target)

    @pytest.fixture
    def stop_server(self, rsyncd: Served):
        return rsyncd.stop


def test_rsync_over_ssh_cannot_read_outside_the_root(sshd: Served, tmp_path: Path) -> None:
    secret = write_random(sshd.root.parent / "secret.bin", 1000)
    with RsyncSshClient(sshd.target) as client:
        for path in ("../secret.bin", "files/../../secret.bin", str(sshd.root.parent / "secret.bin"), "/etc/passwd"):
            with pytest.raises(WorkbenchError):
                client.download(path, tmp_path / "leak.bin", Counter())
            leaked = tmp_path / "leak.bin"
            assert not leaked.exists() or leaked.read_bytes() != secret
            leaked.unlink(missing_ok=True)


def test_rsync_over_ssh_cannot_write_outside_the_root(sshd: Served, tmp_path: Path) -> None:
    write_random(tmp_path / "x.bin", 1000)
    with RsyncSshClient(sshd.target) as client, pytest.raises(WorkbenchError):
        client.upload(tmp_path / "x.bin", "../escaped.bin", Counter())
    assert not (sshd.root.parent / "escaped.bin").exists()


def test_rsync_daemon_is_chrooted_and_never_writes_as_root(rsyncd: Served, tmp_path: Path) -> None:
    secret = write_random(rsyncd.root.parent / "secret.bin", 1000)
    write_random(tmp_path / "up.bin", 5000)
    with RsyncDaemonClient(rsyncd.target) as client:
        with pytest.raises(NotFoundError):
            client.download("../secret.bin", tmp_path / "leak.bin", Counter())
        client.upload(tmp_path / "up.bin", "incoming/up.bin", Counter())
    assert not (tmp_path / "leak.bin").exists() or (tmp_path / "leak.bin").read_bytes() != secret
    st = (rsyncd.root / "incoming" / "up.bin").stat()
    # Started as root, the daemon transfers as an unprivileged uid/gid of its own; otherwise as the invoking user.
    expected = rsyncd.server.transfer_ids or (os.getuid(), os.getgid())  # type: ignore[attr-defined]
    assert (st.st_uid, st.st_gid) == expected
    assert st.st_uid != 0 or os.getuid() != 0


def test_compress_option_still_copies_exactly(rsyncd: Served, tmp_path: Path) -> None:
    data = b"workbench " * 100_000
    (rsyncd.root / "text.txt").write_bytes(data)
    counter = Counter()
    with RsyncDaemonClient(rsyncd.target, ClientOptions(compress=True)) as client:
        assert client.details().compress is True
        client.download("text.txt", tmp_path / "text.txt", counter)
    assert (tmp_path / "text.txt").read_bytes() == data
    assert counter.total == len(data)


def test_no_temp_dir_left_behind(rsyncd: Served, tmp_path: Path) -> None:
    write_random(rsyncd.root / "a.bin", 10_000)
    with RsyncDaemonClient(rsyncd.target) as client:
        client.download("a.bin", tmp_path / "a.bin", Counter())
        with pytest.raises(NotFoundError):
            client.download("missing.bin", tmp_path / "m.bin", Counter())
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".wb-rsync")) == []


def test_the_rsync_daemon_writes_beneath_a_directory_serve_made(tmp_path: Path) -> None:
    """A run's upload directory is made by serve (root); the daemon, transferring as its own uid, writes inside it."""
    from tests.helpers import free_port
    from workbench.protocols.control import Control
    from workbench.server.daemons import supervisor
    from workbench.shared import credentials as creds_mod
    from workbench.shared.target import DEFAULT_PORTS, Target

    root, state = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    ports = {s: free_port() for s in ("http", "ftp", "tcp", "iperf3", "rsync")}
    supervisor.up(root, "127.0.0.1", state, only=["serve", "rsyncd"], ports=ports)
    try:
        creds = creds_mod.read(state / "credentials.json")
        target = Target("127.0.0.1", creds, ports={**DEFAULT_PORTS, **ports}, remote_root=str(root))
        with Control(target) as control:
            control.mkdir("incoming/run-1-abc")
        write_random(tmp_path / "up.bin", 5000)
        with RsyncDaemonClient(target) as client:
            client.mkdir("incoming/run-1-abc/rsync-daemon-5K")
            client.upload(tmp_path / "up.bin", "incoming/run-1-abc/rsync-daemon-5K/up.bin", Counter())
        landed = root / "incoming/run-1-abc/rsync-daemon-5K/up.bin"
        assert landed.read_bytes() == (tmp_path / "up.bin").read_bytes()
    finally:
        supervisor.down(state)

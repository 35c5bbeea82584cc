"""The one contract every protocol client passes against its real server (fsspec-style).

A protocol opts in with a test class that inherits ClientContract and provides these fixtures:

- ``served_root``: Path of the directory the real server exports (remote paths are relative to it);
- ``make_client``: callable(**ClientOptions overrides) -> an unconnected Client for the good credentials;
- ``bad_client``: an unconnected Client whose password is wrong;
- ``stop_server``: callable that kills the server (used mid-transfer).

Files are written to / read from ``served_root`` directly to check what really landed.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.helpers import write_random
from workbench.protocols.base import ClientOptions, FileCopy
from workbench.shared.errors import AuthError, NotFoundError, WorkbenchError

if TYPE_CHECKING:
    from tests.ssh_fixtures import Served

ODD_SIZE = 3 * 1024 * 1024 + 12345  # not a multiple of any request size


class Counter:
    def __init__(self) -> None:
        self.total = 0

    def __call__(self, n: int) -> None:
        self.total += n


class ClientContract:
    # Files in test_small_file_set_both_ways: a set, with sizes that differ by a byte. A client that starts a login
    # per file of a set (scp downloads) names fewer: the grouping is the same for 6 files as for 40.
    small_set_files = 40

    def test_download_file(self, make_client, served_root: Path, tmp_path: Path) -> None:
        data = write_random(served_root / "files" / "one.bin", ODD_SIZE)
        counter = Counter()
        with make_client() as client:
            client.download("files/one.bin", tmp_path / "one.bin", counter)
        assert (tmp_path / "one.bin").read_bytes() == data
        assert counter.total == ODD_SIZE

    def test_upload_file(self, make_client, served_root: Path, tmp_path: Path) -> None:
        data = write_random(tmp_path / "up.bin", ODD_SIZE)
        counter = Counter()
        with make_client() as client:
            client.mkdir("incoming/t1")
            client.upload(tmp_path / "up.bin", "incoming/t1/up.bin", counter)
        assert (served_root / "incoming" / "t1" / "up.bin").read_bytes() == data
        assert counter.total == ODD_SIZE

    def test_upload_overwrites_a_longer_remote_file(self, make_client, served_root: Path, tmp_path: Path) -> None:
        write_random(served_root / "incoming" / "t2" / "over.bin", ODD_SIZE * 2)
        data = write_random(tmp_path / "over.bin", ODD_SIZE)
        with make_client() as client:
            client.mkdir("incoming/t2")
            client.upload(tmp_path / "over.bin", "incoming/t2/over.bin", Counter())
        assert (served_root / "incoming" / "t2" / "over.bin").read_bytes() == data

    def test_download_overwrites_a_longer_local_file(self, make_client, served_root: Path, tmp_path: Path) -> None:
        data = write_random(served_root / "files" / "short.bin", 100_000)
        write_random(tmp_path / "short.bin", 300_000)
        with make_client() as client:
            client.download("files/short.bin", tmp_path / "short.bin", Counter())
        assert (tmp_path / "short.bin").read_bytes() == data

    def test_small_file_set_both_ways(self, make_client, served_root: Path, tmp_path: Path) -> None:
        originals = {
            f"s{i:03d}.bin": write_random(served_root / "files" / "set" / f"s{i:03d}.bin", 4096 + i)
            for i in range(self.small_set_files)
        }
        down = [FileCopy(tmp_path / "down" / n, f"files/set/{n}", len(d)) for n, d in originals.items()]
        (tmp_path / "down").mkdir()
        counter = Counter()
        with make_client() as client:
            client.download_many(down, counter)
            client.mkdir("incoming/set")
            up = [FileCopy(tmp_path / "down" / n, f"incoming/set/{n}", len(d)) for n, d in originals.items()]
            client.upload_many(up, counter)
        for name, data in originals.items():
            assert (tmp_path / "down" / name).read_bytes() == data
            assert (served_root / "incoming" / "set" / name).read_bytes() == data
        assert counter.total == 2 * sum(len(d) for d in originals.values())

    def test_missing_remote_file_is_a_clean_error(self, make_client, tmp_path: Path) -> None:
        with make_client() as client, pytest.raises(NotFoundError):
            client.download("files/does-not-exist.bin", tmp_path / "x.bin", Counter())

    def test_bad_credentials_are_a_clean_error(self, bad_client) -> None:
        with pytest.raises(AuthError):
            bad_client.connect()
        bad_client.close()

    def test_server_stopped_mid_transfer_fails_cleanly(
        self, make_client, served_root: Path, stop_server, tmp_path: Path
    ) -> None:
        # Sparse and large: the server streams it fast, yet it cannot finish before a native client's
        # progress poll (50 ms) notices the first bytes and the server is killed.
        big = served_root / "files" / "big.bin"
        big.parent.mkdir(parents=True, exist_ok=True)
        with open(big, "wb") as fh:
            fh.truncate(1 << 30)
        stopped = threading.Event()

        def stop_after_first_bytes(n: int) -> None:
            if not stopped.is_set():
                stopped.set()
                stop_server()

        client = make_client(stall_timeout_s=5.0)
        client.connect()
        try:
            with pytest.raises(WorkbenchError):
                client.download("files/big.bin", tmp_path / "big.bin", stop_after_first_bytes)
        finally:
            client.close()
        assert stopped.is_set()


class SshdClientContract(ClientContract):
    """The contract for an SSH-based client against workbench's own sshd (the `sshd` fixture, behind the gate
    that confines each session to the served root). A subclass names its `client_class`."""

    client_class: type

    @pytest.fixture
    def served_root(self, sshd: Served):
        return sshd.root

    @pytest.fixture
    def make_client(self, sshd: Served):
        return lambda **opts: self.client_class(sshd.target, ClientOptions(**opts))

    @pytest.fixture
    def bad_client(self, sshd: Served):
        return self.client_class(sshd.bad_target)

    @pytest.fixture
    def stop_server(self, sshd: Served):
        return sshd.stop

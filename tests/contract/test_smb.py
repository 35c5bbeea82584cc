"""The SMB clients (pysmb, smbprotocol, smbclient) against a real smbd on loopback."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.contract.suite import ClientContract, Counter
from tests.helpers import free_port, write_random
from tests.smb_fixtures import SmbdRunner, bad_client_for, client_factory
from workbench.protocols import smb_fastpath, smbprotocol_client
from workbench.protocols.base import Client, ClientOptions, FileCopy
from workbench.protocols.smb import PysmbClient
from workbench.protocols.smbclient_cli import SmbclientClient
from workbench.protocols.smbprotocol_client import SmbprotocolClient
from workbench.server.daemons.smbd import Smbd
from workbench.shared.errors import NetworkError, NotFoundError, UsageError


@pytest.fixture
def served_root(smbd: Smbd) -> Path:
    """The share's directory (ClientContract's name for it; this module's own tests use it too)."""
    return smbd.ctx.root


class _SmbContract(ClientContract):
    client_class: type[Client]

    @pytest.fixture
    def stop_server(self, smbd_runner: SmbdRunner) -> Callable[[], None]:
        return smbd_runner.stop

    @pytest.fixture
    def make_client(self, smbd, smbd_runner: SmbdRunner) -> Callable[..., Client]:
        return client_factory(self.client_class, smbd_runner)

    @pytest.fixture
    def bad_client(self, smbd, smbd_runner: SmbdRunner) -> Client:
        return bad_client_for(self.client_class, smbd_runner)


class TestPysmbContract(_SmbContract):
    client_class = PysmbClient


def test_pysmb_details_show_the_request_limit(make_pysmb) -> None:
    with make_pysmb() as client:
        info = client.details()
    assert info.dialect == "2.0.2"
    assert info.request_bytes == 64 * 1024
    assert info.requests_in_flight == 1


@pytest.fixture
def make_pysmb(smbd, smbd_runner: SmbdRunner) -> Callable[..., Client]:
    return client_factory(PysmbClient, smbd_runner)


def test_pysmb_mkdir_is_idempotent(make_pysmb, served_root, tmp_path) -> None:
    with make_pysmb() as client:
        client.mkdir("incoming/a/b")
        client.mkdir("incoming/a/b")
        write_random(tmp_path / "x.bin", 10)
        client.upload(tmp_path / "x.bin", "incoming/a/b/x.bin", Counter())
    assert (served_root / "incoming" / "a" / "b" / "x.bin").stat().st_size == 10


class TestSmbprotocolContract(_SmbContract):
    client_class = SmbprotocolClient


class TestSmbclientContract(_SmbContract):
    client_class = SmbclientClient


@pytest.fixture
def make_smbprotocol(smbd, smbd_runner: SmbdRunner) -> Callable[..., Client]:
    return client_factory(SmbprotocolClient, smbd_runner)


def test_smbprotocol_details_show_large_signed_pipelined_requests(make_smbprotocol) -> None:
    with make_smbprotocol() as client:
        info = client.details()
    assert info.dialect == "3.1.1"
    assert info.request_bytes == 8 * 1024 * 1024
    assert info.requests_in_flight == smbprotocol_client.DEPTH
    assert info.signing is True
    assert info.encryption is False
    assert info.zero_copy is True


@pytest.mark.parametrize("zero_copy", [True, False], ids=["zero-copy", "library-path"])
@pytest.mark.parametrize(("request_bytes", "depth"), [(1 << 20, 4), (8 << 20, 2)])
def test_smbprotocol_pipelines_many_requests_both_ways(
    make_smbprotocol, served_root, tmp_path, monkeypatch, request_bytes: int, depth: int, zero_copy: bool
) -> None:
    monkeypatch.setattr(smbprotocol_client, "MAX_REQUEST", request_bytes)
    if not zero_copy:
        monkeypatch.setattr(smb_fastpath.FastPath, "attach", classmethod(lambda cls, *a: None))
    size = 20 * 1024 * 1024 + 12345  # several requests, the last one short
    data = write_random(tmp_path / "up.bin", size)
    up, down = Counter(), Counter()
    with make_smbprotocol() as client:
        client.depth = depth
        assert client.details().zero_copy is zero_copy
        client.mkdir("incoming/pipe")
        client.upload(tmp_path / "up.bin", "incoming/pipe/f.bin", up)
        client.download("incoming/pipe/f.bin", tmp_path / "down.bin", down)
    assert (served_root / "incoming" / "pipe" / "f.bin").read_bytes() == data
    assert (tmp_path / "down.bin").read_bytes() == data
    assert up.total == down.total == size


@pytest.mark.parametrize(("dialect", "algorithm"), [(0x0311, 2), (0x0311, 1), (0x0300, None), (0x0210, None)])
def test_piecewise_signature_matches_the_library(dialect: int, algorithm: int | None) -> None:
    from smbprotocol.connection import Connection

    conn = Connection(uuid.uuid4(), "127.0.0.1", 445)
    conn.dialect, conn.signing_algorithm_id = dialect, algorithm
    key = os.urandom(16)
    message = os.urandom(64 + 5000)
    zeroed = message[:48] + bytes(16) + message[64:]
    for response in (False, True):
        expected = conn._generate_signature(zeroed, key, 77, response, 0x0009)
        pieces = [zeroed[:48], zeroed[48:64], memoryview(zeroed)[64:100], zeroed[100:]]
        assert smb_fastpath._signer(conn, key)(pieces, 77, response) == expected


def test_smbclient_rejects_paths_its_command_parser_would_split(make_smbclient, tmp_path) -> None:
    with make_smbclient() as client, pytest.raises(UsageError):
        client.download('files/a";rm x', tmp_path / "x", Counter())


@pytest.fixture
def make_smbclient(smbd, smbd_runner: SmbdRunner) -> Callable[..., Client]:
    return client_factory(SmbclientClient, smbd_runner)


def test_smbclient_keeps_the_password_off_argv(make_smbclient, smbd_runner: SmbdRunner) -> None:
    client = make_smbclient()
    client.connect()
    try:
        argv = " ".join(client._argv())
        auth = client._auth_file
        assert smbd_runner.ctx.credentials.password not in argv
        assert auth.stat().st_mode & 0o077 == 0
    finally:
        client.close()
    assert not auth.exists()


def _smbstatus_rows(smbd) -> list[str]:
    done = subprocess.run(["smbstatus", "-s", str(smbd.conf_path), "-p"], capture_output=True, text=True, timeout=30)
    return [ln for ln in done.stdout.splitlines() if "127.0.0.1" in ln]


@pytest.mark.parametrize(
    ("cls", "protocol", "signing"), [(PysmbClient, "SMB2_02", "-"), (SmbprotocolClient, "SMB3_11", "GMAC")]
)
def test_details_agree_with_what_the_server_negotiated(smbd, smbd_runner: SmbdRunner, cls, protocol, signing) -> None:
    before = set(_smbstatus_rows(smbd))
    with client_factory(cls, smbd_runner)() as client:
        info = client.details()
        rows = [r for r in _smbstatus_rows(smbd) if r not in before]
    assert len(rows) == 1, rows
    columns = rows[0].split()
    assert protocol in columns
    assert signing in columns[-1]
    assert info.signing is (signing != "-")
    assert info.dialect == {"SMB2_02": "2.0.2", "SMB3_11": "3.1.1"}[protocol]


ALL_CLIENTS = [PysmbClient, SmbprotocolClient, SmbclientClient]


@pytest.mark.parametrize("cls", ALL_CLIENTS, ids=lambda c: c.name)
def test_nothing_listening_is_a_network_error(cls: type[Client], smbd_runner: SmbdRunner) -> None:
    target = dataclasses.replace(smbd_runner.target(), ports={"smb": free_port()})
    client = cls(target, ClientOptions(stall_timeout_s=5.0))
    with pytest.raises(NetworkError):
        client.connect()
    client.close()


@pytest.mark.parametrize("cls", ALL_CLIENTS, ids=lambda c: c.name)
def test_unknown_share_is_not_found(cls: type[Client], smbd, smbd_runner: SmbdRunner, tmp_path) -> None:
    target = dataclasses.replace(smbd_runner.target(), share="no-such-share")
    client = cls(target, ClientOptions(stall_timeout_s=5.0))
    with pytest.raises(NotFoundError) as info:
        client.connect()
        client.download("files/x.bin", tmp_path / "x.bin", Counter())
    client.close()
    assert "share" in info.value.one_line()


@pytest.mark.parametrize("cls", ALL_CLIENTS, ids=lambda c: c.name)
def test_a_stalled_server_fails_within_the_timeout(
    cls: type[Client], smbd, smbd_runner: SmbdRunner, served_root, tmp_path
) -> None:
    write_random(served_root / "files" / "stall.bin", 128 * 1024 * 1024)
    pgid = os.getpgid(smbd.proc.pid)
    frozen: list[float] = []
    lock = threading.Lock()

    def freeze_once(n: int = 0) -> None:
        with lock:
            if not frozen:
                frozen.append(time.monotonic())
                os.killpg(pgid, signal.SIGSTOP)  # alive but silent: only a timeout can end the copy

    client = cls(smbd_runner.target(), ClientOptions(stall_timeout_s=2.0))
    client.connect()
    # A native client's progress is polled: on a fast machine a copy can end before its first report, so a
    # timer freezes the server mid-copy too, whichever comes first.
    timer = threading.Timer(0.03, freeze_once)
    try:
        timer.start()
        with pytest.raises(NetworkError):
            client.download("files/stall.bin", tmp_path / "stall.bin", freeze_once)
        assert frozen, "the copy finished before the server could be frozen"
        assert time.monotonic() - frozen[0] < 30
    finally:
        timer.cancel()
        os.killpg(pgid, signal.SIGCONT)
        client.close()


def test_smbprotocol_sets_mix_compounds_and_long_copies(make_smbprotocol, served_root, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(smbprotocol_client, "MAX_REQUEST", 64 * 1024)  # files from 64 KiB on go the long way
    sizes = [0, 1, 4096, 64 * 1024 - 1, 64 * 1024, 200_000]
    originals = {
        f"m{i}.bin": write_random(served_root / "files" / "mixed" / f"m{i}.bin", n) for i, n in enumerate(sizes)
    }
    (tmp_path / "down").mkdir()
    down = [FileCopy(tmp_path / "down" / n, f"files/mixed/{n}", len(d)) for n, d in originals.items()]
    up = [FileCopy(tmp_path / "down" / n, f"incoming/mixed/{n}", len(d)) for n, d in originals.items()]
    counter = Counter()
    with make_smbprotocol() as client:
        client.download_many(down, counter)
        client.mkdir("incoming/mixed")
        client.upload_many(up, counter)
    for name, data in originals.items():
        assert (tmp_path / "down" / name).read_bytes() == data
        assert (served_root / "incoming" / "mixed" / name).read_bytes() == data
    assert counter.total == 2 * sum(sizes)


def test_smbprotocol_set_copes_with_a_file_larger_than_declared(make_smbprotocol, served_root, tmp_path) -> None:
    data = write_random(served_root / "files" / "grown.bin", 50_000)
    counter = Counter()
    with make_smbprotocol() as client:
        client.download_many([FileCopy(tmp_path / "grown.bin", "files/grown.bin", 1000)], counter)
    assert (tmp_path / "grown.bin").read_bytes() == data


def test_smbprotocol_set_with_a_missing_file_fails_and_the_session_survives(
    make_smbprotocol, served_root, tmp_path
) -> None:
    data = write_random(served_root / "files" / "here.bin", 5000)
    files = [
        FileCopy(tmp_path / "a.bin", "files/here.bin", 5000),
        FileCopy(tmp_path / "b.bin", "files/not-here.bin", 5000),
        FileCopy(tmp_path / "c.bin", "files/here.bin", 5000),
    ]
    with make_smbprotocol() as client:
        with pytest.raises(NotFoundError):
            client.download_many(files, Counter())
        client.download("files/here.bin", tmp_path / "again.bin", Counter())
        assert client._conn.outstanding_requests == {}
    assert (tmp_path / "again.bin").read_bytes() == data

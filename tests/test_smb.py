"""The SMB clients (pysmb, smbprotocol, smbclient) against a real smbd on loopback."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from protocols.base import Client
from protocols.smb import PysmbClient
from protocols.smbclient_cli import SmbclientClient
from protocols.smbprotocol_client import SmbprotocolClient
from tests.contract import ClientContract, Counter
from tests.helpers import write_random
from tests.smb_fixtures import SmbdRunner, bad_client_for, client_factory, served_root, smbd, smbd_runner, stop_server

__all__ = ["served_root", "smbd", "smbd_runner", "stop_server"]  # fixtures, imported for pytest


class _SmbContract(ClientContract):
    client_class: type[Client]

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
    assert info["dialect"] == "2.0.2"
    assert info["request_bytes"] == 64 * 1024
    assert info["requests_in_flight"] == 1


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

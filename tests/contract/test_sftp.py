"""paramiko and OpenSSH sftp against the real sshd: the client contract, host keys, confinement."""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.contract.suite import Counter, SshdClientContract
from tests.helpers import write_random
from workbench.protocols.base import ClientOptions
from workbench.protocols.openssh_sftp import OpenSSHSftpClient
from workbench.protocols.sftp import ParamikoClient
from workbench.shared.errors import AuthError, NotFoundError, WorkbenchError

if TYPE_CHECKING:
    from tests.ssh_fixtures import Served


class TestParamikoContract(SshdClientContract):
    client_class = ParamikoClient


class TestOpenSSHSftpContract(SshdClientContract):
    client_class = OpenSSHSftpClient


@pytest.mark.parametrize("client_class", [ParamikoClient, OpenSSHSftpClient])
def test_unknown_host_key_is_refused(client_class: type, sshd: Served, tmp_path: Path) -> None:
    other = tmp_path / "other_known_hosts"
    other.write_text(sshd.target.credentials.known_hosts.read_text().replace("[127.0.0.1]", "[127.0.0.2]"))
    target = replace(sshd.target, credentials=replace(sshd.target.credentials, known_hosts=other))
    client = client_class(target)
    with pytest.raises(AuthError):
        client.connect()
    client.close()


@pytest.mark.parametrize("client_class", [ParamikoClient, OpenSSHSftpClient])
def test_cannot_read_outside_the_root(client_class: type, sshd: Served, tmp_path: Path) -> None:
    secret = write_random(sshd.root.parent / "secret.bin", 1000)
    with client_class(sshd.target) as client:
        for path in ("../secret.bin", str(sshd.root.parent / "secret.bin"), "/etc/shadow", "/etc/hostname"):
            with pytest.raises(WorkbenchError):
                client.download(path, tmp_path / "leak.bin", Counter())
            leaked = tmp_path / "leak.bin"
            assert not leaked.exists() or leaked.read_bytes() != secret
            leaked.unlink(missing_ok=True)


@pytest.mark.parametrize("client_class", [ParamikoClient, OpenSSHSftpClient])
def test_cannot_write_outside_the_root(client_class: type, sshd: Served, tmp_path: Path) -> None:
    write_random(tmp_path / "x.bin", 1000)
    with client_class(sshd.target) as client, pytest.raises(WorkbenchError):
        client.upload(tmp_path / "x.bin", "../escaped.bin", Counter())
    assert not (sshd.root.parent / "escaped.bin").exists()


def test_paramiko_details_and_cipher(sshd: Served) -> None:
    with ParamikoClient(sshd.target) as client:
        details = client.details()
        assert client._transport.remote_cipher == details.cipher == "aes128-gcm@openssh.com"
    in_flight = details.request_bytes * details.requests_in_flight
    # Bounded prefetch that the SSH window never throttles, below the 16 MiB window trap.
    assert 0 < in_flight <= details.ssh_window_bytes < 16 * 1024 * 1024


def test_paramiko_sends_each_request_at_once(sshd: Served) -> None:
    """Nagle's algorithm is off on paramiko's connection, as OpenSSH turns it off on its own: with it on, a
    request's last partial segment waited for the acknowledgement of everything before it."""
    with ParamikoClient(sshd.target) as client:
        sock = client._transport.sock
        assert isinstance(sock, socket.socket)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_paramiko_honours_cipher_option(sshd: Served) -> None:
    with ParamikoClient(sshd.target, ClientOptions(cipher="aes128-ctr")) as client:
        assert client._transport.remote_cipher == "aes128-ctr"


def test_openssh_missing_file_in_a_set_is_not_found(sshd: Served, tmp_path: Path) -> None:
    from workbench.protocols.base import FileCopy

    with OpenSSHSftpClient(sshd.target) as client, pytest.raises(NotFoundError):
        client.download_many([FileCopy(tmp_path / "a.bin", "files/none.bin", 10)], Counter())


def test_paramiko_can_skip_host_key_verification_when_asked(sshd: Served, tmp_path: Path) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    target = replace(sshd.target, credentials=replace(sshd.target.credentials, known_hosts=empty))
    with pytest.raises(AuthError):
        ParamikoClient(target).connect()
    with ParamikoClient(target, ClientOptions(verify_host_keys=False)) as client:
        client.mkdir("incoming/unverified")
    assert (sshd.root / "incoming" / "unverified").is_dir()

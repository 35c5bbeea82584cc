"""Which of workbench's servers a lab starts: the ones its selected clients copy over, and `serve` always."""

from __future__ import annotations

import pytest

from workbench.lab.run import ALWAYS_STARTED, lab_servers
from workbench.protocols import registry
from workbench.server.daemons.supervisor import server_classes

EVERY = [cls.name for cls in server_classes()]


def servers(spec: str) -> list[str]:
    return lab_servers(e.label for e in registry.select(spec))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("http", ["serve"]),
        ("ftp/curl,http/aiohttp", ["serve"]),
        ("sftp/paramiko", ["serve", "sshd"]),
        ("scp", ["serve", "sshd"]),
        ("rsync/ssh", ["serve", "sshd"]),
        ("rsync/daemon", ["serve", "rsyncd"]),
        ("rsync", ["serve", "sshd", "rsyncd"]),
        ("smb/cifs", ["serve", "smbd"]),
        ("sftp/sshfs", ["serve", "sshd"]),
        ("afp/python", ["serve", "afpd"]),
        ("afp/afp_speedtest", ["serve", "afpd"]),
        ("http,smb/smbclient,afp/python", ["serve", "smbd", "afpd"]),
    ],
)
def test_selected_clients_start_their_servers_only(spec: str, expected: list[str]) -> None:
    assert servers(spec) == expected


def test_every_client_selected_starts_every_server() -> None:
    assert servers("all") == EVERY


def test_every_known_client_has_a_server_besides_falling_back() -> None:
    # a client of no known family would start everything (safe but slow): each one must name its own
    for entry in registry.KNOWN_CLIENTS:
        assert lab_servers([entry.label]) != EVERY, entry.label


def test_a_client_of_no_known_family_starts_every_server() -> None:
    assert lab_servers(["http/aiohttp", "gopher/lynx"]) == EVERY


def test_serve_always_started_and_known_to_the_supervisor() -> None:
    assert set(ALWAYS_STARTED) <= set(EVERY)
    assert lab_servers([]) == list(ALWAYS_STARTED)

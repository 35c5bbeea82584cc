"""Free ports to listen on: different ones, each bindable at once; whether a port listens, from the kernel's tables."""

from __future__ import annotations

import socket

import pytest

from workbench.shared.net import free_ports, listening


@pytest.mark.parametrize("bind", ["127.0.0.1", "::1"])
def test_free_ports_are_different_and_free(bind: str) -> None:
    ports = free_ports(bind, 12)
    assert len(set(ports)) == 12 and all(0 < p < 65536 for p in ports)
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    holders = [socket.socket(family, socket.SOCK_STREAM) for _ in ports]
    try:
        for sock, port in zip(holders, ports, strict=True):
            sock.bind((bind, port))  # raises when one was not free
    finally:
        for sock in holders:
            sock.close()


@pytest.mark.parametrize("bind", ["127.0.0.1", "::1"])
def test_a_port_listens_once_its_socket_does_not_when_only_bound(bind: str) -> None:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((bind, 0))
        port = sock.getsockname()[1]
        assert not listening(port)
        sock.listen()
        assert listening(port)

"""`lab --smb-server` on the lab's server host: its smbd answers a client as asked (highest dialect, signing
required, encryption required), read from what the server itself said during negotiation and session set-up."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.helpers import lab_unavailable
from workbench.lab.link import Lab, LinkSpec
from workbench.server.daemons import supervisor
from workbench.server.daemons.smbd import Smbd, SmbServerOptions
from workbench.shared import credentials as creds_mod
from workbench.shared.paths import CREDENTIALS_FILE
from workbench.shared.target import DEFAULT_PORTS

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(lab_unavailable() is not None, reason=lab_unavailable() or ""),
    pytest.mark.skipif(Smbd.unavailable_reason() is not None, reason=Smbd.unavailable_reason() or ""),
]

KERNEL_LINK = LinkSpec(rate_bits_per_s=1_000_000_000, rtt_ms=0.0)  # no delay line: quick to build
SIGNING_REQUIRED = 0x02  # MS-SMB2 2.2.4: SMB2_NEGOTIATE_SIGNING_REQUIRED in the server's SecurityMode
DIALECT = {0x0202: "2.0.2", 0x0210: "2.1", 0x0300: "3.0", 0x0302: "3.0.2", 0x0311: "3.1.1"}


def _what_the_server_said(lab: Lab, state: Path) -> tuple[str, bool, bool]:
    """(dialect, whether the server requires signing, whether it encrypts the session) for a client that
    offers every dialect and does not ask for encryption, once it has opened the share. The client signs: Samba
    refuses an unsigned session's tree connect even when signing is merely offered; whether the server requires
    it is its own word, the SecurityMode of its negotiate response."""
    from smbprotocol.connection import Connection
    from smbprotocol.session import Session
    from smbprotocol.tree import TreeConnect

    creds = creds_mod.read(state / CREDENTIALS_FILE)
    with lab.in_client():
        conn = Connection(uuid.uuid4(), lab.server_addr, DEFAULT_PORTS["smb"], require_signing=True)
        conn.connect(timeout=10)
        try:
            session = Session(conn, creds.user, creds.password, require_encryption=False, auth_protocol="ntlm")
            session.connect()
            TreeConnect(session, rf"\\{lab.server_addr}\workbench").connect()  # the share opens as asked
            return DIALECT[conn.dialect], bool(conn.server_security_mode & SIGNING_REQUIRED), bool(session.encrypt_data)
        finally:
            conn.disconnect(close=True, timeout=5)


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        (None, ("3.1.1", False, False)),  # workbench's smbd as it always was: nothing imposed
        ("signing=required,max-dialect=2.0.2", ("2.0.2", True, False)),
        ("encryption=required,max-dialect=3.0", ("3.0", False, True)),
    ],
)
def test_the_lab_smbd_answers_as_asked(tmp_path: Path, asked: str | None, expected: tuple[str, bool, bool]) -> None:
    options = SmbServerOptions.parse(asked).to_json() if asked else None
    root, state = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    with Lab(KERNEL_LINK) as lab:
        servers = supervisor.up(root, lab.server_addr, state, only=["smbd"], netns=lab.server_ns, smb_server=options)
        assert servers.servers[0]["ports"] == {"smb": DEFAULT_PORTS["smb"]}
        try:
            assert _what_the_server_said(lab, state) == expected
        finally:
            supervisor.down(state)

"""What each SMB client says it negotiated, against a real smbd, with the client's options set both ways and
against servers that require signing or encryption (smbd's SmbServerOptions, as the lab's --smb-server sets).

Every figure read back here comes from the client's own session (pysmb, smbprotocol) or output (smbclient).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.contract.suite import Counter
from tests.helpers import write_random
from tests.smb_fixtures import SmbdRunner, client_factory
from workbench.protocols.base import Client
from workbench.protocols.details import ClientDetails
from workbench.protocols.smb import PysmbClient
from workbench.protocols.smbclient_cli import SmbclientClient
from workbench.protocols.smbprotocol_client import SmbprotocolClient
from workbench.server.daemons.smbd import Smbd
from workbench.shared.cryptocost import ENCRYPTION_CIPHERS
from workbench.shared.errors import UnavailableError, WorkbenchError

MiB = 1 << 20


def _negotiated(make: Callable[..., Client], **options: object) -> ClientDetails:
    with make(stall_timeout_s=20.0, **options) as client:
        return client.details()


def _round_trip(make: Callable[..., Client], tmp_path: Path, root: Path, **options: object) -> ClientDetails:
    """Upload and download one file with these options; the bytes must come back whole."""
    source = tmp_path / "up.bin"
    write_random(source, 3 * MiB + 17)
    back = tmp_path / "back.bin"
    with make(stall_timeout_s=20.0, **options) as client:
        client.mkdir("incoming/negotiated")
        client.upload(source, "incoming/negotiated/x.bin", Counter())
        client.download("incoming/negotiated/x.bin", back, Counter())
        info = client.details()
    assert (root / "incoming" / "negotiated" / "x.bin").read_bytes() == source.read_bytes()
    assert back.read_bytes() == source.read_bytes()
    return info


@pytest.fixture
def pysmb(smbd: Smbd, smbd_runner: SmbdRunner) -> Callable[..., Client]:
    return client_factory(PysmbClient, smbd_runner)


@pytest.fixture
def smbprotocol(smbd: Smbd, smbd_runner: SmbdRunner) -> Callable[..., Client]:
    return client_factory(SmbprotocolClient, smbd_runner)


@pytest.fixture
def smbclient(smbd: Smbd, smbd_runner: SmbdRunner) -> Callable[..., Client]:
    if reason := SmbclientClient.unavailable_reason():
        pytest.skip(reason)
    return client_factory(SmbclientClient, smbd_runner)


def _strict_runner(base: Path, **server: str) -> Iterator[SmbdRunner]:
    runner = SmbdRunner(base)
    runner.ctx = dataclasses.replace(runner.ctx, smb_server=server)
    runner.server = Smbd(runner.ctx)
    runner.ensure()
    try:
        yield runner
    finally:
        runner.stop()


@pytest.fixture(scope="module")
def signing_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SmbdRunner]:
    """An smbd that requires signing of every session ("server signing = mandatory")."""
    yield from _strict_runner(tmp_path_factory.mktemp("smbd-signing"), signing="required")


@pytest.fixture(scope="module")
def encrypting_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SmbdRunner]:
    """An smbd that requires encryption of every session ("server smb encrypt = required")."""
    yield from _strict_runner(tmp_path_factory.mktemp("smbd-encryption"), encryption="required")


# ---- pysmb: SMB 2.0.2, signing as asked, no encryption


def test_pysmb_by_default_signs_only_what_the_server_requires(pysmb: Callable[..., Client]) -> None:
    got = _negotiated(pysmb)
    assert (got.dialect, got.signing, got.signing_required, got.encryption) == ("2.0.2", False, False, False)
    assert (got.read_bytes, got.credits, got.multichannel, got.negotiated_from) == (64 * 1024, 1, False, "session")


@pytest.mark.parametrize("signing", ["on", "required"])
def test_pysmb_signs_when_asked(pysmb: Callable[..., Client], signing: str) -> None:
    got = _negotiated(pysmb, smb_signing=signing)
    assert (got.signing, got.signing_algorithm) == (True, "HMAC-SHA256")
    assert got.signing_required is (signing == "required")


def test_pysmb_refuses_encryption_as_unavailable(pysmb: Callable[..., Client]) -> None:
    with pytest.raises(UnavailableError, match="pysmb cannot encrypt"):
        _negotiated(pysmb, smb_encryption="required")
    assert _negotiated(pysmb, smb_encryption="off").encryption is False


def test_pysmb_signs_for_a_server_that_requires_it(signing_server: SmbdRunner) -> None:
    got = _negotiated(client_factory(PysmbClient, signing_server))
    assert (got.signing, got.signing_required, got.signing_algorithm) == (True, True, "HMAC-SHA256")


# ---- smbprotocol: signs what it requires, encrypts when asked or told, a dialect on request


def test_smbprotocol_by_default_signs_and_does_not_encrypt(smbprotocol: Callable[..., Client]) -> None:
    got = _negotiated(smbprotocol)
    assert (got.dialect, got.signing, got.signing_required) == ("3.1.1", True, True)
    assert got.signing_algorithm in ("AES-128-CMAC", "AES-128-GMAC")  # 3.1.1 negotiates one of them
    assert (got.encryption, got.encryption_required, got.encryption_cipher) == (False, False, None)
    assert (got.credits, got.multichannel, got.negotiated_from) == (4, False, "session")


def test_smbprotocol_encrypts_when_asked(smbprotocol: Callable[..., Client], smbd: Smbd, tmp_path: Path) -> None:
    got = _round_trip(smbprotocol, tmp_path, smbd.ctx.root, smb_encryption="required")
    assert (got.encryption, got.encryption_required) == (True, True)
    assert got.encryption_cipher in ENCRYPTION_CIPHERS
    assert got.signing is False  # encryption covers signing
    assert got.zero_copy is False  # the fast path leaves encrypted sessions to the library


@pytest.mark.parametrize(
    ("dialect", "algorithm", "request_bytes"),
    [("2.0.2", "HMAC-SHA256", 64 * 1024), ("3.0", "AES-128-CMAC", 8 * MiB)],
)
def test_smbprotocol_keeps_to_the_highest_dialect(
    smbprotocol: Callable[..., Client], dialect: str, algorithm: str, request_bytes: int
) -> None:
    got = _negotiated(smbprotocol, smb_max_dialect=dialect)
    assert (got.dialect, got.signing_algorithm, got.read_bytes) == (dialect, algorithm, request_bytes)


def test_smbprotocol_unsigned_below_3_1_1_and_says_it_cannot_on_3_1_1(smbprotocol: Callable[..., Client]) -> None:
    got = _negotiated(smbprotocol, smb_signing="off", smb_max_dialect="3.0.2")
    assert (got.dialect, got.signing, got.signing_required, got.signing_algorithm) == ("3.0.2", False, False, None)
    # SMB 3.1.1 has the tree connect signed, and the library signs all or nothing: Samba refuses it unsigned
    with pytest.raises(UnavailableError, match=r"smbprotocol cannot go unsigned on SMB 3\.1\.1"):
        _negotiated(smbprotocol, smb_signing="off")


def test_smbprotocol_is_told_to_encrypt_by_the_server(encrypting_server: SmbdRunner, tmp_path: Path) -> None:
    make = client_factory(SmbprotocolClient, encrypting_server)
    got = _round_trip(make, tmp_path, encrypting_server.ctx.root)
    assert (got.encryption, got.encryption_required) == (True, True)
    assert got.encryption_cipher in ENCRYPTION_CIPHERS


# ---- smbclient: read from its own debug output


def test_smbclient_by_default_signs_and_encrypts_nothing(smbclient: Callable[..., Client]) -> None:
    got = _negotiated(smbclient)
    assert (got.dialect, got.signing, got.signing_required) == ("3.1.1", False, False)
    assert (got.encryption, got.encryption_required, got.multichannel) == (False, False, False)
    assert got.negotiated_from == "smbclient output"


def test_smbclient_signs_when_asked(smbclient: Callable[..., Client]) -> None:
    got = _negotiated(smbclient, smb_signing="required")
    assert (got.signing, got.signing_required) == (True, True)
    assert got.signing_algorithm in ("AES-128-CMAC", "AES-128-GMAC")


def test_smbclient_encrypts_when_asked(smbclient: Callable[..., Client], smbd: Smbd, tmp_path: Path) -> None:
    got = _round_trip(smbclient, tmp_path, smbd.ctx.root, smb_encryption="required")
    assert (got.encryption, got.encryption_required, got.signing) == (True, True, False)
    assert got.encryption_cipher is None  # smbclient does not print it: not known


@pytest.mark.parametrize("dialect", ["2.0.2", "3.0.2"])
def test_smbclient_keeps_to_the_highest_dialect(smbclient: Callable[..., Client], dialect: str) -> None:
    assert _negotiated(smbclient, smb_max_dialect=dialect).dialect == dialect


def test_smbclient_follows_a_server_that_requires_signing(signing_server: SmbdRunner) -> None:
    got = _negotiated(client_factory(SmbclientClient, signing_server))
    assert (got.signing, got.signing_required) == (True, True)


def test_smbclient_follows_a_server_that_requires_encryption(encrypting_server: SmbdRunner) -> None:
    got = _negotiated(client_factory(SmbclientClient, encrypting_server))
    assert (got.encryption, got.encryption_required) == (True, True)


def test_pysmb_cannot_reach_a_server_that_requires_encryption(encrypting_server: SmbdRunner) -> None:
    # SMB 2.0.2 has no encryption: the server refuses the session, and the row fails rather than copying plain
    with pytest.raises(WorkbenchError):
        _negotiated(client_factory(PysmbClient, encrypting_server))


def test_smbprotocol_says_when_it_could_not_keep_protection_off(
    signing_server: SmbdRunner, encrypting_server: SmbdRunner
) -> None:
    # the library follows a server's requirement even when told "off": the row says so instead of measuring it
    with pytest.raises(UnavailableError, match="smbprotocol cannot keep signing off"):
        _negotiated(client_factory(SmbprotocolClient, signing_server), smb_signing="off")
    with pytest.raises(UnavailableError, match="smbprotocol cannot keep encryption off"):
        _negotiated(client_factory(SmbprotocolClient, encrypting_server), smb_encryption="off")
    assert _negotiated(client_factory(SmbprotocolClient, encrypting_server)).encryption is True  # its default follows


@pytest.mark.parametrize(("dialect", "used"), [("2.0.2", 4), ("3.1.1", 1)])
def test_smbprotocol_row_counts_the_requests_it_kept_in_flight(
    smbprotocol: Callable[..., Client], smbd: Smbd, tmp_path: Path, dialect: str, used: int
) -> None:
    # 2 MiB: 32 requests of SMB 2.0.2's 64 KiB, four at a time; a single one of SMB 3.1.1's 8 MiB
    write_random(smbd.ctx.root / "inflight.bin", 2 * MiB)
    with smbprotocol(stall_timeout_s=20.0, smb_max_dialect=dialect) as client:
        client.download("inflight.bin", tmp_path / "got.bin", Counter())
        assert client.row_details("download").credits == used
        assert client.row_details("download").credits == 4  # a row with no copy: the configured depth

"""The readers of what an SMB session negotiated: the kernel's /proc/fs/cifs/DebugData and Stats, macOS's
`smbutil statshares -f json`, smbclient's debug output, and the one-line note a row shows.

The DebugData samples follow the seq_printf formats of the kernel's fs/smb/client/cifs_debug.c: a 6.x kernel
(three credit counts, the negotiated cipher line) and a 5.x one (one credit count, no cipher line). The smbutil
samples carry the keys and values smbutil's statshares.c writes with -f json (null for "off").
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.schema_check import assert_valid_run_document, schema_errors
from tests.synthetic_runs import MIB, lab_run
from workbench.cli.export_html import render_html
from workbench.cli.summary import summary_rows
from workbench.core.results import Run
from workbench.protocols.base import ClientOptions
from workbench.protocols.details import ClientDetails
from workbench.protocols.mount import CifsClient, CommandRunner, Outcome, SmbfsClient
from workbench.protocols.smb_negotiated import (
    from_cifs_debugdata,
    from_smbclient_output,
    from_smbutil_json,
    max_in_flight_from_cifs_stats,
    merge,
    negotiated_note,
    sizes_from_cifs_mount_options,
)
from workbench.shared.credentials import Credentials
from workbench.shared.cryptocost import ENCRYPTION_CIPHERS, SIGNING_ALGORITHMS
from workbench.shared.errors import UnavailableError, UsageError
from workbench.shared.target import Target

DEBUGDATA_6X = """Display Internal CIFS Data Structures for Debugging
---------------------------------------------------
CIFS Version 2.47
Features: DFS,FSCACHE,STATS2,DEBUG,ALLOW_INSECURE_LEGACY,CIFS_POSIX,UPCALL(SPNEGO),XATTR,ACL,WITNESS
CIFSMaxBufSize: 16384
Active VFS Requests: 1

Servers:
1) ConnectionId: 0x1 Hostname: 10.99.0.2
ClientGUID: 5F3C2A10-8E11-4A5B-9C77-1D2E3F405162
Number of credits: 8059,1,1 Dialect 0x311 signed
Server capabilities: 0x300067
TCP status: 1 Instance: 1
Local Users To Server: 1 SecMode: 0x3 Req On Wire: 7 Net namespace: 4026532281
In Send: 1 In MaxReq Wait: 0
Compression: no built-in support
Encryption: Negotiated cipher (AES128-GCM)

	Sessions:
	1) Address: 10.99.0.2 Uses: 1 Capability: 0x300067	Session Status: 1
	Security type: RawNTLMSSP  SessionId: 0x2d8a5f40 signed
	User: 0 Cred User: 0

	Shares:
	0) IPC: \\\\10.99.0.2\\IPC$ Mounts: 1 DevInfo: 0x0 Attributes: 0x0
	PathComponentMax: 0 Status: 1 type: 0 Serial Number: 0x0
	Share Capabilities: None	Share Flags: 0x0
	tid: 0x1	Maximal Access: 0x1f00a9

	1) \\\\10.99.0.2\\workbench Mounts: 1 Type: NTFS DevInfo: 0x20 Attributes: 0x1006f
	PathComponentMax: 255 Status: 1 type: DISK Serial Number: 0x9e1c3a55
	Share Capabilities: None Aligned, Partition Aligned,	Share Flags: 0x800
	tid: 0x5	Optimal sector size: 0x200	Maximal Access: 0x1f01ff

	MIDs:
--
"""

DEBUGDATA_5X_ENCRYPTED = """Display Internal CIFS Data Structures for Debugging
---------------------------------------------------
CIFS Version 2.28
Features: DFS,FSCACHE,STATS,DEBUG,ALLOW_INSECURE_LEGACY,WEAK_PW_HASH,CIFS_POSIX,UPCALL(SPNEGO),XATTR,ACL
CIFSMaxBufSize: 16384
Active VFS Requests: 0

Servers:
1) ConnectionId: 0x3 Hostname: nas.local
Number of credits: 512 Dialect 0x300
TCP status: 1 Instance: 1
Local Users To Server: 1 SecMode: 0x1 Req On Wire: 0
In Send: 0 In MaxReq Wait: 0

	Sessions:
	1) Name: 192.168.1.20 Uses: 1 Capability: 0x300047	Session Status: 1
	Security type: RawNTLMSSP  SessionId: 0x7a0c1d2e encrypted
	User: 0 Cred User: 0

	Shares:
	0) IPC: \\\\nas.local\\IPC$ Mounts: 1 DevInfo: 0x0 Attributes: 0x0
	PathComponentMax: 0 Status: 1 type: 0 Serial Number: 0x0 Encrypted

	1) \\\\nas.local\\media Mounts: 1 Type: NTFS DevInfo: 0x20 Attributes: 0x1006f
	PathComponentMax: 255 Status: 1 type: DISK Serial Number: 0x51e2a7b0 Encrypted

	MIDs:
--
2) ConnectionId: 0x4 Hostname: 10.99.0.2
Number of credits: 8190 Dialect 0x202
TCP status: 1 Instance: 1
Local Users To Server: 1 SecMode: 0x1 Req On Wire: 0
In Send: 0 In MaxReq Wait: 0

	Sessions:
	1) Name: 10.99.0.2 Uses: 1 Capability: 0x300047	Session Status: 1
	Security type: RawNTLMSSP  SessionId: 0x11
	User: 0 Cred User: 0

	Extra Channels: 1
		Channel: 2 ConnectionId: 0x5
		Number of credits: 8190 Dialect 0x202
		TCP status: 1 Instance: 1
		Local Users To Server: 1 SecMode: 0x1 Req On Wire: 0
		In Send: 0 In MaxReq Wait: 0

	Shares:
	0) IPC: \\\\10.99.0.2\\IPC$ Mounts: 1 DevInfo: 0x0 Attributes: 0x0
	PathComponentMax: 0 Status: 1 type: 0 Serial Number: 0x0

	MIDs:
--
"""

STATS = """Resources in use
CIFS Session: 1
Share (unique mount targets): 2
SMB Request/Response Buffer: 1 Pool size: 5
SMB Small Req/Resp Buffer: 1 Pool size: 30
Operations (MIDs): 0

0 session 0 share reconnects
Total vfs operations: 97 maximum at one time: 2

Max requests in flight: 3
1) \\\\nas.local\\media
SMBs: 20

Max requests in flight: 16
1) \\\\10.99.0.2\\workbench
SMBs: 412
"""


def _smbutil(**overrides: object) -> str:
    share: dict[str, object] = {
        "share_name": "workbench",
        "SERVER_NAME": "10.99.0.2",
        "USER_ID": 501,
        "SMB_NEGOTIATE": ["SMBV_NEG_SMB2_ENABLED", "SMBV_NEG_SMB3_ENABLED"],
        "SMB_VERSION": "SMB_3.1.1",
        "SMB_ENCRYPT_ALGORITHMS": [f"{c.replace('-', '_')}_ENABLED" for c in ENCRYPTION_CIPHERS],
        "SMB_CURR_ENCRYPT_ALGORITHM": None,
        "SMB_SIGNING_ALGORITHMS": ["AES_128_CMAC_ENABLED", "AES_128_GMAC_ENABLED"],
        "SMB_CURR_SIGN_ALGORITHM": "AES-128-GMAC",
        "SMB_SHARE_TYPE": "DISK",
        "SIGNING_SUPPORTED": True,
        "SIGNING_REQUIRED": False,
        "CLIENT_REQUIRES_SIGNING": True,
        "MULTI_CREDIT_SUPPORTED": True,
        "MULTI_CHANNEL_SUPPORTED": True,
        "ENCRYPTION_SUPPORTED": True,
        "ENCRYPTION_REQUIRED": False,
        "SIGNING_ON": True,
        "SESSION_RECONNECT_TIME": "0:0",
        "SESSION_RECONNECT_COUNT": 0,
    }
    share.update(overrides)
    return json.dumps([share])


def test_debugdata_of_a_6x_kernel_signed_session() -> None:
    got = from_cifs_debugdata(DEBUGDATA_6X, host="10.99.0.2")
    assert got.dialect == "3.1.1"
    assert (got.signing, got.signing_required) == (True, True)
    assert got.signing_algorithm is None  # the kernel does not print 3.1.1's signing algorithm
    assert (got.encryption, got.encryption_required, got.encryption_cipher) == (False, False, None)
    assert got.credits == 7  # the requests on the wire as the file was read
    assert got.multichannel is False
    assert got.negotiated_from == "/proc/fs/cifs/DebugData"


def test_debugdata_as_the_kernel_prints_it_with_trailing_blanks() -> None:
    # seq_printf leaves a blank at the end of several lines ("Hostname: %s ", "Servers: ")
    text = DEBUGDATA_6X.replace("Hostname: 10.99.0.2\n", "Hostname: 10.99.0.2 \n").replace("Servers:", "Servers: ")
    assert from_cifs_debugdata(text, host="10.99.0.2") == from_cifs_debugdata(DEBUGDATA_6X, host="10.99.0.2")
    assert from_cifs_debugdata(text, host="10.99.0.2").dialect == "3.1.1"


def test_debugdata_picks_the_server_by_host_and_reads_encryption() -> None:
    nas = from_cifs_debugdata(DEBUGDATA_5X_ENCRYPTED, host="nas.local")
    assert nas.dialect == "3.0"
    assert (nas.encryption, nas.encryption_required, nas.encryption_cipher) == (True, True, "AES-128-CCM")
    assert (nas.signing, nas.signing_required) == (False, False)
    assert nas.credits is None  # nothing on the wire then: not a count of what the copy used
    lab = from_cifs_debugdata(DEBUGDATA_5X_ENCRYPTED, host="10.99.0.2")
    assert lab.dialect == "2.0.2"
    assert lab.encryption is False
    assert lab.multichannel is True  # one extra channel


def test_debugdata_of_an_unknown_host_is_the_first_server_and_no_server_is_nothing() -> None:
    assert from_cifs_debugdata(DEBUGDATA_5X_ENCRYPTED, host="elsewhere").dialect == "3.0"
    assert from_cifs_debugdata("Display Internal CIFS Data Structures\n\nServers: \n\t[NONE]\n") == ClientDetails()


def test_cifs_stats_give_the_most_requests_in_flight() -> None:
    assert max_in_flight_from_cifs_stats(STATS) == 16
    assert max_in_flight_from_cifs_stats("Resources in use\n") is None


def test_cifs_mount_options_give_the_request_sizes() -> None:
    options = "rw,relatime,vers=3.1.1,cache=none,username=u,uid=0,soft,rsize=4194304,wsize=1048576,actimeo=1"
    got = sizes_from_cifs_mount_options(options)
    assert (got.read_bytes, got.write_bytes) == (4 << 20, 1 << 20)
    assert sizes_from_cifs_mount_options("rw,vers=3.0") == ClientDetails()


def test_smbutil_signed_by_the_clients_requirement() -> None:
    got = from_smbutil_json(_smbutil(), share="workbench")
    assert got.dialect == "3.1.1"
    assert (got.signing, got.signing_required, got.signing_algorithm) == (True, True, "AES-128-GMAC")
    assert (got.encryption, got.encryption_required, got.encryption_cipher) == (False, False, None)
    assert got.multichannel is None  # the server's capability is not the session's use
    assert got.negotiated_from == "smbutil"


def test_smbutil_encrypted_and_unsigned() -> None:
    text = _smbutil(
        SMB_CURR_ENCRYPT_ALGORITHM="AES-256-GCM",
        SMB_CURR_SIGN_ALGORITHM=None,
        SIGNING_ON=False,
        CLIENT_REQUIRES_SIGNING=False,
        ENCRYPTION_REQUIRED=True,
    )
    got = from_smbutil_json(text)
    assert (got.encryption, got.encryption_required, got.encryption_cipher) == (True, True, "AES-256-GCM")
    assert (got.signing, got.signing_required, got.signing_algorithm) == (False, False, None)


def test_smbutil_smb2_signs_with_its_one_algorithm() -> None:
    # SMB 2.x's HMAC-SHA256 has no SMB_CURR_SIGN_ALGORITHM value: null, with SIGNING_ON true
    got = from_smbutil_json(_smbutil(SMB_VERSION="SMB_2.002", SMB_CURR_SIGN_ALGORITHM=None, SIGNING_REQUIRED=True))
    assert (got.dialect, got.signing, got.signing_algorithm) == ("2.0.2", True, "HMAC-SHA256")


def test_smbutil_picks_the_share_and_refuses_what_is_not_its_output() -> None:
    two = json.loads(_smbutil()) + json.loads(_smbutil(share_name="media", SMB_VERSION="SMB_3.0"))
    assert from_smbutil_json(json.dumps(two), share="media").dialect == "3.0"
    for text in ("", "not json", "{}", "[1, 2]", "[]"):
        assert from_smbutil_json(text).negotiated_from is None


SMBCLIENT_PARTIAL = """Connecting to 10.99.0.2 at port 445
 session request ok
 negotiated dialect[SMB3_11] against server[10.99.0.2]
 session setup ok
signed SMB2 message (sign_algo_id=2)
signed SMB2 message (sign_algo_id=2)
 tconx ok
"""
SMBCLIENT_SIGNED = SMBCLIENT_PARTIAL + "signed SMB2 message (sign_algo_id=2)\n" * 4
SMBCLIENT_ENCRYPTED = """ negotiated dialect[SMB3_00] against server[10.99.0.2]
 session setup ok
smb2_signing_encrypt_pdu: Encrypted SMB2 message
smb2_signing_decrypt_pdu: Decrypted SMB2 message
 tconx ok
smb2_signing_encrypt_pdu: Encrypted SMB2 message
smb2_signing_decrypt_pdu: Decrypted SMB2 message
"""


def test_smbclient_signing_is_read_after_the_tree_connect() -> None:
    # SMB 3.1.1 signs the session setup's last reply even when the session is not signed
    partial = from_smbclient_output(SMBCLIENT_PARTIAL, signing=None, encryption=None)
    assert (partial.dialect, partial.signing, partial.signing_required) == ("3.1.1", False, False)
    signed = from_smbclient_output(SMBCLIENT_SIGNED, signing="required", encryption=None)
    assert (signed.signing, signed.signing_required, signed.signing_algorithm) == (True, True, "AES-128-GMAC")
    asked_on = from_smbclient_output(SMBCLIENT_SIGNED, signing="on", encryption=None)
    assert asked_on.signing_required is None  # signed because asked: whether the server insisted is not known
    by_server = from_smbclient_output(SMBCLIENT_SIGNED, signing=None, encryption=None)
    assert by_server.signing_required is True  # the default signs only when the server requires it


def test_smbclient_encryption_and_no_output() -> None:
    got = from_smbclient_output(SMBCLIENT_ENCRYPTED, signing=None, encryption="required")
    assert (got.dialect, got.encryption, got.encryption_required) == ("3.0", True, True)
    assert got.encryption_cipher == "AES-128-CCM"  # SMB 3.0's one cipher (smbclient does not print 3.1.1's)
    assert got.signing is False
    assert from_smbclient_output("Connection to 10.99.0.2 failed", signing=None, encryption=None) == ClientDetails()


def test_merge_lays_only_what_is_known_over_the_details() -> None:
    base = ClientDetails(dialect="3.1.1", read_bytes=1 << 20, requests_in_flight=4)
    merged = merge(base, ClientDetails(signing=True, negotiated_from="session"))
    assert (merged.dialect, merged.read_bytes, merged.signing, merged.requests_in_flight) == ("3.1.1", 1 << 20, True, 4)


@pytest.mark.parametrize(
    ("details", "note"),
    [
        (
            ClientDetails(
                dialect="3.1.1",
                signing=True,
                signing_required=True,
                signing_algorithm="AES-128-CMAC",
                encryption=False,
                read_bytes=1 << 20,
                write_bytes=1 << 20,
                credits=8,
                negotiated_from="session",
            ),
            "negotiated: SMB 3.1.1, signed AES-128-CMAC (required), not encrypted, 1 MiB × 8 credits",
        ),
        (
            ClientDetails(dialect="3.0", encryption=True, encryption_cipher="AES-128-CCM", negotiated_from="smbutil"),
            "negotiated: SMB 3.0, signing not known, encrypted AES-128-CCM",
        ),
        (
            ClientDetails(
                dialect="2.0.2",
                signing=False,
                encryption=False,
                read_bytes=65536,
                write_bytes=8 << 20,
                multichannel=True,
                negotiated_from="/proc/fs/cifs/DebugData",
            ),
            "negotiated: SMB 2.0.2, not signed, not encrypted, read 64 KiB / write 8 MiB, multichannel",
        ),
        (ClientDetails(dialect="2.0.2"), "SMB 2.0.2"),  # a document from before these fields: its old note
        (ClientDetails(), None),
    ],
)
def test_negotiated_note(details: ClientDetails, note: str | None) -> None:
    assert negotiated_note(details) == note


def test_every_reader_spells_algorithms_and_ciphers_as_the_details_do() -> None:
    readers = [
        from_cifs_debugdata(DEBUGDATA_6X),
        from_cifs_debugdata(DEBUGDATA_5X_ENCRYPTED),
        from_smbutil_json(_smbutil()),
        from_smbutil_json(_smbutil(SMB_CURR_ENCRYPT_ALGORITHM="AES-128-GCM")),
        from_smbclient_output(SMBCLIENT_SIGNED, signing="required", encryption=None),
    ]
    for got in readers:
        assert got.signing_algorithm in (None, *SIGNING_ALGORITHMS)
        assert got.encryption_cipher in (None, *ENCRYPTION_CIPHERS)


# ---- the mounts: their options on the mount command line, macOS's statshares read back


class _Runner(CommandRunner):
    """Stands for a host that can mount: records each command; `smbutil statshares` answers `shares`."""

    def __init__(self, shares: str = "") -> None:
        self.calls: list[list[str]] = []
        self.shares = shares
        self.mounted: set[Path] = set()

    def unavailable(self, client_cls: type) -> str | None:
        return None

    def is_mounted(self, path: Path) -> bool:
        return path in self.mounted

    def run(self, argv: Sequence[str], *, timeout: float, stdin_text: str | None = None) -> Outcome:
        self.calls.append(list(argv))
        if argv[0] == "mount":
            self.mounted.add(Path(argv[4]))
        elif argv[0] == "smbutil":
            return Outcome(0, self.shares)
        else:
            self.mounted.discard(Path(argv[-1]))
        return Outcome(0)

    def run_with_prompt(self, argv: Sequence[str], *, timeout: float, answer: str) -> Outcome:
        self.calls.append(list(argv))
        self.mounted.add(Path(argv[-1]))
        return Outcome(0)


def _target() -> Target:
    return Target("127.0.0.1", Credentials("jo", "pw-not-real"), ports={"smb": 4445}, share="workbench")


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, set()),
        ({"smb_signing": "off"}, set()),
        ({"smb_signing": "on"}, {"sign"}),
        ({"smb_signing": "required", "smb_encryption": "required"}, {"sign", "seal"}),
        ({"smb_max_dialect": "3.0.2"}, {"vers=3.02"}),
        ({"smb_max_dialect": "2.0.2"}, {"vers=2.0"}),
    ],
)
def test_cifs_mount_options_say_what_was_chosen(options: dict[str, str], expected: set[str]) -> None:
    runner = _Runner()
    with CifsClient(_target(), ClientOptions(**options), runner=runner):
        pass
    said = set(runner.calls[0][-1].split(","))
    assert said & {"sign", "seal"} | {o for o in said if o.startswith("vers=")} == expected


def test_smbfs_reads_back_what_statshares_says() -> None:
    runner = _Runner(shares=_smbutil())
    with SmbfsClient(_target(), runner=runner) as client:
        got = client.details()
        assert runner.calls[-1] == ["smbutil", "statshares", "-m", str(client.mountpoint), "-f", "json"]
    assert (got.dialect, got.signing_algorithm, got.negotiated_from, got.mount) == (
        "3.1.1",
        "AES-128-GMAC",
        "smbutil",
        "mount_smbfs",
    )


@pytest.mark.parametrize("option", ["smb_signing", "smb_encryption", "smb_max_dialect"])
def test_smbfs_cannot_take_smb_options_per_mount(option: str) -> None:
    value = {"smb_signing": "off", "smb_encryption": "required", "smb_max_dialect": "3.0"}[option]
    runner = _Runner()
    client = SmbfsClient(_target(), ClientOptions(**{option: value}), runner=runner)
    with pytest.raises(UnavailableError, match="mount_smbfs cannot"):
        client.connect()
    assert not [c for c in runner.calls if c[0] == "mount_smbfs"]  # refused before mounting


# ---- where a row's negotiated figures go: the JSON (schema-valid, read back whole), the notes, the HTML

NEGOTIATED = ClientDetails(
    request_bytes=8 * MIB,
    requests_in_flight=4,
    dialect="3.1.1",
    read_bytes=8 * MIB,
    write_bytes=8 * MIB,
    signing=True,
    signing_required=True,
    signing_algorithm="AES-128-GMAC",
    encryption=False,
    encryption_required=False,
    credits=4,
    multichannel=False,
    negotiated_from="session",
)
LINE = "negotiated: SMB 3.1.1, signed AES-128-GMAC (required), not encrypted, 8 MiB × 4 credits"


def _run_with_negotiated_row() -> Run:
    run = lab_run()
    rows = tuple(
        dataclasses.replace(row, client="smbprotocol", details=NEGOTIATED) if row.protocol == "smb" else row
        for row in run.results
    )
    return dataclasses.replace(run, results=rows)


def test_the_json_keeps_every_negotiated_field_and_validates() -> None:
    doc = json.loads(json.dumps(_run_with_negotiated_row().to_json()))
    assert_valid_run_document(doc)
    smb = next(row for row in doc["results"] if row["protocol"] == "smb")
    assert {k: smb["details"][k] for k in ("signing_algorithm", "credits", "negotiated_from")} == {
        "signing_algorithm": "AES-128-GMAC",
        "credits": 4,
        "negotiated_from": "session",
    }
    again = Run.from_json(doc)
    assert next(r for r in again.results if r.protocol == "smb").details == NEGOTIATED


def test_the_schema_refuses_a_cipher_spelt_otherwise() -> None:
    doc = json.loads(json.dumps(_run_with_negotiated_row().to_json()))
    smb = next(row for row in doc["results"] if row["protocol"] == "smb")
    smb["details"]["encryption_cipher"] = "AES128-GCM"  # the kernel's spelling, not the document's
    assert schema_errors(doc)


def test_the_notes_and_the_html_say_the_negotiated_line() -> None:
    run = _run_with_negotiated_row()
    smb = next(line for line in summary_rows(run) if line.group == "smb")
    assert LINE in smb.notes
    assert LINE in render_html(run)


def test_one_dialect_table_feeds_every_spelling_and_algorithm() -> None:
    from workbench.core.ceiling import crypto_in_use
    from workbench.protocols.smb_negotiated import BY_NAME, SMB_DIALECTS, dialect_of, usual_cipher
    from workbench.protocols.smb_options import DIALECT_CHOICES
    from workbench.protocols.smbclient_cli import _protection_options
    from workbench.server.daemons.smbd import MIN_PROTOCOL, SmbServerOptions

    assert [d.name for d in SMB_DIALECTS] == ["2.0.2", "2.1", "3.0", "3.0.2", "3.1.1"] == list(DIALECT_CHOICES)
    # the spellings as Samba, mount.cifs and smbutil write them, and MS-SMB2's algorithms: written out, so a typo
    # in the one table cannot pass by being checked against itself
    assert [(d.revision, d.samba, d.cifs_vers, d.smbutil, d.signing, d.cipher, d.encrypts) for d in SMB_DIALECTS] == [
        (0x0202, "SMB2_02", "2.0", "SMB_2.002", "HMAC-SHA256", None, False),
        (0x0210, "SMB2_10", "2.1", "SMB_2.1", "HMAC-SHA256", None, False),
        (0x0300, "SMB3_00", "3.0", "SMB_3.0", "AES-128-CMAC", "AES-128-CCM", True),
        (0x0302, "SMB3_02", "3.02", "SMB_3.0.2", "AES-128-CMAC", "AES-128-CCM", True),
        (0x0311, "SMB3_11", "3.1.1", "SMB_3.1.1", None, None, True),
    ]
    assert MIN_PROTOCOL == "SMB2_02" and SmbServerOptions().max_dialect == "3.1.1"
    for d in SMB_DIALECTS:
        assert dialect_of(d.name) == dialect_of(f"SMB {d.name}") == dialect_of(d.samba) == d.name
        assert SmbServerOptions(max_dialect=d.name).conf()["server max protocol"] == d.samba
        assert _protection_options(ClientOptions(smb_max_dialect=d.name)) == [f"--option=client max protocol={d.samba}"]
        assert from_smbutil_json(json.dumps({"SMB_VERSION": d.smbutil})).dialect == d.name
        signed = crypto_in_use(ClientDetails(dialect=d.name, signing=True))
        sealed = crypto_in_use(ClientDetails(dialect=d.name, encryption=True))
        assert (signed.algorithm if signed else None) == d.signing  # 3.1.1's signing stays unknown
        assert (sealed.algorithm if sealed else None) == usual_cipher(d.name)
    assert dialect_of("SMB 4.0") is None and dialect_of(None) is None
    assert usual_cipher("3.1.1") == "AES-128-GCM" and BY_NAME["3.1.1"].cipher is None  # assumed, never read
    assert usual_cipher("2.1") is None and usual_cipher("3.0.2") == "AES-128-CCM"
    with pytest.raises(UsageError, match="has no encryption"):
        SmbServerOptions.parse("encryption=required,max-dialect=2.1")
    SmbServerOptions.parse("encryption=required,max-dialect=3.0")  # the first dialect that encrypts

"""What an SMB session negotiated, read from wherever each client can tell: one reader per source.

Every reader returns a ClientDetails holding only the negotiated fields it could read (None where its
source cannot say), with `negotiated_from` naming the source; `merge` lays them over a client's own
details. Sources: the session objects of pysmb and smbprotocol ("session"), smbclient's debug output
("smbclient output"), the Linux CIFS client's /proc/fs/cifs/DebugData, macOS's `smbutil statshares -a
-f json` ("smbutil").
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

from workbench.protocols.details import ClientDetails
from workbench.shared.cryptocost import ENCRYPTION_CIPHERS, SIGNING_ALGORITHMS

# The negotiated fields a reader fills, in the order the note line names them.
NEGOTIATED_FIELDS = (
    "dialect",
    "signing",
    "signing_required",
    "signing_algorithm",
    "encryption",
    "encryption_required",
    "encryption_cipher",
    "read_bytes",
    "write_bytes",
    "credits",
    "multichannel",
    "negotiated_from",
)


@dataclass(frozen=True)
class Dialect:
    """One SMB 2/3 dialect in every spelling the code meets, and the algorithms it signs and encrypts with."""

    name: str  # SMB's documents' spelling: the settings' words and ClientDetails.dialect, "3.1.1"
    revision: int  # MS-SMB2 2.2.3's DialectRevision, 0x0311
    samba: str  # Samba's protocol name (smb.conf's `server max protocol`, smbclient's words and debug output)
    cifs_vers: str  # mount.cifs's vers=, which offers exactly this dialect
    smbutil: str  # macOS `smbutil statshares`' SMB_VERSION
    signing: str | None  # the one algorithm it signs with; None: negotiated per session (3.1.1)
    cipher: str | None  # the one cipher it encrypts with; None: negotiated (3.1.1), or no encryption (2.x)
    encrypts: bool  # SMB 2.x has no encryption: a server requiring it refuses every 2.x session


# Every dialect, oldest first (the order "highest dialect" compares by); algorithms spelt as in ClientDetails.
SMB_DIALECTS = (
    Dialect("2.0.2", 0x0202, "SMB2_02", "2.0", "SMB_2.002", "HMAC-SHA256", None, encrypts=False),
    Dialect("2.1", 0x0210, "SMB2_10", "2.1", "SMB_2.1", "HMAC-SHA256", None, encrypts=False),
    Dialect("3.0", 0x0300, "SMB3_00", "3.0", "SMB_3.0", "AES-128-CMAC", "AES-128-CCM", encrypts=True),
    Dialect("3.0.2", 0x0302, "SMB3_02", "3.02", "SMB_3.0.2", "AES-128-CMAC", "AES-128-CCM", encrypts=True),
    Dialect("3.1.1", 0x0311, "SMB3_11", "3.1.1", "SMB_3.1.1", None, None, encrypts=True),
)
SMB1 = "1.0"  # a session older than SMB 2 (pysmb against a server without SMB2, smbutil's "SMB_1")
BY_NAME = {d.name: d for d in SMB_DIALECTS}
DIALECT_NAMES = tuple(BY_NAME)  # the words smb_max_dialect and --smb-server's max-dialect accept
DIALECTS = {d.revision: d.name for d in SMB_DIALECTS}
SAMBA_PROTOCOLS = {d.samba: d.name for d in SMB_DIALECTS}
# 3.1.1 negotiates its cipher: Samba's first choice is AES-128-GCM, which every 3.1.1 client offers, so a row
# whose client did not say is taken to use it. Its signing has no such stand-in: Samba signs with AES-128-GMAC
# for a client that offers it (smbclient, recent Windows) and CMAC for one that does not (the kernel's).
USUAL_NEGOTIATED_CIPHER = "AES-128-GCM"
# MS-SMB2 2.2.3.1.7 and 2.2.3.1.2: the ids of signing algorithms and ciphers, in the spellings of details.py.
SIGNING_IDS = dict(zip((0, 1, 2), SIGNING_ALGORITHMS, strict=True))
CIPHER_IDS = dict(zip((1, 2, 3, 4), ENCRYPTION_CIPHERS, strict=True))


def dialect_name(revision: int | None) -> str | None:
    """0x0311 -> "3.1.1"; an unknown revision keeps its number."""
    if revision is None:
        return None
    return DIALECTS.get(revision, f"0x{revision:04x}")


def dialect_of(text: str | None) -> str | None:
    """'3.1.1' from '3.1.1', 'SMB 3.1.1' or 'SMB3_11'; None for anything else."""
    if not text:
        return None
    digits = "".join(ch for ch in text if ch.isdigit())
    return next((d.name for d in SMB_DIALECTS if digits in (_digits(d.name), _digits(d.samba))), None)


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def default_signing_algorithm(dialect: str | None) -> str | None:
    """The one algorithm a dialect before 3.1.1 signs with (3.1.1 negotiates it)."""
    found = BY_NAME.get(dialect or "")
    return found.signing if found else None


def default_cipher(dialect: str | None) -> str | None:
    """The one cipher SMB 3.0 and 3.0.2 encrypt with (3.1.1 negotiates it; 2.x cannot encrypt)."""
    found = BY_NAME.get(dialect or "")
    return found.cipher if found else None


def usual_cipher(dialect: str | None) -> str | None:
    """The cipher a session of `dialect` is taken to use when its client cannot say: its one cipher, or for 3.1.1
    the one Samba picks first (USUAL_NEGOTIATED_CIPHER); None for a dialect without encryption."""
    found = BY_NAME.get(dialect or "")
    if found is None or not found.encrypts:
        return None
    return found.cipher or USUAL_NEGOTIATED_CIPHER


def merge(details: ClientDetails, negotiated: ClientDetails) -> ClientDetails:
    """`details` with every negotiated field `negotiated` knows laid over it."""
    known = {name: getattr(negotiated, name) for name in NEGOTIATED_FIELDS if getattr(negotiated, name) is not None}
    return dataclasses.replace(details, **known)


def from_smbprotocol(conn: Any, session: Any, tree: Any, credits: int | None) -> ClientDetails:
    """smbprotocol's Connection, Session and TreeConnect after login: the library keeps every negotiated figure."""
    if conn is None or conn.dialect is None:
        return ClientDetails()
    dialect = dialect_name(conn.dialect)
    # the session's flag, or the share's (a share can require encryption of its own)
    encrypted = bool(session is not None and session.encrypt_data) or bool(tree is not None and tree.encrypt_data)
    # The library signs only when signing is required (its Session drops signing when encryption covers it).
    signed = bool(session is not None and session.signing_required and not encrypted)
    algorithm = SIGNING_IDS.get(conn.signing_algorithm_id) if dialect == "3.1.1" else None
    cipher = CIPHER_IDS.get(conn.cipher_id) if dialect == "3.1.1" else None
    return ClientDetails(
        dialect=dialect,
        signing=signed,
        signing_required=bool(conn.require_signing) if session is not None else None,
        signing_algorithm=(algorithm or default_signing_algorithm(dialect)) if signed else None,
        encryption=encrypted,
        encryption_required=bool(session.require_encryption or encrypted) if session is not None else None,
        encryption_cipher=(cipher or default_cipher(dialect)) if encrypted else None,
        credits=credits,
        # The library opens one connection per session: never several channels.
        multichannel=False,
        negotiated_from="session",
    )


def from_pysmb(conn: Any, client_requires_signing: bool) -> ClientDetails:
    """pysmb's SMBConnection after login: its negotiate reply's security mode and whether it signs."""
    if conn is None:
        return ClientDetails()
    revision = getattr(conn, "dialect_revision", None)
    dialect = dialect_name(revision) if revision else SMB1
    signed = bool(conn.is_signing_active)
    server_requires = bool(conn.security_mode & _SMB2_SIGNING_REQUIRED) if revision else None
    return ClientDetails(
        dialect=dialect,
        signing=signed,
        signing_required=client_requires_signing or server_requires,
        signing_algorithm=default_signing_algorithm(dialect) if signed else None,
        # pysmb has no SMB 3: it never encrypts.
        encryption=False,
        encryption_required=False,
        read_bytes=conn.max_read_size,
        write_bytes=conn.max_write_size,
        credits=1,  # one request at a time
        multichannel=False,
        negotiated_from="session",
    )


_SMB2_SIGNING_REQUIRED = 0x02  # MS-SMB2 2.2.4 SecurityMode

# smbclient at debug level 10: the dialect of the negotiate reply and one line per signed or encrypted message.
_SMBCLIENT_DIALECT = re.compile(r"negotiated dialect\[(\w+)\]")
_SMBCLIENT_SIGNED = re.compile(r"signed SMB2 message \(sign_algo_id=(\d+)\)")
_SMBCLIENT_ENCRYPTED = "Encrypted SMB2 message"
_SMBCLIENT_TREE = " tconx ok"  # the tree is connected: every message after it is the session's own traffic


def from_smbclient_output(text: str, signing: str | None, encryption: str | None) -> ClientDetails:
    """smbclient's debug output (-d 10) of a login followed by one command on the tree.

    Signing and encryption are read from the messages after the tree connect, not from the session
    setup (SMB 3.1.1 signs the setup's last reply even when the session goes unsigned). `signing` and
    `encryption` are what the client was asked for (None: its default, which only follows the server):
    protection that happened without the client asking for it was the server's requirement. smbclient
    prints neither its cipher (SMB 3.0's is the one it has) nor its request sizes: not known.
    """
    found = _SMBCLIENT_DIALECT.search(text)
    if found is None:
        return ClientDetails()
    dialect = SAMBA_PROTOCOLS.get(found.group(1), found.group(1))
    _, tree, session = text.partition(_SMBCLIENT_TREE)
    algorithms = _SMBCLIENT_SIGNED.findall(session) if tree else []
    signed = bool(algorithms)
    encrypted = bool(tree) and _SMBCLIENT_ENCRYPTED in session
    return ClientDetails(
        dialect=dialect,
        signing=signed,
        signing_required=_required(signing, signed),
        signing_algorithm=SIGNING_IDS.get(int(algorithms[-1])) if signed else None,
        encryption=encrypted,
        encryption_required=_required(encryption, encrypted),
        encryption_cipher=default_cipher(dialect) if encrypted else None,  # 3.1.1's is not printed
        multichannel=False,  # smbclient opens one connection
        negotiated_from="smbclient output",
    )


# /proc/fs/cifs/DebugData, the Linux kernel's SMB client (fs/smb/client/cifs_debug.c): one block per server
# connection, "N) ConnectionId: 0x… Hostname: … ", then its credits and dialect, security mode, the
# negotiated cipher (kernels from 6.x), its sessions and their shares.
_CIFS_SERVER = re.compile(r"^\d+\) ConnectionId: 0x[0-9a-fA-F]+ *(?:Hostname: (\S+))?", re.MULTILINE)
_CIFS_DIALECT = re.compile(r"Number of credits: (\d+)(?:,\d+)* Dialect 0x([0-9a-fA-F]+)([^\n]*)")
_CIFS_SECMODE = re.compile(r"SecMode: 0x([0-9a-fA-F]+) Req On Wire: (\d+)")
_CIFS_CIPHER = re.compile(r"Encryption: Negotiated cipher \(([A-Z0-9-]+)\)")
_CIFS_SESSION = re.compile(r"SessionId: 0x[0-9a-fA-F]+([^\n]*)")
_CIFS_CHANNELS = re.compile(r"Extra Channels: (\d+)")
_CIFS_SHARE_ENCRYPTED = re.compile(r"Serial Number: 0x[0-9a-fA-F]+[^\n]* Encrypted")
_CIFS_MAX_IN_FLIGHT = re.compile(r"Max requests in flight: (\d+)")
# the kernel's cipher names (cipher_alg_str) -> ours
_CIFS_CIPHERS = {"AES128-CCM": "AES-128-CCM", "AES128-GCM": "AES-128-GCM", "AES256-CCM": "AES-256-CCM",
                 "AES256-GCM": "AES-256-GCM"}  # fmt: skip


def from_cifs_debugdata(text: str, host: str | None = None) -> ClientDetails:
    """The kernel's view of the server connection to `host` (the first one when None or not found by name).

    Signing is the session's (or the connection's) "signed"; the kernel signs only when one side requires it.
    The algorithm is not printed: 2.x and 3.0 have one each, 3.1.1's stays not known. "Req On Wire" is the
    requests in flight at the moment the file was read (a read taken mid-copy), so it is used only when
    positive; the Stats file's maximum (`max_in_flight_from_cifs_stats`) is the better count.
    """
    block = _cifs_block(text, host)
    if block is None:
        return ClientDetails()
    found = _CIFS_DIALECT.search(block)
    if found is None:
        return ClientDetails()
    dialect = dialect_name(int(found.group(2), 16))
    session = _CIFS_SESSION.search(block)
    session_flags = session.group(1).split() if session else []
    signed = "signed" in session_flags or "signed" in found.group(3).split()
    encrypted = "encrypted" in session_flags or _CIFS_SHARE_ENCRYPTED.search(block) is not None
    secmode = _CIFS_SECMODE.search(block)
    server_requires = bool(int(secmode.group(1), 16) & _SMB2_SIGNING_REQUIRED) if secmode else None
    on_wire = int(secmode.group(2)) if secmode else 0
    cipher = _CIFS_CIPHER.search(block)
    channels = _CIFS_CHANNELS.search(block)
    return ClientDetails(
        dialect=dialect,
        signing=signed,
        # the kernel signs only when the server or the `sign` mount option requires it
        signing_required=True if signed else server_requires,
        signing_algorithm=default_signing_algorithm(dialect) if signed else None,
        encryption=encrypted,
        # the server's session flag or the `seal` mount option: either way, required
        encryption_required=encrypted,
        encryption_cipher=(_CIFS_CIPHERS.get(cipher.group(1)) if cipher else default_cipher(dialect))
        if encrypted
        else None,
        credits=on_wire or None,
        multichannel=channels is not None and int(channels.group(1)) > 0,
        negotiated_from="/proc/fs/cifs/DebugData",
    )


def _cifs_block(text: str, host: str | None) -> str | None:
    starts = list(_CIFS_SERVER.finditer(text))
    if not starts:
        return None
    blocks = [
        (m.group(1), text[m.start() : starts[i + 1].start() if i + 1 < len(starts) else len(text)])
        for i, m in enumerate(starts)
    ]
    for name, block in blocks:
        if host is not None and name == host:
            return block
    return blocks[0][1]


def max_in_flight_from_cifs_stats(text: str) -> int | None:
    """The most requests the kernel kept in flight on any server connection (/proc/fs/cifs/Stats)."""
    counts = [int(n) for n in _CIFS_MAX_IN_FLIGHT.findall(text)]
    return max(counts) if counts else None


def sizes_from_cifs_mount_options(options: str) -> ClientDetails:
    """rsize and wsize, the kernel's read and write request sizes, from a cifs line's options in /proc/mounts."""
    found = dict(opt.partition("=")[::2] for opt in options.split(","))
    return ClientDetails(
        read_bytes=int(found["rsize"]) if found.get("rsize", "").isdigit() else None,
        write_bytes=int(found["wsize"]) if found.get("wsize", "").isdigit() else None,
    )


# `smbutil statshares -m MOUNTPOINT -f json` on macOS: a JSON array with one object per share.
_SMBUTIL_VERSIONS = {**{d.smbutil: d.name for d in SMB_DIALECTS}, "SMB_1": SMB1}


def from_smbutil_json(text: str, share: str | None = None) -> ClientDetails:
    """macOS's view of a mounted share: the share named `share` (the first one when None or not found).

    SMB_CURR_SIGN_ALGORITHM and SMB_CURR_ENCRYPT_ALGORITHM are null when off; SIGNING_ON says whether
    messages are signed (SMB 2.x and 3.0 sign with their one algorithm, printed as null); SIGNING_REQUIRED is
    the server's requirement, CLIENT_REQUIRES_SIGNING the client's (nsmb.conf); ENCRYPTION_REQUIRED the
    share's flag. Request sizes and credits are not printed.
    """
    try:
        shares = json.loads(text)
    except ValueError:
        return ClientDetails()
    if isinstance(shares, dict):
        shares = [shares]
    if not isinstance(shares, list) or not shares or not all(isinstance(s, dict) for s in shares):
        return ClientDetails()
    chosen = next((s for s in shares if share is not None and s.get("share_name") == share), shares[0])
    version = chosen.get("SMB_VERSION")
    if not isinstance(version, str):
        return ClientDetails()  # every share statshares lists has a version: this is not its output
    dialect = _SMBUTIL_VERSIONS.get(version)
    algorithm = _known(chosen.get("SMB_CURR_SIGN_ALGORITHM"), SIGNING_ALGORITHMS)
    cipher = _known(chosen.get("SMB_CURR_ENCRYPT_ALGORITHM"), ENCRYPTION_CIPHERS)
    signed = chosen.get("SIGNING_ON") is True or algorithm is not None
    encrypted = cipher is not None or chosen.get("SMB_CURR_ENCRYPT_ALGORITHM") not in (None, "OFF")
    required_by = [chosen.get(key) for key in ("SIGNING_REQUIRED", "CLIENT_REQUIRES_SIGNING")]
    signing_required = any(v is True for v in required_by) if any(isinstance(v, bool) for v in required_by) else None
    sealed = chosen.get("ENCRYPTION_REQUIRED")
    return ClientDetails(
        dialect=dialect,
        signing=signed,
        signing_required=signing_required,
        signing_algorithm=(algorithm or default_signing_algorithm(dialect)) if signed else None,
        encryption=encrypted,
        encryption_required=sealed if isinstance(sealed, bool) else None,
        encryption_cipher=(cipher or default_cipher(dialect)) if encrypted else None,
        # MULTI_CHANNEL_SUPPORTED is the server's capability, not the session's use: not known
        negotiated_from="smbutil",
    )


def _known(value: object, names: tuple[str, ...]) -> str | None:
    return value if isinstance(value, str) and value in names else None


def _required(asked: str | None, happened: bool) -> bool | None:
    """Whether signing (or encryption) was required, from what the client was asked and what happened. A client
    left to its default, or told "off", protects a session only when the server requires it; one told "on"
    protects it whenever the server allows, so a protected session does not say whether the server insisted."""
    if asked == "required":
        return True
    if not happened:
        return False
    return None if asked == "on" else True


def negotiated_note(details: ClientDetails) -> str | None:
    """One line for the row's notes: "negotiated: SMB 3.1.1, signed AES-128-CMAC (required), not encrypted,
    1 MiB × 8 credits"; "not known" where the client could not say. A document written before these fields
    existed (no `negotiated_from`) keeps its old short note, "SMB 3.1.1"."""
    if details.negotiated_from is None:
        return f"SMB {details.dialect}" if details.dialect else None
    parts = [f"SMB {details.dialect}" if details.dialect else "dialect not known"]
    parts.append(_protection("signed", "signing", details.signing, details.signing_required, details.signing_algorithm))
    parts.append(
        _protection(
            "encrypted", "encryption", details.encryption, details.encryption_required, details.encryption_cipher
        )
    )
    sizes = _sizes(details.read_bytes, details.write_bytes)
    if sizes is not None:
        parts.append(f"{sizes} × {_credits(details.credits)}" if details.credits else sizes)
    elif details.credits:
        parts.append(_credits(details.credits))
    if details.multichannel:
        parts.append("multichannel")
    return "negotiated: " + ", ".join(parts)


def _protection(done: str, noun: str, on: bool | None, required: bool | None, algorithm: str | None) -> str:
    if on is None:
        return f"{noun} not known"
    if not on:
        return f"not {done}"
    said = done + (f" {algorithm}" if algorithm else "")
    return said + (" (required)" if required else "")


def _credits(count: int) -> str:
    return f"{count} credit" if count == 1 else f"{count} credits"


def _sizes(read_bytes: int | None, write_bytes: int | None) -> str | None:
    if read_bytes is None and write_bytes is None:
        return None
    if read_bytes == write_bytes:
        return _size(read_bytes)
    return f"read {_size(read_bytes)} / write {_size(write_bytes)}"


def _size(value: int | None) -> str:
    if value is None:
        return "not known"
    if value >= 1 << 20 and value % (1 << 20) == 0:
        return f"{value >> 20} MiB"
    return f"{value // 1024} KiB" if value >= 1024 else f"{value} B"

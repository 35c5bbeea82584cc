"""What an SMB session negotiated, read from wherever each client can tell: one reader per source.

Every reader returns a ClientDetails holding only the negotiated fields it could read (None where its
source cannot say), with `negotiated_from` naming the source; `merge` lays them over a client's own
details. Sources: the session objects of pysmb and smbprotocol ("session"), smbclient's debug output
("smbclient output"), the Linux CIFS client's /proc/fs/cifs/DebugData, macOS's `smbutil statshares -a
-f json` ("smbutil").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from workbench.protocols.details import ENCRYPTION_CIPHERS, SIGNING_ALGORITHMS, ClientDetails

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

# MS-SMB2 2.2.3: dialect revision numbers.
DIALECTS = {0x0202: "2.0.2", 0x0210: "2.1", 0x0300: "3.0", 0x0302: "3.0.2", 0x0311: "3.1.1"}
# MS-SMB2 2.2.3.1.7 and 2.2.3.1.2: the ids of signing algorithms and ciphers, in the spellings of details.py.
SIGNING_IDS = dict(zip((0, 1, 2), SIGNING_ALGORITHMS, strict=True))
CIPHER_IDS = dict(zip((1, 2, 3, 4), ENCRYPTION_CIPHERS, strict=True))


def dialect_name(revision: int | None) -> str | None:
    """0x0311 -> "3.1.1"; an unknown revision keeps its number."""
    if revision is None:
        return None
    return DIALECTS.get(revision, f"0x{revision:04x}")


def default_signing_algorithm(dialect: str | None) -> str | None:
    """The one algorithm a dialect before 3.1.1 signs with (3.1.1 negotiates it)."""
    if dialect in ("2.0.2", "2.1"):
        return "HMAC-SHA256"
    if dialect in ("3.0", "3.0.2"):
        return "AES-128-CMAC"
    return None


def default_cipher(dialect: str | None) -> str | None:
    """The one cipher SMB 3.0 and 3.0.2 encrypt with (3.1.1 negotiates it; 2.x cannot encrypt)."""
    return "AES-128-CCM" if dialect in ("3.0", "3.0.2") else None


def merge(details: ClientDetails, negotiated: ClientDetails) -> ClientDetails:
    """`details` with every negotiated field `negotiated` knows laid over it."""
    known = {name: getattr(negotiated, name) for name in NEGOTIATED_FIELDS if getattr(negotiated, name) is not None}
    return dataclasses.replace(details, **known)


def from_smbprotocol(conn: Any, session: Any, credits: int | None) -> ClientDetails:
    """smbprotocol's Connection and Session after login: the library keeps every negotiated figure."""
    if conn is None or conn.dialect is None:
        return ClientDetails()
    dialect = dialect_name(conn.dialect)
    encrypted = bool(session is not None and session.encrypt_data)
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
        parts.append(f"{sizes} × {details.credits} credits" if details.credits else sizes)
    elif details.credits:
        parts.append(f"{details.credits} credits")
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

"""The client's side of SMB's security and dialect, as the user chose it (the smb_signing, smb_encryption and
smb_max_dialect settings): the accepted words, their checks, and the refusal of a client that cannot honour one.

None everywhere means "the client's own default": nothing is passed and behaviour is what it always was.
"""

from __future__ import annotations

from workbench.protocols.smb_negotiated import DIALECT_NAMES
from workbench.shared.errors import UnavailableError, UsageError

SIGNING_CHOICES = ("off", "on", "required")  # off: never sign; on: sign when the server allows; required: insist
ENCRYPTION_CHOICES = ("off", "required")
DIALECT_CHOICES = DIALECT_NAMES


def check_signing(value: str) -> str:
    return _check(value, SIGNING_CHOICES, "SMB signing")


def check_encryption(value: str) -> str:
    return _check(value, ENCRYPTION_CHOICES, "SMB encryption")


def check_dialect(value: str) -> str:
    return _check(value, DIALECT_CHOICES, "SMB dialect")


def _check(value: str, choices: tuple[str, ...], what: str) -> str:
    if value not in choices:
        raise UsageError(f"unknown {what} {value!r}", f"choose from {', '.join(choices)}")
    return value


def cannot(client: str, what: str, hint: str) -> UnavailableError:
    """The row's refusal when `client` cannot do what the user asked: its error reads "unavailable: <client>
    cannot …", never a silently different session."""
    return UnavailableError(f"{client} cannot {what}", hint)

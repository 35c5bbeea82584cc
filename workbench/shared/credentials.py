"""Credentials for everything workbench serves: generated once, kept in a 0600 file, never in argv.

Resolution order for a client: an explicit file (--credentials), then the environment variable
WORKBENCH_PASSWORD (with WORKBENCH_USER), then the default file written by `serve`/`servers up`.
"""

from __future__ import annotations

import getpass
import json
import os
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from workbench.shared.errors import AuthError, NotFoundError, UsageError
from workbench.shared.jsontypes import JSONValue
from workbench.shared.validate import parse_model

ENV_USER = "WORKBENCH_USER"
ENV_PASSWORD = "WORKBENCH_PASSWORD"
# Samba and sshd map logins to Unix accounts, so the served user is the account running the servers.
DEFAULT_USER = getpass.getuser()


_EXAMPLE = 'a JSON object: {"user": "alice", "password": "…", "ssh_key": null, "known_hosts": null}'


def _path_field(example: str) -> Any:
    return Field(None, description="a path string or null", json_schema_extra={"example": example})


class CredentialsFile(BaseModel):
    """credentials.json as `serve` / `servers up` write it (strict: a number is not a password)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    user: str = Field(
        min_length=1, description="a non-empty user name string", json_schema_extra={"example": '"user": "alice"'}
    )
    password: str = Field(
        min_length=1, description="a non-empty password string", json_schema_extra={"example": '"password": "s3cret"'}
    )
    ssh_key: str | None = _path_field('"ssh_key": "/home/alice/.local/share/workbench/server/ssh/client_key"')
    known_hosts: str | None = _path_field('"known_hosts": "/home/alice/.local/share/workbench/server/ssh/known_hosts"')


@dataclass(frozen=True)
class Credentials:
    """A user name and password, plus SSH material for the SSH-based protocols."""

    user: str
    password: str = field(repr=False)
    ssh_key: Path | None = None  # private key file for sftp/rsync-over-ssh/sshfs
    known_hosts: Path | None = None  # host keys the SSH clients verify against

    def to_json(self) -> dict[str, str | None]:
        return {
            "user": self.user,
            "password": self.password,
            "ssh_key": str(self.ssh_key) if self.ssh_key else None,
            "known_hosts": str(self.known_hosts) if self.known_hosts else None,
        }

    @classmethod
    def from_json(cls, data: JSONValue, what: str = "credentials file") -> Credentials:
        # Values are never echoed in a refusal: a mistyped password must not end up on a terminal or in a log.
        parsed: CredentialsFile = parse_model(CredentialsFile, data, what, _EXAMPLE, echo_input=False)
        return cls(
            user=parsed.user,
            password=parsed.password,
            ssh_key=Path(parsed.ssh_key) if parsed.ssh_key else None,
            known_hosts=Path(parsed.known_hosts) if parsed.known_hosts else None,
        )


def generate(user: str = DEFAULT_USER) -> Credentials:
    # Alphanumeric only: the password goes through smbpasswd's stdin, URL userinfo and rsync's env.
    alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
    return Credentials(user=user, password="".join(secrets.choice(alphabet) for _ in range(24)))


def write_private(path: Path, creds: Credentials) -> None:
    """Write the credentials file with mode 0600 from the first byte (no window where others can read)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # a new state directory is private (serve checks)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(creds.to_json(), fh, indent=2)
    os.chmod(path, 0o600)


def read(path: Path) -> Credentials:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise NotFoundError(
            f"credentials file {path} not found", "start the server with 'workbench serve' or pass --credentials"
        ) from exc
    except (OSError, ValueError) as exc:
        # json's message quotes no content beyond a position, so no secret leaks through it
        raise UsageError(f"cannot read credentials file {path}: {exc}", "regenerate it with 'workbench serve'") from exc
    return Credentials.from_json(data, f"credentials file {path}")


def load_or_create(path: Path, user: str = DEFAULT_USER) -> Credentials:
    """The server side: reuse the file if present, otherwise generate and write it once."""
    if path.exists():
        return read(path)
    creds = generate(user)
    write_private(path, creds)
    return creds


def resolve(path: Path | None, default_path: Path) -> Credentials:
    """The client side: explicit file, else environment, else the default file."""
    if path is not None:
        return read(path)
    password = os.environ.get(ENV_PASSWORD)
    if password:
        base = read(default_path) if default_path.exists() else None
        user = os.environ.get(ENV_USER) or (base.user if base else DEFAULT_USER)
        if base:
            return replace(base, user=user, password=password)
        return Credentials(user=user, password=password)
    if default_path.exists():
        return read(default_path)
    raise AuthError(
        "no credentials found",
        f"pass --credentials FILE, set {ENV_PASSWORD}, or copy the server's {default_path.name}",
    )


def for_server(path: Path) -> Credentials:
    """The server side: $WORKBENCH_PASSWORD (and $WORKBENCH_USER) when set, else the file, created once."""
    password = os.environ.get(ENV_PASSWORD)
    if password:
        return Credentials(user=os.environ.get(ENV_USER) or DEFAULT_USER, password=password)
    return load_or_create(path)

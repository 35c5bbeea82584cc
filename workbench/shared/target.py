"""The far host as every part of workbench names it (Target, its ports, URL helpers), and the target file:
where its services listen (no secrets; those stay in credentials.json).

`serve` and `servers up` write it next to the credentials; `run` reads it, or builds a Target from
--host and the default ports.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from workbench.shared.credentials import Credentials
from workbench.shared.errors import NotFoundError, UsageError
from workbench.shared.paths import TARGET_FILE
from workbench.shared.ports import DEFAULT_PORTS as DEFAULT_PORTS  # declared apart, so --help needs no models
from workbench.shared.servers_hello import ServersHello, checked_hello
from workbench.shared.validate import check_host, parse_model


def url_host(host: str) -> str:
    """The host as it goes into a URL or a user@host:path argument: IPv6 addresses in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@dataclass(frozen=True)
class Target:
    """The far host: where its services listen and how to log in."""

    host: str
    credentials: Credentials
    ports: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_PORTS))
    remote_root: str = ""  # absolute path of the served root on the far host (sftp, rsync over ssh)
    share: str = "workbench"  # SMB share and rsync module name, both exporting the served root
    # A server workbench did not start (given by URL): no control API, no /f/ or /ctl/ on HTTP; paths are
    # relative to `prefix` beneath what the service exports (the SMB share, the rsync module, the FTP
    # login directory, the HTTP URL path). SSH-based clients use `remote_root` instead, as for served hosts.
    stock: bool = False
    prefix: str = ""  # POSIX directory, no leading or trailing "/"; "" is the export's own root
    tls: bool = False  # ftps:// (explicit TLS on the control and data connections) and https://
    # Stock SSH: the host as the user wrote it, so OpenSSH clients pass it as is and ~/.ssh/config applies
    # (HostName, ProxyJump, IdentityFile, HostKeyAlias); `host` is then the resolved address.
    ssh_alias: str | None = None

    def port(self, service: str) -> int:
        return int(self.ports.get(service, DEFAULT_PORTS[service]))

    def remote_path(self, remote: str) -> str:
        """A path relative to the served root as the service sees it: beneath `prefix` on a stock server."""
        remote = remote.strip("/")
        if not self.prefix:
            return remote
        return f"{self.prefix}/{remote}" if remote else self.prefix


_EXAMPLE = 'a JSON object: {"host": "192.0.2.10", "ports": {"http": 8181}, "remote_root": "/srv/wb"}'
_HINT = "regenerate it with 'workbench serve' or 'workbench servers up'"


class TargetFile(BaseModel):
    """target.json as `serve` / `servers up` write it; strict, so a hand edit gone wrong is named."""

    model_config = ConfigDict(strict=True, extra="forbid")

    host: str = Field(
        description="a host name or IP address string", json_schema_extra={"example": '"host": "nas.local"'}
    )
    ports: dict[str, int] = Field(
        default_factory=dict,
        description="an object of service: port (1..65535)",
        json_schema_extra={"example": '"ports": {"http": 8181, "ftp": 2121}', "item": "a port number 1..65535"},
    )
    remote_root: str = Field(
        "",
        description="the served root's absolute path string",
        json_schema_extra={"example": '"remote_root": "/srv/wb"'},
    )
    share: str = Field(
        "workbench",
        description="the SMB share / rsync module name",
        json_schema_extra={"example": '"share": "workbench"'},
    )


def write(state_dir: Path, host: str, ports: dict[str, int], remote_root: Path, share: str) -> Path:
    path = state_dir / TARGET_FILE
    state_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"host": host, "ports": ports, "remote_root": str(remote_root), "share": share}, indent=2)
    )
    return path


def _check_ports(ports: dict[str, int], path: Path) -> None:
    for service, port in ports.items():
        if service not in DEFAULT_PORTS:
            raise UsageError(
                f"unknown service 'ports.{service}' in target file {path}", f"known: {', '.join(DEFAULT_PORTS)}"
            )
        if not 1 <= port <= 65_535:
            raise UsageError(
                f"target file {path} key 'ports.{service}' must be a port 1..65535, not {port}",
                f'e.g. "ports": {{"{service}": {DEFAULT_PORTS[service]}}}',
            )


def read(path: Path, creds: Credentials, host: str | None = None) -> Target:
    what = f"target file {path}"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise NotFoundError(f"{what} not found", "start 'workbench serve' or pass --host") from exc
    except IsADirectoryError as exc:
        raise UsageError(f"{what} is a directory", "give the target.json file to --target") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"malformed {what}: {exc}", _HINT) from exc
    parsed: TargetFile = parse_model(TargetFile, data, what, _EXAMPLE)
    _check_ports(parsed.ports, path)
    return Target(
        host=host or check_host(parsed.host, source=f"{what} key 'host'"),
        credentials=creds,
        ports={**DEFAULT_PORTS, **parsed.ports},
        remote_root=parsed.remote_root,
        share=parsed.share,
    )


def target_from_hello(given: Mapping[str, Any] | ServersHello, host: str, keys_dir: Path) -> Target:
    """The Target reaching servers started elsewhere, from the JSON object that described them (`servers
    over-ssh`'s line, a fleet's job), checked first (checked_hello: a malformed one is a one-line WorkbenchError):
    login, ports, paths; key material goes to files in keys_dir (0700), as the OpenSSH clients read it only from
    files."""
    hello = checked_hello(given)
    ports = {k: v for k, v in hello.ports.items() if k in DEFAULT_PORTS}
    ssh_key = known_hosts = None
    if hello.ssh_key:
        ssh_key = keys_dir / "client_key"
        fd = os.open(ssh_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(hello.ssh_key)
    if hello.host_keys:
        # the far sshd's host keys, filed under the name this side connects to (its known_hosts names the bind)
        name = f"[{host}]:{ports['ssh']}" if "ssh" in ports else host
        known_hosts = keys_dir / "known_hosts"
        known_hosts.write_text("".join(f"{name} {key}\n" for key in hello.host_keys))
    creds = Credentials(
        user=hello.credentials.user, password=hello.credentials.password, ssh_key=ssh_key, known_hosts=known_hosts
    )
    return Target(
        host=host,
        credentials=creds,
        ports={**DEFAULT_PORTS, **ports},
        remote_root=hello.remote_root,
        share=hello.share,
    )

"""A host alias resolved the way OpenSSH resolves it: `ssh -G` prints the configuration it would use.

`ssh -G` reads ~/.ssh/config (or the file named by WORKBENCH_SSH_CONFIG, passed as `-F`) and the
system file, applies Host and Match blocks and prints the result without any network traffic, so the
Python client (paramiko) and the OpenSSH programs agree on HostName, User, Port, identity files,
known_hosts files, ProxyJump and HostKeyAlias. ssh prints known_hosts paths already expanded but
identity files as written (``~/.ssh/id_ed25519``, ``%d/key``): those are expanded here with the same
tokens ssh uses. ssh prints a list on one line separated by spaces, so a path containing a space
cannot be told apart from two paths; such paths are not supported.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
from dataclasses import dataclass

from workbench.shared.errors import NotFoundError, UsageError

ENV_CONFIG = "WORKBENCH_SSH_CONFIG"
TIMEOUT_S = 15.0


@dataclass(frozen=True)
class SshHost:
    """What `ssh -G ALIAS` says it would use to reach ALIAS."""

    alias: str  # the host as the user wrote it
    hostname: str
    user: str
    port: int
    identity_files: tuple[str, ...] = ()  # expanded; ssh tries them in this order (missing ones are skipped)
    user_known_hosts: tuple[str, ...] = ()
    global_known_hosts: tuple[str, ...] = ()
    proxy_jump: str | None = None  # "[user@]host[:port][,...]" as ssh -G prints it; None when unset
    proxy_command: str | None = None  # unexpanded (%h, %p, %r), None when unset
    host_key_alias: str | None = None
    strict_host_key_checking: str = "ask"  # yes, no, ask, accept-new (off is printed as "false" -> "no")
    identities_only: bool = False
    batch_mode: bool = False

    @property
    def known_hosts_name(self) -> str:
        """The name this host's keys are filed under in known_hosts, as OpenSSH looks them up.

        HostKeyAlias is used exactly as written (ssh adds no port to it); otherwise the HostName, in
        the `[host]:port` form when the port is not 22.
        """
        if self.host_key_alias:
            return self.host_key_alias
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


def config_file() -> str | None:
    """The ssh config file tests (or a user) chose with WORKBENCH_SSH_CONFIG, else None (ssh's own default)."""
    value = os.environ.get(ENV_CONFIG, "").strip()
    return value or None


def config_args() -> list[str]:
    """`-F FILE` when WORKBENCH_SSH_CONFIG is set: every OpenSSH program must read the same config."""
    path = config_file()
    return ["-F", path] if path else []


def resolve(alias: str, port: int | None = None, user: str | None = None) -> SshHost:
    """Run `ssh -G [-p PORT] [-l USER] [-F CONFIG] ALIAS` and parse what it prints."""
    if not alias or alias.startswith("-") or any(c.isspace() or not c.isprintable() for c in alias):
        raise UsageError(f"invalid SSH host {alias!r}", "give a host name, address or ~/.ssh/config alias")
    ssh = shutil.which("ssh")
    if ssh is None:
        raise NotFoundError(
            "ssh is not installed, so the SSH configuration cannot be read", "apt-get install openssh-client"
        )
    argv = [ssh, "-G"]
    if port is not None:
        argv += ["-p", str(port)]
    if user:
        argv += ["-l", user]
    argv += [*config_args(), "--", alias]
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise UsageError(f"`ssh -G {alias}` did not answer within {TIMEOUT_S:.0f} s", "check the ssh config") from exc
    except OSError as exc:
        raise NotFoundError(f"cannot run ssh: {exc}", "apt-get install openssh-client") from exc
    if done.returncode != 0:
        lines = [ln.strip() for ln in done.stderr.splitlines() if ln.strip() and "Pseudo-terminal" not in ln]
        why = lines[-1] if lines else f"exit status {done.returncode}"
        where = config_file() or "~/.ssh/config"
        raise UsageError(f"ssh cannot resolve {alias!r}: {why}", f"check {where}")
    return parse(alias, done.stdout)


def parse(alias: str, text: str) -> SshHost:
    """Build an SshHost from `ssh -G` output (one `keyword value` per line, keywords in lower case)."""
    values: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key:
            values.setdefault(key.lower(), []).append(value.strip())

    def one(key: str, default: str = "") -> str:
        found = values.get(key)
        return found[0] if found else default

    def optional(key: str) -> str | None:
        value = one(key)
        return None if value.lower() in ("", "none") else value

    hostname = one("hostname", alias)
    user = one("user") or _local_user()
    try:
        port = int(one("port", "22"))
    except ValueError as exc:
        raise UsageError(f"ssh reports a bad port for {alias!r}: {one('port')!r}", "check the ssh config") from exc
    tokens = _tokens(alias, hostname, user, port)
    strict = one("stricthostkeychecking", "ask").lower()
    return SshHost(
        alias=alias,
        hostname=hostname,
        user=user,
        port=port,
        identity_files=tuple(expand(v, tokens) for v in values.get("identityfile", []) if v.lower() != "none"),
        user_known_hosts=tuple(_words(one("userknownhostsfile"))),
        global_known_hosts=tuple(_words(one("globalknownhostsfile"))),
        proxy_jump=optional("proxyjump"),
        proxy_command=optional("proxycommand"),
        host_key_alias=optional("hostkeyalias"),
        strict_host_key_checking={"false": "no", "true": "yes", "off": "no"}.get(strict, strict),
        identities_only=one("identitiesonly").lower() == "yes",
        batch_mode=one("batchmode").lower() == "yes",
    )


def _words(value: str) -> list[str]:
    return [w for w in value.split() if w.lower() != "none"]


def _local_user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return os.environ.get("USER", "")


def _home() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return os.path.expanduser("~")


def _tokens(alias: str, hostname: str, user: str, port: int) -> dict[str, str]:
    """The percent tokens ssh_config(5) defines for IdentityFile (all but %C, %j and %k)."""
    fqdn = socket.gethostname()
    return {
        "%": "%",
        "d": _home(),
        "h": hostname,
        "i": str(os.getuid()),
        "L": fqdn.split(".")[0],
        "l": fqdn,
        "n": alias,
        "p": str(port),
        "r": user,
        "u": _local_user(),
    }


def expand(path: str, tokens: dict[str, str]) -> str:
    """A path as ssh opens it: a leading `~` or `~/` is the home directory, `%X` tokens replaced."""
    if path == "~" or path.startswith("~/"):
        path = _home() + path[1:]
    return substitute(path, tokens)


def substitute(text: str, tokens: dict[str, str]) -> str:
    """`text` with each `%X` whose X is in `tokens` replaced by its value (`%%` if tokens has "%")."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "%" and i + 1 < len(text) and text[i + 1] in tokens:
            out.append(tokens[text[i + 1]])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)

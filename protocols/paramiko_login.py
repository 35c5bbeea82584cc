"""paramiko logging in to a stock SSH server the way OpenSSH would: the user's config, known_hosts, agent, keys.

`ssh -G` (workbench.shared.sshconfig) says where the alias leads (HostName, Port, User), through which
jump hosts (ProxyJump, run as `ssh -W`, or a ProxyCommand), under which name its key is filed
(HostKeyAlias or `[host]:port`), which known_hosts files to check and which identity files to try.
Host keys are checked as StrictHostKeyChecking=yes does: an unknown key fails with its type and SHA256
fingerprint and how to accept it, a changed key fails loudly. Authentication tries the agent's keys,
then the identity files, then the password (also through keyboard-interactive), as ssh does.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import hmac
import re
import shlex
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.shared.errors import AuthError, NotFoundError, UsageError, from_os_error
from workbench.shared.sshconfig import SshHost, config_args, substitute
from workbench.shared.target import url_host

try:
    import paramiko
except ImportError:  # the registry reports sftp/paramiko as unavailable
    paramiko = None  # type: ignore[assignment]

# Host-key algorithms and the key type a known_hosts line names for them.
_KEY_TYPE = {"rsa-sha2-512": "ssh-rsa", "rsa-sha2-256": "ssh-rsa"}


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH's SHA256 fingerprint of a public key: `SHA256:` and unpadded base64."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


# --- the connection: direct, through ProxyJump hosts, or a ProxyCommand ---------------------------------


def open_socket(host: SshHost, connect_timeout_s: float, io_timeout_s: float) -> socket.socket | paramiko.ProxyCommand:
    """A connected socket (or paramiko.ProxyCommand) to the host as ssh would reach it."""
    command = proxy_argv(host, connect_timeout_s)
    if command is None:
        try:
            sock = socket.create_connection((host.hostname, host.port), timeout=connect_timeout_s)
        except OSError as exc:
            error = from_os_error(exc, "connecting over SSH", host.hostname, host.port)
            # A server workbench did not start: the generic hint (start 'workbench serve') does not apply.
            hint = f"is an SSH server running there? `ssh -G {host.alias}` shows where the ssh config leads"
            raise type(error)(error.message, hint) from exc
        sock.settimeout(io_timeout_s)
        return sock
    if shutil.which(command[0]) is None:
        raise NotFoundError(f"{command[0]} is needed to reach {host.alias} through its proxy", "install it")
    proxy = paramiko.ProxyCommand(shlex.join(command))
    proxy.settimeout(io_timeout_s)
    return proxy


def proxy_argv(host: SshHost, connect_timeout_s: float) -> list[str] | None:
    """The command that carries the connection, as OpenSSH would run it; None for a direct TCP connection.

    ProxyJump `a,b` becomes `ssh -J a -W HOST:PORT b` (OpenSSH's own expansion); a ProxyCommand runs through
    /bin/sh with %h, %p, %r, %n and %% replaced.
    """
    if host.proxy_jump:
        hops = [h.strip() for h in host.proxy_jump.split(",") if h.strip()]
        argv = [
            "ssh",
            *config_args(),
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={max(1, round(connect_timeout_s))}",
        ]
        if len(hops) > 1:
            argv += ["-J", ",".join(hops[:-1])]
        last = hops[-1] if hops[-1].startswith("ssh://") else f"ssh://{hops[-1]}"
        return [*argv, "-W", f"{url_host(host.hostname)}:{host.port}", "--", last]
    if host.proxy_command:
        # The values go into a shell command line: a user or host name with shell syntax in it (from a URL, an
        # environment variable or a netrc) could run commands. Refused, as OpenSSH refuses such names.
        named = {"h": host.hostname, "r": host.user, "n": host.alias}
        for token, value in named.items():
            if f"%{token}" in host.proxy_command and not _SHELL_SAFE.fullmatch(value):
                raise UsageError(
                    f"{value!r} cannot go into the ProxyCommand of {host.alias}: it holds characters a shell "
                    "reads as syntax",
                    "use a plain user and host name",
                )
        tokens = {**named, "p": str(host.port), "%": "%"}
        return ["/bin/sh", "-c", "exec " + substitute(host.proxy_command, tokens)]
    return None


# What OpenSSH accepts in a user or host name it substitutes into a ProxyCommand: no shell syntax, no leading "-".
_SHELL_SAFE = re.compile(r"[A-Za-z0-9_.@+:\[\]%][A-Za-z0-9_.@+:\[\]%-]*")


# --- host keys --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KnownKey:
    marker: str  # "", "@revoked" or "@cert-authority"
    key_type: str
    blob: bytes
    where: str  # file:line, for messages


def _glob(pattern: str) -> re.Pattern[str]:
    """OpenSSH's host patterns know only * and ? (`[` is literal: `[host]:port`); names compare without case."""
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL)


def _name_matches(pattern_list: str, name: str) -> bool:
    """A known_hosts host field: hashed (|1|salt|hash) or comma-separated patterns with * ? and !negation."""
    if pattern_list.startswith("|1|"):
        try:
            _, _, salt, digest = pattern_list.split("|")
            mac = hmac.new(base64.b64decode(salt), name.encode(), hashlib.sha1).digest()
            return hmac.compare_digest(mac, base64.b64decode(digest))
        except (ValueError, TypeError):
            return False
    matched = False
    for pattern in pattern_list.split(","):
        negated = pattern.startswith("!")
        if _glob(pattern[1:] if negated else pattern).fullmatch(name):
            if negated:
                return False
            matched = True
    return matched


def known_keys(files: list[str], name: str) -> list[KnownKey]:
    """Every known_hosts line, in every file that exists, that applies to `name`."""
    name = name.lower()  # ssh lowercases the host name before it looks it up (and hashes it)
    found: list[KnownKey] = []
    for path in files:
        try:
            lines = Path(path).read_text(errors="replace").splitlines()
        except OSError:
            continue
        for number, line in enumerate(lines, 1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            marker = fields.pop(0) if fields[0].startswith("@") else ""
            if len(fields) < 3 or not _name_matches(fields[0], name):
                continue
            try:
                blob = base64.b64decode(fields[2], validate=True)
            except ValueError:
                continue
            found.append(KnownKey(marker, fields[1], blob, f"{path}:{number}"))
    return found


def prefer_known_types(transport: paramiko.Transport, known: list[KnownKey]) -> None:
    """Offer first the host-key algorithms known_hosts has a key for, as OpenSSH does."""
    types = {k.key_type for k in known if not k.marker}
    if not types:
        return
    options = transport.get_security_options()
    algorithms = list(options.key_types)
    algorithms.sort(key=lambda a: _KEY_TYPE.get(a, a) not in types)  # stable: known types first
    options.key_types = tuple(algorithms)


def check_host_key(key: paramiko.PKey, host: SshHost, files: list[str], hint: str) -> None:
    """Raise AuthError unless known_hosts holds exactly this key for the host (StrictHostKeyChecking=yes)."""
    name = host.known_hosts_name
    known = known_keys(files, name)
    offered_type, blob = key.get_name(), key.asbytes()
    shown = f"{offered_type} key {fingerprint(key)}"
    if any(k.marker == "@revoked" and k.blob == blob for k in known):
        raise AuthError(
            f"the host key of {name} ({shown}) is marked @revoked", "do not connect: ask the server's owner"
        )
    plain = [k for k in known if not k.marker]
    if any(k.key_type == offered_type and k.blob == blob for k in plain):
        return
    same_type = [k for k in plain if k.key_type == offered_type]
    if same_type:
        raise AuthError(
            f"host key of {name} has CHANGED: the server offers {shown}, {same_type[0].where} holds another",
            f"if the server was reinstalled, remove the old key (ssh-keygen -R '{name}'), else someone is in between",
        )
    others = sorted({k.key_type for k in plain})
    also = f" (known_hosts has only {', '.join(others)} for it)" if others else ""
    searched = ", ".join(f for f in files if Path(f).exists()) or "no known_hosts file exists"
    raise AuthError(f"host key of {name} is unknown: {shown}{also}; searched {searched}", hint)


# --- authentication ---------------------------------------------------------------------------------------


def _public_blob(path: Path) -> bytes | None:
    try:
        fields = path.with_name(path.name + ".pub").read_text().split()
        return base64.b64decode(fields[1]) if len(fields) > 1 else None
    except (OSError, ValueError):
        return None


def authenticate(
    transport: paramiko.Transport,
    user: str,
    identity_files: list[str],
    identities_only: bool,
    password: str,
    where: str,
) -> None:
    """Log in with the agent's keys, then the identity files, then the password, as ssh tries them."""
    tried: list[str] = []
    notes: list[str] = []
    allowed: list[str] | None = None  # what the server still accepts, once it has said
    offered: set[bytes] = set()

    def attempt(method: str, call: Callable[[], list[str]]) -> bool:
        nonlocal allowed
        if allowed is not None and method not in allowed:
            return False
        tried.append(method)
        try:
            remaining = call()
        except paramiko.BadAuthenticationType as exc:
            allowed = list(exc.allowed_types)
            return False
        except paramiko.AuthenticationException:
            return False
        if remaining:  # partial success: the server wants another method too
            allowed = list(remaining)
            return False
        return True

    files = [Path(f) for f in identity_files]
    wanted = {b for b in (_public_blob(f) for f in files) if b}
    agent = _agent()
    try:
        for agent_key in agent.get_keys() if agent is not None else ():
            blob = agent_key.asbytes()
            if identities_only and blob not in wanted:
                continue
            offered.add(blob)
            if attempt("publickey", functools.partial(transport.auth_publickey, user, agent_key)):
                return
        for path in files:
            key = _load_key(path, notes)
            if key is None or key.asbytes() in offered:
                continue
            offered.add(key.asbytes())
            if attempt("publickey", functools.partial(transport.auth_publickey, user, key)):
                return
    finally:
        if agent is not None:
            with contextlib.suppress(Exception):
                agent.close()
    if password:
        if attempt("password", lambda: transport.auth_password(user, password)):
            return
        if attempt("keyboard-interactive", lambda: transport.auth_interactive(user, _answer_with(password))):
            return
    methods = ", ".join(dict.fromkeys(tried)) or "nothing to try"
    extra = f"; {'; '.join(notes)}" if notes else ""
    raise AuthError(
        f"{user}@{where} was refused by SSH (tried: {methods}){extra}",
        "check the user, the key (IdentityFile in ~/.ssh/config, or ssh-add -l for the agent) or give a password",
    )


def _agent() -> paramiko.Agent | None:
    try:
        return paramiko.Agent()
    except (paramiko.SSHException, OSError):
        return None  # no agent, or one that speaks something else: ssh would go on without it too


def _load_key(path: Path, notes: list[str]) -> paramiko.PKey | None:
    if not path.exists():
        return None
    try:
        return paramiko.PKey.from_path(path)
    except paramiko.PasswordRequiredException:
        notes.append(f"{path} is encrypted (add it to the agent with ssh-add)")
    except (OSError, ValueError, paramiko.SSHException) as exc:
        notes.append(f"cannot load {path}: {exc}")
    return None


def _answer_with(password: str) -> Callable[[str, str, list[tuple[str, bool]]], list[str]]:
    def handler(title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
        # Hidden prompts are the password; an echoed one (a user name, a question) gets nothing.
        return [password if not echo else "" for _, echo in prompts]

    return handler

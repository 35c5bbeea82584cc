"""Servers given by URL (`workbench run smb://nas/share`): parsing, defaults and a display form.

Accepted, with the scheme's default port when none is given:

- ``smb://[user@]host[:port]/share[/dir]`` (445)
- ``sftp://`` or ``ssh://[user@]host[:port][/dir]`` (22): curl's convention: no path or ``/~/dir`` is
  relative to the login's home directory, any other path is absolute
- ``ftp://`` and ``ftps://[user@]host[:port][/dir]`` (21; ftps is explicit TLS): relative to the login directory
- ``rsync://[user@]host[:port]/module[/dir]`` (873)
- ``http://`` and ``https://[user@]host[:port][/dir]`` (80, 443): a WebDAV directory
- ``afp://[user@]host[:port]/volume[/dir]`` (548)

Components are percent-decoded; an IPv6 address goes in brackets. A password in the URL is refused: it
would land in the shell's history and, passed on, in `ps`. Nothing here touches the network or the disk.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from workbench.shared.errors import UsageError
from workbench.shared.validate import MAX_PORT, check_host


@dataclass(frozen=True)
class Scheme:
    service: str  # the Target.ports key: smb, ssh, ftp, rsync, http, afp
    default_port: int
    export: str | None  # what the first path component names ("share", "module", "volume"), None: no such thing
    tls: bool = False


SCHEMES: dict[str, Scheme] = {
    "smb": Scheme("smb", 445, "share"),
    "sftp": Scheme("ssh", 22, None),
    "ssh": Scheme("ssh", 22, None),
    "ftp": Scheme("ftp", 21, None),
    "ftps": Scheme("ftp", 21, None, tls=True),
    "rsync": Scheme("rsync", 873, "module"),
    "http": Scheme("http", 80, None),
    "https": Scheme("http", 443, None, tls=True),
    "afp": Scheme("afp", 548, "volume"),
}

PASSWORD_WAYS = "set WORKBENCH_PASSWORD, add it to ~/.netrc, store it in the OS keyring, or type it at the prompt"
_EXAMPLE = "e.g. smb://alice@nas.local/share, sftp://nas.local/~/dir, rsync://nas.local/module"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class StockUrl:
    """A parsed server URL. `path` is POSIX without a trailing slash; "" is the export's (or home's) root.

    For sftp/ssh a `path` starting with "/" is absolute, otherwise relative to the login's home directory;
    for every other scheme it is relative to what the service exports (the share, module, volume, FTP login
    directory or the HTTP server's root).
    """

    scheme: str  # as typed, lower case: "ssh" stays "ssh" (the display form keeps it)
    host: str  # decoded; an IPv6 address without brackets
    port: int  # as given, else the scheme's default
    port_given: bool  # the URL named the port (for SSH, else ~/.ssh/config's Port applies)
    user: str | None  # decoded; None: not in the URL
    share: str  # the SMB share, rsync module or AFP volume ("" for the other schemes)
    path: str

    @property
    def service(self) -> str:
        return SCHEMES[self.scheme].service

    @property
    def tls(self) -> bool:
        return SCHEMES[self.scheme].tls

    @property
    def is_ssh(self) -> bool:
        return self.service == "ssh"

    def display(self) -> str:
        """The URL again, normalised, percent-encoded where needed: never holds a secret (none is accepted)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{quote(self.user, safe='')}@" if self.user is not None else ""
        port = f":{self.port}" if self.port_given else ""
        parts = [quote(p, safe="") for p in (self.share, *self.path.strip("/").split("/")) if p]
        if self.is_ssh:
            # curl's convention: /~/ marks a path relative to the home directory
            tail = "/" + "/".join(parts) if self.path.startswith("/") else "/~/" + "/".join(parts) if parts else ""
        else:
            tail = "/" + "/".join(parts) if parts else ""
        return f"{self.scheme}://{user}{host}{port}{tail}"

    def __str__(self) -> str:
        return self.display()


def _refuse(message: str, hint: str = _EXAMPLE) -> UsageError:
    return UsageError(message, hint)


def _decode(text: str, what: str) -> str:
    try:
        value = unquote(text, errors="strict")
    except UnicodeDecodeError as exc:
        raise _refuse(f"the URL's {what} is not valid UTF-8 once percent-decoded") from exc
    if _CONTROL.search(value):
        raise _refuse(f"the URL's {what} holds a control character")
    return value


def _port(text: str) -> int:
    # The text is never echoed: a URL mangled by a password with '/' or '#' in it puts part of it here.
    if not text.isdigit() or not 1 <= int(text) <= MAX_PORT:
        raise _refuse(f"the URL's port must be a number 1..{MAX_PORT}", "e.g. smb://nas.local:445/share")
    return int(text)


def _host(text: str) -> str:
    if text.startswith("["):
        inner = _decode(text[1:-1], "host")
        try:
            ipaddress.IPv6Address(inner)
        except ValueError as exc:
            raise _refuse("the URL's host in brackets must be an IPv6 address", "e.g. sftp://[::1]:2222/") from exc
        return inner
    host = _decode(text, "host")
    if not host:
        raise _refuse("the URL names no host")
    if host.startswith("-"):
        raise _refuse("the URL's host may not start with '-'", "an SSH client would read it as an option")
    return check_host(host, source="the URL's host")


def split_host_port(text: str, what: str) -> tuple[str, str | None]:
    """'host:port', '[v6]:port', 'host' -> (host text, port text or None); the port text is not checked."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise _refuse(f"{what}: an IPv6 address needs its closing ']'", "e.g. [::1]:5201")
        rest = text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise _refuse(f"{what}: expected ':PORT' after the IPv6 address", "e.g. [::1]:5201")
        return text[: end + 1], rest[1:] if rest else None
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, None
    if ":" in host:
        raise _refuse(f"{what}: an IPv6 address goes in brackets", "e.g. [::1]:5201")
    return host, port


def _segments(path: str) -> list[str]:
    """Decoded path components; empty ones (doubled or trailing slashes) dropped; '.' and '..' refused."""
    parts = []
    for raw in path.split("/"):
        if not raw:
            continue
        part = _decode(raw, "path")
        if part in (".", "..") or "/" in part:
            raise _refuse("the URL's path may not hold '.', '..' or an encoded '/'", "name the directory itself")
        parts.append(part)
    return parts


def parse(text: str) -> StockUrl:
    """Parse a server URL (see the module docstring); a UsageError in one line for anything else."""
    scheme, sep, rest = text.strip().partition("://")
    if not sep:
        raise _refuse(f"{text!r} is not a server URL (scheme://host/...)")
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise _refuse(f"unknown URL scheme {scheme!r}", f"use one of {known}")
    kind = SCHEMES[scheme]
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    userinfo, at, hostport = authority.rpartition("@")
    # A password holding '/', '?' or '#' ends the authority early: 'u:pa/ss@host' reads as host 'u', port 'pa'.
    cut_short = not at and ":" in authority and not authority.rpartition(":")[2].isdigit() and "@" in tail
    if (at and ":" in userinfo) or cut_short:
        raise _refuse("a password in the URL would be kept in the shell's history and shown by ps", PASSWORD_WAYS)
    if "?" in tail or "#" in tail:
        raise _refuse("the URL may not have a query ('?') or a fragment ('#')", "give the directory only")
    user = _decode(userinfo, "user") if at else None
    if user == "":
        raise _refuse("the URL has an empty user name before '@'", "e.g. smb://alice@nas.local/share")
    if user is not None and user.startswith("-"):
        # sftp, scp, rsync and sshfs take the user into their arguments: older OpenSSH reads '-oX' there as an option
        raise _refuse("the URL's user may not start with '-'", "e.g. smb://alice@nas.local/share")
    host_text, port_text = split_host_port(hostport, "the URL's host")
    host = _host(host_text)
    port_given = bool(port_text)
    port = _port(port_text) if port_text else kind.default_port
    if kind.service == "ssh":
        home = tail in ("", "/") or tail == "/~" or tail.startswith("/~/")
        parts = _segments(tail[2:] if tail.startswith("/~") else tail)
        path = "/".join(parts) if home else "/" + "/".join(parts)
        return StockUrl(scheme, host, port, port_given, user, "", path)
    parts = _segments(tail)
    share = ""
    if kind.export is not None:
        if not parts:
            raise _refuse(
                f"{scheme}:// needs a {kind.export} after the host",
                f"e.g. {scheme}://{host_text}/{kind.export}[/directory]",
            )
        share, parts = parts[0], parts[1:]
    return StockUrl(scheme, host, port, port_given, user, share, "/".join(parts))


def parse_host_port(text: str, what: str = "--iperf3") -> tuple[str | None, int]:
    """'[HOST:]PORT' (HOST may be '[v6]') -> (host or None, port)."""
    value = text.strip()
    if value.isdigit():
        host_text, port_text = "", value
    else:
        host_text, port_text_or_none = split_host_port(value, what)
        if port_text_or_none is None:
            raise _refuse(f"{what} must be [HOST:]PORT, not {text!r}", f"e.g. {what} 5201 or {what} nas.local:5201")
        port_text = port_text_or_none
    if not port_text.isdigit() or not 1 <= int(port_text) <= MAX_PORT:
        raise _refuse(f"{what} must be [HOST:]PORT with a port 1..{MAX_PORT}, not {text!r}", f"e.g. {what} 5201")
    if not host_text:
        return None, int(port_text)
    if host_text.startswith("["):
        try:
            return str(ipaddress.IPv6Address(host_text[1:-1])), int(port_text)
        except ValueError as exc:
            raise _refuse(f"{what}: {host_text!r} is not an IPv6 address", f"e.g. {what} [::1]:5201") from exc
    return check_host(host_text, source=what), int(port_text)

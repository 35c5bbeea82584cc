"""Who logs in to a server given by URL, and with what password: never from a command line.

User: the URL's, else $WORKBENCH_USER, else the login of the ~/.netrc entry for the host, else (SSH)
what `ssh -G` says (~/.ssh/config's User), else the local user.

Password: $WORKBENCH_PASSWORD, else the ~/.netrc entry for the host (the file $NETRC names, as curl's
--netrc-file and Python's requests read it, else ~/.netrc; refused when others can read it), else the OS
keyring when the `keyring` package is installed (service "scheme://host", then "workbench", under the
user's name), else a prompt when stdin is a terminal. SSH may have none: keys and the agent log in then,
and a prompt comes only if they are refused (`ask`). Otherwise a one-line AuthError names the four ways.
"""

from __future__ import annotations

import getpass
import importlib.util
import netrc
import os
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from workbench.shared.credentials import ENV_PASSWORD, ENV_USER
from workbench.shared.errors import AuthError, UsageError
from workbench.shared.urls import PASSWORD_WAYS, StockUrl

KEYRING_SERVICE = "workbench"
ENV_NETRC = "NETRC"


@dataclass(frozen=True)
class Login:
    user: str
    password: str | None = field(repr=False)  # None: none found (SSH keys and the agent log in)
    user_from: str = ""  # where the user came from, for `doctor`: "the URL", "$WORKBENCH_USER", ...
    password_from: str | None = None  # where the password came from; never the password itself

    def describe(self) -> str:
        """'alice (from the URL), password from ~/.netrc': what `doctor` shows; no secret."""
        how = f"password from {self.password_from}" if self.password else "no password (keys and the agent)"
        return f"{self.user} (from {self.user_from}), {how}"


@dataclass(frozen=True)
class _NetrcEntry:
    login: str
    password: str = field(repr=False)
    source: str = ""


def netrc_path(env: Mapping[str, str]) -> Path:
    given = env.get(ENV_NETRC)
    return Path(given) if given else Path(env.get("HOME") or os.path.expanduser("~")) / ".netrc"


def _netrc_entry(host: str, env: Mapping[str, str]) -> _NetrcEntry | None:
    path = netrc_path(env)
    shown = f"${ENV_NETRC} ({path})" if env.get(ENV_NETRC) else "~/.netrc"
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AuthError(f"cannot read {shown}: {exc.strerror}", "check its permissions") from exc
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    try:
        parsed = netrc.netrc(str(path))
    except netrc.NetrcParseError as exc:
        # the parser's message may quote a token, and a token may be a password: say where, not what
        raise AuthError(f"cannot parse {shown} (line {exc.lineno})", "fix the entry there") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise AuthError(f"cannot read {shown}: {exc}", "check the file") from exc
    found = parsed.authenticators(host)
    if found is None:
        return None
    login, _account, password = found
    if password and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AuthError(f"{shown} holds passwords and others may read it", f"chmod 600 {path}")
    return _NetrcEntry(login or "", password or "", shown)


def _keyring_password(url: StockUrl, user: str) -> str | None:
    if importlib.util.find_spec("keyring") is None:
        return None
    import keyring

    for service in (f"{url.scheme}://{url.host}", KEYRING_SERVICE):
        try:
            password = keyring.get_password(service, user)
        except Exception:  # no backend, a locked store, a D-Bus error: the keyring simply has nothing for us
            return None
        if password:
            return password
    return None


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except ValueError:  # stdin closed
        return False


def resolve_user(url: StockUrl, *, ssh_user: str | None = None, env: Mapping[str, str] | None = None) -> Login:
    """The user alone (no password looked up): what `doctor` and SSH's config resolution need first."""
    env = os.environ if env is None else env
    if url.user:
        return Login(url.user, None, "the URL")
    if env.get(ENV_USER):
        return Login(env[ENV_USER], None, f"${ENV_USER}")
    entry = _netrc_entry(url.host, env)
    if entry is not None and entry.login:
        return Login(entry.login, None, entry.source)
    if url.is_ssh and ssh_user:
        return Login(ssh_user, None, "ssh's configuration")
    return Login(getpass.getuser(), None, "the local user")


def resolve(
    url: StockUrl,
    *,
    prompt: bool,
    ssh_user: str | None = None,
    env: Mapping[str, str] | None = None,
    ask_password: Callable[[str], str] = getpass.getpass,
) -> Login:
    """The login for `url`, in the order of the module docstring; AuthError when no password can be had.

    `prompt`: a prompt may be shown when stdin is a terminal. `ssh_user`: the User `ssh -G` resolved.
    """
    env = os.environ if env is None else env
    who = resolve_user(url, ssh_user=ssh_user, env=env)
    password, source = _find_password(url, who.user, env)
    if password is None and not url.is_ssh:
        if url.service == "ftp" and who.user in ("anonymous", "ftp"):
            return Login(who.user, "", who.user_from, "anonymous FTP")
        password = ask(url, who.user, prompt=prompt, ask_password=ask_password)
        source = "the prompt"
    return Login(who.user, password, who.user_from, source)


def _find_password(url: StockUrl, user: str, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    if env.get(ENV_PASSWORD):
        return env[ENV_PASSWORD], f"${ENV_PASSWORD}"
    entry = _netrc_entry(url.host, env)
    # an entry for another login on the same host is someone else's password (curl reads it the same way)
    if entry is not None and entry.password and entry.login in ("", user):
        return entry.password, entry.source
    password = _keyring_password(url, user)
    if password:
        return password, "the OS keyring"
    return None, None


def can_prompt(prompt: bool) -> bool:
    """A password may be asked for: the caller allows it and stdin is a terminal."""
    return prompt and _stdin_is_terminal()


def ask(url: StockUrl, user: str, *, prompt: bool, ask_password: Callable[[str], str] = getpass.getpass) -> str:
    """The password typed at a prompt (only on a terminal); AuthError naming the four ways otherwise."""
    where = f"{user}@{url.display().split('://', 1)[1].rpartition('@')[2]}"  # the URL's host and path
    if not can_prompt(prompt):
        raise AuthError(f"no password for {where} and no terminal to ask on", PASSWORD_WAYS)
    try:
        typed = ask_password(f"password for {where}: ")
    except EOFError as exc:
        raise AuthError(f"no password typed for {where}", PASSWORD_WAYS) from exc
    if not typed:
        raise UsageError(f"an empty password for {where}", PASSWORD_WAYS)
    return typed

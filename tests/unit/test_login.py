"""Login resolution for server URLs: the user and password sources in their order (URL, environment, netrc,
ssh's configuration, the OS keyring through a real keyring backend kept in memory, the prompt), and the
refusals (a netrc others can read, no password and no terminal) in one line that never holds a secret."""

from __future__ import annotations

import getpass
import io
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend

from workbench.shared import login
from workbench.shared.errors import AuthError
from workbench.shared.urls import parse


class MemoryKeyring(KeyringBackend):
    """A keyring backend holding its passwords in a dict: the keyring package's own API, no OS store."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.store.pop((service, username), None)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    before = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    try:
        yield ring
    finally:
        keyring.set_keyring(before)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HOME and none of the variables a developer may have set."""
    for name in ("WORKBENCH_USER", "WORKBENCH_PASSWORD", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal unless a test says so
    return tmp_path


def _netrc(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def _never_asked(prompt: str) -> str:
    raise AssertionError(f"asked for a password: {prompt}")


def test_user_order(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sftp = parse("sftp://nas.local/")
    assert login.resolve_user(sftp).user == getpass.getuser()
    assert login.resolve_user(sftp, ssh_user="from-ssh").user == "from-ssh"
    assert login.resolve_user(parse("smb://nas.local/s"), ssh_user="from-ssh").user == getpass.getuser()
    _netrc(home / ".netrc", "machine nas.local login netrc-user password pw\n")
    assert login.resolve_user(sftp, ssh_user="from-ssh").user == "netrc-user"
    monkeypatch.setenv("WORKBENCH_USER", "env-user")
    assert login.resolve_user(sftp).user == "env-user"
    who = login.resolve_user(parse("sftp://url-user@nas.local/"))
    assert (who.user, who.user_from) == ("url-user", "the URL")


def test_password_from_environment_first(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _netrc(home / ".netrc", "machine nas.local login alice password from-netrc\n")
    monkeypatch.setenv("WORKBENCH_PASSWORD", "from-env")
    found = login.resolve(parse("smb://alice@nas.local/s"), prompt=True, ask_password=_never_asked)
    assert (found.password, found.password_from) == ("from-env", "$WORKBENCH_PASSWORD")
    assert "from-env" not in repr(found) and "from-env" not in found.describe()


def test_password_from_netrc(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _netrc(home / ".netrc", "machine nas.local login alice password from-netrc\ndefault login x password y\n")
    found = login.resolve(parse("ftp://nas.local/"), prompt=False)
    assert (found.user, found.password, found.password_from) == ("alice", "from-netrc", "~/.netrc")
    # another login's entry on the same host is not this user's password; the default entry is for login x
    with pytest.raises(AuthError):
        login.resolve(parse("ftp://bob@nas.local/"), prompt=False)
    other = _netrc(home / "elsewhere", "machine nas.local login alice password via-NETRC\n")
    monkeypatch.setenv("NETRC", str(other))
    assert login.resolve(parse("ftp://nas.local/"), prompt=False).password == "via-NETRC"


def test_netrc_others_can_read_is_refused(home: Path) -> None:
    _netrc(home / ".netrc", "machine nas.local login alice password open-secret\n", mode=0o644)
    with pytest.raises(AuthError) as info:
        login.resolve(parse("smb://nas.local/s"), prompt=False)
    assert "chmod 600" in info.value.one_line() and "open-secret" not in info.value.one_line()


def test_netrc_syntax_error_does_not_quote_the_file(home: Path) -> None:
    # Python's parser says "bad follower token 'hunter3'": a password typed one token too far
    _netrc(home / ".netrc", "machine nas.local login alice password hunter2 hunter3\n")
    with pytest.raises(AuthError) as info:
        login.resolve(parse("smb://nas.local/s"), prompt=False)
    line = info.value.one_line()
    assert "hunter2" not in line and "hunter3" not in line and "(line " in line


def test_password_from_keyring(home: Path, memory_keyring: MemoryKeyring) -> None:
    memory_keyring.set_password("workbench", "alice", "general")
    found = login.resolve(parse("https://alice@dav.local/d"), prompt=False)
    assert (found.password, found.password_from) == ("general", "the OS keyring")
    memory_keyring.set_password("https://dav.local", "alice", "specific")
    assert login.resolve(parse("https://alice@dav.local/d"), prompt=False).password == "specific"


def test_prompt_only_on_a_terminal(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = parse("smb://alice@nas.local/share")
    with pytest.raises(AuthError) as info:
        login.resolve(url, prompt=True, ask_password=_never_asked)
    line = info.value.one_line()
    for way in ("WORKBENCH_PASSWORD", "netrc", "keyring", "prompt"):
        assert way in line
    monkeypatch.setattr("sys.stdin", _Terminal())
    asked: list[str] = []

    def typed(prompt: str) -> str:
        asked.append(prompt)
        return "typed-secret"

    found = login.resolve(url, prompt=True, ask_password=typed)
    assert (found.password, found.password_from) == ("typed-secret", "the prompt")
    assert asked == ["password for alice@nas.local/share: "]
    with pytest.raises(AuthError):
        login.resolve(url, prompt=False, ask_password=typed)  # --no-prompt, or a lab run


def test_ssh_may_have_no_password(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", _Terminal())
    found = login.resolve(parse("sftp://alice@nas.local/"), prompt=True, ask_password=_never_asked)
    assert found.password is None and "keys" in found.describe()


def test_anonymous_ftp(home: Path) -> None:
    found = login.resolve(parse("ftp://anonymous@ftp.local/pub"), prompt=False)
    assert (found.user, found.password) == ("anonymous", "")

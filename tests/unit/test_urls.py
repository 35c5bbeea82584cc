"""Server URLs: every scheme's parts and defaults, curl's home-relative SSH paths, percent-decoding, IPv6,
the display form, and each refusal as one line (a password in the URL never echoed)."""

from __future__ import annotations

import pytest

from workbench.shared.errors import UsageError
from workbench.shared.urls import parse, parse_host_port


@pytest.mark.parametrize(
    ("text", "service", "port", "user", "share", "path"),
    [
        ("smb://alice@nas.local/plain", "smb", 445, "alice", "plain", ""),
        ("smb://nas.local:4455/plain/a/b/", "smb", 4455, None, "plain", "a/b"),
        ("SMB://nas.local/Public%20Share/dir%2Done", "smb", 445, None, "Public Share", "dir-one"),
        ("sftp://bob@host", "ssh", 22, "bob", "", ""),
        ("sftp://host/", "ssh", 22, None, "", ""),
        ("ssh://host:2222/~/scratch/x", "ssh", 2222, None, "", "scratch/x"),
        ("sftp://host/~", "ssh", 22, None, "", ""),
        ("sftp://host/srv/data", "ssh", 22, None, "", "/srv/data"),
        ("ftp://u@127.0.0.1:2121/in/box", "ftp", 2121, "u", "", "in/box"),
        ("ftps://host", "ftp", 21, None, "", ""),
        ("rsync://backup@nas:8730/module/sub", "rsync", 8730, "backup", "module", "sub"),
        ("http://host/dav/", "http", 80, None, "", "dav"),
        ("https://host:8443/remote.php/dav/files/me", "http", 8443, None, "", "remote.php/dav/files/me"),
        ("afp://mac.local/Volume/Folder", "afp", 548, None, "Volume", "Folder"),
        ("smb://user%40corp@nas/share", "smb", 445, "user@corp", "share", ""),
    ],
)
def test_parses_each_scheme(text: str, service: str, port: int, user: str | None, share: str, path: str) -> None:
    url = parse(text)
    assert (url.service, url.port, url.user, url.share, url.path) == (service, port, user, share, path)
    assert parse(url.display()) == url  # the display form reads back as the same URL


def test_tls_and_given_ports() -> None:
    assert parse("ftps://h").tls and parse("https://h").tls
    assert not parse("ftp://h").tls and not parse("http://h").tls
    assert parse("https://h").port == 443
    assert parse("ssh://h:22/").port_given and not parse("ssh://h/").port_given


def test_ipv6_in_brackets() -> None:
    url = parse("sftp://alice@[::1]:2222/~/d")
    assert (url.host, url.port, url.user, url.path) == ("::1", 2222, "alice", "d")
    assert url.display() == "sftp://alice@[::1]:2222/~/d"
    assert parse("smb://[fe80::1%25eth0]/s").host == "fe80::1%eth0"


def test_display_encodes_and_keeps_scheme() -> None:
    assert parse("ssh://h/abs/p").display() == "ssh://h/abs/p"
    assert parse("smb://nas/My%20Share/a%2Fb".replace("%2F", "-")).display() == "smb://nas/My%20Share/a-b"
    assert parse("ftp://h//").display() == "ftp://h"


def _refused(text: str) -> str:
    with pytest.raises(UsageError) as info:
        parse(text)
    line = info.value.one_line()
    assert "\n" not in line
    return line


@pytest.mark.parametrize(
    "text",
    ["smb://alice:hunter2@nas/share", "sftp://alice:@host/", "ftp://al:hun/ter2@host/x", "http://a:hunter2@h/d"],
)
def test_refuses_a_password_without_echoing_it(text: str) -> None:
    line = _refused(text)
    secret = text.split(":", 2)[2].split("@")[0]
    if secret:
        assert secret not in line
    assert "password" in line
    for way in ("WORKBENCH_PASSWORD", "netrc", "keyring", "prompt"):
        assert way in line


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("gopher://host/x", "unknown URL scheme 'gopher'"),
        ("nas.local/share", "not a server URL"),
        ("smb://nas.local", "needs a share"),
        ("smb://nas.local/", "needs a share"),
        ("rsync://nas.local", "needs a module"),
        ("afp://mac.local", "needs a volume"),
        ("smb://nas:0/s", "port"),
        ("smb://nas:65536/s", "port"),
        ("smb://nas:44x/s", "port"),
        ("smb://nas/s/../etc", "'..'"),
        ("smb://nas/s/a%2Fb", "encoded '/'"),
        ("smb://nas/s/%00", "control character"),
        ("smb://nas/s/%ff", "UTF-8"),
        ("http://h/d?x=1", "query"),
        ("http://h/d#frag", "fragment"),
        ("smb://@nas/s", "empty user"),
        ("smb://[nas]/s", "IPv6"),
        ("smb://::1/s", "brackets"),
        ("smb:///s", "no host"),
        ("smb://na s/s", "host"),
    ],
)
def test_refusals_are_one_line(text: str, needle: str) -> None:
    assert needle in _refused(text)


def test_host_port() -> None:
    assert parse_host_port("5201") == (None, 5201)
    assert parse_host_port("nas.local:5202") == ("nas.local", 5202)
    assert parse_host_port("[::1]:5201") == ("::1", 5201)
    for bad in ("nas.local", "0", "70000", "nas:", ":5201x", "[::1]", "::1:5201", "[nas]:5201"):
        with pytest.raises(UsageError):
            parse_host_port(bad)

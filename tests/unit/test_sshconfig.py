"""A host alias resolved as OpenSSH resolves it: the real `ssh -G` (no network traffic) on a test config file;
what paramiko makes of it: known_hosts matching and the proxy commands."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import os
import pwd
from pathlib import Path

import pytest

from workbench.protocols.paramiko_login import known_keys, proxy_argv
from workbench.shared import sshconfig
from workbench.shared.errors import NotFoundError, UsageError

HOME = pwd.getpwuid(os.getuid()).pw_dir


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ssh_config"
    path.write_text(
        "Host nas\n"
        "  HostName 192.0.2.10\n"
        "  Port 2200\n"
        "  User alice\n"
        "  IdentityFile ~/.ssh/nas_key\n"
        "  IdentityFile %d/keys/%h-%r-%p\n"
        f"  UserKnownHostsFile {tmp_path}/kh_one ~/kh_two\n"
        "  GlobalKnownHostsFile /dev/null\n"
        "  HostKeyAlias nas-key\n"
        "  ProxyJump bob@jump.example:2022,jump2\n"
        "  StrictHostKeyChecking accept-new\n"
        "  IdentitiesOnly yes\n"
        "Host plain\n"
        "  HostName 192.0.2.11\n"
        "  StrictHostKeyChecking no\n"
    )
    monkeypatch.setenv(sshconfig.ENV_CONFIG, str(path))
    return path


def test_an_alias_resolves_to_what_its_host_block_says(config: Path) -> None:
    host = sshconfig.resolve("nas")
    assert (host.alias, host.hostname, host.user, host.port) == ("nas", "192.0.2.10", "alice", 2200)
    # ssh prints identity files as written: ~ and the %-tokens are expanded here as ssh would.
    assert host.identity_files == (f"{HOME}/.ssh/nas_key", f"{HOME}/keys/192.0.2.10-alice-2200")
    assert host.user_known_hosts == (f"{config.parent}/kh_one", f"{HOME}/kh_two")
    assert host.global_known_hosts == ("/dev/null",)
    assert host.proxy_jump == "bob@jump.example:2022,jump2"
    assert host.host_key_alias == "nas-key"
    assert host.strict_host_key_checking == "accept-new"
    assert host.identities_only is True
    assert host.known_hosts_name == "nas-key"  # HostKeyAlias as written, never with a port


def test_the_url_user_and_port_win_over_the_config(config: Path) -> None:
    host = sshconfig.resolve("nas", port=2222, user="carol")
    assert (host.user, host.port) == ("carol", 2222)
    assert host.identity_files[1] == f"{HOME}/keys/192.0.2.10-carol-2222"


def test_an_unconfigured_host_gets_openssh_defaults(config: Path) -> None:
    host = sshconfig.resolve("192.0.2.99")
    assert (host.hostname, host.port, host.proxy_jump, host.host_key_alias) == ("192.0.2.99", 22, None, None)
    assert host.user == pwd.getpwuid(os.getuid()).pw_name
    assert f"{HOME}/.ssh/id_ed25519" in host.identity_files
    assert host.user_known_hosts[0] == f"{HOME}/.ssh/known_hosts"
    assert host.known_hosts_name == "192.0.2.99"  # port 22: the bare name
    plain = sshconfig.resolve("plain", port=2022)
    assert plain.known_hosts_name == "[192.0.2.11]:2022"
    assert plain.strict_host_key_checking == "no"


def test_config_args_follow_the_environment(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert sshconfig.config_args() == ["-F", str(config)]
    monkeypatch.delenv(sshconfig.ENV_CONFIG)
    assert sshconfig.config_args() == []


def test_the_result_is_frozen(config: Path) -> None:
    host = sshconfig.resolve("nas")
    with pytest.raises(dataclasses.FrozenInstanceError):
        host.port = 1  # type: ignore[misc]


def test_a_broken_config_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad_config"
    bad.write_text("Host x\n  NoSuchKeyword yes\n")
    monkeypatch.setenv(sshconfig.ENV_CONFIG, str(bad))
    with pytest.raises(UsageError) as caught:
        sshconfig.resolve("x")
    assert "ssh cannot resolve 'x'" in caught.value.message and str(bad) in caught.value.hint
    monkeypatch.setenv(sshconfig.ENV_CONFIG, str(tmp_path / "missing"))
    with pytest.raises(UsageError):
        sshconfig.resolve("x")


@pytest.mark.parametrize("alias", ["", "-oProxyCommand=x", "two words"])
def test_an_alias_that_is_not_a_host_is_refused(alias: str) -> None:
    with pytest.raises(UsageError):
        sshconfig.resolve(alias)


def test_missing_ssh_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NotFoundError) as caught:
        sshconfig.resolve("nas")
    assert "openssh-client" in caught.value.hint


def test_token_expansion_matches_ssh() -> None:
    tokens = {"%": "%", "d": "/home/a", "h": "h.example", "r": "bob", "p": "22", "u": "a"}
    assert sshconfig.expand("~/k_%h_%r_%p_%u_%%", tokens) == f"{HOME}/k_h.example_bob_22_a_%"
    assert sshconfig.expand("%d/x", tokens) == "/home/a/x"
    assert sshconfig.expand("/keys/%z", tokens) == "/keys/%z"  # an unknown token stays as written
    assert sshconfig.expand("~other/x", tokens) == "~other/x"


# --- what paramiko does with a resolved host (protocols/paramiko_login.py) ----------------------------------


def _hashed(name: str) -> str:
    salt = os.urandom(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def test_known_hosts_lines_match_as_openssh_matches_them(tmp_path: Path) -> None:
    blob = "AAAAC3NzaC1lZDI1NTE5AAAAIB0Wd1kaWx4ZtZqYyJUhV3GmYr1wLZ3hG8K0ZJb2kqvF"
    other = "AAAAC3NzaC1lZDI1NTE5AAAAIHn8jC2Q1pYF9vQ9CkQ8qT8b6v0yR0WbQm9c6Y3ZzM1k"
    kh = tmp_path / "known_hosts"
    kh.write_text(
        "# a comment\n"
        f"{_hashed('[nas.example]:2222')} ssh-ed25519 {blob}\n"
        f"*.lan,!bad.lan ssh-ed25519 {other}\n"
        f"@revoked * ssh-ed25519 {other}\n"
        f"[10.0.0.?]:22?? ssh-rsa {blob}\n"
        "garbage\n"
    )
    hashed = known_keys([str(kh), str(tmp_path / "missing")], "[NAS.example]:2222")  # names compare lower-case
    assert [(k.marker, k.key_type) for k in hashed] == [("", "ssh-ed25519"), ("@revoked", "ssh-ed25519")]
    assert [k.marker for k in known_keys([str(kh)], "box.lan")] == ["", "@revoked"]
    assert [k.marker for k in known_keys([str(kh)], "bad.lan")] == ["@revoked"]  # negated
    # "[" is literal in a known_hosts pattern (not a character class): only * and ? are wildcards
    assert [k.key_type for k in known_keys([str(kh)], "[10.0.0.7]:2201") if not k.marker] == ["ssh-rsa"]
    assert known_keys([str(kh)], "[10.0.0.7]:22") == [k for k in known_keys([str(kh)], "x") if k.marker]


def test_proxy_jump_and_proxy_command_become_the_commands_openssh_would_run(config: Path) -> None:
    nas = sshconfig.resolve("nas")
    argv = proxy_argv(nas, connect_timeout_s=5)
    assert argv is not None
    assert argv[:3] == ["ssh", "-F", str(config)] and "BatchMode=yes" in argv
    assert argv[argv.index("-J") + 1] == "bob@jump.example:2022"
    assert argv[-4:] == ["-W", "192.0.2.10:2200", "--", "ssh://jump2"]
    assert proxy_argv(sshconfig.resolve("plain"), connect_timeout_s=5) is None
    command = dataclasses.replace(nas, proxy_jump=None, proxy_command="nc -X 5 %h %p # %r %n %%")
    assert proxy_argv(command, connect_timeout_s=5) == ["/bin/sh", "-c", "exec nc -X 5 192.0.2.10 2200 # alice nas %"]


@pytest.mark.parametrize("user", ["$(touch pwned)", "a;b", "`id`", "-oProxyCommand=x", "two words", "a'b"])
def test_a_user_with_shell_syntax_never_reaches_a_proxy_command(config: Path, user: str) -> None:
    nas = dataclasses.replace(sshconfig.resolve("nas"), proxy_jump=None, proxy_command="nc %h %p # %r", user=user)
    with pytest.raises(UsageError, match="characters a shell reads as syntax"):
        proxy_argv(nas, connect_timeout_s=5)
    # a ProxyCommand that does not name the user does not care what it is
    assert proxy_argv(dataclasses.replace(nas, proxy_command="nc %h %p"), connect_timeout_s=5) is not None

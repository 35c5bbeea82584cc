"""A real OpenSSH sshd on 127.0.0.1 that lets this user log in with a key and run commands: the far host of
`run --via-ssh` and the client hosts of `fleet` in the integration tests (their `workbench` is this venv's)."""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import NO_LOGIN_RC_ENV, free_port, sshd_setenv
from workbench.server.daemons.sshd import Sshd
from workbench.shared.net import port_open

HOST = "127.0.0.1"
SSHD = "/usr/sbin/sshd"
REMOTE_WORKBENCH = str(Path(sys.executable).with_name("workbench"))


@dataclass
class LoginHost:
    """An sshd for logins with commands, and the client config (-F) that reaches it as the alias `farbox`."""

    dir: Path
    port: int
    ssh_config: Path
    known_hosts: Path
    host_key_line: str


@contextlib.contextmanager
def sshds_without_login_rc() -> Iterator[None]:
    """workbench's sshds (its own and the stock one) started meanwhile in this process hand NO_LOGIN_RC_ENV to their
    sessions, as the tests' own login sshds do (tests.helpers.sshd_setenv): an sshd's `-o` comes before its
    configuration file, which sets no SetEnv of its own."""
    command = Sshd.command

    def with_env(self: Sshd) -> list[str]:
        binary, *rest = command(self)
        return [binary, "-o", f"SetEnv={NO_LOGIN_RC_ENV}", *rest]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Sshd, "command", with_env)
        yield


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=30)


@pytest.fixture
def login_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoginHost]:
    if not os.path.exists(SSHD) or shutil.which("ssh") is None:
        pytest.skip("OpenSSH server or client not installed")
    if not os.path.exists(REMOTE_WORKBENCH):
        pytest.skip(f"no workbench script beside {sys.executable}")
    d = tmp_path / "login-sshd"
    d.mkdir(mode=0o700)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    keygen(d / "host_key")
    keygen(d / "client_key")
    shutil.copyfile(d / "client_key.pub", d / "authorized_keys")
    port = free_port(HOST)
    (d / "sshd_config").write_text(
        "\n".join(
            [
                f"ListenAddress {HOST}",
                f"Port {port}",
                f"HostKey {d / 'host_key'}",
                f"PidFile {d / 'sshd.pid'}",
                f"AuthorizedKeysFile {d / 'authorized_keys'}",
                f"AllowUsers {getpass.getuser()}",
                "AuthenticationMethods publickey",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password",
                "UsePAM no",
                "StrictModes no",
                "PrintMotd no",
                "UseDNS no",
                "LogLevel ERROR",
                # the far side's results and test files in this test's own folder, not the shared ~/.local/share
                # (tests running side by side would make the same test files there at once)
                # and this test worker's name, by which the tests tell its leftovers from those of others
                f"SetEnv WORKBENCH_HOME={d / 'far-home'}{sshd_setenv()}",
            ]
        )
        + "\n"
    )
    kind, blob = (d / "host_key.pub").read_text().split()[:2]
    known_hosts = d / "known_hosts"
    known_hosts.write_text(f"[{HOST}]:{port} {kind} {blob}\n")
    ssh_config = d / "ssh_config"
    ssh_config.write_text(
        f"Host farbox\n  HostName {HOST}\n  Port {port}\n  User {getpass.getuser()}\n"
        f"  IdentityFile {d / 'client_key'}\n  IdentitiesOnly yes\n  IdentityAgent none\n"
        f"  UserKnownHostsFile {known_hosts}\n  GlobalKnownHostsFile /dev/null\n"
    )
    monkeypatch.setenv("WORKBENCH_SSH_CONFIG", str(ssh_config))
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not port_open(HOST, port):
            assert proc.poll() is None and time.monotonic() < deadline, "the login sshd did not start"
            time.sleep(0.05)
        yield LoginHost(d, port, ssh_config, known_hosts, f"{kind} {blob}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)

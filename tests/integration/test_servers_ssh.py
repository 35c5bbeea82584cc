"""sshd and rsyncd start from private config, refuse what they must, and stop leaving nothing behind."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from workbench.protocols.openssh_sftp import ssh_login, ssh_options
from workbench.protocols.sftp import ParamikoClient
from workbench.shared.net import port_open

if TYPE_CHECKING:
    from tests.ssh_fixtures import Served


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("fixture", ["sshd", "rsyncd"])
def test_server_stops_leaving_no_process(fixture: str, request: pytest.FixtureRequest) -> None:
    served: Served = request.getfixturevalue(fixture)
    server = served.server
    pid = server.proc.pid
    port = next(iter(server.ctx.ports.values()))
    assert port_open("127.0.0.1", port)
    if fixture == "sshd":
        # An open session runs in its own session id: stop() must end it too.
        client = ParamikoClient(served.target)
        client.connect()
    served.stop()
    assert not _alive(pid)
    assert not port_open("127.0.0.1", port)
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and str(server.dir) in _cmdline(int(p))]
    assert leftovers == []
    if fixture == "sshd":
        client.close()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_sshd_refuses_shell_commands(sshd: Served) -> None:
    from workbench.protocols.base import ClientOptions

    argv = ["ssh", "-p", str(sshd.target.port("ssh")), *ssh_options(sshd.target, ClientOptions())]
    done = subprocess.run([*argv, ssh_login(sshd.target), "cat /etc/hostname"], capture_output=True, timeout=30)
    assert done.returncode != 0
    assert b"refused" in done.stderr


def test_sshd_state_is_private(sshd: Served) -> None:
    server = sshd.server
    config = server.config_path.read_text()
    assert "PasswordAuthentication no" in config
    assert str(server.dir / "authorized_keys") in config
    assert stat.S_IMODE(server.dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(server.client_key_path.stat().st_mode) == 0o600
    assert f"[127.0.0.1]:{sshd.target.port('ssh')} ssh-ed25519 " in server.known_hosts_path.read_text()


def test_rsyncd_secrets_file_is_0600_and_config_has_no_password(rsyncd: Served) -> None:
    server = rsyncd.server
    assert stat.S_IMODE(server.secrets_path.stat().st_mode) == 0o600
    assert rsyncd.target.credentials.password not in server.config_path.read_text()
    assert rsyncd.target.credentials.password not in _cmdline(server.proc.pid)

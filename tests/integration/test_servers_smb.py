"""The private smbd: starts and stops cleanly, keeps secrets off argv, and confines clients to its root."""

from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path

import pytest

from tests.contract.suite import Counter
from tests.helpers import free_port
from tests.smb_fixtures import HOST, SmbdRunner, client_factory
from workbench.protocols.base import Client
from workbench.protocols.smb import PysmbClient
from workbench.protocols.smbclient_cli import SmbclientClient
from workbench.protocols.smbprotocol_client import SmbprotocolClient
from workbench.server.daemons import supervisor
from workbench.server.daemons.base import ServerContext
from workbench.server.daemons.smbd import SOCKET_PATH_MAX, SOCKET_SUFFIX_ROOM, Smbd, socket_dir_for
from workbench.shared.credentials import generate
from workbench.shared.errors import WorkbenchError

CLIENTS = [PysmbClient, SmbprotocolClient, SmbclientClient]


def _processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line contains `text` (zombies have an empty one and do not count)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry))
    return found


@pytest.fixture
def own_smbd(tmp_path: Path) -> Smbd:
    if reason := Smbd.unavailable_reason():
        pytest.skip(reason)
    ctx = ServerContext(
        root=tmp_path / "root",
        bind=HOST,
        state_dir=tmp_path / "state",
        credentials=generate(),
        ports={"smb": free_port(HOST)},
    )
    server = Smbd(ctx)
    yield server
    server.stop()


def test_smbd_starts_and_stops_leaving_no_process(own_smbd: Smbd) -> None:
    own_smbd.start()
    # A connection makes smbd fork a child per client: that child must go too.
    with socket.create_connection((HOST, own_smbd.ctx.ports["smb"]), timeout=5):
        assert len(_processes_mentioning(str(own_smbd.conf_path))) >= 1
        own_smbd.stop()
    assert _processes_mentioning(str(own_smbd.conf_path)) == []
    with pytest.raises(OSError):
        socket.create_connection((HOST, own_smbd.ctx.ports["smb"]), timeout=1).close()


def test_smbd_in_a_deep_state_directory_starts_and_serves(tmp_path: Path) -> None:
    """A unix socket's path holds 107 bytes: under a deep state directory smbd's sockets go to a short private
    folder (else smbd exits at start: "File name too long"), removed again when it stops."""
    if reason := Smbd.unavailable_reason():
        pytest.skip(reason)
    runner = SmbdRunner(tmp_path / ("d" * 80))
    assert len(str(runner.server.dir)) > 107 - 40
    try:
        server = runner.ensure()
        sockets = server.short_socket_dir()
        assert (sockets / "lock" / "msg.sock").is_dir() and sockets.stat().st_mode & 0o777 == 0o700
        (runner.ctx.root / "deep.bin").write_bytes(b"x" * 1000)
        with PysmbClient(runner.target()) as client:
            client.download("deep.bin", tmp_path / "deep.bin", Counter())
        assert (tmp_path / "deep.bin").read_bytes() == b"x" * 1000
    finally:
        runner.stop()
    assert not sockets.exists()


def test_servers_down_removes_the_socket_folder_of_a_deep_smbd(tmp_path: Path) -> None:
    """`servers down` stops a recorded smbd from another process than the one that started it: it finds the
    short socket folder again by the server's directory and removes it too."""
    if reason := Smbd.unavailable_reason():
        pytest.skip(reason)
    state_dir = tmp_path / ("s" * 80)
    (tmp_path / "root").mkdir()
    supervisor.up(tmp_path / "root", HOST, state_dir, only=["smbd"], ports={"smb": free_port(HOST)})
    try:
        sockets = socket_dir_for(state_dir / "smbd")
        assert sockets is not None and (sockets / "lock").is_dir()
    finally:
        supervisor.down(state_dir)
    assert not sockets.exists()


def test_smbd_keeps_the_password_off_argv_and_config(own_smbd: Smbd) -> None:
    pid = own_smbd.start()
    password = own_smbd.ctx.credentials.password
    assert password not in " ".join(own_smbd.command())
    assert password not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    assert password not in own_smbd.conf_path.read_text()
    assert own_smbd.conf_path.stat().st_mode & 0o077 == 0


def test_smbd_config_is_private_and_confined(own_smbd: Smbd) -> None:
    own_smbd.ctx.root.mkdir(parents=True, exist_ok=True)
    text = own_smbd.config_text()
    state = str(own_smbd.dir)
    # the two socket folders move to a short private folder when the server's directory is too deep for a
    # socket's path (pytest's temporary directories can be): private either way
    sockets = state if len(state) + SOCKET_SUFFIX_ROOM <= SOCKET_PATH_MAX else str(own_smbd.short_socket_dir())
    for key in ("private dir", "lock directory", "state directory", "cache directory", "pid directory", "ncalrpc dir"):
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(f"{key} ="))
        where = sockets if key in ("lock directory", "ncalrpc dir") else state
        assert line.split("=", 1)[1].strip().startswith(where + "/"), line
    for setting in ("wide links = no", "follow symlinks = no", "guest ok = no", "server min protocol = SMB2_02"):
        assert setting in text
    assert f"valid users = {own_smbd.ctx.credentials.user}" in text


def test_smbd_with_an_unknown_user_fails_with_a_clean_error(own_smbd: Smbd, tmp_path: Path) -> None:
    ctx = dataclasses.replace(own_smbd.ctx, credentials=generate("no-such-user-wb"))
    server = Smbd(ctx)
    with pytest.raises(WorkbenchError) as info:
        server.start()
    assert "no-such-user-wb" in info.value.one_line()
    assert server.proc is None


@pytest.fixture
def served_root(smbd: Smbd) -> Path:
    return smbd.ctx.root


@pytest.fixture
def outside_secret(served_root: Path, tmp_path: Path) -> bytes:
    """A file outside the share, reachable only through a symlink or '..' if the server let clients escape."""
    secret = b"outside the served root\n"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(secret)
    links = served_root / "links"
    links.mkdir(parents=True, exist_ok=True)
    for name, dest in (("file-link", outside / "secret.txt"), ("dir-link", outside)):
        (links / name).unlink(missing_ok=True)
        (links / name).symlink_to(dest)
    return secret


@pytest.mark.parametrize("cls", CLIENTS, ids=lambda c: c.name)
@pytest.mark.parametrize(
    "remote", ["links/file-link", "links/dir-link/secret.txt", "../outside/secret.txt", "links/../../secret.txt"]
)
def test_share_does_not_expose_files_outside_its_root(
    cls: type[Client], remote: str, smbd_runner: SmbdRunner, smbd, outside_secret: bytes, tmp_path: Path
) -> None:
    local = tmp_path / "got.bin"
    with client_factory(cls, smbd_runner)() as client, pytest.raises(WorkbenchError):
        client.download(remote, local, Counter())
    assert not local.exists() or outside_secret not in local.read_bytes()

"""pysmb, smbprotocol and smbclient against a stock Samba (share "plain"), reached by its URL as a user types it.

The target comes from the server's URL plus a directory with spaces beneath the share, so every path a
client sends lies under that prefix. remove_tree is checked against what is really on disk, with links
made on the server's disk directly (no SMB client can create one on Samba 4.17). Samba with its defaults
(wide links = no) hides a symlink that leads out of the share: SMB cannot see or delete it, so the
removal leaves it, deletes everything else, never touches what it points to, and says so.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.contract.scratch_contract import MkdirContract, RemoveTreeContract, ScratchContract
from tests.contract.suite import ClientContract, Counter
from tests.helpers import ensure_running, loopback_context, write_random
from workbench.lab import netns
from workbench.protocols.base import Client, ClientOptions
from workbench.protocols.mounts.commands import CommandRunner, Outcome
from workbench.protocols.mounts.smb_mount import CifsClient
from workbench.protocols.smb import PysmbClient
from workbench.protocols.smbclient_cli import SmbclientClient
from workbench.protocols.smbprotocol_client import SmbprotocolClient
from workbench.server.stock.samba import SHARE, StockSmbd
from workbench.shared import urls
from workbench.shared.errors import AuthError, NotFoundError, UsageError, WorkbenchError
from workbench.shared.target import Target

PREFIX = "stock area/run one"  # beneath the share, as the URL's path puts it
TREE_CLIENTS = [PysmbClient, SmbprotocolClient]  # the SMB clients that can delete a directory tree
_namespaces = itertools.count()


def target_from_url(url: str, server: StockSmbd, password: str | None = None) -> Target:
    """The Target a run builds from the URL (share from the URL, its path = prefix)."""
    parsed = urls.parse(url)
    creds = server.ctx.credentials
    if password is not None:
        creds = replace(creds, password=password)
    return Target(parsed.host, creds, ports={"smb": parsed.port}, share=parsed.share, stock=True, prefix=parsed.path)


@pytest.fixture(scope="module")
def smbd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockSmbd]:
    """One stock smbd for the module; `stock_smbd` restarts it when a test stopped it."""
    if reason := StockSmbd.unavailable_reason():
        pytest.skip(reason)
    server = StockSmbd(loopback_context(tmp_path_factory.mktemp("stock-smbd"), "smb"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def stock_smbd(smbd_server: StockSmbd) -> StockSmbd:
    ensure_running(smbd_server)
    return smbd_server


@pytest.fixture
def prefix_root(stock_smbd: StockSmbd) -> Iterator[Path]:
    """The directory the prefix names, fresh for each test."""
    path = stock_smbd.ctx.root / PREFIX
    path.mkdir(parents=True, exist_ok=True)
    yield path
    _wipe(path)


def _wipe(path: Path) -> None:
    for entry in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if entry.is_symlink() or not entry.is_dir():
            entry.unlink()
        else:
            entry.rmdir()


@pytest.fixture
def target(stock_smbd: StockSmbd, prefix_root: Path) -> Target:
    return target_from_url(f"{stock_smbd.url()}/{quote(PREFIX)}", stock_smbd)


class _StockSmbContract(ClientContract, MkdirContract):
    client_class: type[Client]

    @pytest.fixture
    def served_root(self, prefix_root: Path) -> Path:
        return prefix_root

    @pytest.fixture
    def make_client(self, target: Target) -> Callable[..., Client]:
        return lambda **opts: self.client_class(target, ClientOptions(**opts))

    @pytest.fixture
    def bad_client(self, target: Target) -> Client:
        wrong = replace(target.credentials, password=target.credentials.password + "x")
        return self.client_class(replace(target, credentials=wrong), ClientOptions(stall_timeout_s=10.0))

    @pytest.fixture
    def stop_server(self, stock_smbd: StockSmbd) -> Callable[[], None]:
        return stock_smbd.stop


class TestStockPysmbContract(_StockSmbContract, ScratchContract):
    client_class = PysmbClient


class TestStockSmbprotocolContract(_StockSmbContract, RemoveTreeContract):
    client_class = SmbprotocolClient


class TestStockSmbclientContract(_StockSmbContract):
    client_class = SmbclientClient


def test_url_names_the_share_and_port(stock_smbd: StockSmbd) -> None:
    parsed = urls.parse(stock_smbd.url())
    assert (parsed.scheme, parsed.share, parsed.path) == ("smb", SHARE, "")
    assert (parsed.host, parsed.port, parsed.user) == ("127.0.0.1", stock_smbd.ctx.ports["smb"], "root")


@pytest.mark.parametrize("cls", [PysmbClient, SmbprotocolClient, SmbclientClient], ids=lambda c: c.name)
def test_wrong_password_is_an_auth_error(cls: type[Client], stock_smbd: StockSmbd, prefix_root: Path) -> None:
    target = target_from_url(stock_smbd.url(), stock_smbd, password="not-the-password")
    client = cls(target, ClientOptions(stall_timeout_s=10.0))
    with pytest.raises(AuthError):
        client.connect()
    client.close()


def test_the_password_is_in_no_command_line_or_config(stock_smbd: StockSmbd) -> None:
    assert stock_smbd.proc is not None
    password = stock_smbd.ctx.credentials.password
    assert password.encode() not in Path(f"/proc/{stock_smbd.proc.pid}/cmdline").read_bytes()
    assert password not in stock_smbd.conf_path.read_text()
    assert stock_smbd.conf_path.stat().st_mode & 0o077 == 0


def _tree(top: Path) -> None:
    (top / "files" / "deep" / "er").mkdir(parents=True)
    (top / "empty").mkdir()
    write_random(top / "a.bin", 1000)
    write_random(top / "files" / "b.bin", 70_000)
    write_random(top / "files" / "deep" / "er" / "c.bin", 10)


@pytest.mark.parametrize("cls", TREE_CLIENTS, ids=lambda c: c.name)
def test_remove_tree_never_follows_links_that_lead_out_of_the_share(
    cls: type[Client], target: Target, prefix_root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    kept = write_random(outside / "sub" / "kept.bin", 2000)
    scratch = prefix_root / "scratch"
    _tree(scratch)
    (scratch / "files" / "out-dir").symlink_to(outside)
    (scratch / "out-file").symlink_to(outside / "sub" / "kept.bin")
    with cls(target) as client, pytest.raises(WorkbenchError, match="not empty") as error:
        client.remove_tree("scratch")
    assert "scratch/files" in error.value.one_line() and "hides" in error.value.one_line()
    # Samba hid the links (wide links = no): they stay, with the directories holding them; all else is gone.
    left = sorted(str(p.relative_to(scratch)) for p in scratch.rglob("*"))
    assert left == ["files", "files/out-dir", "out-file"]
    assert (outside / "sub" / "kept.bin").read_bytes() == kept
    assert sorted(p.name for p in outside.rglob("*")) == ["kept.bin", "sub"]


@pytest.mark.parametrize("cls", TREE_CLIENTS, ids=lambda c: c.name)
def test_remove_tree_never_enters_a_link_to_a_directory_elsewhere_in_the_share(
    cls: type[Client], target: Target, prefix_root: Path
) -> None:
    elsewhere = {n: write_random(prefix_root / "elsewhere" / "d" / n, 500) for n in ("one.bin", "two.bin")}
    scratch = prefix_root / "scratch"
    _tree(scratch)
    (scratch / "files" / "to-elsewhere").symlink_to(prefix_root / "elsewhere" / "d")  # Samba shows it as a directory
    with cls(target) as client, pytest.raises(WorkbenchError, match="symlink"):
        client.remove_tree("scratch")
    assert {n: (prefix_root / "elsewhere" / "d" / n).read_bytes() for n in elsewhere} == elsewhere
    left = sorted(str(p.relative_to(scratch)) for p in scratch.rglob("*"))
    assert left == ["files", "files/to-elsewhere"]


@pytest.mark.parametrize("cls", TREE_CLIENTS, ids=lambda c: c.name)
def test_remove_tree_of_a_missing_directory_or_the_share_root_fails_cleanly(
    cls: type[Client], target: Target, stock_smbd: StockSmbd, prefix_root: Path
) -> None:
    with cls(target) as client, pytest.raises(NotFoundError):
        client.remove_tree("no-such-dir")
    at_root = target_from_url(stock_smbd.url(), stock_smbd)
    with cls(at_root) as client, pytest.raises(UsageError):
        client.remove_tree("")
    assert prefix_root.is_dir()


def test_the_stock_smbd_serves_inside_a_network_namespace(tmp_path: Path) -> None:
    """As the lab starts it on its server host: smbd and the client both inside the namespace."""
    name = f"{netns.PREFIX}{os.getpid()}-{next(_namespaces)}-stock-smbd"
    netns.create(name)
    try:
        ctx = replace(loopback_context(tmp_path, "smb"), netns=name)
        server = StockSmbd(ctx)
        server.start()
        try:
            data = write_random(tmp_path / "up.bin", 50_000)
            target = target_from_url(server.url(), server)
            with netns.entered(name), PysmbClient(target) as client:
                client.mkdir("in ns")
                client.upload(tmp_path / "up.bin", "in ns/up.bin", Counter())
            assert (ctx.root / "in ns" / "up.bin").read_bytes() == data
            # Nothing listens on the host's own loopback: the port is the namespace's.
            with pytest.raises(WorkbenchError):
                PysmbClient(target, ClientOptions(connect_timeout_s=2.0)).connect()
        finally:
            server.stop()
    finally:
        netns.delete(name)


class _MountsAnything(CommandRunner):
    """A host where every mount command succeeds (this kernel has no CIFS): only the path mapping is checked."""

    def __init__(self) -> None:
        self.mounted: set[Path] = set()

    def unavailable(self, client_cls: object) -> str | None:
        return None

    def is_mounted(self, path: Path) -> bool:
        return path in self.mounted

    def run(self, argv: object, *, timeout: float, stdin_text: str | None = None) -> Outcome:
        words = list(argv)  # type: ignore[call-overload]
        if words[0] == "mount":
            self.mounted.add(Path(words[4]))
        else:
            self.mounted.discard(Path(words[-1]))
        return Outcome(0)


def test_cifs_puts_a_stock_targets_paths_beneath_the_prefix_in_the_mounted_share(target: Target) -> None:
    runner = _MountsAnything()
    with CifsClient(target, runner=runner) as client:
        assert client.mountpoint is not None
        assert client._path("files/x.bin") == client.mountpoint / "stock area" / "run one" / "files" / "x.bin"
        served = CifsClient(replace(target, stock=False), runner=runner)
        served.mountpoint, served._mounted = client.mountpoint, True
        assert served._path("files/x.bin") == client.mountpoint / "files" / "x.bin"

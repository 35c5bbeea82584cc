"""workbench's AFP client against a stock netatalk (volume "plain", netatalk's defaults), reached by its URL as a
user types it.

The target comes from the server's URL plus a directory with spaces beneath the volume, so every path the
client sends lies under that prefix. remove_tree is checked against what is really on disk, with links made
on the server's disk directly: netatalk shows a symbolic link as a file of Finder type 'slnk' and resolves no
path through it, so the removal deletes the link itself and never what it points to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.contract.scratch_contract import ScratchContract
from tests.contract.suite import ClientContract
from tests.helpers import ensure_running, loopback_context, write_random
from workbench.protocols.afp import AfpPythonClient
from workbench.protocols.base import Client, ClientOptions
from workbench.server.stock.netatalk import VOLUME, StockAfpd
from workbench.shared import urls
from workbench.shared.errors import AuthError, NotFoundError, UsageError, WorkbenchError
from workbench.shared.target import Target

PREFIX = "stock area/run one"  # beneath the volume, as the URL's path puts it


def target_from_url(url: str, server: StockAfpd, password: str | None = None) -> Target:
    """The Target a run builds from the URL (volume from the URL, its path = prefix)."""
    parsed = urls.parse(url)
    creds = server.ctx.credentials
    if password is not None:
        creds = replace(creds, password=password)
    return Target(parsed.host, creds, ports={"afp": parsed.port}, share=parsed.share, stock=True, prefix=parsed.path)


@pytest.fixture(scope="module")
def afpd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockAfpd]:
    """One stock netatalk for the module; `stock_afpd` restarts it when a test stopped it."""
    if reason := StockAfpd.unavailable_reason():
        pytest.skip(reason)
    server = StockAfpd(loopback_context(tmp_path_factory.mktemp("stock-afpd"), "afp"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def stock_afpd(afpd_server: StockAfpd) -> StockAfpd:
    ensure_running(afpd_server)
    return afpd_server


def _wipe(path: Path) -> None:
    for entry in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if entry.is_symlink() or not entry.is_dir():
            entry.unlink()
        else:
            entry.rmdir()


@pytest.fixture
def prefix_root(stock_afpd: StockAfpd) -> Iterator[Path]:
    """The directory the prefix names, fresh for each test."""
    path = stock_afpd.ctx.root / PREFIX
    path.mkdir(parents=True, exist_ok=True)
    yield path
    _wipe(path)


@pytest.fixture
def target(stock_afpd: StockAfpd, prefix_root: Path) -> Target:
    return target_from_url(f"{stock_afpd.url()}/{quote(PREFIX)}", stock_afpd)


class TestStockAfpContract(ClientContract, ScratchContract):
    client_class = AfpPythonClient

    @pytest.fixture
    def served_root(self, prefix_root: Path) -> Path:
        return prefix_root

    @pytest.fixture
    def make_client(self, target: Target) -> Callable[..., Client]:
        return lambda **opts: AfpPythonClient(target, ClientOptions(**opts))

    @pytest.fixture
    def bad_client(self, target: Target) -> Client:
        wrong = replace(target.credentials, password=target.credentials.password + "x")
        return AfpPythonClient(replace(target, credentials=wrong), ClientOptions(stall_timeout_s=10.0))

    @pytest.fixture
    def stop_server(self, stock_afpd: StockAfpd) -> Callable[[], None]:
        return stock_afpd.stop


def test_url_names_the_volume_and_port(stock_afpd: StockAfpd) -> None:
    parsed = urls.parse(stock_afpd.url())
    assert (parsed.scheme, parsed.share, parsed.path) == ("afp", VOLUME, "")
    assert (parsed.host, parsed.port, parsed.user) == ("127.0.0.1", stock_afpd.ctx.ports["afp"], "root")


def test_wrong_password_is_an_auth_error(stock_afpd: StockAfpd, prefix_root: Path) -> None:
    client = AfpPythonClient(target_from_url(stock_afpd.url(), stock_afpd, password="not-the-password"))
    with pytest.raises(AuthError):
        client.connect()
    client.close()


def test_the_password_is_in_no_command_line_or_config(stock_afpd: StockAfpd) -> None:
    assert stock_afpd.proc is not None
    password = stock_afpd.ctx.credentials.password
    for pid in [stock_afpd.proc.pid, *_children(stock_afpd.proc.pid)]:
        assert password.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert password not in stock_afpd.conf_path.read_text()
    assert stock_afpd.conf_path.stat().st_mode & 0o077 == 0
    shadow = (stock_afpd.dir / "accounts" / "etc" / "shadow").read_text()
    assert password not in shadow and shadow.count("$6$") == 1  # one hashed password: the served user's


def _children(pid: int) -> list[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in found.read_text().split()] if found.exists() else []


def _tree(top: Path) -> None:
    (top / "files" / "deep" / "er").mkdir(parents=True)
    (top / "empty").mkdir()
    write_random(top / "a.bin", 1000)
    write_random(top / "files" / "b.bin", 70_000)
    write_random(top / "files" / "deep" / "er" / "c.bin", 10)


def test_remove_tree_deletes_links_out_of_the_volume_and_never_what_they_point_to(
    target: Target, prefix_root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    kept = write_random(outside / "sub" / "kept.bin", 2000)
    scratch = prefix_root / "scratch"
    _tree(scratch)
    (scratch / "files" / "out-dir").symlink_to(outside)
    (scratch / "out-file").symlink_to(outside / "sub" / "kept.bin")
    with AfpPythonClient(target) as client:
        client.remove_tree("scratch")
    assert not scratch.exists() and not scratch.is_symlink()
    assert (outside / "sub" / "kept.bin").read_bytes() == kept
    assert sorted(p.name for p in outside.rglob("*")) == ["kept.bin", "sub"]


def test_remove_tree_never_enters_a_link_to_a_directory_elsewhere_in_the_volume(
    target: Target, prefix_root: Path
) -> None:
    elsewhere = {n: write_random(prefix_root / "elsewhere" / "d" / n, 500) for n in ("one.bin", "two.bin")}
    scratch = prefix_root / "scratch"
    _tree(scratch)
    (scratch / "files" / "to-elsewhere").symlink_to(prefix_root / "elsewhere" / "d")
    with AfpPythonClient(target) as client:
        client.remove_tree("scratch")
    assert {n: (prefix_root / "elsewhere" / "d" / n).read_bytes() for n in elsewhere} == elsewhere
    assert not scratch.exists()


def test_remove_tree_of_a_missing_directory_or_the_volume_root_fails_cleanly(
    target: Target, stock_afpd: StockAfpd, prefix_root: Path
) -> None:
    with AfpPythonClient(target) as client, pytest.raises(NotFoundError):
        client.remove_tree("no-such-dir")
    at_root = target_from_url(stock_afpd.url(), stock_afpd)
    with AfpPythonClient(at_root) as client, pytest.raises((UsageError, WorkbenchError)):
        client.remove_tree("")
    assert prefix_root.is_dir()

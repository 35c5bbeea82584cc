"""The rsync daemon client against a stock rsync daemon (module "plain"), reached by its URL as a user types it.

The target comes from the server's URL plus a directory with spaces beneath the module, so every path
the client sends lies under that prefix. remove_tree and same_as_local are checked against what is
really on disk.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.contract.scratch_contract import ScratchContract
from tests.contract.suite import ClientContract, Counter
from tests.helpers import loopback_context, write_random
from workbench.lab import netns
from workbench.protocols.base import ClientOptions
from workbench.protocols.rsync import RsyncDaemonClient
from workbench.server.stock.rsync_daemon import MODULE, StockRsyncd
from workbench.shared import urls
from workbench.shared.errors import AuthError, NotFoundError, WorkbenchError
from workbench.shared.target import Target

PREFIX = "stock area/run [1] *"  # beneath the module; spaces and rsync wildcard characters on purpose
_namespaces = itertools.count()


def target_from_url(url: str, server: StockRsyncd) -> Target:
    """The Target a run builds from the URL (module = share, the URL's path = prefix)."""
    parsed = urls.parse(url)
    return Target(
        parsed.host,
        server.ctx.credentials,
        ports={"rsync": parsed.port},
        share=parsed.share,
        stock=True,
        prefix=parsed.path,
    )


@pytest.fixture(scope="module")
def _module_rsyncd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockRsyncd]:
    """One daemon for the module's tests: rsync lingers 0.4 s on SIGTERM (its handler sleeps), in each of its
    processes, which stopping one per test added to most tests. `stock_rsyncd` restarts it when a test stopped it."""
    server = StockRsyncd(loopback_context(tmp_path_factory.mktemp("rsyncd"), "rsync"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def stock_rsyncd(_module_rsyncd: StockRsyncd) -> StockRsyncd:
    """The module's daemon, running (restarted if an earlier test stopped it) over an empty module, so that no
    test sees another's files."""
    server = _module_rsyncd
    if server.proc is None or server.proc.poll() is not None:
        server.stop()
        server.start()
    for entry in server.ctx.root.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    (server.ctx.root / PREFIX).mkdir(parents=True)
    return server


@pytest.fixture
def target(stock_rsyncd: StockRsyncd) -> Target:
    return target_from_url(f"{stock_rsyncd.url()}/{quote(PREFIX)}", stock_rsyncd)


@pytest.fixture
def prefix_root(stock_rsyncd: StockRsyncd) -> Path:
    return stock_rsyncd.ctx.root / PREFIX


class TestStockRsyncDaemonContract(ClientContract, ScratchContract):
    client_class = RsyncDaemonClient

    @pytest.fixture
    def served_root(self, prefix_root: Path) -> Path:
        return prefix_root

    @pytest.fixture
    def make_client(self, target: Target) -> Callable[..., RsyncDaemonClient]:
        return lambda **opts: RsyncDaemonClient(target, ClientOptions(**opts))

    @pytest.fixture
    def bad_client(self, target: Target) -> RsyncDaemonClient:
        wrong = replace(target.credentials, password="wrong-" + target.credentials.password)
        return RsyncDaemonClient(replace(target, credentials=wrong))

    @pytest.fixture
    def stop_server(self, stock_rsyncd: StockRsyncd) -> Callable[[], None]:
        return stock_rsyncd.stop


def test_url_names_the_module_and_port(stock_rsyncd: StockRsyncd) -> None:
    parsed = urls.parse(stock_rsyncd.url())
    assert (parsed.scheme, parsed.share, parsed.path) == ("rsync", MODULE, "")
    assert (parsed.host, parsed.port, parsed.user) == ("127.0.0.1", stock_rsyncd.ctx.ports["rsync"], "root")


def test_wrong_password_is_an_auth_error(target: Target) -> None:
    wrong = replace(target.credentials, password="not-" + target.credentials.password)
    with pytest.raises(AuthError):
        RsyncDaemonClient(replace(target, credentials=wrong)).connect()


def test_the_password_is_in_no_command_line_and_the_secrets_file_is_private(stock_rsyncd: StockRsyncd) -> None:
    assert stock_rsyncd.proc is not None
    cmdline = Path(f"/proc/{stock_rsyncd.proc.pid}/cmdline").read_bytes()
    password = stock_rsyncd.ctx.credentials.password
    assert password.encode() not in cmdline
    assert password not in stock_rsyncd.config_path.read_text()
    assert stock_rsyncd.secrets_path.stat().st_mode & 0o077 == 0


def _tree(top: Path) -> dict[str, bytes]:
    (top / "files" / "deep" / "er").mkdir(parents=True)
    (top / "empty").mkdir()
    return {
        "a.bin": write_random(top / "a.bin", 1000),
        "files/b.bin": write_random(top / "files" / "b.bin", 5000),
        "files/deep/er/c.bin": write_random(top / "files" / "deep" / "er" / "c.bin", 10),
    }


def test_remove_tree_deletes_the_directory_and_nothing_beside_it(
    target: Target, prefix_root: Path, tmp_path: Path
) -> None:
    _tree(prefix_root / "scratch")
    (prefix_root / "scratch" / "inner-link").symlink_to("files")  # a link to a directory of the tree
    beside = {n: write_random(prefix_root / n / "keep.bin", 100) for n in ("scratch2", "scratc", "x")}
    with RsyncDaemonClient(target) as client:
        client.remove_tree("scratch")
    assert not os.path.lexists(prefix_root / "scratch")
    assert {n: (prefix_root / n / "keep.bin").read_bytes() for n in beside} == beside


def test_remove_tree_removes_links_that_lead_out_and_never_follows_them(
    target: Target, prefix_root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    kept = write_random(outside / "sub" / "kept.bin", 2000)
    scratch = prefix_root / "scratch"
    _tree(scratch)
    # Made on the server's disk directly: a client cannot create them. Absolute and relative, to a directory
    # and to a file, and one that points nowhere.
    (scratch / "out-dir").symlink_to(outside)
    (scratch / "files" / "out-file").symlink_to(outside / "sub" / "kept.bin")
    (scratch / "files" / "deep" / "up").symlink_to(os.path.relpath(outside, scratch / "files" / "deep"))
    (scratch / "dangling").symlink_to(tmp_path / "nowhere")
    with RsyncDaemonClient(target) as client:
        client.remove_tree("scratch")
    assert not os.path.lexists(scratch)
    assert (outside / "sub" / "kept.bin").read_bytes() == kept
    assert sorted(p.name for p in outside.rglob("*")) == ["kept.bin", "sub"]


def test_remove_tree_takes_names_with_filter_characters_literally(target: Target, prefix_root: Path) -> None:
    odd = "run [1]*?"
    for name in (odd, "run 1", "run [1]x", "run ["):
        write_random(prefix_root / "outer" / name / "f.bin", 10)
    with RsyncDaemonClient(target) as client:
        client.remove_tree(f"outer/{odd}")
    assert sorted(p.name for p in (prefix_root / "outer").iterdir()) == ["run 1", "run [", "run [1]x"]


def test_paths_are_taken_literally_not_as_the_daemons_wildcards(
    target: Target, stock_rsyncd: StockRsyncd, prefix_root: Path, tmp_path: Path
) -> None:
    # The daemon expands wildcards in the paths it gets: unescaped, "run [1] *" would be this decoy.
    decoy = stock_rsyncd.ctx.root / "stock area" / "run 1 decoy"
    decoy_data = {n: write_random(decoy / n / "f.bin", 64) for n in ("files", "incoming", "gone")}
    data = write_random(prefix_root / "files" / "f.bin", 64)
    write_random(prefix_root / "gone" / "f.bin", 64)
    up = write_random(tmp_path / "up.bin", 64)
    with RsyncDaemonClient(target) as client:
        client.download("files/f.bin", tmp_path / "f.bin", Counter())
        client.mkdir("incoming/new [a]")
        client.upload(tmp_path / "up.bin", "incoming/new [a]/f.bin", Counter())
        assert client.same_as_local(tmp_path / "up.bin", "incoming/new [a]/f.bin")
        client.remove_tree("gone")
    assert (tmp_path / "f.bin").read_bytes() == data
    assert (prefix_root / "incoming" / "new [a]" / "f.bin").read_bytes() == up
    assert not (prefix_root / "gone").exists()
    assert {n: (decoy / n / "f.bin").read_bytes() for n in decoy_data} == decoy_data
    assert sorted(p.name for p in decoy.iterdir()) == sorted(decoy_data)


def test_remove_tree_of_what_is_missing_or_no_directory_fails_cleanly(target: Target, prefix_root: Path) -> None:
    data = write_random(prefix_root / "plain.bin", 100)
    with RsyncDaemonClient(target) as client:
        with pytest.raises(NotFoundError):
            client.remove_tree("no-such-dir")
        with pytest.raises(WorkbenchError, match="not a directory"):
            client.remove_tree("plain.bin")
    assert (prefix_root / "plain.bin").read_bytes() == data


def test_same_as_local_compares_by_rsync_checksums(target: Target, prefix_root: Path, tmp_path: Path) -> None:
    data = write_random(tmp_path / "up.bin", 300_000)
    flipped = bytearray(data)
    flipped[123_456] ^= 0x01
    (tmp_path / "flipped.bin").write_bytes(flipped)  # same size, same mtime below: only a checksum tells
    write_random(tmp_path / "longer.bin", 300_001)
    with RsyncDaemonClient(target) as client:
        client.mkdir("up")
        client.upload(tmp_path / "up.bin", "up/up.bin", Counter())
        stamp = (prefix_root / "up" / "up.bin").stat()
        os.utime(tmp_path / "flipped.bin", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        assert client.same_as_local(tmp_path / "up.bin", "up/up.bin") is True
        assert client.same_as_local(tmp_path / "flipped.bin", "up/up.bin") is False
        assert client.same_as_local(tmp_path / "longer.bin", "up/up.bin") is False
        assert client.same_as_local(tmp_path / "up.bin", "up/missing.bin") is False
    # A dry run: nothing on the server changed.
    assert (prefix_root / "up" / "up.bin").read_bytes() == data
    assert sorted(p.name for p in (prefix_root / "up").iterdir()) == ["up.bin"]


def test_the_stock_daemon_serves_inside_a_network_namespace(tmp_path: Path) -> None:
    """As the lab starts it on its server host: the daemon and the client both inside the namespace."""
    name = f"{netns.PREFIX}{os.getpid()}-{next(_namespaces)}-stock-rsyncd"
    netns.create(name)
    try:
        ctx = replace(loopback_context(tmp_path, "rsync"), netns=name)
        server = StockRsyncd(ctx)
        server.start()
        try:
            data = write_random(tmp_path / "up.bin", 50_000)
            target = target_from_url(server.url(), server)
            with netns.entered(name), RsyncDaemonClient(target) as client:
                client.upload(tmp_path / "up.bin", "up.bin", Counter())
                assert client.same_as_local(tmp_path / "up.bin", "up.bin")
            assert (ctx.root / "up.bin").read_bytes() == data
            # Nothing listens on the host's own loopback: the port is the namespace's.
            with pytest.raises(WorkbenchError):
                RsyncDaemonClient(target, ClientOptions(connect_timeout_s=2.0)).connect()
        finally:
            server.stop()
    finally:
        netns.delete(name)

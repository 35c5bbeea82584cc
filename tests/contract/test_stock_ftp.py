"""ftplib and curl against a stock pyftpdlib started as its own program, plain FTP and explicit TLS (FTPS).

The target is a stock one: every path lies beneath a prefix (with a space in it) under the login
directory, and there is no control API. The FTPS server's self-signed certificate is trusted through
SSL_CERT_FILE, as a user would point at their NAS's CA; an untrusted one must fail in one clean line.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.contract.scratch_contract import MkdirContract, RemoveTreeContract, ScratchContract
from tests.contract.suite import ClientContract, Counter
from tests.helpers import loopback_context, write_random
from workbench.protocols.base import Client, ClientOptions, LeftInPlace
from workbench.protocols.curl import CurlFtpClient
from workbench.protocols.ftp import FtplibClient
from workbench.server.stock.pyftpd import StockFtp, StockFtps
from workbench.server.stock.tls import write_self_signed
from workbench.shared.errors import AuthError, WorkbenchError
from workbench.shared.target import Target

HOST = "127.0.0.1"
PREFIX = "stock area/run one"  # beneath the login directory, as a URL's path would put it


@dataclass
class StockFtpServer:
    server: StockFtp
    target: Target

    @property
    def login_root(self) -> Path:
        return self.server.ctx.root

    @property
    def prefix_root(self) -> Path:
        return self.server.ctx.root / PREFIX

    def kill(self) -> None:
        """Die abruptly, like a crashed server (SIGTERM would let pyftpdlib finish its transfers)."""
        proc = self.server.proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            self.server.proc = None


def _start(base: Path, server_cls: type[StockFtp], monkeypatch: pytest.MonkeyPatch, **kwargs: bool) -> StockFtp:
    server = server_cls(loopback_context(base, "ftp"), **kwargs)
    server.start()
    _trust(server, monkeypatch)
    return server


def _trust(server: StockFtp, monkeypatch: pytest.MonkeyPatch) -> None:
    if server.tls:
        # Trust this server's certificate as a user trusts their NAS's: through the environment, not an option.
        monkeypatch.setenv("SSL_CERT_FILE", str(server.cert_path))
        monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


@contextlib.contextmanager
def _running(server: StockFtp) -> Iterator[StockFtpServer]:
    ctx = server.ctx
    target = Target(HOST, ctx.credentials, ports=dict(ctx.ports), stock=True, prefix=PREFIX, tls=server.tls)
    (ctx.root / PREFIX).mkdir(parents=True, exist_ok=True)
    try:
        yield StockFtpServer(server, target)
    finally:
        server.stop()


@pytest.fixture(scope="module", params=[StockFtp, StockFtps], ids=["ftp", "ftps"])
def _module_ftp(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockFtp]:
    """One server of each kind for the module's tests: starting one (and its certificate) per test cost more
    than most tests. `stock_ftp` restarts it when a test killed it."""
    server = request.param(loopback_context(tmp_path_factory.mktemp("ftp"), "ftp"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _empty(folder: Path) -> None:
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


@pytest.fixture
def stock_ftp(_module_ftp: StockFtp, monkeypatch: pytest.MonkeyPatch) -> StockFtpServer:
    """The module's server of this kind, running (restarted if an earlier test killed it) with an empty login
    directory, so that no test sees another's files."""
    server = _module_ftp
    if server.proc is None or server.proc.poll() is not None:
        server.stop()
        server.start()
    _empty(server.ctx.root)
    _trust(server, monkeypatch)
    ctx = server.ctx
    target = Target(HOST, ctx.credentials, ports=dict(ctx.ports), stock=True, prefix=PREFIX, tls=server.tls)
    (ctx.root / PREFIX).mkdir(parents=True)
    return StockFtpServer(server, target)


class _StockFtpContract(ClientContract):
    client_class: type[Client]

    @pytest.fixture
    def served_root(self, stock_ftp: StockFtpServer) -> Path:
        return stock_ftp.prefix_root

    @pytest.fixture
    def make_client(self, stock_ftp: StockFtpServer) -> Callable[..., Client]:
        return lambda **opts: self.client_class(stock_ftp.target, ClientOptions(**opts))  # type: ignore[arg-type]

    @pytest.fixture
    def bad_client(self, stock_ftp: StockFtpServer) -> Client:
        creds = replace(stock_ftp.target.credentials, password="wrong-" + stock_ftp.target.credentials.password)
        return self.client_class(replace(stock_ftp.target, credentials=creds), ClientOptions(stall_timeout_s=5.0))

    @pytest.fixture
    def stop_server(self, stock_ftp: StockFtpServer) -> Callable[[], None]:
        return stock_ftp.kill


class TestFtplibStockContract(_StockFtpContract, ScratchContract):
    client_class = FtplibClient


class TestCurlStockContract(_StockFtpContract, MkdirContract, RemoveTreeContract):
    client_class = CurlFtpClient


# -- paths beneath the prefix, URLs, secrets --------------------------------------------------------------------


def test_paths_land_beneath_the_prefix_and_never_beside_it(stock_ftp: StockFtpServer, tmp_path: Path) -> None:
    data = write_random(tmp_path / "a b#c.bin", 70_000)
    for cls in (FtplibClient, CurlFtpClient):
        with cls(stock_ftp.target) as client:
            client.mkdir(f"incoming/{cls.name} dir")
            client.upload(tmp_path / "a b#c.bin", f"incoming/{cls.name} dir/a b#c.bin", Counter())
        assert (stock_ftp.prefix_root / "incoming" / f"{cls.name} dir" / "a b#c.bin").read_bytes() == data
    assert sorted(p.name for p in stock_ftp.login_root.iterdir()) == [PREFIX.split("/")[0]]


def test_url_is_what_a_user_types(stock_ftp: StockFtpServer) -> None:
    ctx = stock_ftp.server.ctx
    scheme = "ftps" if stock_ftp.server.tls else "ftp"
    assert stock_ftp.server.url() == f"{scheme}://{ctx.credentials.user}@{HOST}:{ctx.ports['ftp']}/"
    assert stock_ftp.server.url("::1") == f"{scheme}://{ctx.credentials.user}@[::1]:{ctx.ports['ftp']}/"


def test_the_password_reaches_the_server_only_through_a_private_file(stock_ftp: StockFtpServer) -> None:
    server = stock_ftp.server
    assert server.proc is not None
    cmdline = Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()
    assert server.ctx.credentials.password.encode() not in cmdline
    assert server.settings_path.stat().st_mode & 0o777 == 0o600
    assert server.ctx.credentials.password in server.settings_path.read_text()  # it is there, and only there
    if server.tls:
        assert server.key_path.stat().st_mode & 0o777 == 0o600


def test_curl_with_the_wrong_password_is_an_auth_error(stock_ftp: StockFtpServer, tmp_path: Path) -> None:
    write_random(stock_ftp.prefix_root / "files" / "x.bin", 1000)
    creds = replace(stock_ftp.target.credentials, password="not-" + stock_ftp.target.credentials.password)
    client = CurlFtpClient(replace(stock_ftp.target, credentials=creds), ClientOptions(stall_timeout_s=5.0))
    with pytest.raises(AuthError):
        client.download("files/x.bin", tmp_path / "x.bin", Counter())


# -- remove_tree -------------------------------------------------------------------------------------------------


def _tree(top: Path, keep: Path) -> None:
    """A scratch tree with nested directories, names with spaces, and links that must be deleted, not followed."""
    write_random(top / "a file.bin", 5000)
    write_random(top / "sub dir" / "deeper" / "f.bin", 3000)
    (top / "sub dir" / "empty").mkdir()
    write_random(top / "sub dir" / ".hidden", 10)
    (top / "dir link").symlink_to(keep)  # to a directory beside the tree: its files must survive
    (top / "sub dir" / "file link").symlink_to(keep / "kept.bin")
    (top / "dangling").symlink_to("nowhere")  # pyftpdlib's MLSD cannot stat it and leaves it out


@pytest.mark.parametrize("offer_mlsd", [True, False], ids=["mlsd", "list-only"])
@pytest.mark.parametrize("client_cls", [FtplibClient, CurlFtpClient], ids=["ftplib", "curl"])
def test_remove_tree_deletes_links_and_never_follows_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offer_mlsd: bool, client_cls: type[Client]
) -> None:
    with _running(_start(tmp_path / "s", StockFtp, monkeypatch, offer_mlsd=offer_mlsd)) as stock:
        keep = stock.prefix_root / "keep"
        kept = write_random(keep / "kept.bin", 2000)
        _tree(stock.prefix_root / "scratch", keep)
        with client_cls(stock.target) as client:
            if offer_mlsd:
                client.remove_tree("scratch")
            else:  # no MLST unique fact to tell a directory swapped for a link: the nested ones stay, in one line
                with pytest.raises(LeftInPlace, match="no MLST unique fact"):
                    client.remove_tree("scratch")
        if offer_mlsd:
            assert not os.path.lexists(stock.prefix_root / "scratch")
        else:
            assert sorted(p.name for p in (stock.prefix_root / "scratch").iterdir()) == ["sub dir"]
        assert (keep / "kept.bin").read_bytes() == kept
        assert sorted(p.name for p in keep.iterdir()) == ["kept.bin"]


def test_remove_tree_over_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _running(_start(tmp_path / "s", StockFtps, monkeypatch)) as stock:
        keep = stock.prefix_root / "keep"
        kept = write_random(keep / "kept.bin", 2000)
        _tree(stock.prefix_root / "scratch", keep)
        with FtplibClient(stock.target) as client:
            client.remove_tree("scratch")
        assert not os.path.lexists(stock.prefix_root / "scratch")
        assert (keep / "kept.bin").read_bytes() == kept


def test_remove_tree_of_the_prefix_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run deletes its scratch directory, which is the target's prefix: remove_tree("")."""
    with _running(_start(tmp_path / "s", StockFtp, monkeypatch)) as stock:
        write_random(stock.prefix_root / "files" / "f.bin", 100)
        with FtplibClient(stock.target) as client:
            client.remove_tree("")
        assert not stock.prefix_root.exists()
        assert stock.prefix_root.parent.is_dir()


def test_remove_tree_refuses_the_login_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _running(_start(tmp_path / "s", StockFtp, monkeypatch)) as stock:
        write_random(stock.login_root / "theirs.bin", 100)
        with FtplibClient(replace(stock.target, prefix="")) as client, pytest.raises(WorkbenchError, match="login"):
            client.remove_tree("")
        assert (stock.login_root / "theirs.bin").exists()


def test_remove_tree_stops_at_a_link_the_server_will_not_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyftpdlib refuses to touch a link that leads outside its root, and its MLSD calls the link a directory:
    the client must say so rather than walk into the directory the link points at."""
    with _running(_start(tmp_path / "s", StockFtp, monkeypatch)) as stock:
        outside = tmp_path / "outside"
        precious = write_random(outside / "precious.bin", 1000)
        (stock.prefix_root / "scratch").mkdir()
        (stock.prefix_root / "scratch" / "out link").symlink_to(outside)
        with FtplibClient(stock.target) as client, pytest.raises(WorkbenchError, match="out link"):
            client.remove_tree("scratch")
        assert (outside / "precious.bin").read_bytes() == precious


# -- TLS: trust, refusal, plain servers ---------------------------------------------------------------------------


@pytest.fixture
def untrusted_ftps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StockFtpServer]:
    """An FTPS server whose certificate the client does not trust: SSL_CERT_FILE names another one."""
    with _running(_start(tmp_path / "s", StockFtps, monkeypatch)) as stock:
        other = tmp_path / "other"
        other.mkdir()
        write_self_signed(other / "cert.pem", other / "key.pem", [HOST], common_name="another server")
        monkeypatch.setenv("SSL_CERT_FILE", str(other / "cert.pem"))
        yield stock


def test_ftplib_refuses_an_untrusted_certificate(untrusted_ftps: StockFtpServer) -> None:
    client = FtplibClient(untrusted_ftps.target, ClientOptions(stall_timeout_s=5.0))
    with pytest.raises(AuthError, match="not trusted") as caught:
        client.connect()
    client.close()
    assert "\n" not in caught.value.one_line()
    assert untrusted_ftps.target.credentials.password not in caught.value.one_line()


def test_curl_refuses_an_untrusted_certificate(untrusted_ftps: StockFtpServer, tmp_path: Path) -> None:
    write_random(untrusted_ftps.prefix_root / "files" / "x.bin", 1000)
    client = CurlFtpClient(untrusted_ftps.target, ClientOptions(stall_timeout_s=5.0))
    with pytest.raises(AuthError, match="not trusted") as caught:
        client.download("files/x.bin", tmp_path / "x.bin", Counter())
    assert "certificate" in str(caught.value).split("not trusted", 1)[1]  # curl's reason, not its advice
    with pytest.raises(AuthError, match="not trusted"):
        client.connect()


@pytest.mark.parametrize("client_cls", [FtplibClient, CurlFtpClient], ids=["ftplib", "curl"])
def test_unverified_tls_still_encrypts_and_copies(
    untrusted_ftps: StockFtpServer, tmp_path: Path, client_cls: type[Client]
) -> None:
    """verify_host_keys=False (--insecure-host-keys) skips the certificate check; the server still demands TLS."""
    data = write_random(untrusted_ftps.prefix_root / "files" / "x.bin", 100_000)
    with client_cls(untrusted_ftps.target, ClientOptions(verify_host_keys=False)) as client:
        client.download("files/x.bin", tmp_path / "x.bin", Counter())
    assert (tmp_path / "x.bin").read_bytes() == data


@pytest.mark.parametrize("client_cls", [FtplibClient, CurlFtpClient], ids=["ftplib", "curl"])
def test_ftps_against_a_plain_server_is_refused_before_the_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client_cls: type[Client]
) -> None:
    with _running(_start(tmp_path / "s", StockFtp, monkeypatch)) as stock:
        write_random(stock.prefix_root / "files" / "x.bin", 1000)
        client = client_cls(replace(stock.target, tls=True), ClientOptions(stall_timeout_s=5.0))
        with pytest.raises(WorkbenchError, match="explicit TLS"):
            if isinstance(client, CurlFtpClient):
                client.download("files/x.bin", tmp_path / "x.bin", Counter())
            else:
                client.connect()
        client.close()
        log = stock.server.log_path.read_text()
        assert "logged in" not in log


def test_a_plain_client_is_refused_by_the_ftps_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tls_control_required: the stock FTPS server never takes a password in clear."""
    with _running(_start(tmp_path / "s", StockFtps, monkeypatch)) as stock:
        client = FtplibClient(replace(stock.target, tls=False), ClientOptions(stall_timeout_s=5.0))
        with pytest.raises(WorkbenchError):
            client.connect()
        client.close()
        assert "logged in" not in stock.server.log_path.read_text()

"""HTTP clients (aiohttp, curl) against a stock WebDAV server (WsgiDAV), as `workbench run https://...` meets one.

Each client runs the whole ClientContract twice: with Basic and with Digest, over http and over https
(each client gets both schemes and both transports). Remote paths sit beneath a prefix with a space in it.
The server's self-signed certificate is trusted through SSL_CERT_FILE only, as a user trusts a private CA
(curl gets it as --cacert). Then the parts the contract has no word for: remove_tree, an untrusted
certificate, a missing directory, a closed port, and no password on any command line.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.contract.scratch_contract import IsDirContract, MkdirContract, RemoveTreeContract
from tests.contract.suite import ClientContract, Counter
from tests.helpers import free_port, lab_unavailable, loopback_context, write_random
from tests.stock_http import PREFIX, StockDav
from workbench.protocols.base import Client, ClientOptions
from workbench.protocols.curl import CurlHttpClient
from workbench.protocols.http import AiohttpClient
from workbench.server.stock.webdav import StockWebDav
from workbench.shared.credentials import Credentials
from workbench.shared.errors import AuthError, NetworkError, NotFoundError, UsageError, WorkbenchError
from workbench.shared.net import port_open
from workbench.shared.target import Target

needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed: apt-get install curl")
CLIENTS = [AiohttpClient, pytest.param(CurlHttpClient, marks=needs_curl)]


def _trust(monkeypatch: pytest.MonkeyPatch, dav: StockDav) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(dav.server.cert_path))
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


class _StockDavContract(ClientContract, MkdirContract, RemoveTreeContract):
    client_class: type[Client]
    auth: str
    tls: bool

    @pytest.fixture(scope="class")
    @classmethod
    def dav_server(cls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockDav]:
        dav = StockDav(tmp_path_factory.mktemp("webdav"), cls.auth, cls.tls)
        yield dav
        dav.stop()

    @pytest.fixture
    def dav(self, dav_server: StockDav, monkeypatch: pytest.MonkeyPatch) -> StockDav:
        dav_server.ensure()  # a test before may have killed it
        _trust(monkeypatch, dav_server)
        return dav_server

    @pytest.fixture
    def served_root(self, dav: StockDav) -> Path:
        return dav.served_root

    @pytest.fixture
    def make_client(self, dav: StockDav) -> Callable[..., Client]:
        return dav.factory(self.client_class)

    @pytest.fixture
    def bad_client(self, dav: StockDav) -> Client:
        return dav.bad(self.client_class)

    @pytest.fixture
    def stop_server(self, dav: StockDav) -> Callable[[], None]:
        return dav.kill


class TestAiohttpDigestHttps(_StockDavContract, IsDirContract):
    client_class, auth, tls = AiohttpClient, "digest", True


class TestAiohttpBasicHttp(_StockDavContract, IsDirContract):
    client_class, auth, tls = AiohttpClient, "basic", False


@needs_curl
class TestCurlBasicHttps(_StockDavContract):
    client_class, auth, tls = CurlHttpClient, "basic", True


@needs_curl
class TestCurlDigestHttp(_StockDavContract):
    client_class, auth, tls = CurlHttpClient, "digest", False


# --- beyond the contract: one Basic https server and one Digest http server for the module ---


@pytest.fixture(scope="module")
def https_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockDav]:
    dav = StockDav(tmp_path_factory.mktemp("webdav-https"), "basic", tls=True)
    yield dav
    dav.stop()


@pytest.fixture(scope="module")
def digest_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockDav]:
    dav = StockDav(tmp_path_factory.mktemp("webdav-digest"), "digest", tls=False)
    yield dav
    dav.stop()


@pytest.fixture
def https_dav(https_server: StockDav, monkeypatch: pytest.MonkeyPatch) -> StockDav:
    https_server.ensure()
    _trust(monkeypatch, https_server)
    return https_server


@pytest.fixture
def digest_dav(digest_server: StockDav) -> StockDav:
    digest_server.ensure()
    return digest_server


@pytest.mark.parametrize("cls", CLIENTS)
def test_remove_tree_leaves_what_links_inside_point_at(cls: type[Client], digest_dav: StockDav, tmp_path: Path) -> None:
    # DELETE hands the walk to the server; WsgiDAV, like the utility clients, removes a link, never its target.
    outside = tmp_path / "outside"
    keep = write_random(outside / "keep.bin", 100)
    scratch = digest_dav.served_root / f"linked {cls.name}"
    (scratch / "sub").mkdir(parents=True)
    (scratch / "link-to-dir").symlink_to(outside)
    (scratch / "sub" / "link-to-file").symlink_to(outside / "keep.bin")
    with cls(digest_dav.target()) as client:
        client.remove_tree(f"linked {cls.name}")
    assert not scratch.exists()
    assert (outside / "keep.bin").read_bytes() == keep


@pytest.mark.parametrize("cls", CLIENTS)
def test_remove_tree_of_the_servers_root_is_refused(cls: type[Client], digest_dav: StockDav) -> None:
    with cls(digest_dav.target(prefix="")) as client, pytest.raises(UsageError):
        client.remove_tree("")
    assert digest_dav.served_root.is_dir()


@pytest.mark.parametrize("cls", CLIENTS)
@pytest.mark.parametrize("scheme", ["basic", "digest"])
def test_wrong_password_is_an_auth_error_naming_the_login(
    cls: type[Client], scheme: str, https_dav: StockDav, digest_dav: StockDav
) -> None:
    dav = https_dav if scheme == "basic" else digest_dav
    client = dav.bad(cls)
    with pytest.raises(AuthError, match="refused the login"):
        client.connect()
    client.close()


@pytest.mark.parametrize("cls", CLIENTS)
def test_a_login_refused_after_connect_fails_the_upload_at_once(cls: type[Client], tmp_path: Path) -> None:
    """A Digest PUT refused mid-session (here: the password changed; on Apache also a nonce gone stale) is an
    AuthError, never a stall: aiohttp's own retry would send the streamed body again, which never comes."""
    dav = StockDav(tmp_path / "dav", "digest", tls=False)
    dav.ensure()
    client = cls(dav.target(), ClientOptions(stall_timeout_s=60.0))  # a stall would end as NetworkError, after 60 s
    try:
        client.connect()
        dav.restart_with_password("changed-" + dav.ctx.credentials.password)
        write_random(tmp_path / "up.bin", 32 << 20)
        with pytest.raises(AuthError):
            client.upload(tmp_path / "up.bin", "up.bin", Counter())
    finally:
        client.close()
        dav.stop()


@pytest.mark.parametrize("cls", CLIENTS)
def test_a_connection_the_server_closed_between_copies_does_not_fail_the_next(
    cls: type[Client], tmp_path: Path
) -> None:
    """A server closes idle keep-alive connections (its timeout, a restart) while the client waits between
    copies: the next upload must go out on a new connection, not stream into the closed one."""
    dav = StockDav(tmp_path / "dav", "digest", tls=False)
    dav.ensure()
    data = write_random(tmp_path / "up.bin", 4 << 20)
    client = cls(dav.target(), ClientOptions(stall_timeout_s=30.0))
    try:
        client.connect()
        for n in range(3):
            dav.restart_with_password(dav.ctx.credentials.password)  # same login: closes every connection
            client.upload(tmp_path / "up.bin", f"up{n}.bin", Counter())
            assert (dav.served_root / f"up{n}.bin").read_bytes() == data
    finally:
        client.close()
        dav.stop()


@pytest.mark.parametrize("cls", CLIENTS)
def test_untrusted_certificate_is_a_clean_auth_error(
    cls: type[Client], https_dav: StockDav, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The system store alone: it does not know this server's self-signed certificate.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    client = cls(https_dav.target(), ClientOptions(stall_timeout_s=5.0))
    with pytest.raises(AuthError, match="certificate") as caught:
        client.connect()
    client.close()
    assert "SSL_CERT_FILE" in caught.value.hint and "--insecure-host-keys" in caught.value.hint


@pytest.mark.parametrize("cls", CLIENTS)
def test_insecure_host_keys_also_skips_the_certificate_check(
    cls: type[Client], https_dav: StockDav, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    data = write_random(https_dav.served_root / "files" / "insecure.bin", 5000)
    with cls(https_dav.target(), ClientOptions(verify_host_keys=False)) as client:
        client.download("files/insecure.bin", tmp_path / "insecure.bin", Counter())
    assert (tmp_path / "insecure.bin").read_bytes() == data


@needs_curl
def test_curl_trusts_curl_ca_bundle_too(https_dav: StockDav, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setenv("CURL_CA_BUNDLE", str(https_dav.server.cert_path))
    with CurlHttpClient(https_dav.target()) as client:
        client.mkdir("via-curl-ca-bundle")
    assert (https_dav.served_root / "via-curl-ca-bundle").is_dir()


@pytest.mark.parametrize("cls", CLIENTS)
def test_missing_prefix_directory_is_not_found_at_connect(cls: type[Client], digest_dav: StockDav) -> None:
    client = cls(digest_dav.target(prefix="no/such dir"))
    with pytest.raises(NotFoundError, match="no/such%20dir"):
        client.connect()
    client.close()


@pytest.mark.parametrize("cls", CLIENTS)
def test_closed_port_is_a_network_error(cls: type[Client], digest_dav: StockDav) -> None:
    target = Target("127.0.0.1", digest_dav.ctx.credentials, ports={"http": free_port()}, stock=True, prefix=PREFIX)
    client = cls(target, ClientOptions(stall_timeout_s=2.0, connect_timeout_s=2.0))
    with pytest.raises(NetworkError):
        client.connect()
    client.close()


@needs_curl
def test_no_password_on_any_command_line_and_the_config_is_private(https_dav: StockDav) -> None:
    password = https_dav.ctx.credentials.password
    assert password not in " ".join(https_dav.server.command())
    assert password not in https_dav.server.url()
    assert (
        https_dav.server.url() == f"https://{https_dav.ctx.credentials.user}@127.0.0.1:{https_dav.ctx.ports['http']}/"
    )
    for private in (https_dav.server.config_path, https_dav.server.key_path):
        assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    assert password in https_dav.server.config_path.read_text()  # where it lives instead
    curl = CurlHttpClient(https_dav.target())
    curl.connect()  # learns the scheme, which adds --basic to the argv
    argv = curl._argv()
    assert "--basic" in argv and password not in " ".join(argv)


@pytest.mark.skipif(lab_unavailable() is not None, reason=f"network namespaces: {lab_unavailable()}")
def test_starts_inside_a_network_namespace_as_the_lab_does(tmp_path: Path) -> None:
    """With ctx.netns the server listens in that namespace only (the lab's server host), not on the host's."""
    ns = f"wbtest-dav-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        ctx = dataclasses.replace(loopback_context(tmp_path, "http"), netns=ns)
        server = StockWebDav(ctx, auth="digest", tls=True)
        server.start()
        try:
            port = ctx.ports["http"]
            assert port_open("127.0.0.1", port, ns)
            assert not port_open("127.0.0.1", port)
        finally:
            server.stop()
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)


class _RedirectingDav:
    """A hostile WebDAV server on loopback: PROPFIND of the prefix answers as WebDAV does, every other request
    is sent on (307, which keeps the method and body) to /victim/. It records every request it gets."""

    def __init__(self) -> None:
        import asyncio
        import threading

        from aiohttp import web

        self.seen: list[tuple[str, str]] = []
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def handle(request: web.Request) -> web.StreamResponse:
            self.seen.append((request.method, request.path))
            await request.read()
            if request.method == "PROPFIND":
                return web.Response(status=207, text='<?xml version="1.0"?><multistatus xmlns="DAV:"/>')
            return web.Response(status=307, headers={"Location": "/victim/"})

        async def start() -> None:
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", handle)
            self._runner = web.AppRunner(app)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
            ready.set()

        def serve() -> None:
            self._loop.run_until_complete(start())
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        assert ready.wait(10)

    def stop(self) -> None:
        import asyncio

        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.mark.parametrize("cls", CLIENTS)
def test_a_redirect_is_refused_never_followed(cls: type[Client], tmp_path: Path) -> None:
    # Followed, a DELETE with Depth: infinity (or a PUT) would land wherever the server's Location points.
    server = _RedirectingDav()
    target = Target(
        host="127.0.0.1", ports={"http": server.port}, stock=True, prefix="scratch", credentials=Credentials("u", "pw")
    )
    write_random(tmp_path / "up.bin", 4096)
    try:
        with cls(target, ClientOptions(stall_timeout_s=10.0)) as client:
            for action in (
                lambda: client.remove_tree("run"),
                lambda: client.upload(tmp_path / "up.bin", "run/up.bin", Counter()),
                lambda: client.download("run/up.bin", tmp_path / "down.bin", Counter()),
                lambda: client.mkdir("run/sub"),
            ):
                # remove_tree's PROPFIND finds no plain collection there and sends no DELETE at all
                with pytest.raises(WorkbenchError, match=r"redirect|HTTP 307|not a plain collection"):
                    action()
    finally:
        server.stop()
    assert not [seen for seen in server.seen if seen[1].startswith("/victim")], server.seen

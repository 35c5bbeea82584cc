"""HTTP (aiohttp, curl) and FTP (ftplib, curl) clients against the real `workbench serve` on loopback."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.contract.suite import ClientContract
from tests.serve_fixtures import ServeRunner, bad, factory
from workbench.protocols.base import Client
from workbench.protocols.curl import CurlFtpClient, CurlHttpClient
from workbench.protocols.ftp import FtplibClient
from workbench.protocols.http import AiohttpClient


class _ServeContract(ClientContract):
    client_class: type[Client]

    @pytest.fixture
    def served_root(self, served: ServeRunner) -> Path:
        return served.ctx.root

    @pytest.fixture
    def make_client(self, served: ServeRunner) -> Callable[..., Client]:
        return factory(self.client_class, served)

    @pytest.fixture
    def bad_client(self, served: ServeRunner) -> Client:
        return bad(self.client_class, served)

    @pytest.fixture
    def stop_server(self, served: ServeRunner) -> Callable[[], None]:
        return served.kill


class TestAiohttpContract(_ServeContract):
    client_class = AiohttpClient


class TestFtplibContract(_ServeContract):
    client_class = FtplibClient


needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed: apt-get install curl")


@needs_curl
class TestCurlHttpContract(_ServeContract):
    client_class = CurlHttpClient


@needs_curl
class TestCurlFtpContract(_ServeContract):
    client_class = CurlFtpClient


def test_http_refuses_paths_outside_the_root(served: ServeRunner, tmp_path: Path) -> None:
    from workbench.shared.errors import WorkbenchError

    (served.ctx.root.parent / "secret.txt").write_text("outside")
    with AiohttpClient(served.target()) as client:
        for sneaky in ("../secret.txt", "files/../../secret.txt", "%2e%2e/secret.txt"):
            with pytest.raises(WorkbenchError):
                client.download(sneaky, tmp_path / "x", lambda n: None)
    assert not (tmp_path / "x").exists() or (tmp_path / "x").read_bytes() != b"outside"


def test_ftp_refuses_paths_outside_the_root(served: ServeRunner, tmp_path: Path) -> None:
    from workbench.shared.errors import WorkbenchError

    (served.ctx.root.parent / "secret2.txt").write_text("outside")
    with FtplibClient(served.target()) as client, pytest.raises(WorkbenchError):
        client.download("../secret2.txt", tmp_path / "y", lambda n: None)


def test_ftp_session_that_never_came_back_fails_its_copy_in_one_line(tmp_path: Path) -> None:
    """After a failed row the runner reconnects; when the server stays down, the next copy must fail its row
    with a NetworkError (as SFTP and SMB do), never an AssertionError that ends the whole run."""
    from tests.helpers import free_port
    from workbench.protocols.base import ClientOptions
    from workbench.shared.credentials import generate
    from workbench.shared.errors import NetworkError
    from workbench.shared.target import Target

    target = Target("127.0.0.1", generate(), ports={"ftp": free_port()})  # nothing listens there
    client = FtplibClient(target, ClientOptions(stall_timeout_s=2.0))
    with pytest.raises(NetworkError):
        client.connect()
    for call in (lambda: client.mkdir("incoming/x"), lambda: client.download("files/a", tmp_path / "a", print)):
        with pytest.raises(NetworkError):
            call()
    client.close()

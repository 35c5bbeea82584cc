"""curl itself meeting each failure: the HTTP and FTP curl clients' download() and upload() against `workbench serve`.

connect() checks reachability and the login with Python (urllib, ftplib) before any curl runs, so the contract's
"bad credentials" and "refused" tests never reach curl's own error handling. Here every client connects
first, then the world changes under it and curl meets the change in its transfer:

- the password is no longer the server's (the client is handed other credentials after connect): AuthError;
- the server is gone (killed after connect), its port refused: NetworkError;
- the network is gone: the transfer runs in a new network namespace, whose only interface (loopback) is
  down, so 127.0.0.1 has no route (no address beyond this machine's loopback is ever used): NetworkError;
- the server is killed mid-transfer, each way: NetworkError.

Each is one WorkbenchError of that class, its exit code the one README's table gives, its message one line
naming curl.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tests.contract.suite import Counter
from tests.helpers import write_random
from tests.serve_fixtures import ServeRunner
from workbench.protocols.base import Client, ClientOptions
from workbench.protocols.curl import CurlFtpClient, CurlHttpClient
from workbench.shared.errors import AuthError, ExitCode, NetworkError, WorkbenchError

REPO = Path(__file__).resolve().parents[2]
CLIENTS = [CurlHttpClient, CurlFtpClient]
SMALL_BYTES = 256 * 1024
BIG_BYTES = 1 << 30  # sparse on both ends: fast to serve, never finished before the kill
KILL_AFTER_BYTES = 8 << 20  # past curl's own start-up reads (its config on stdin), well inside the transfer

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed: apt-get install curl")


def _assert_one_line(exc: WorkbenchError, cls: type[WorkbenchError], code: ExitCode) -> None:
    assert type(exc) is cls, (type(exc), exc.one_line())
    assert exc.exit_code == code
    line = exc.one_line()
    assert "\n" not in line and line.startswith("curl") and "curl: curl" not in line, line


def _connected(cls: type[Client], served: ServeRunner) -> Client:
    client = cls(served.target(), ClientOptions(stall_timeout_s=5.0))
    client.connect()
    return client


def _calls(client: Client, served: ServeRunner, tmp_path: Path, tag: str) -> list[Callable[[], None]]:
    """A download of an existing file and an upload into an existing directory, each one curl run."""
    write_random(served.ctx.root / "files" / f"{tag}.bin", SMALL_BYTES)
    (served.ctx.root / "incoming" / tag).mkdir(parents=True, exist_ok=True)
    local = tmp_path / f"{tag}-up.bin"
    write_random(local, SMALL_BYTES)
    return [
        lambda: client.download(f"files/{tag}.bin", tmp_path / f"{tag}-down.bin", Counter()),
        lambda: client.upload(local, f"incoming/{tag}/up.bin", Counter()),
    ]


@pytest.mark.parametrize("cls", CLIENTS, ids=lambda c: c.__name__)
def test_credentials_the_server_no_longer_takes_are_an_auth_error(
    cls: type[Client], served: ServeRunner, tmp_path: Path
) -> None:
    client = _connected(cls, served)
    try:
        wrong = replace(served.ctx.credentials, password="not-the-password")
        client.target = replace(client.target, credentials=wrong)
        for call in _calls(client, served, tmp_path, f"auth-{cls.__name__}"):
            with pytest.raises(WorkbenchError) as caught:
                call()
            _assert_one_line(caught.value, AuthError, ExitCode.AUTH)
    finally:
        client.close()
    assert not (served.ctx.root / "incoming" / f"auth-{cls.__name__}" / "up.bin").exists()


def test_a_server_stopped_after_connect_is_a_refused_port(served: ServeRunner, tmp_path: Path) -> None:
    clients = [_connected(cls, served) for cls in CLIENTS]
    calls = [(c, call) for c in clients for call in _calls(c, served, tmp_path, f"refused-{type(c).__name__}")]
    served.kill()
    try:
        for client, call in calls:
            with pytest.raises(WorkbenchError) as caught:
                call()
            _assert_one_line(caught.value, NetworkError, ExitCode.NETWORK)
            assert "connect" in caught.value.one_line().lower(), (type(client).__name__, caught.value.one_line())
    finally:
        for client in clients:
            client.close()


# Runs in a child process: connects in this machine's network, then moves itself into a new network
# namespace (loopback down: no route to anything) and lets curl try each copy there.
_IN_A_NAMESPACE_WITHOUT_ROUTES = """
import ctypes, json, sys
from pathlib import Path
from workbench.protocols.base import ClientOptions
from workbench.protocols.curl import CurlFtpClient, CurlHttpClient
from workbench.shared import credentials, target

state, tmp = Path(sys.argv[1]), Path(sys.argv[2])
where = target.read(state / "target.json", credentials.read(state / "credentials.json"))
clients = [cls(where, ClientOptions(stall_timeout_s=5.0)) for cls in (CurlHttpClient, CurlFtpClient)]
for client in clients:
    client.connect()
def ignore(n):
    pass
CLONE_NEWNET = 0x40000000
if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET) != 0:
    sys.exit(f"unshare(CLONE_NEWNET) failed: errno {ctypes.get_errno()}")
said = []
for client in clients:
    name = type(client).__name__
    for call, args in (("download", ("files/unreachable.bin", tmp / f"{name}.bin", ignore)),
                       ("upload", (tmp / "up.bin", f"incoming/unreachable/{name}.bin", ignore))):
        try:
            getattr(client, call)(*args)
            said.append([name, call, None, None, "no error"])
        except Exception as exc:
            said.append([name, call, type(exc).__name__, int(getattr(exc, "exit_code", -1)),
                         exc.one_line() if hasattr(exc, "one_line") else repr(exc)])
    client.close()
print(json.dumps(said))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a new network namespace needs root")
def test_a_network_gone_after_connect_is_an_unreachable_host(served: ServeRunner, tmp_path: Path) -> None:
    write_random(served.ctx.root / "files" / "unreachable.bin", SMALL_BYTES)
    (served.ctx.root / "incoming" / "unreachable").mkdir(parents=True, exist_ok=True)
    write_random(tmp_path / "up.bin", SMALL_BYTES)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(x for x in (str(REPO), os.environ.get("PYTHONPATH")) if x)}
    done = subprocess.run(
        [sys.executable, "-c", _IN_A_NAMESPACE_WITHOUT_ROUTES, str(served.ctx.state_dir), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert [(name, call) for name, call, *_ in said] == [
        (cls.__name__, call) for cls in CLIENTS for call in ("download", "upload")
    ], said
    for name, call, error, code, line in said:
        assert (error, code) == ("NetworkError", ExitCode.NETWORK), (name, call, line)
        assert "\n" not in line and line.startswith("curl") and "curl: curl" not in line, line
    assert not any((served.ctx.root / "incoming" / "unreachable").iterdir())


def _kill_once_past(served: ServeRunner, threshold: int) -> tuple[Callable[[int], None], threading.Event]:
    """A progress callback that kills the server once the copy has moved `threshold` bytes."""
    killed = threading.Event()
    moved = Counter()

    def progress(n: int) -> None:
        moved(n)
        if moved.total >= threshold and not killed.is_set():
            killed.set()
            served.kill()

    return progress, killed


@pytest.mark.parametrize("cls", CLIENTS, ids=lambda c: c.__name__)
def test_a_server_killed_mid_download_is_a_network_error(
    cls: type[Client], served: ServeRunner, tmp_path: Path
) -> None:
    big = served.ctx.root / "files" / "killed-down.bin"
    big.parent.mkdir(parents=True, exist_ok=True)
    with open(big, "wb") as fh:
        fh.truncate(BIG_BYTES)
    client = _connected(cls, served)
    progress, killed = _kill_once_past(served, KILL_AFTER_BYTES)
    try:
        with pytest.raises(WorkbenchError) as caught:
            client.download("files/killed-down.bin", tmp_path / "down.bin", progress)
    finally:
        client.close()
        big.unlink()
    assert killed.is_set()
    _assert_one_line(caught.value, NetworkError, ExitCode.NETWORK)
    assert (tmp_path / "down.bin").stat().st_size < BIG_BYTES  # it did stop part-way


@pytest.mark.parametrize("cls", CLIENTS, ids=lambda c: c.__name__)
def test_a_server_killed_mid_upload_is_a_network_error(cls: type[Client], served: ServeRunner, tmp_path: Path) -> None:
    local = tmp_path / "up.bin"
    with open(local, "wb") as fh:
        fh.truncate(BIG_BYTES)
    incoming = served.ctx.root / "incoming" / f"killed-{cls.__name__}"
    incoming.mkdir(parents=True, exist_ok=True)
    client = _connected(cls, served)
    progress, killed = _kill_once_past(served, KILL_AFTER_BYTES)
    try:
        with pytest.raises(WorkbenchError) as caught:
            client.upload(local, f"{incoming.relative_to(served.ctx.root)}/up.bin", progress)
    finally:
        client.close()
        shutil.rmtree(incoming)
    assert killed.is_set()
    _assert_one_line(caught.value, NetworkError, ExitCode.NETWORK)

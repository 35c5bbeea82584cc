"""AFP through workbench's own client (afp/python) against a real netatalk afpd: the client contract, the logins,
the request pattern, deadlines and a removal that never follows a link.
"""

from __future__ import annotations

import math
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests import afp_fixtures
from tests.afp_fixtures import AfpdRunner, AfpServed
from tests.contract.scratch_contract import ScratchContract
from tests.contract.suite import ClientContract, Counter
from tests.helpers import write_random
from workbench.protocols.afp import AfpPythonClient
from workbench.protocols.base import ClientOptions, LeftInPlace
from workbench.shared.credentials import Credentials
from workbench.shared.errors import (
    AuthError,
    DiskError,
    ExitCode,
    NetworkError,
    NotFoundError,
    UsageError,
    WorkbenchError,
)


@pytest.fixture(scope="module")
def afpd_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfpdRunner]:
    yield from afp_fixtures.running(tmp_path_factory)


@pytest.fixture
def afpd(afpd_runner: AfpdRunner) -> AfpServed:
    return afp_fixtures.served(afpd_runner)


def _peer_pids(client: AfpPythonClient) -> list[int]:
    """The local processes holding the server's end of the client's connection (the session's afpd)."""
    assert client._conn is not None
    near = client._conn.sock.getsockname()[1]
    far = client._conn.sock.getpeername()[1]
    wanted = f"{far:04X}"
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(f":{wanted}") and fields[2].endswith(f":{near:04X}"):
            inodes.add(f"socket:[{fields[9]}]")
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (entry / "fd").iterdir()):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _client(afpd: AfpServed, **opts: object) -> AfpPythonClient:
    return AfpPythonClient(afpd.target, ClientOptions(**opts))  # type: ignore[arg-type]


class TestAfpContract(ClientContract, ScratchContract):
    client_class = AfpPythonClient

    @pytest.fixture
    def served_root(self, afpd: AfpServed) -> Path:
        return afpd.root

    @pytest.fixture
    def make_client(self, afpd: AfpServed):
        return lambda **opts: _client(afpd, **opts)

    @pytest.fixture
    def bad_client(self, afpd: AfpServed):
        return AfpPythonClient(afpd.bad_target)

    @pytest.fixture
    def stop_server(self, afpd: AfpServed):
        return afpd.stop


# --- logins ----------------------------------------------------------------------------------------------------


def test_the_password_goes_by_dhx2_unless_cleartext_is_asked_for(afpd: AfpServed) -> None:
    with _client(afpd) as client:
        assert client.uam == "DHX2"
        assert client.version is not None and client.version.startswith("AFP3")


@pytest.fixture(scope="module")
def guest_afpd_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfpdRunner]:
    yield from afp_fixtures.running(tmp_path_factory, guest=True)


def test_a_guest_login_only_when_asked(guest_afpd_runner: AfpdRunner, tmp_path: Path) -> None:
    served = afp_fixtures.served(guest_afpd_runner)
    data = write_random(served.root / "files" / "open.bin", 5000)
    with AfpPythonClient(served.target) as client:
        assert client.uam == "DHX2"  # the server takes guests too: the password still goes by DHX2
    with AfpPythonClient(served.target, ClientOptions(afp_login="guest")) as client:
        assert client.uam == "No User Authent"
        client.download("files/open.bin", tmp_path / "open.bin", Counter())
    assert (tmp_path / "open.bin").read_bytes() == data


def test_a_wrong_password_is_an_auth_error_exit_4(afpd: AfpServed) -> None:
    client = AfpPythonClient(afpd.bad_target)
    with pytest.raises(AuthError) as caught:
        client.connect()
    client.close()
    assert caught.value.exit_code == ExitCode.AUTH
    assert "\n" not in caught.value.one_line() and afpd.bad_target.credentials.password not in caught.value.one_line()


def test_an_unknown_user_is_an_auth_error(afpd: AfpServed) -> None:
    target = replace(afpd.target, credentials=Credentials("nobody-such-user", "x"))
    with pytest.raises(AuthError):
        AfpPythonClient(target).connect()


def test_cleartext_refuses_a_password_it_would_cut(afpd: AfpServed) -> None:
    """The cleartext login carries 8 bytes: a longer password is refused before any login is sent."""
    client = _client(afpd, afp_login="cleartext")
    with pytest.raises(UsageError, match="at most 8 bytes"):
        client.connect()
    client.close()


def test_an_unknown_login_kind_is_a_usage_error(afpd: AfpServed) -> None:
    with pytest.raises(UsageError, match="unknown AFP login"):
        _client(afpd, afp_login="kerberos").connect()


def test_a_missing_volume_is_not_found(afpd: AfpServed) -> None:
    client = AfpPythonClient(replace(afpd.target, share="no-such-volume"))
    with pytest.raises(NotFoundError, match="no-such-volume"):
        client.connect()
    client.close()


# --- the request pattern ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("block_size", "in_flight"), [(64 * 1024, 3), (256 * 1024, 1), (1 << 20, 8)])
def test_request_size_and_requests_in_flight_are_honoured(
    afpd: AfpServed, tmp_path: Path, block_size: int, in_flight: int
) -> None:
    size = 2 * 1024 * 1024 + 4321
    data = write_random(afpd.root / "files" / "pattern.bin", size)
    write_random(afpd.root / "files" / "warm.bin", 10)
    with _client(afpd, block_size=block_size, requests_in_flight=in_flight) as client:
        client.download("files/warm.bin", tmp_path / "warm.bin", Counter())  # looks the directory up once
        before = client.requests_sent
        client.download("files/pattern.bin", tmp_path / "pattern.bin", Counter())
        reads = math.ceil(size / block_size)
        assert client.requests_sent - before == reads + 2  # FPOpenFork, the reads, FPCloseFork
        assert client.peak_in_flight == min(in_flight, reads)
        details = client.details()
        assert (details.request_bytes, details.requests_in_flight) == (block_size, in_flight)
        before = client.requests_sent
        client.upload(tmp_path / "pattern.bin", "files/back.bin", Counter())
        assert client.requests_sent - before == reads + 3  # FPCreateFile, FPOpenFork, the writes, FPCloseFork
    assert (tmp_path / "pattern.bin").read_bytes() == data
    assert (afpd.root / "files" / "back.bin").read_bytes() == data


def test_requests_never_exceed_the_servers_quantum(afpd: AfpServed, tmp_path: Path) -> None:
    size = 3 * 1024 * 1024
    write_random(afpd.root / "files" / "q.bin", size)
    with _client(afpd, block_size=16 << 20) as client:
        quantum = client._conn.server_quantum_bytes if client._conn else 0
        assert 0 < quantum < 16 << 20
        assert client.details().request_bytes == quantum
        client.download("files/q.bin", tmp_path / "q.bin", Counter())
        client.download("files/q.bin", tmp_path / "q.bin", Counter())
        before = client.requests_sent
        client.download("files/q.bin", tmp_path / "q.bin", Counter())
        assert client.requests_sent - before == math.ceil(size / quantum) + 2


def test_an_empty_file_both_ways(afpd: AfpServed, tmp_path: Path) -> None:
    (afpd.root / "files").mkdir()
    (afpd.root / "files" / "empty.bin").write_bytes(b"")
    (tmp_path / "up.bin").write_bytes(b"")
    with _client(afpd) as client:
        client.download("files/empty.bin", tmp_path / "empty.bin", Counter())
        client.upload(tmp_path / "up.bin", "files/up.bin", Counter())
    assert (tmp_path / "empty.bin").read_bytes() == b""
    assert (afpd.root / "files" / "up.bin").read_bytes() == b""


# --- failures --------------------------------------------------------------------------------------------------


def test_a_stalled_server_fails_the_copy_within_the_timeout(afpd: AfpServed, tmp_path: Path) -> None:
    big = afpd.root / "files" / "stall.bin"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as fh:
        fh.truncate(1 << 30)
    client = _client(afpd, stall_timeout_s=2.0)
    client.connect()
    stopped: list[int] = []

    def freeze(n: int) -> None:
        if not stopped:
            stopped.extend(_peer_pids(client))
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)

    try:
        with pytest.raises(NetworkError) as caught:
            client.download("files/stall.bin", tmp_path / "stall.bin", freeze)
        assert "no reply" in caught.value.one_line() and "2 s" in caught.value.one_line()
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        client.close()
    assert stopped, "the session's afpd was found"


def test_a_server_killed_mid_copy_is_one_network_error(afpd: AfpServed, tmp_path: Path) -> None:
    big = afpd.root / "files" / "killed.bin"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as fh:
        fh.truncate(1 << 30)
    client = _client(afpd)
    client.connect()
    killed = threading.Event()

    def kill(n: int) -> None:
        if not killed.is_set():
            killed.set()
            afpd.stop()

    try:
        with pytest.raises(WorkbenchError) as caught:
            client.download("files/killed.bin", tmp_path / "killed.bin", kill)
    finally:
        client.close()
    assert killed.is_set()
    assert caught.value.exit_code == ExitCode.NETWORK
    assert "\n" not in caught.value.one_line()


def test_paths_with_dot_dot_are_refused_before_any_request(afpd: AfpServed, tmp_path: Path) -> None:
    write_random(afpd.root.parent / "secret.bin", 100)
    try:
        with _client(afpd) as client:
            for path in ("../secret.bin", "files/../../secret.bin", "files//x"):
                before = client.requests_sent
                with pytest.raises(NotFoundError):
                    client.download(path, tmp_path / "leak.bin", Counter())
                assert client.requests_sent == before
    finally:
        (afpd.root.parent / "secret.bin").unlink()


# --- directories and removal -----------------------------------------------------------------------------------


def test_mkdir_is_idempotent_and_is_dir_tells_files_from_directories(afpd: AfpServed) -> None:
    write_random(afpd.root / "files" / "f.bin", 10)
    with _client(afpd) as client:
        client.mkdir("incoming/a/b")
        client.mkdir("incoming/a/b")
        assert client.is_dir("incoming/a/b") and client.is_dir("incoming")
        assert not client.is_dir("files/f.bin") and not client.is_dir("incoming/none")
    assert (afpd.root / "incoming" / "a" / "b").is_dir()


def test_mkdir_over_a_file_fails(afpd: AfpServed) -> None:
    write_random(afpd.root / "incoming" / "taken", 10)
    with _client(afpd) as client, pytest.raises(NotFoundError, match="not a directory"):
        client.mkdir("incoming/taken/sub")


def test_remove_tree_deletes_links_and_never_follows_them(afpd: AfpServed, tmp_path: Path) -> None:
    outside = afpd.root / "outside"
    keep = write_random(outside / "keep.bin", 1000)
    scratch = afpd.root / "incoming" / "run-1"
    for i in range(30):
        write_random(scratch / "deep" / f"d{i % 3}" / f"f{i}.bin", 100 + i)
    (scratch / "to-dir").symlink_to(outside)  # a link to a directory: deleted itself, its target kept
    (scratch / "deep" / "to-file").symlink_to(outside / "keep.bin")
    (scratch / "dangling").symlink_to(afpd.root / "nowhere")
    (scratch / "up").symlink_to("..")
    with _client(afpd) as client:
        client.remove_tree("incoming/run-1")
    assert not scratch.exists() and not scratch.is_symlink()
    assert (outside / "keep.bin").read_bytes() == keep
    assert (afpd.root / "incoming").is_dir()


def test_a_scratch_swapped_for_a_link_is_left_in_place(afpd: AfpServed) -> None:
    outside = afpd.root / "outside"
    keep = write_random(outside / "keep.bin", 1000)
    (afpd.root / "incoming").mkdir()
    (afpd.root / "incoming" / "run-2").symlink_to(outside)
    with _client(afpd) as client:
        with pytest.raises(LeftInPlace):
            client.remove_tree("incoming/run-2")
        with pytest.raises(LeftInPlace):
            client.check_real_dir("incoming/run-2")
        client.mkdir("incoming/real")
        client.check_real_dir("incoming/real")
    assert (afpd.root / "incoming" / "run-2").is_symlink()
    assert (outside / "keep.bin").read_bytes() == keep


def test_remove_tree_of_a_missing_directory_and_of_the_root(afpd: AfpServed) -> None:
    with _client(afpd) as client:
        with pytest.raises(NotFoundError):
            client.remove_tree("incoming/none")
        with pytest.raises(UsageError):
            client.remove_tree("")


def test_a_listing_of_many_entries_is_removed_whole(afpd: AfpServed) -> None:
    scratch = afpd.root / "incoming" / "many"
    scratch.mkdir(parents=True)
    for i in range(1300):  # more than one FPEnumerateExt2 reply
        (scratch / f"entry-with-a-longish-name-{i:05d}.bin").write_bytes(b"x")
    with _client(afpd) as client:
        client.remove_tree("incoming/many")
    assert not scratch.exists()


def test_a_failed_copy_leaves_the_session_usable(afpd: AfpServed, tmp_path: Path) -> None:
    """A failure in the middle of pipelined requests reads the replies still due: the next copy works."""
    data = write_random(afpd.root / "files" / "f.bin", 3 * 1024 * 1024 + 1)
    write_random(tmp_path / "up.bin", 1000)
    with _client(afpd, block_size=256 * 1024, requests_in_flight=4) as client:
        with pytest.raises(DiskError):  # the local disk is full after the first reply
            client.download("files/f.bin", Path("/dev/full"), Counter())
        with pytest.raises(NotFoundError):
            client.upload(tmp_path / "up.bin", "no-such-dir/up.bin", Counter())
        with pytest.raises(NotFoundError):
            client.download("files/none.bin", tmp_path / "none.bin", Counter())
        client.download("files/f.bin", tmp_path / "ok.bin", Counter())
    assert (tmp_path / "ok.bin").read_bytes() == data


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda path: os.truncate(path, 0), id="cut-to-nothing"),
        # every page stays mapped, the last one short: the kernel sends zeros for what is gone, no error
        pytest.param(lambda path: os.truncate(path, (8 << 20) - 100), id="cut-within-a-page"),
        pytest.param(lambda path: path.open("ab").write(b"more"), id="grown"),
    ],
)
def test_a_local_file_that_changes_size_under_an_upload_is_one_error(
    afpd: AfpServed, tmp_path: Path, change: Callable[[Path], object]
) -> None:
    """The upload sends from the file mapped into memory: a file cut short or grown under it fails the copy with
    one line, it neither kills the process nor sends a copy of the wrong length as a success."""
    source = tmp_path / "changes.bin"
    write_random(source, 8 * 1024 * 1024)
    (afpd.root / "files").mkdir()
    changed: list[int] = []

    def change_once(n: int) -> None:
        if not changed:
            changed.append(n)
            change(source)

    with _client(afpd, block_size=256 * 1024, requests_in_flight=2) as client, pytest.raises(WorkbenchError) as caught:
        client.upload(source, "files/changes.bin", change_once)
    assert changed
    line = caught.value.one_line()
    assert "the local file changed size during the copy" in line and "\n" not in line


def test_an_upload_from_a_pipe_goes_through_a_buffer(afpd: AfpServed, tmp_path: Path) -> None:
    """What cannot be mapped (a pipe) is read into a buffer and sent from it: the same bytes arrive."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    data = os.urandom(3 * 1024 * 1024 + 7)

    def feed() -> None:
        with open(fifo, "wb") as fh:
            fh.write(data)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    (afpd.root / "files").mkdir()
    with _client(afpd, block_size=1 << 20, requests_in_flight=3) as client:
        client.upload(fifo, "files/piped.bin", Counter())
    feeder.join(timeout=10)
    assert (afpd.root / "files" / "piped.bin").read_bytes() == data

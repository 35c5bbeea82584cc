"""The fault matrix: every client family against the real servers when the far side misbehaves.

For each client (HTTP aiohttp + curl, FTP ftplib + curl, SFTP paramiko + OpenSSH + sshfs, rsync over ssh
and to the daemon, SMB pysmb + smbprotocol + smbclient): the server stopped (SIGSTOP) mid-copy, the
process serving the connection killed mid-copy, a full disk on the far side, bad credentials, a refused
port and a port that speaks something else. Each must end in one WorkbenchError line within a bound set
by the stall timeout, never a hang. Then `workbench run` end to end: exit codes 0 / 8, and Ctrl-C and
SIGTERM in the middle of an sshfs copy (exit 130 / 143, finished rows saved, the JSON written, nothing
left running or mounted).

The stall timeout is short here (STALL_S) to keep the module fast; the default is 30 s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.far_host import FarHost, servers_up
from tests.helpers import free_port, write_random
from tests.platform_clients import expected_clients
from tests.schema_check import assert_valid_run_document
from workbench.core.store import Store
from workbench.protocols import registry
from workbench.protocols.base import Client, ClientOptions
from workbench.server.daemons import supervisor
from workbench.server.daemons.base import ServerContext
from workbench.server.daemons.serve_process import ServeProcess
from workbench.shared import credentials as creds_mod
from workbench.shared import procs
from workbench.shared import target as target_mod
from workbench.shared.errors import AuthError, DiskError, NetworkError, WorkbenchError
from workbench.shared.target import Target

pytestmark = pytest.mark.serial  # races a stop or kill against a copy: ./test.sh gives it the machine alone

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
STALL_S = 2.0
BIG_BYTES = 64 << 20  # more than loopback's socket buffers hold (4 MiB send + up to 32 MiB receive)
# Which server process serves each client (ssh-based clients all reach sshd).
SERVER_OF = {
    "http": "serve",
    "ftp": "serve",
    "sftp": "sshd",
    "rsync/ssh": "sshd",
    "rsync/daemon": "rsyncd",
    "smb": "smbd",
}
SERVICE_OF = {"serve": "http", "sshd": "ssh", "rsyncd": "rsync", "smbd": "smb"}
CLIENTS = [
    "http/aiohttp",
    "http/curl",
    "ftp/ftplib",
    "ftp/curl",
    "sftp/paramiko",
    "sftp/openssh",
    "sftp/sshfs",
    "rsync/ssh",
    "rsync/daemon",
    "smb/pysmb",
    "smb/smbprotocol",
    "smb/smbclient",
]


def _server_name(label: str) -> str:
    return SERVER_OF.get(label) or SERVER_OF[label.split("/")[0]]


class Far:
    """Every real server (`servers up`, tests/far_host.py) on loopback with free ports, a private root and state."""

    def __init__(self, base: Path, host: FarHost) -> None:
        self.root = host.root
        self.state = host.state_dir
        self.creds = creds_mod.read(self.state / "credentials.json")
        self.target = target_mod.read(self.state / "target.json", self.creds)
        self.restarted: list[ServeProcess] = []
        write_random(self.root / "files" / "big.bin", BIG_BYTES)
        write_random(base / "big.bin", BIG_BYTES)
        self.local_big = base / "big.bin"
        wrong_key = base / "wrong_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong_key)], check=True)
        self.wrong_key = wrong_key

    def pid(self, name: str) -> int:
        if name == "serve" and self.restarted:
            assert self.restarted[-1].proc is not None
            return self.restarted[-1].proc.pid
        state = supervisor.read_state(self.state)
        assert state is not None
        return next(int(s["pid"]) for s in state.servers if s["name"] == name)

    def port(self, name: str) -> int:
        return self.target.port(SERVICE_OF[name])

    def connection_pids(self, name: str) -> list[int]:
        """Processes holding the server side of an established connection to `name`'s port."""
        port = self.port(name)
        out = subprocess.run(
            ["ss", "-Htnp", "state", "established", f"( sport = :{port} )"], capture_output=True, text=True
        ).stdout
        below = set(procs.tree([self.pid(name)], procs.snapshot()))
        return sorted({int(p) for p in re.findall(r"pid=(\d+)", out)} & below)

    def restart_serve_if_dead(self) -> None:
        if procs.pid_alive(self.pid("serve")):
            return
        ctx = ServerContext(
            root=self.root.resolve(), bind=HOST, state_dir=self.state, credentials=self.creds, ports=self.target.ports
        )
        server = ServeProcess(ctx)
        server.start()
        self.restarted.append(server)

    def stop_restarted(self) -> None:
        """Stop the serve processes started again after a test killed serve (`servers down` stops the rest)."""
        for server in self.restarted:
            server.stop()


@pytest.fixture(scope="module")
def far(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Far]:
    if os.geteuid() != 0:
        pytest.skip("the servers' private state and the sshfs mount need root")
    base = tmp_path_factory.mktemp("far")
    with servers_up(base) as host:
        far = Far(base, host)
        try:
            yield far
        finally:
            far.stop_restarted()


def _client_class(label: str) -> type[Client]:
    entry = next(e for e in registry.KNOWN_CLIENTS if e.label == label)
    loaded = registry.load(entry)
    if isinstance(loaded, str):  # a client this platform must run fails the test, it is never skipped
        (pytest.fail if label in expected_clients() else pytest.skip)(f"{label}: {loaded}")
    return loaded


def _client(label: str, target: Target, timeout: float = STALL_S) -> Client:
    return _client_class(label)(target, ClientOptions(stall_timeout_s=timeout))


def _upload_dir(client: Client) -> str:
    remote_dir = f"incoming/faults-{uuid.uuid4().hex[:8]}"
    client.mkdir(remote_dir)
    return remote_dir


def _copy(client: Client, far: Far, direction: str, remote_dir: str, local: Path, hook: Callable[[int], None]) -> None:
    if direction == "download":
        client.download("files/big.bin", local, hook)
    else:
        client.upload(far.local_big, f"{remote_dir}/big.bin", hook)


def _one_line(exc: WorkbenchError) -> str:
    line = exc.one_line()
    assert line and "\n" not in line and "Traceback" not in line
    return line


# ------------------------------------------------------------------ faults mid-copy, per client
DIRECTIONS = ("download", "upload")
# A copy may end before the stop lands (curl moves 64 MiB in about 0.1 s, and with the other servers' copies running
# beside it the 10 ms timer may fire late), or return less than a stall timeout after it (its last bytes and the
# server's answer were through just before): that attempt says nothing either way, and the copy is tried again. A
# client that ignores a stall returns only once the server is resumed, long after, and fails.
STALL_TRIES = 3


@dataclass(frozen=True)
class StalledCopy:
    error: BaseException | None  # what the copy raised (None: it returned)
    stopped: list[int]  # the server's pids stopped
    elapsed_s: float  # from the stop to the copy's end
    unavailable: str | None = None  # the client cannot load here: why
    stopped_before_the_end: bool = False  # the stop landed while the copy ran

    @property
    def says_nothing(self) -> bool:
        """The copy returned before the stop, or too soon after it to have met a stalled server."""
        return self.error is None and (not self.stopped_before_the_end or self.elapsed_s < STALL_S)


def _stall_copy(far: Far, tmp_path: Path, label: str, direction: str) -> StalledCopy:
    """One copy whose server is stopped (SIGSTOP, its connections left open) 10 ms in or at its first progress."""
    loaded = registry.load(next(e for e in registry.KNOWN_CLIENTS if e.label == label))
    if isinstance(loaded, str):
        return StalledCopy(None, [], 0.0, unavailable=loaded)
    tmp_path.mkdir(parents=True, exist_ok=True)
    name = _server_name(label)
    client = loaded(far.target, ClientOptions(stall_timeout_s=STALL_S))
    stopped: list[int] = []
    began: list[float] = []
    lock = threading.Lock()
    resumed = threading.Event()

    def resume() -> None:
        resumed.set()
        with lock:
            for pid in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def keep_frozen() -> None:
        # A session child forked just after the first freeze (sshd's per-login child, when the timer fires
        # during an SSH login) would carry the copy on: stop every new process of the server's tree too.
        while not resumed.wait(0.02):
            with lock:
                if resumed.is_set():  # resumed while this pass waited for the lock: stopping more would outlive it
                    return
                for pid in procs.tree([far.pid(name)], procs.snapshot()):
                    if pid not in stopped:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGSTOP)
                            stopped.append(pid)

    # A client that ignores the stall would wait forever: the server wakes up again after this long, so
    # such a client ends (and fails the time check of the test) instead of hanging the suite.
    waker = threading.Timer(3 * STALL_S + 8, resume)

    def freeze_once(n: int) -> None:
        with lock:
            if began:
                return
            # the server stops answering, its TCP connections stay open
            began.append(time.monotonic())
            # a process of the tree may end between the snapshot and its stop (the previous copy's session child
            # leaving): it is skipped, and the watcher below stops whatever the tree forks next
            for pid in procs.tree([far.pid(name)], procs.snapshot()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
            waker.start()
            threading.Thread(target=keep_frozen, daemon=True).start()

    # curl and rsync move 64 MiB in about the 50 ms between two progress polls: a timer stops the server
    # 10 ms into the copy in case the first progress report would only come at its end
    early = threading.Timer(0.01, freeze_once, args=(0,))
    error: BaseException | None = None
    try:
        client.connect()
        remote_dir = _upload_dir(client) if direction == "upload" else ""
        early.start()
        _copy(client, far, direction, remote_dir, tmp_path / "big.bin", freeze_once)
    except BaseException as exc:  # judged by the test
        error = exc
    finally:
        ended = time.monotonic()
        early.cancel()
        waker.cancel()
        resume()
        try:
            client.close()
        except BaseException as exc:  # judged by the test, as the copy's own error would be
            error = error or exc
    with lock:
        before_the_end = bool(began) and began[0] < ended
        return StalledCopy(error, list(stopped), ended - began[0] if began else 0.0, None, before_the_end)


def _stall_copy_tries(far: Far, tmp_path: Path, label: str, direction: str) -> StalledCopy:
    for attempt in range(STALL_TRIES):
        outcome = _stall_copy(far, tmp_path / f"try-{attempt}", label, direction)
        if outcome.unavailable is not None or not outcome.says_nothing:
            return outcome
        print(f"\n{label} {direction}: the copy ended before the server's stop could matter; again")
    return outcome


# The clients whose stalled copies run against a second far host (`servers up` of serve and sshd alone): serve's
# and sshd's clients split over two servers each, so no lane is much longer than smbd's.
ON_THE_SECOND_HOST = frozenset({"ftp/ftplib", "ftp/curl", "sftp/sshfs", "rsync/ssh"})


@pytest.fixture(scope="module")
def stalled_copies(
    far: Far, serverless_logins: ServerlessLogins, tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], StalledCopy]:
    """Every client's stalled copy both ways, one lane per server process (serve and sshd of two far hosts, the
    rsync daemon, smbd), the lanes side by side and each one copy at a time: a lane stops only its own server, which
    no other lane's copies use, and each copy waits on a stall timeout, not on a core. The step that runs this module
    has the machine to itself (./test.sh), so the SSH logins inside the stall timeout are not starved by other tests'
    work. The logins that reach no server (serverless_logins) run beside the lanes."""
    base = tmp_path_factory.mktemp("stalled")
    second_base = tmp_path_factory.mktemp("second-far")
    far.restart_serve_if_dead()
    with servers_up(second_base, only=["serve", "sshd"]) as second_host:
        second = Far(second_base, second_host)
        lanes: dict[tuple[int, str], list[tuple[str, str]]] = {}
        for label in CLIENTS:
            on_second = label in ON_THE_SECOND_HOST
            for direction in DIRECTIONS:
                lanes.setdefault((int(on_second), _server_name(label)), []).append((label, direction))

        def run_lane(cases: list[tuple[str, str]]) -> dict[tuple[str, str], StalledCopy]:
            return {
                (lb, d): _stall_copy_tries(
                    second if lb in ON_THE_SECOND_HOST else far, base / f"{lb.replace('/', '-')}-{d}", lb, d
                )
                for lb, d in cases
            }

        found: dict[tuple[str, str], StalledCopy] = {}
        with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
            for outcomes in pool.map(run_lane, lanes.values()):
                found |= outcomes
    return found


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("label", CLIENTS)
def test_stopped_server_fails_the_copy_in_about_the_stall_timeout(
    stalled_copies: dict[tuple[str, str], StalledCopy], label: str, direction: str
) -> None:
    outcome = stalled_copies[label, direction]
    if outcome.unavailable is not None:  # a client this platform must run fails the test, it is never skipped
        (pytest.fail if label in expected_clients() else pytest.skip)(f"{label}: {outcome.unavailable}")
    assert not outcome.says_nothing, f"{label} {direction}: each of {STALL_TRIES} copies ended before the stop mattered"
    error = outcome.error
    assert isinstance(error, WorkbenchError), f"{label} {direction}: not one WorkbenchError line: {error!r}"
    line = _one_line(error)
    print(f"\nSTOPPED {label} {direction}: {outcome.elapsed_s:.1f} s: {line}")
    assert outcome.stopped, "the copy ended before the server could be stopped"
    # rsync's own --timeout speaks at about STALL_S, the watchdog behind it at 2 x; ssh's keep-alives at ~3 x / 3.
    elapsed = outcome.elapsed_s
    assert elapsed < 3 * STALL_S + 3, f"{label} {direction} took {elapsed:.1f} s to notice a stopped server"


# A copy may end before the kill lands (curl moves 64 MiB in about 0.1 s, and on a busy machine the watcher below
# may not run in that time): that attempt says nothing either way, and the test tries again.
KILL_TRIES = 3


@dataclass(frozen=True)
class KilledCopy:
    error: WorkbenchError | None  # what the copy raised (None: it returned)
    killed: list[int]  # the server's pids killed
    killed_before_the_end: bool  # the kill landed while the copy ran
    elapsed_s: float  # from the kill to the copy's end


def _kill_mid_copy(far: Far, tmp_path: Path, label: str) -> KilledCopy:
    tmp_path.mkdir(parents=True, exist_ok=True)
    far.restart_serve_if_dead()
    name = _server_name(label)
    client = _client(label, far.target)
    killed: list[int] = []
    began: list[float] = []
    lock = threading.Lock()

    def kill_once(n: int, connection_only: bool = False) -> None:
        with lock:
            if killed:
                return
            # only the process serving this connection (serve serves all in one: it dies whole)
            pids = far.connection_pids(name)
            if name != "serve":
                # a server forking per connection (smbd, sshd, the rsync daemon) holds a new one in its listener
                # until the child takes it over: killing the listener then would end the server for the tests after
                # this one, not this connection
                pids = [pid for pid in pids if pid != far.pid(name)]
            if not pids and (connection_only or name != "serve"):
                # not connected yet, or a forking server's child not found: a server killed whole would stay dead
                # for the tests after this one (the next progress report or watcher pass tries again)
                return
            began.append(time.monotonic())
            killed.extend(pids or [far.pid(name)])
            for pid in killed:
                os.kill(pid, signal.SIGKILL)

    # As in the stall test: curl may report progress only once 64 MiB have moved, so from 10 ms into the copy
    # a watcher also kills the process serving the connection as soon as there is one.
    copying = threading.Event()

    def watch() -> None:
        time.sleep(0.01)
        while copying.is_set() and not killed:
            kill_once(0, connection_only=True)
            time.sleep(0.005)

    early = threading.Thread(target=watch, daemon=True)
    error: WorkbenchError | None = None
    client.connect()
    try:
        copying.set()
        early.start()
        try:
            _copy(client, far, "download", "", tmp_path / "big.bin", kill_once)
        except WorkbenchError as exc:
            error = exc
        ended = time.monotonic()
    finally:
        copying.clear()
        early.join(timeout=5)
        client.close()
        far.restart_serve_if_dead()
    with lock:
        before_the_end = bool(began) and began[0] < ended
        return KilledCopy(error, list(killed), before_the_end, ended - began[0] if began else 0.0)


@pytest.mark.parametrize("label", CLIENTS)
def test_server_killed_mid_copy_fails_the_copy_at_once(far: Far, tmp_path: Path, label: str) -> None:
    for attempt in range(KILL_TRIES):
        outcome = _kill_mid_copy(far, tmp_path / f"try-{attempt}", label)
        if outcome.error is not None or outcome.killed_before_the_end:
            break
        print(f"\n{label}: the copy ended before the kill landed; again")
    else:
        pytest.fail(f"{label}: each of {KILL_TRIES} copies ended before the server could be killed")
    assert outcome.error is not None, f"{label}: the copy went on after its server was killed {outcome.killed}"
    line = _one_line(outcome.error)
    elapsed = outcome.elapsed_s
    print(f"\nKILLED {label}: {elapsed:.1f} s: {line}")
    assert outcome.killed
    assert elapsed < STALL_S + 3, f"{label} took {elapsed:.1f} s to notice its server died"


@pytest.mark.parametrize("label", CLIENTS)
def test_disk_full_on_the_far_side_fails_the_upload(far: Far, label: str) -> None:
    far.restart_serve_if_dead()
    full = far.root / "incoming" / f"full-{uuid.uuid4().hex[:8]}"
    full.mkdir()
    # a 4 MiB tmpfs inside the served root; mode 1777: the rsync daemon may write as an unprivileged user
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=1777", "tmpfs", str(full)], check=True)
    client = _client(label, far.target)
    try:
        client.connect()
        started = time.monotonic()
        with pytest.raises(WorkbenchError) as caught:
            client.upload(far.local_big, f"incoming/{full.name}/big.bin", lambda n: None)
        elapsed = time.monotonic() - started
    finally:
        client.close()
        subprocess.run(["umount", "-l", str(full)], check=True)
        full.rmdir()
    line = _one_line(caught.value)
    print(f"\nDISK FULL {label}: {elapsed:.1f} s: {type(caught.value).__name__}: {line}")
    assert elapsed < 3 * STALL_S + 3


def _bad_target(far: Far, label: str) -> Target:
    wrong = dataclasses.replace(far.creds, password=far.creds.password + "x", ssh_key=far.wrong_key)
    return dataclasses.replace(far.target, credentials=wrong)


def _retarget(far: Far, label: str, port: int) -> Target:
    service = SERVICE_OF[_server_name(label)]
    if label in ("ftp/ftplib", "ftp/curl"):
        service = "ftp"
    return dataclasses.replace(far.target, ports={**far.target.ports, service: port})


class Garbage:
    """A TCP listener on loopback that answers every connection with a line of nonsense and then waits."""

    def __init__(self) -> None:
        self.sock = socket.create_server((HOST, 0))
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            with contextlib.suppress(OSError):
                conn.sendall(b"GARBAGE 42 this is not the service you are looking for\r\n")

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


BAD_CREDENTIALS, REFUSED, WRONG_SERVICE = "BAD CREDENTIALS", "REFUSED", "WRONG SERVICE"
# Logins that fail touch no shared state (no server is stopped or killed), so they run a few at a time: each waits
# on its server's answer (pyftpdlib's 3 s brake on guessing, a connect deadline), not on the others. All 36 at once
# were too many: on a busy machine a refused port then took more than its bound. The longest waits start first
# (a port answering garbage, smbclient's 9 s bound foremost), so the short ones fill in beside them.
LOGIN_WORKERS = 4


@dataclass(frozen=True)
class FailedLogin:
    error: BaseException | None  # what connect() raised (None: it logged in)
    elapsed_s: float
    unavailable: str | None = None  # the client cannot load here: why
    close_error: BaseException | None = None  # what the client's close() raised, if anything


class ServerlessLogins:
    """Every client's login against a refused port and a port speaking something else, started in the background:
    they reach no server of the far host, so they run from the module's start beside the stalled copies."""

    def __init__(self, far: Far) -> None:
        self._garbage = Garbage()
        cases: dict[tuple[str, str], Callable[[], FailedLogin]] = {}
        for label in reversed(CLIENTS):  # the SMB clients' waits on garbage are the longest
            wrong = _retarget(far, label, self._garbage.port)
            cases[WRONG_SERVICE, label] = functools.partial(_attempt_login, label, wrong)
        # bound and never listening: connections are refused, and no server started meanwhile (the second far host
        # of the stalled copies) can take the port
        self._closed = socket.socket()
        self._closed.bind((HOST, 0))
        closed_port = self._closed.getsockname()[1]
        for label in CLIENTS:
            cases[REFUSED, label] = functools.partial(_attempt_login, label, _retarget(far, label, closed_port))
        self._pool = ThreadPoolExecutor(max_workers=LOGIN_WORKERS)
        self.futures = {case: self._pool.submit(attempt) for case, attempt in cases.items()}

    def close(self) -> None:
        try:
            self._pool.shutdown(wait=True)
        finally:
            self._garbage.close()
            self._closed.close()


class FailedLogins:
    """Every client's login against bad credentials, a refused port and a port speaking something else."""

    def __init__(self, far: Far, serverless: ServerlessLogins) -> None:
        far.restart_serve_if_dead()
        cases: dict[tuple[str, str], Callable[[], FailedLogin]] = {}
        for label in CLIENTS:
            # pyftpdlib answers a failed login after 3 s (its brake on guessing): a shorter stall timeout would
            # call that a stalled server, so bad credentials leave more time
            cases[BAD_CREDENTIALS, label] = functools.partial(_attempt_login, label, _bad_target(far, label), 5.0)
        with ThreadPoolExecutor(max_workers=LOGIN_WORKERS) as pool:
            futures = {case: pool.submit(attempt) for case, attempt in cases.items()}
            self._by_case = {case: future.result() for case, future in (futures | serverless.futures).items()}

    def result(self, what: str, label: str) -> tuple[WorkbenchError, float]:
        """connect() must have failed with a WorkbenchError: the error and the seconds it took."""
        attempt = self._by_case[what, label]
        if attempt.unavailable is not None:  # a client this platform must run fails the test, never skips
            (pytest.fail if label in expected_clients() else pytest.skip)(f"{label}: {attempt.unavailable}")
        assert attempt.close_error is None, f"{what} {label}: close() raised {attempt.close_error!r}"
        error = attempt.error
        assert isinstance(error, WorkbenchError), f"{what} {label}: connect() did not fail with one line: {error!r}"
        print(f"\n{what} {label}: {attempt.elapsed_s:.1f} s: {type(error).__name__}: {_one_line(error)}")
        return error, attempt.elapsed_s


def _attempt_login(label: str, target: Target, timeout: float = STALL_S) -> FailedLogin:
    entry = next(e for e in registry.KNOWN_CLIENTS if e.label == label)
    loaded = registry.load(entry)
    if isinstance(loaded, str):
        return FailedLogin(None, 0.0, unavailable=loaded)
    client = loaded(target, ClientOptions(stall_timeout_s=timeout))
    started = time.monotonic()
    error: BaseException | None = None
    close_error: BaseException | None = None
    try:
        client.connect()
    except BaseException as exc:  # judged by the test
        error = exc
    finally:
        try:
            client.close()
        except BaseException as exc:  # judged by the test: close() must not fail
            close_error = exc
    return FailedLogin(error, time.monotonic() - started, close_error=close_error)


@pytest.fixture(scope="module")
def serverless_logins(far: Far) -> Iterator[ServerlessLogins]:
    logins = ServerlessLogins(far)
    try:
        yield logins
    finally:
        logins.close()


@pytest.fixture(scope="module")
def failed_logins(far: Far, serverless_logins: ServerlessLogins) -> FailedLogins:
    return FailedLogins(far, serverless_logins)


@pytest.mark.parametrize("label", CLIENTS)
def test_bad_credentials_fail_the_login(failed_logins: FailedLogins, label: str) -> None:
    error, elapsed = failed_logins.result(BAD_CREDENTIALS, label)
    assert isinstance(error, AuthError), _one_line(error)
    assert elapsed < 10


@pytest.mark.parametrize("label", CLIENTS)
def test_refused_port_fails_the_login_at_once(failed_logins: FailedLogins, label: str) -> None:
    error, elapsed = failed_logins.result(REFUSED, label)
    assert isinstance(error, NetworkError | DiskError) or "refused" in _one_line(error), _one_line(error)
    assert elapsed < 5


@pytest.mark.parametrize("label", CLIENTS)
def test_wrong_service_on_the_port_fails_the_login(failed_logins: FailedLogins, label: str) -> None:
    _, elapsed = failed_logins.result(WRONG_SERVICE, label)
    # a connect deadline (5 s) and two stalls at worst (smbclient's login bound), never a hang
    assert elapsed < ClientOptions.connect_timeout_s + 3 * STALL_S + 2


# ------------------------------------------------------------------ `workbench run` end to end
def _workbench(far: Far, home: Path, *args: str, where: tuple[str, ...] = ()) -> list[str]:
    return [
        sys.executable,
        "-m",
        "workbench",
        "run",
        *(where or ("--target", str(far.state / "target.json"))),
        "--credentials",
        str(far.state / "credentials.json"),
        "--files",
        str(home / "files"),
        "--db",
        str(home / "runs.sqlite"),
        "--json",
        str(home / "run.json"),
        "--tcp-duration",
        "0.25",  # the baseline runs, but no figure of it is read here
        "--warmup",
        "0",
        "--stall-timeout",
        str(STALL_S),
        *args,
    ]


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "WORKBENCH_HOME": str(home), "COLUMNS": "200"}
    env.pop("WORKBENCH_PASSWORD", None)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    return env


def test_run_exits_0_when_every_row_that_could_run_verified_and_8_when_one_failed(far: Far, tmp_path: Path) -> None:
    far.restart_serve_if_dead()
    # smb/mount_smbfs is macOS-only: an 'unavailable:' row, which does not fail the run
    ok = subprocess.run(
        _workbench(far, tmp_path, "--protocols", "http/aiohttp,smb/mount_smbfs", "--sizes", "1M", "--repeat", "1"),
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    doc = json.loads((tmp_path / "run.json").read_text())
    assert_valid_run_document(doc)
    assert any(r["error"] and r["error"].startswith("unavailable:") for r in doc["results"])
    # the upload directory carries a random token: two clients with their own databases never share one
    assert re.fullmatch(r"incoming/run-\d+-[0-9a-f]{16}", doc["run"]["upload_dir"]), doc["run"]["upload_dir"]
    assert not (far.root / doc["run"]["upload_dir"]).exists()

    # the same run with the pysmb rows sent to a closed port: they fail, the HTTP rows still run and verify
    config = tmp_path / "bad-smb.toml"
    config.write_text(f'[ports]\nsmb = {free_port(HOST)}\n' + "".join(
        f"{s} = {far.target.port(s)}\n" for s in ("http", "ftp", "tcp", "iperf3")
    ))
    failed = subprocess.run(
        _workbench(
            far,
            tmp_path,
            "--protocols",
            "http/aiohttp,smb/pysmb",
            "--sizes",
            "1M",
            "--repeat",
            "1",
            where=("--host", HOST, "--config", str(config)),
        ),
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=120,
    )
    assert failed.returncode == 8, (failed.stdout[-2000:], failed.stderr)
    lines = [ln for ln in failed.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "smb/pysmb" in lines[0] and "rows failed or did not verify" in lines[0], lines
    doc = json.loads((tmp_path / "run.json").read_text())
    assert_valid_run_document(doc)
    rows = {(r["client"], r["direction"]): r for r in doc["results"]}
    assert rows[("aiohttp", "upload")]["verified"] and rows[("aiohttp", "download")]["verified"]
    assert "refused" in rows[("pysmb", "upload")]["error"]
    with Store(tmp_path / "runs.sqlite") as store:
        saved = store.load(doc["run"]["id"])
    assert len(saved.results) == len(doc["results"])



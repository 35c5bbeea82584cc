"""The mount family: sshfs for real against the project's sshd on loopback; CIFS and mount_smbfs command lines.

The sshfs client passes the shared ClientContract. CIFS is not in this kernel and mount_smbfs is
macOS only, so their command lines and credential handling are checked with a recording runner
(a fake for pure logic) and their "unavailable" messages are checked as they are here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.contract.suite import ClientContract, Counter
from tests.far_host import FarHost, fuse_mounts, saved_rows, start_workbench, wait_for
from tests.helpers import ensure_running, free_port, loopback_context, write_random
from tests.schema_check import assert_valid_run_document
from workbench.core.store import Store
from workbench.protocols.base import ClientOptions
from workbench.protocols.mount import CifsClient, CommandRunner, Outcome, SmbfsClient, SshfsClient
from workbench.protocols.mounts import smb_mount
from workbench.protocols.mounts import sshfs as sshfs_mount
from workbench.protocols.mounts.base import readahead_bytes
from workbench.server.daemons.sshd import Sshd
from workbench.shared import procs
from workbench.shared.credentials import Credentials
from workbench.shared.errors import AuthError, NetworkError, NotFoundError, UnavailableError, WorkbenchError
from workbench.shared.target import Target

HOST = "127.0.0.1"
PASSWORD = "s3cret,with=odd chars"


# --- sshfs against a real sshd --------------------------------------------------------------------


class SshdRunner:
    """Owns one Sshd on loopback; `ensure()` restarts it after a test stopped it."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.ctx = loopback_context(base, "ssh")
        self.server = Sshd(self.ctx)

    def ensure(self) -> Sshd:
        ensure_running(self.server)
        return self.server

    def stop(self) -> None:
        """Stop sshd and the sessions it serves (ManagedServer.stop ends its setsid session children too)."""
        self.server.stop()

    def credentials(self, key: Path | None = None, known_hosts: Path | None = None) -> Credentials:
        return Credentials(
            self.ctx.credentials.user,
            self.ctx.credentials.password,
            ssh_key=key or self.server.client_key_path,
            known_hosts=known_hosts or self.server.known_hosts_path,
        )

    def target(self, credentials: Credentials | None = None, **changes: object) -> Target:
        target = Target(
            host=HOST,
            credentials=credentials or self.credentials(),
            ports={"ssh": self.ctx.ports["ssh"]},
            remote_root=str(self.ctx.root),
        )
        return dataclasses.replace(target, **changes)

    def client(self, credentials: Credentials | None = None, **options: object) -> SshfsClient:
        return SshfsClient(self.target(credentials), ClientOptions(**options))


@pytest.fixture(scope="module")
def sshd_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshdRunner]:
    if reason := SshfsClient.unavailable_reason() or Sshd.unavailable_reason():
        pytest.skip(reason)
    runner = SshdRunner(tmp_path_factory.mktemp("sshd"))
    try:
        yield runner
    finally:
        runner.stop()
        shutil.rmtree(runner.base, ignore_errors=True)


@pytest.fixture
def sshd(sshd_runner: SshdRunner) -> Sshd:
    return sshd_runner.ensure()


@pytest.fixture
def other_key(tmp_path: Path) -> Path:
    """A key the server does not know (empty passphrase, so nothing secret on argv)."""
    key = tmp_path / "other_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30)
    return key


class TestSshfsContract(ClientContract):
    client_class = SshfsClient

    @pytest.fixture
    def served_root(self, sshd: Sshd) -> Path:
        return sshd.ctx.root

    @pytest.fixture
    def make_client(self, sshd: Sshd, sshd_runner: SshdRunner) -> Callable[..., SshfsClient]:
        return sshd_runner.client

    @pytest.fixture
    def bad_client(self, sshd: Sshd, sshd_runner: SshdRunner, other_key: Path) -> SshfsClient:
        return sshd_runner.client(sshd_runner.credentials(key=other_key))

    @pytest.fixture
    def stop_server(self, sshd_runner: SshdRunner) -> Callable[[], None]:
        return sshd_runner.stop


def _mounts_below(prefix: str) -> list[str]:
    return [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines() if prefix in line]


def test_sshfs_mounts_privately_and_leaves_nothing_behind(sshd, sshd_runner: SshdRunner) -> None:
    client = sshd_runner.client()
    client.connect()
    mountpoint = client.mountpoint
    try:
        assert mountpoint is not None
        assert str(mountpoint) in _mounts_below("fuse.sshfs")
        info = client.details()
        assert info.cipher == "aes128-gcm@openssh.com" and "sshfs" in info.page_cache
        assert info.timed_includes_setup is False and info.request_bytes == 32 * 1024
        # reads are paced by the mount's readahead window, read from the kernel for this very mount
        readahead = readahead_bytes(mountpoint)
        assert readahead and readahead % 4096 == 0
        down, up = client.row_details("download"), client.row_details("upload")
        assert down.readahead_bytes == readahead and down.requests_in_flight == readahead // (32 * 1024)
        assert up.readahead_bytes is None and up.requests_in_flight == 8
    finally:
        client.close()
        client.close()  # twice is fine
    assert str(mountpoint) not in _mounts_below("fuse.sshfs")
    assert not mountpoint.exists()


def test_sshfs_mount_point_is_0700_while_mounted(sshd, sshd_runner: SshdRunner) -> None:
    seen: list[int] = []

    class Watching(CommandRunner):
        def run(self, argv, *, timeout, stdin_text=None):
            if argv[0].endswith("sshfs"):
                seen.append(stat.S_IMODE(os.stat(argv[2]).st_mode))
            return super().run(argv, timeout=timeout, stdin_text=stdin_text)

    with SshfsClient(sshd_runner.target(), runner=Watching()):
        pass
    assert seen == [0o700]


def _ssh_client_pid(port: int) -> int:
    """The ssh process sshfs started for the mount (sshfs daemonizes; ssh's argv carries the port)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[0] == b"ssh" and f"-oPort={port}".encode() in argv:
                return int(entry)
    raise AssertionError("no ssh process for the sshfs mount")


def _bytes_read(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar")


# Helper CPU (sshfs daemon + its ssh) per MiB read through the mount. Measured on a 2-core VM (aes128-gcm):
# 64 MiB cost 0.12-0.14 s, about 2 ms/MiB, of which ssh alone was ~1.2 ms/MiB (its decryption). A quarter of that
# still proves both are counted in seconds (not ticks or ms) and that a copy's work shows up; CPU time only grows
# under a neighbour's load, so the floor cannot flake on a busy machine. /proc counts in 10 ms ticks: a floor of
# a few ticks needs tens of MiB, hence the 32 MiB file.
HELPER_CPU_FLOOR_S_PER_MIB = 0.5e-3
TICK_SLACK_S = 0.03  # /proc's CPU times are whole 10 ms ticks, one or two per process either side


def test_sshfs_repeated_downloads_cross_the_network(sshd, sshd_runner: SshdRunner, tmp_path: Path) -> None:
    size = 32 * 1024 * 1024
    write_random(sshd.ctx.root / "files" / "cache.bin", size)
    with sshd_runner.client() as client:
        ssh = _ssh_client_pid(sshd_runner.ctx.ports["ssh"])
        # the daemon serving the mount and its ssh, whose CPU the row's client CPU includes
        assert procs.with_argument(str(client.mountpoint)) and ssh in procs.in_session(client._mount_session or -1)
        cpu_before = client.helper_cpu_seconds()
        start = time.monotonic()
        for _ in range(2):  # the second read would come from the page cache if it were kept
            before = _bytes_read(ssh)
            client.download("files/cache.bin", tmp_path / "cache.bin", Counter())
            assert _bytes_read(ssh) - before >= size
        wall_s = time.monotonic() - start
        used_s = client.helper_cpu_seconds() - cpu_before
    copied_mib = 2 * size / (1 << 20)
    # 64 MiB decrypted and relayed is not free, and no process can use more than every core for the whole time
    assert used_s >= HELPER_CPU_FLOOR_S_PER_MIB * copied_mib, f"{used_s} s of helper CPU for {copied_mib} MiB"
    assert used_s <= wall_s * (os.cpu_count() or 1) + TICK_SLACK_S, f"{used_s} s of helper CPU in {wall_s:.3f} s"


def test_sshfs_server_stopped_mid_upload_fails_cleanly(sshd, sshd_runner: SshdRunner, tmp_path: Path) -> None:
    write_random(tmp_path / "up.bin", 32 * 1024 * 1024)
    client = sshd_runner.client(stall_timeout_s=5.0)
    client.connect()
    mountpoint = str(client.mountpoint)
    try:
        with pytest.raises(NetworkError):
            client.upload(tmp_path / "up.bin", "up.bin", lambda n: sshd_runner.stop())
    finally:
        client.close()
    assert mountpoint not in _mounts_below("fuse.sshfs") and not os.path.exists(mountpoint)


def test_sshfs_hung_server_fails_within_the_timeout(sshd, sshd_runner: SshdRunner, tmp_path: Path) -> None:
    write_random(sshd.ctx.root / "files" / "hang.bin", 32 * 1024 * 1024)
    sessions: list[int] = []

    def freeze_once(n: int) -> None:
        if not sessions:  # the server stops answering but keeps the TCP connection open
            sessions.extend(procs.descendants(sshd.proc.pid))
            for pid in sessions:
                os.kill(pid, signal.SIGSTOP)

    client = sshd_runner.client(stall_timeout_s=3.0)
    client.connect()
    started = time.monotonic()
    try:
        with pytest.raises(NetworkError):
            client.download("files/hang.bin", tmp_path / "hang.bin", freeze_once)
        elapsed = time.monotonic() - started
    finally:
        for pid in sessions:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGCONT)
        client.close()
    assert sessions
    assert elapsed < 3.0 * 3  # ServerAlive probes give up after about `timeout` seconds


def test_sshfs_unknown_host_key_is_an_auth_error(sshd, sshd_runner: SshdRunner, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    client = sshd_runner.client(sshd_runner.credentials(known_hosts=empty))
    with pytest.raises(AuthError, match="Host key verification failed"):
        client.connect()
    assert client.mountpoint is None


def test_sshfs_missing_root_is_not_found(sshd, sshd_runner: SshdRunner) -> None:
    client = SshfsClient(sshd_runner.target(remote_root=str(sshd.ctx.root / "nowhere")))
    with pytest.raises(NotFoundError):
        client.connect()


def test_sshfs_closed_port_is_a_network_error(sshd_runner: SshdRunner) -> None:
    client = SshfsClient(sshd_runner.target(ports={"ssh": free_port(HOST)}))
    with pytest.raises(NetworkError, match="refused"):
        client.connect()
    assert client.mountpoint is None


def test_sshfs_argv_carries_no_secret_and_verifies_host_keys(tmp_path: Path) -> None:
    creds = Credentials("jo", PASSWORD, ssh_key=tmp_path / "k,ey", known_hosts=tmp_path / "kh")
    target = Target("::1", creds, ports={"ssh": 2022}, remote_root="/srv/root")
    client = SshfsClient(target, ClientOptions(stall_timeout_s=9))
    argv = client.mount_argv(tmp_path / "mnt")
    assert argv[1:7] == ["jo@[::1]:/srv/root", str(tmp_path / "mnt"), "-p", "2022", "-F", "/dev/null"]
    opts = argv[-1]
    for wanted in ("StrictHostKeyChecking=yes", "BatchMode=yes", "IdentitiesOnly=yes", "ServerAliveInterval=3"):
        assert wanted in opts.split(",")
    assert f"IdentityFile={tmp_path}/k\\,ey" in opts  # commas escaped for FUSE's option parser
    assert "reconnect" not in opts
    assert all(PASSWORD not in word for word in argv)
    loose = SshfsClient(Target("h", creds), ClientOptions(verify_host_keys=False)).mount_argv(tmp_path)
    assert "StrictHostKeyChecking=no" in loose[-1] and "UserKnownHostsFile=/dev/null" in loose[-1]


def test_sshfs_unavailable_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sshfs_mount, "which", lambda *names: None)
    assert SshfsClient.unavailable_reason() == "sshfs not installed: apt-get install sshfs"


# --- CIFS and mount_smbfs: command lines and credentials (recording runner) -----------------------


class Recorder(CommandRunner):
    """Stands for a host with CIFS: records commands and what the credentials file held at mount time."""

    def __init__(self, mount: Outcome = Outcome(0)) -> None:  # noqa: B008 - Outcome is frozen
        self.mount_outcome = mount
        self.calls: list[list[str]] = []
        self.answers: list[str] = []
        self.credentials_seen: list[tuple[str, int, int]] = []
        self.mounted: set[Path] = set()

    def unavailable(self, client_cls) -> str | None:
        return None

    def is_mounted(self, path: Path) -> bool:
        return path in self.mounted

    def run(self, argv, *, timeout: float, stdin_text: str | None = None) -> Outcome:
        self.calls.append(list(argv))
        if argv[0] == "mount":
            opts = dict(o.split("=", 1) for o in argv[-1].split(",") if "=" in o)
            creds = Path(opts["credentials"])
            mode, dir_mode = stat.S_IMODE(creds.stat().st_mode), stat.S_IMODE(creds.parent.stat().st_mode)
            self.credentials_seen.append((creds.read_text(), mode, dir_mode))
            if self.mount_outcome.ok:
                self.mounted.add(Path(argv[4]))
            return self.mount_outcome
        self.mounted.discard(Path(argv[-1]))
        return Outcome(0)

    def run_with_prompt(self, argv, *, timeout: float, answer: str) -> Outcome:
        self.calls.append(list(argv))
        self.answers.append(answer)
        self.mounted.add(Path(argv[-1]))
        return Outcome(0)


def _smb_target(user: str = "jo") -> Target:
    return Target(HOST, Credentials(user, PASSWORD), ports={"smb": 4445}, share="work bench")


def test_cifs_password_goes_only_through_a_private_credentials_file() -> None:
    runner = Recorder()
    with CifsClient(_smb_target(), runner=runner) as client:
        mountpoint = client.mountpoint
        argv = runner.calls[0]
        assert argv[:5] == ["mount", "-t", "cifs", "//127.0.0.1/work bench", str(mountpoint)]
        opts = argv[-1].split(",")
        assert {"cache=none", "soft", "port=4445", "ip=127.0.0.1"} <= set(opts)
        creds_path = Path(next(o for o in opts if o.startswith("credentials="))[len("credentials=") :])
        assert not creds_path.exists() and not creds_path.parent.exists()  # deleted once mounted
    assert all(PASSWORD not in word for word in argv) and "password=" not in argv[-1]
    assert runner.credentials_seen == [(f"username=jo\npassword={PASSWORD}\n", 0o600, 0o700)]
    assert runner.calls[-1] == ["umount", str(mountpoint)]
    assert not mountpoint.exists()


@pytest.mark.parametrize(
    ("output", "error"),
    [
        ("mount error(13): Permission denied", AuthError),
        ("mount error(111): could not connect to 127.0.0.1", NetworkError),
        ("mount error(2): No such file or directory", NotFoundError),
        ("mount error(19): No such device", UnavailableError),
    ],
)
def test_cifs_mount_errors_are_translated_and_clean_up(output: str, error: type) -> None:
    runner = Recorder(Outcome(32, output + "\nRefer to the mount.cifs(8) manual page"))
    client = CifsClient(_smb_target(), runner=runner)
    with pytest.raises(error) as err:
        client.connect()
    assert output in err.value.one_line()
    creds = Path(next(o for o in runner.calls[0][-1].split(",") if o.startswith("credentials="))[12:])
    assert not creds.exists() and client.mountpoint is None


@pytest.mark.skip_elsewhere
@pytest.mark.skipif(CifsClient.unavailable_reason() is None, reason="this machine can mount CIFS")
def test_cifs_unavailable_here_is_one_line() -> None:
    reason = CifsClient.unavailable_reason()
    assert reason and "\n" not in reason
    with pytest.raises(UnavailableError):
        CifsClient(_smb_target()).connect()


def test_cifs_without_kernel_support_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(smb_mount, "_kernel_has_cifs", lambda: False)
    reason = CifsClient.unavailable_reason()
    assert reason and ("no CIFS support" in reason or "Linux only" in reason)


def test_smbfs_url_encodes_and_types_the_password() -> None:
    runner = Recorder()
    with SmbfsClient(_smb_target("jo@corp:x"), runner=runner) as client:
        mountpoint = client.mountpoint
    assert runner.calls[0] == [
        "mount_smbfs",
        "-o",
        "nobrowse,soft,nodatacache",
        "//jo%40corp%3Ax@127.0.0.1:4445/work%20bench",
        str(mountpoint),
    ]
    assert runner.answers == [PASSWORD]
    assert runner.calls[-1] == ["umount", str(mountpoint)]


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the message given on other systems")
def test_smbfs_unavailable_off_macos() -> None:
    assert SmbfsClient.unavailable_reason() == "mount_smbfs is macOS only (on Linux use smb/cifs)"


def test_close_after_failed_connect_is_safe() -> None:
    client = CifsClient(_smb_target(), runner=Recorder(Outcome(None)))
    with pytest.raises(WorkbenchError):
        client.connect()
    client.close()
    client.close()


# --- Ctrl-C and SIGTERM while `workbench run` copies through an sshfs mount -------------------------


@pytest.mark.parametrize(
    ("signum", "code", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_signal_during_an_sshfs_copy_keeps_rows_and_leaves_nothing(
    far_host: FarHost, tmp_path: Path, signum: int, code: int, word: str
) -> None:
    if reason := SshfsClient.unavailable_reason():
        pytest.skip(reason)
    db, run_tmp = tmp_path / "runs.sqlite", tmp_path / "run-tmp"
    far_root = str(far_host.root)
    proc = start_workbench(
        "run",
        *far_host.run_args(),
        "--protocols",
        "sftp/sshfs",
        "--directions",
        "upload",
        "--sizes",
        "1M,128M",
        "--repeat",
        "3",
        "--warmup",
        "0",
        "--tcp-duration",
        "1",
        "--files",
        str(tmp_path / "files"),
        "--db",
        str(db),
        "--json",
        str(tmp_path / "run.json"),
        home=tmp_path / "home",
        tmp_dir=run_tmp,
    )
    incoming = far_host.root / "incoming"

    def big_copy_under_way() -> bool:  # the 1M row is saved and the 128M upload is landing on the far host
        landing = [p for p in incoming.rglob("*128M*") if p.is_file()]
        return saved_rows(db) >= 1 and any(0 < p.stat().st_size < 128 << 20 for p in landing)

    try:
        wait_for("the 128M upload under way", big_copy_under_way, proc)
        assert fuse_mounts(far_root)  # the copy runs through the run's own mount of the far root
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, out + err
    assert word in err and "Traceback" not in err + out, err
    with Store(db) as store:
        run = store.load()
    assert [(r.label, r.file_set, r.error, r.verified) for r in run.results][:1] == [("sftp/sshfs", "1M", None, True)]
    doc = json.loads((tmp_path / "run.json").read_text())  # the JSON is written on the way out too
    assert_valid_run_document(doc)
    assert [(r["file_set"], r["verified"]) for r in doc["results"]][:1] == [("1M", True)], doc["results"]
    assert not (far_host.root / doc["run"]["upload_dir"]).exists()  # the run's upload directory went with it
    # nothing left: the mount, sshfs and its ssh, the far host's sessions for them, the run's temporary files
    # (`run` starts no servers or namespaces of its own: the lab's Ctrl-C test covers those)
    deadline = time.monotonic() + 10
    while (far_host.sessions() or fuse_mounts(far_root)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fuse_mounts(far_root) == set()
    assert not _ssh_clients_of(far_host.ports["ssh"])
    assert far_host.sessions() == []
    assert list(run_tmp.iterdir()) == []


def _ssh_clients_of(port: int) -> list[int]:
    """sshfs or ssh processes still talking to the far host's sshd port."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            names = (b"ssh", b"sshfs")
            if Path(argv[0].decode(errors="replace")).name.encode() in names and str(port).encode() in b" ".join(argv):
                found.append(int(entry))
    return found

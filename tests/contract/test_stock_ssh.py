"""Every SSH-based client against a stock OpenSSH sshd (its own sftp-server, a shell, no gate), reached as a
user reaches a server: a Host alias in an ssh config file (WORKBENCH_SSH_CONFIG, as ~/.ssh/config would be)
naming HostName, Port, User, IdentityFile and a known_hosts file whose entries are hashed.

The scratch directory (remote_root) is relative to the login's home directory, as `sftp://host/~/dir`
gives it: the test user is root and /root is writable, so each test gets its own directory there and
removes it; where the home directory is not writable an absolute one under the test's tmp dir is used.
Besides the ClientContract: unknown and changed host keys (the fingerprint and what to do), HostKeyAlias,
ProxyJump, the agent, paramiko's remove_tree (never following links), absolute scratch paths, and that a
password goes to ssh through SSH_ASKPASS (or to sshfs on stdin), never on any command line.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.argv_watch import ArgvWatch
from tests.contract.scratch_contract import MkdirContract, ScratchContract
from tests.contract.suite import ClientContract, Counter
from tests.helpers import ensure_running, loopback_context, write_random
from workbench.lab import netns
from workbench.protocols.base import Client, ClientOptions
from workbench.protocols.mount import SshfsClient
from workbench.protocols.openssh_sftp import (
    ASKPASS_SECRET_ENV,
    OpenSSHSftpClient,
    askpass_env,
    remote_path,
    ssh_options,
)
from workbench.protocols.rsync import RsyncSshClient
from workbench.protocols.scp import ScpClient, ScpLegacyClient
from workbench.protocols.sftp import ParamikoClient
from workbench.server.stock.openssh import StockSshd
from workbench.shared import sshconfig
from workbench.shared.credentials import Credentials
from workbench.shared.errors import AuthError, NotFoundError, WorkbenchError
from workbench.shared.target import Target

HOST = "127.0.0.1"
ALIAS = "wb-stock"
CLI_CLIENTS: list[type[Client]] = [OpenSSHSftpClient, ScpClient, ScpLegacyClient, RsyncSshClient, SshfsClient]
ALL_CLIENTS: list[type[Client]] = [ParamikoClient, *CLI_CLIENTS]
_namespaces = itertools.count()


class StockSsh:
    """One stock sshd for the module, the ssh config file that names it, and targets through its aliases."""

    def __init__(self, base: Path) -> None:
        self.base = base
        user = pwd.getpwuid(os.getuid()).pw_name
        self.ctx = loopback_context(base, "ssh", Credentials(user, ""))
        self.server = StockSshd(self.ctx)
        self.server.start()
        self.port = self.ctx.ports["ssh"]
        self.user = user
        self.wrong_key = base / "wrong_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.wrong_key)], check=True)
        self.known_hosts = base / "known_hosts"
        self.known_hosts.write_text(self.server.known_hosts_path.read_text())
        # Hashed entries, as Debian's ssh writes them (HashKnownHosts yes): both kinds of client must read them.
        subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(self.known_hosts)], check=True, capture_output=True)
        assert self.known_hosts.read_text().startswith("|1|")
        self.alias_known_hosts = base / "known_hosts_alias"
        self.alias_known_hosts.write_text(self.server.host_key_line(["wb-stock-key"]))
        self.empty_known_hosts = base / "known_hosts_empty"
        self.empty_known_hosts.write_text("")
        self.changed_known_hosts = base / "known_hosts_changed"
        other = base / "other_host_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
        kind, blob = other.with_suffix(".pub").read_text().split()[:2]
        self.changed_known_hosts.write_text(f"[{HOST}]:{self.port} {kind} {blob}\n")
        self.config = base / "ssh_config"
        self.config.write_text(self._config())

    def _host(self, alias: str, **settings: object) -> str:
        lines = [f"Host {alias}", f"  HostName {HOST}", f"  Port {self.port}", "  GlobalKnownHostsFile /dev/null"]
        lines += [f"  {key} {value}" for key, value in settings.items()]
        return "\n".join(lines) + "\n"

    def _config(self) -> str:
        key = self.server.client_key_path
        only = {"IdentitiesOnly": "yes"}
        return "".join(
            (
                self._host(ALIAS, User=self.user, IdentityFile=key, UserKnownHostsFile=self.known_hosts, **only),
                self._host("wb-stock-badkey", IdentityFile=self.wrong_key, UserKnownHostsFile=self.known_hosts, **only),
                self._host("wb-stock-unknown", IdentityFile=key, UserKnownHostsFile=self.empty_known_hosts, **only),
                self._host("wb-stock-changed", IdentityFile=key, UserKnownHostsFile=self.changed_known_hosts, **only),
                self._host(
                    "wb-stock-alias",
                    IdentityFile=key,
                    HostKeyAlias="wb-stock-key",
                    UserKnownHostsFile=self.alias_known_hosts,
                    **only,
                ),
                # Through the same sshd as a jump host (ssh -J wb-stock -W 127.0.0.1:PORT).
                self._host("wb-stock-jump", IdentityFile=key, UserKnownHostsFile=self.known_hosts, ProxyJump=ALIAS),
                # No usable identity file: only the agent's key can log in.
                self._host("wb-stock-agent", IdentityFile=self.base / "absent", UserKnownHostsFile=self.known_hosts),
            )
        )

    def target(self, remote_root: str, alias: str = ALIAS, password: str = "") -> Target:
        return Target(
            HOST,
            Credentials(self.user, password),
            ports={"ssh": self.port},
            remote_root=remote_root,
            stock=True,
            ssh_alias=alias,
        )

    def logins(self) -> int:
        return self.server.log_path.read_text(errors="replace").count("Accepted publickey")

    def failed_passwords(self) -> int:
        return self.server.log_path.read_text(errors="replace").count("Failed password")


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockSsh]:
    if reason := StockSshd.unavailable_reason():
        pytest.skip(reason)
    runner = StockSsh(tmp_path_factory.mktemp("stock-ssh"))
    try:
        yield runner
    finally:
        runner.server.stop()


@pytest.fixture(autouse=True)
def ssh_config(stock: StockSsh, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every client, and every ssh they run, reads the test's config; no agent unless a test starts one."""
    monkeypatch.setenv(sshconfig.ENV_CONFIG, str(stock.config))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    ensure_running(stock.server)
    return stock.config


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """(the scratch directory on this host, remote_root as the clients get it): relative to home if possible."""
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    if os.access(home, os.W_OK):
        name = f"wb-stock-test-{secrets.token_hex(4)}"
        local = home / name
        local.mkdir()
        try:
            yield local, name
        finally:
            shutil.rmtree(local, ignore_errors=True)
    else:
        local = tmp_path / "scratch"
        local.mkdir()
        yield local, str(local)


class _StockFixtures(MkdirContract):
    client_class: type[Client]

    @pytest.fixture
    def served_root(self, scratch: tuple[Path, str]) -> Path:
        return scratch[0]

    @pytest.fixture
    def make_client(self, stock: StockSsh, scratch: tuple[Path, str]) -> Callable[..., Client]:
        return lambda **opts: self.client_class(stock.target(scratch[1]), ClientOptions(**opts))

    @pytest.fixture
    def bad_client(self, stock: StockSsh, scratch: tuple[Path, str]) -> Client:
        return self.client_class(stock.target(scratch[1], alias="wb-stock-badkey"))

    @pytest.fixture
    def stop_server(self, stock: StockSsh) -> Callable[[], None]:
        return stock.server.stop


class TestParamikoStock(_StockFixtures, ClientContract, ScratchContract):
    client_class = ParamikoClient


class TestOpenSSHSftpStock(_StockFixtures, ClientContract):
    client_class = OpenSSHSftpClient


class TestScpStock(_StockFixtures, ClientContract):
    client_class = ScpClient
    small_set_files = 6  # a login per downloaded file


class TestScpLegacyStock(_StockFixtures, ClientContract):
    client_class = ScpLegacyClient
    small_set_files = 6  # a login per downloaded file


class TestRsyncSshStock(_StockFixtures, ClientContract):
    client_class = RsyncSshClient


class TestSshfsStock(_StockFixtures, ClientContract, ScratchContract):
    client_class = SshfsClient


# --- the OpenSSH programs get the alias and the user's config, nothing the credentials do not name ----------


def test_openssh_programs_get_the_alias_and_the_config_file(stock: StockSsh, ssh_config: Path) -> None:
    target = stock.target("scratch")
    argv = ssh_options(target, ClientOptions())
    assert argv[:2] == ["-F", str(ssh_config)]
    assert "BatchMode=yes" in argv and "StrictHostKeyChecking=yes" in argv
    assert not any(a.startswith(("UserKnownHostsFile", "IdentitiesOnly")) or a == "-i" for a in argv)
    mount = SshfsClient(target).mount_argv(Path("/mnt/x"))
    assert f"{stock.user}@{ALIAS}:scratch" in mount and str(ssh_config) in mount
    assert "IdentityFile" not in mount[-1] and "UserKnownHostsFile" not in mount[-1]
    named = dataclasses.replace(
        target,
        credentials=Credentials(stock.user, "", ssh_key=stock.wrong_key, known_hosts=stock.known_hosts),
    )
    argv = ssh_options(named, ClientOptions())
    assert ["-i", str(stock.wrong_key)] == argv[argv.index("-i") : argv.index("-i") + 2]
    assert f"UserKnownHostsFile={stock.known_hosts}" in argv and "IdentitiesOnly=yes" in argv


def test_remote_paths_stay_relative_to_home_or_absolute() -> None:
    def path(root: str, remote: str) -> str:
        return remote_path(Target(HOST, Credentials("u", ""), remote_root=root, stock=True), remote)

    assert path("scratch", "files/a.bin") == "scratch/files/a.bin"
    assert path("", "files/a.bin") == "files/a.bin"
    assert path("", "") == "."
    assert path("/srv/x/", "a") == "/srv/x/a"
    assert path("/srv/x", "") == "/srv/x"
    assert path("/", "a") == "/a"
    served = Target(HOST, Credentials("u", ""), remote_root="/srv/root")
    assert remote_path(served, "files/a.bin") == "files/a.bin"  # workbench's sshd starts in the root


@pytest.mark.parametrize("client_class", ALL_CLIENTS)
def test_an_absolute_scratch_directory_works_too(client_class: type[Client], stock: StockSsh, tmp_path: Path) -> None:
    root = tmp_path / "abs root"
    data = write_random(root / "files" / "a.bin", 70_000)
    write_random(tmp_path / "up.bin", 50_000)
    with client_class(stock.target(str(root))) as client:
        client.download("files/a.bin", tmp_path / "a.bin", Counter())
        client.mkdir("incoming/abs")
        client.upload(tmp_path / "up.bin", "incoming/abs/up.bin", Counter())
    assert (tmp_path / "a.bin").read_bytes() == data
    assert (root / "incoming" / "abs" / "up.bin").read_bytes() == (tmp_path / "up.bin").read_bytes()


# --- host keys --------------------------------------------------------------------------------------------


def _fingerprint(stock: StockSsh) -> str:
    done = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(stock.server.host_key_path.with_suffix(".pub"))],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()[1]


def test_paramiko_names_an_unknown_host_key_by_its_fingerprint(stock: StockSsh, scratch: tuple[Path, str]) -> None:
    client = ParamikoClient(stock.target(scratch[1], alias="wb-stock-unknown"))
    with pytest.raises(AuthError) as caught:
        client.connect()
    client.close()
    fingerprint = _fingerprint(stock)
    assert fingerprint.startswith("SHA256:") and fingerprint in caught.value.message
    assert "ssh-ed25519" in caught.value.message and f"[{HOST}]:{stock.port}" in caught.value.message
    assert "ssh-keyscan" in caught.value.hint and "wb-stock-unknown" in caught.value.hint


@pytest.mark.parametrize("client_class", CLI_CLIENTS)
def test_openssh_programs_refuse_an_unknown_host_key_and_say_what_to_do(
    client_class: type[Client], stock: StockSsh, scratch: tuple[Path, str]
) -> None:
    client = client_class(stock.target(scratch[1], alias="wb-stock-unknown"))
    with pytest.raises(AuthError) as caught:
        client.connect()
    client.close()
    assert "ssh-keyscan" in caught.value.hint and "wb-stock-unknown" in caught.value.hint


@pytest.mark.parametrize("client_class", [ParamikoClient, OpenSSHSftpClient, ScpLegacyClient])
def test_a_changed_host_key_is_refused_loudly(
    client_class: type[Client], stock: StockSsh, scratch: tuple[Path, str]
) -> None:
    client = client_class(stock.target(scratch[1], alias="wb-stock-changed"))
    with pytest.raises(AuthError) as caught:
        client.connect()
    client.close()
    assert "CHANGED" in caught.value.message and "ssh-keygen -R" in caught.value.hint


@pytest.mark.parametrize("client_class", [ParamikoClient, OpenSSHSftpClient])
def test_unknown_host_keys_pass_only_when_verification_is_off(
    client_class: type[Client], stock: StockSsh, scratch: tuple[Path, str]
) -> None:
    target = stock.target(scratch[1], alias="wb-stock-unknown")
    with client_class(target, ClientOptions(verify_host_keys=False)) as client:
        client.mkdir("unverified")
    assert (scratch[0] / "unverified").is_dir()


@pytest.mark.parametrize("client_class", [ParamikoClient, OpenSSHSftpClient, ScpClient])
def test_a_host_key_alias_names_the_key(client_class: type[Client], stock: StockSsh, scratch: tuple[Path, str]) -> None:
    with client_class(stock.target(scratch[1], alias="wb-stock-alias")) as client:
        client.mkdir("by-alias")
    assert (scratch[0] / "by-alias").is_dir()


# --- how the connection is reached and authenticated -------------------------------------------------------


@pytest.mark.parametrize("client_class", [ParamikoClient, OpenSSHSftpClient])
def test_proxy_jump_goes_through_the_jump_host(
    client_class: type[Client], stock: StockSsh, scratch: tuple[Path, str]
) -> None:
    client = client_class(stock.target(scratch[1], alias="wb-stock-jump"))
    before = stock.logins()
    try:
        client.connect()  # one session (sftp: `pwd`; paramiko: the login)
        deadline = time.monotonic() + 5
        while stock.logins() - before < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # sshd may log the second login a moment after the session starts
        assert stock.logins() - before == 2  # the jump host's login, then the target's through it
        client.mkdir("jumped")
    finally:
        client.close()
    assert (scratch[0] / "jumped").is_dir()


@pytest.fixture
def agent(stock: StockSsh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An ssh-agent of our own holding the client key, on a private socket."""
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(["ssh-add", "-q", str(stock.server.client_key_path)], env=env, check=True, timeout=10)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


@pytest.mark.parametrize("client_class", [ParamikoClient, OpenSSHSftpClient])
def test_the_agent_logs_in_when_no_identity_file_does(
    client_class: type[Client], stock: StockSsh, scratch: tuple[Path, str], agent: None
) -> None:
    with client_class(stock.target(scratch[1], alias="wb-stock-agent")) as client:
        client.mkdir("via-agent")
    assert (scratch[0] / "via-agent").is_dir()


def test_without_the_agent_the_same_alias_is_refused(stock: StockSsh, scratch: tuple[Path, str]) -> None:
    client = ParamikoClient(stock.target(scratch[1], alias="wb-stock-agent"))
    with pytest.raises(AuthError):
        client.connect()
    client.close()


# --- passwords: through SSH_ASKPASS (sshfs: stdin), never a command line ----------------------------------


@pytest.mark.parametrize("client_class", ALL_CLIENTS)
def test_a_password_reaches_the_server_but_no_command_line(
    client_class: type[Client], stock: StockSsh, scratch: tuple[Path, str]
) -> None:
    # The test user is root, whom sshd never lets in by password, and UsePAM no checks /etc/shadow: the
    # login fails, but only after the server was sent the password (its log says "Failed password").
    secret = f"wb-pw-{secrets.token_hex(8)}"
    client = client_class(stock.target(scratch[1], alias="wb-stock-badkey", password=secret))
    before = stock.failed_passwords()
    with ArgvWatch(secret) as watch, pytest.raises(AuthError) as caught:
        try:
            client.connect()
        finally:
            client.close()
    assert watch.scans > 0 and watch.hits == []
    assert secret not in caught.value.one_line()
    deadline = time.monotonic() + 5
    while stock.failed_passwords() == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stock.failed_passwords() > before, "the server never saw a password attempt"


def test_the_askpass_helper_prints_the_secret_from_its_environment_only(stock: StockSsh) -> None:
    secret = f"wb-pw-{secrets.token_hex(8)}"
    target = stock.target("x", password=secret)
    with askpass_env(target) as env:
        helper = Path(env["SSH_ASKPASS"])
        assert env["SSH_ASKPASS_REQUIRE"] == "force" and env[ASKPASS_SECRET_ENV] == secret
        assert helper.stat().st_mode & 0o777 == 0o700 and helper.parent.stat().st_mode & 0o777 == 0o700
        assert secret not in helper.read_text()
        login = f"{target.credentials.user}@{target.host}"
        for prompt in (f"{login}'s password: ", f"({login}) Password: "):  # password, keyboard-interactive
            done = subprocess.run([str(helper), prompt], env=env, capture_output=True, text=True)
            assert done.stdout == secret + "\n"
        # a ProxyJump's ssh inherits the environment and asks for the jump host's password: not this one
        done = subprocess.run([str(helper), "root@jump.example's password: "], env=env, capture_output=True, text=True)
        assert done.returncode != 0 and secret not in done.stdout
        assert "BatchMode=no" in ssh_options(target, ClientOptions())
    assert not helper.parent.exists()
    with askpass_env(stock.target("x")) as env:
        assert env == {}  # no password: nothing may prompt (BatchMode=yes)
    assert "BatchMode=yes" in ssh_options(stock.target("x"), ClientOptions())


# --- remove_tree (paramiko, the stock run's utility client) ----------------------------------------------


@pytest.mark.parametrize("client_class", [ParamikoClient, SshfsClient])  # sshfs: every mount's remove_tree
def test_remove_tree_deletes_everything_and_follows_no_link(
    client_class: type[Client], stock: StockSsh, scratch: tuple[Path, str], tmp_path: Path
) -> None:
    local, rel = scratch
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "precious.txt").write_text("must stay")
    (outside / "file.txt").write_text("must stay too")
    tree = local / "run" / "tree"
    write_random(tree / "files" / "a.bin", 1000)
    write_random(tree / "files" / "deep" / "er" / "b.bin", 1000)
    (tree / "empty").mkdir()
    os.symlink(outside / "keep", tree / "files" / "link-to-dir")
    os.symlink(outside / "file.txt", tree / "link-to-file")
    os.symlink(tree / "nowhere", tree / "dangling")
    with client_class(stock.target(rel)) as client:
        client.remove_tree("run/tree")
        assert not tree.exists() and (local / "run").is_dir()
        with pytest.raises(NotFoundError):
            client.remove_tree("run/tree")
        (local / "run" / "plain.txt").write_text("x")
        with pytest.raises(WorkbenchError):
            client.remove_tree("run/plain.txt")
        os.symlink(outside / "keep", local / "run" / "dirlink")
        with pytest.raises(WorkbenchError):
            client.remove_tree("run/dirlink")  # a link to a directory is not the directory
    assert (outside / "keep" / "precious.txt").read_text() == "must stay"
    assert (outside / "file.txt").read_text() == "must stay too"


def test_remove_tree_with_an_absolute_scratch_path(stock: StockSsh, scratch: tuple[Path, str]) -> None:
    local, _ = scratch  # what a URL with an absolute path gives
    write_random(local / "t" / "x" / "y.bin", 100)
    with ParamikoClient(stock.target(str(local))) as client:
        client.remove_tree("t")
    assert not (local / "t").exists()


# --- inside a network namespace, as the lab starts it on its server host ---------------------------------


def test_stock_sshd_serves_inside_a_network_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"{netns.PREFIX}{os.getpid()}-{next(_namespaces)}-stock-sshd"
    netns.create(name)
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
        ctx = dataclasses.replace(loopback_context(tmp_path, "ssh", Credentials(user, "")), netns=name)
        server = StockSshd(ctx)
        server.start()
        try:
            port = ctx.ports["ssh"]
            assert server.url() == f"sftp://{user}@{HOST}:{port}{ctx.root.resolve()}"
            config = tmp_path / "ssh_config"
            config.write_text(
                f"Host wb-ns\n  HostName {HOST}\n  Port {port}\n  User {user}\n"
                f"  IdentityFile {server.client_key_path}\n  IdentitiesOnly yes\n"
                f"  UserKnownHostsFile {server.known_hosts_path}\n  GlobalKnownHostsFile /dev/null\n"
            )
            monkeypatch.setenv(sshconfig.ENV_CONFIG, str(config))
            target = Target(
                HOST,
                Credentials(user, ""),
                ports={"ssh": port},
                remote_root=str(ctx.root),
                stock=True,
                ssh_alias="wb-ns",
            )
            with netns.entered(name):
                for client_class in (ParamikoClient, OpenSSHSftpClient):
                    with client_class(target) as client:
                        client.mkdir(f"made-by-{client_class.__name__}")
            assert sorted(p.name for p in ctx.root.iterdir()) == ["made-by-OpenSSHSftpClient", "made-by-ParamikoClient"]
            # Nothing listens on the host's own loopback: the port is the namespace's.
            with pytest.raises(WorkbenchError):
                ParamikoClient(target, ClientOptions(connect_timeout_s=2.0)).connect()
        finally:
            server.stop()
    finally:
        netns.delete(name)

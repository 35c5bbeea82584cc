"""Every command line of the documentation's shell blocks (README.md, CONTRIBUTING.md, docs/*.md), taken from the
pages at test time and run as written.

The lines come from the pages themselves (tests/readme_lines.py), so a changed or added line is what runs. Each is
run through bash with the installed console script first on PATH (`workbench` is `<venv>/bin/workbench`, as
after an install), HOME a fresh directory, against real local servers:

- the far host of "Two real hosts, workbench on both" (docs/usage.md) is this machine: `files make` and
  `servers up` run as written, on a loopback alias address of its own (SUBSTITUTIONS), and its target.json and
  credentials.json are copied into the client's working directory, as the page says to;
- the NAS of "Measuring servers you already have" and the fleet's server are the stock Samba, OpenSSH and
  rsync daemon (workbench/server/stock) on 127.0.0.1, with the password in ~/.netrc;
- the hosts reached over SSH (`--via-ssh alice@nas`, the fleet's clients in desks.txt, `sftp://nas.local`) are
  aliases in the test's ssh config (named by $WORKBENCH_SSH_CONFIG: ssh reads ~ from the password database, not
  $HOME) of real sshds on 127.0.0.1; the login sshd's sessions find this venv's `workbench` on their PATH, as on
  a host where it is installed.

Only what names another machine is replaced, by the reviewed table SUBSTITUTIONS (and sizes are bounded: below).
Lines that cannot run here are listed once, with the reason, in NOT_HERE. The `workbench lab` lines run in
tests/lab/test_readme_lab_lines.py. A documented line in none of these fails test_every_readme_line_is_run_or_said_why.

Sizes are bounded by flags appended to the line (BOUNDS): click gives a single-valued option its last value,
so an appended `--sizes 64K --repeat 1` replaces the line's `--sizes 16M,256M,1G --repeat 5` (each run's
recorded plan is checked to be the bounded one). `--small` is a list option: an appended one would add a set,
not replace the line's, so its value is made smaller in place (SMALLER_VALUES: `--small 1000x16K` copies four
16 KiB files, not a thousand; the plan is checked for that too). `--protocols` is appended to keep one or two
clients per run.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.far_host import fleet_members
from tests.helpers import free_port, sshd_setenv
from tests.readme_lines import ReadmeLine, readme_lines, with_flags
from tests.schema_check import assert_valid_run_document
from tests.ssh_login import keygen
from tests.stock_urls import StockSite
from workbench.core.results import Run
from workbench.core.store import Store
from workbench.server.daemons.sshd import Sshd
from workbench.shared.net import port_open

SCRIPT = Path(sys.prefix) / "bin" / "workbench"  # the console script the install made
USER = getpass.getuser()
# The far host's address: a loopback alias no other test binds, so `servers up`'s default ports are free there.
FAR_ADDRESS = f"127.77.{os.getpid() % 200 + 20}.10"

# README text -> what replaces it here, and why. Only names of other machines and ids of runs this database has.
SUBSTITUTIONS: list[tuple[str, str, str]] = [
    ("192.168.1.10", "{far_address}", "the far host: this machine on a loopback alias"),
    ("smb://alice@nas.local/share", "smb://{user}@127.0.0.1:{smb_port}/plain", "the NAS: stock Samba's share"),
    ("rsync://backup@nas.local/module", "rsync://{user}@127.0.0.1:{rsync_port}/plain", "the NAS: a stock rsyncd"),
    ("--iperf3 5201", "--iperf3 {iperf3_port}", "the NAS's iperf3 -s: a free loopback port"),
    ("--via-ssh alice@nas ", "--via-ssh {user}@nas ", "this machine's user; 'nas' is an ssh config alias"),
    ("smb://alice@nas/share", "smb://{user}@127.0.0.1:{smb_port}/plain", "the fleet's server: stock Samba"),
    ("report 12 ", "report {after} ", "the newer of the database's runs"),
    ("compare 11 12", "compare {before} {after}", "the database's two runs"),
]

# Values of a list option (typed twice it takes both, so an appended bound would add to the line's own, not replace it)
# -> the bounded value, and why. The flag stays as written: only its count shrinks.
SMALLER_VALUES: list[tuple[str, str, str]] = [
    ("--small 1000x16K", "--small 4x16K", "a small-file set of the same file size, four files instead of a thousand"),
]

# Lines that need another machine, or are this machine's set-up and this suite themselves.
NOT_HERE: dict[str, str] = {
    "pipx install filecopy-workbench": "installs from PyPI (network); the venv's editable install stands in",
    "./setup.sh": "installs Debian packages and rebuilds .venv: the set-up this suite runs in (.ci/run runs it)",
    "./test.sh": "the test suite itself",
    "WORKBENCH_TESTS_STRICT=1 .venv/bin/python -m pytest tests/unit -q": "a part of the test suite itself",
}

PLAN = ["--sizes", "64K", "--repeat", "1", "--warmup", "0", "--tcp-duration", "1"]


def _run_bound(protocols: str) -> list[str]:
    return ["--protocols", protocols, *PLAN]


@dataclass
class Outcome:
    command: str
    proc: subprocess.CompletedProcess[str]
    new_runs: list[int]

    def ok(self) -> None:
        text = self.proc.stdout + self.proc.stderr
        assert self.proc.returncode == 0, (self.command, self.proc.returncode, text[-6000:])
        assert "Traceback" not in text and "internal error" not in text, text[-6000:]


@dataclass
class World:
    """This machine standing in for the README's hosts, started as the lines need them."""

    base: Path
    lines: list[ReadmeLine]
    site: StockSite = field(init=False)
    cwd: Path = field(init=False)
    values: dict[str, str] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    login: subprocess.Popen[bytes] | None = None
    servers_up: bool = False
    made_dirs: list[Path] = field(default_factory=list)
    _stoppers: list[Callable[[], object]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.site = StockSite(self.base / "site")
        self.cwd = self.base / "client"
        self.cwd.mkdir()
        (self.home / ".ssh").mkdir(parents=True, mode=0o700)
        self.values.update(user=USER, far_address=FAR_ADDRESS)

    @property
    def home(self) -> Path:
        return self.site.home

    @property
    def db(self) -> Path:
        return self.home / ".local" / "share" / "workbench" / "runs.sqlite"

    def env(self) -> dict[str, str]:
        drop = ("COLUMNS", "NETRC", "XDG_DATA_HOME", "BASH_ENV", "ENV", "SSL_CERT_FILE", "CURL_CA_BUNDLE")
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_") and k not in drop}
        env.update(
            HOME=str(self.home),
            PATH=f"{SCRIPT.parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            WORKBENCH_SSH_CONFIG=str(self.home / ".ssh" / "config"),
            COLUMNS="200",
        )
        return env

    # -- running lines
    def line(self, *prefix: str) -> ReadmeLine:
        found = [ln for ln in self.lines if ln.argv[: len(prefix)] == list(prefix)]
        assert found, f"no documented line starts {' '.join(prefix)!r}"
        return found[0]

    def command_for(self, line: ReadmeLine) -> str:
        # an entry may end in a space (`report 12 `) so it cannot match a longer word: match on "LINE "
        text = line.command + " "
        for old, new, _ in SUBSTITUTIONS:
            if old in text:
                text = text.replace(old, new.format(**self.values))
        for old, new, _ in SMALLER_VALUES:
            text = text.replace(old + " ", new + " ")
        return with_flags(text.strip(), bounds_for(line))

    def run(self, line: ReadmeLine, *, again: bool = False) -> Outcome:
        if line.where in self.outcomes and not again:
            return self.outcomes[line.where]
        command = self.command_for(line)
        before = self._run_ids()
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=self.cwd,
            env=self.env(),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=900,
        )
        outcome = Outcome(command, proc, sorted(set(self._run_ids()) - set(before)))
        self.outcomes[line.where] = outcome
        return outcome

    def _run_ids(self) -> list[int]:
        if not self.db.exists():
            return []
        with Store(self.db) as store:
            return [r.id for r in store.history(1000)]

    def load(self, run_id: int) -> Run:
        with Store(self.db) as store:
            return store.load(run_id)

    # -- what the lines need
    def far_host(self) -> None:
        """The README's far host: `files make`, then `servers up`, as written; the two files copied over."""
        if self.servers_up:
            return
        # A host's address is on one of its interfaces, and smbd binds only to such addresses: the alias joins lo
        # for the module's time (routed to lo anyway, as all of 127.0.0.0/8 is).
        subprocess.run(["ip", "addr", "add", f"{FAR_ADDRESS}/32", "dev", "lo"], check=True, timeout=30)
        self._stoppers.append(
            lambda: subprocess.run(["ip", "addr", "del", f"{FAR_ADDRESS}/32", "dev", "lo"], check=True, timeout=30)
        )
        self.run(self.line("workbench", "files", "make")).ok()
        self.run(self.line("workbench", "servers", "up")).ok()
        self.servers_up = True
        state = self.home / ".local" / "share" / "workbench" / "server"
        for name in ("target.json", "credentials.json"):
            shutil.copy2(state / name, self.cwd / name)

    def runs(self, count: int) -> None:
        """At least `count` runs in the database, made by the README's own `run --target` line."""
        self.far_host()
        while len(self._run_ids()) < count:
            self.run(self.line("workbench", "run", "--target"), again=True).ok()
        ids = sorted(self._run_ids())
        self.values.update(before=str(ids[-2] if len(ids) > 1 else ids[-1]), after=str(ids[-1]))

    def stock(self, *kinds: str) -> None:
        for kind in kinds:
            self.site.start(kind)
        if "smb" in self.site.servers:
            self.values["smb_port"] = str(self.site.servers["smb"].ctx.ports["smb"])
            for folder in ("scratch", "bench"):  # the URLs' directories must exist on the server
                (self.site.root("smb") / folder).mkdir(exist_ok=True)
        if "rsync" in self.site.servers:
            self.values["rsync_port"] = str(self.site.servers["rsync"].ctx.ports["rsync"])
        self._write_ssh_config()

    def iperf3(self) -> None:
        if "iperf3_port" in self.values:
            return
        port = free_port()
        proc = subprocess.Popen(
            ["iperf3", "-s", "-B", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self._stoppers.append(lambda: _stop(proc))
        _wait_listening(port, proc)
        self.values["iperf3_port"] = str(port)

    def login_host(self) -> None:
        """An sshd whose sessions have this venv's `workbench` on PATH: 'nas' and the fleet's desks."""
        if self.login is not None:
            return
        d = self.base / "login-sshd"
        d.mkdir(mode=0o700)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        keygen(d / "host_key")
        keygen(d / "client_key")
        shutil.copyfile(d / "client_key.pub", d / "authorized_keys")
        port = free_port()
        far_home = self.base / "far-home"  # the far side's workbench data, kept out of the real home
        (d / "sshd_config").write_text(
            f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {d / 'host_key'}\nPidFile {d / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {d / 'authorized_keys'}\nAllowUsers {USER}\nAuthenticationMethods publickey\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
            "UsePAM no\nStrictModes no\nPrintMotd no\nUseDNS no\nLogLevel ERROR\n"
            f"SetEnv PATH={SCRIPT.parent}:/usr/local/bin:/usr/bin:/bin WORKBENCH_HOME={far_home}{sshd_setenv()}\n"
        )
        kind, blob = (d / "host_key.pub").read_text().split()[:2]
        (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {kind} {blob}\n")
        self.login = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")])
        _wait_listening(port, self.login)
        self.values["login_port"] = str(port)
        self.values["login_dir"] = str(d)
        (self.cwd / "desks.txt").write_text("desk1\ndesk2\n")  # the README's HOSTS file: two client hosts
        self._write_ssh_config()

    def _write_ssh_config(self) -> None:
        blocks = []
        if "login_port" in self.values:
            d = Path(self.values["login_dir"])
            for alias in ("nas", "desk1", "desk2"):
                blocks.append(
                    f"Host {alias}\n  HostName 127.0.0.1\n  Port {self.values['login_port']}\n"
                    f"  IdentityFile {d / 'client_key'}\n  IdentitiesOnly yes\n  IdentityAgent none\n"
                    f"  UserKnownHostsFile {d / 'known_hosts'}\n  GlobalKnownHostsFile /dev/null\n  BatchMode yes\n"
                )
        ssh = self.site.servers.get("ssh")
        if ssh is not None:
            blocks.append(
                f"Host nas.local\n  HostName 127.0.0.1\n  Port {ssh.ctx.ports['ssh']}\n  User {USER}\n"
                f"  IdentityFile {ssh.client_key_path}\n  IdentitiesOnly yes\n  IdentityAgent none\n"  # type: ignore[attr-defined]
                f"  UserKnownHostsFile {ssh.known_hosts_path}\n  GlobalKnownHostsFile /dev/null\n"  # type: ignore[attr-defined]
                "  StrictHostKeyChecking yes\n  BatchMode yes\n"
            )
        path = self.home / ".ssh" / "config"
        path.write_text("".join(blocks))
        path.chmod(0o600)

    def home_dir(self, name: str) -> None:
        """`sftp://nas.local/~/tmp` needs ~/tmp in the login's home (this machine's user's, from the password
        database, not $HOME): made when missing, and removed again at the end if still empty."""
        path = Path(os.path.expanduser(f"~{USER}")) / name
        if not path.exists():
            path.mkdir()
            self.made_dirs.append(path)

    def stop(self) -> None:
        if self.servers_up:
            down = subprocess.run(
                [str(SCRIPT), "servers", "down"], env=self.env(), capture_output=True, text=True, timeout=120
            )
            assert down.returncode == 0, down.stderr
        for stop in self._stoppers:
            stop()
        if self.login is not None:
            self.login.terminate()
            self.login.wait(timeout=10)
        self.site.stop()
        for path in self.made_dirs:
            path.rmdir()  # fails the teardown when a run left its scratch directory behind


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(timeout=10)


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 15
    while not port_open("127.0.0.1", port):
        assert proc.poll() is None and time.monotonic() < deadline, f"nothing listens on {port}"
        time.sleep(0.05)


# -- what each kind of line needs, how it is bounded, and what it must have done ------------------------------------


def _is_url_run(argv: list[str]) -> bool:
    return argv[:2] == ["workbench", "run"] and len(argv) > 2 and "://" in argv[2]


@dataclass(frozen=True)
class Rule:
    matches: Callable[[list[str]], bool]
    prepare: Callable[[World, ReadmeLine], None]
    bounds: Callable[[list[str]], list[str]]
    check: Callable[[World, ReadmeLine, Outcome], None]


def _nothing(world: World, line: ReadmeLine) -> None:
    return None


def _no_bounds(argv: list[str]) -> list[str]:
    return []


def _check_files_made(world: World, line: ReadmeLine, outcome: Outcome) -> None:
    outcome.ok()
    manifest = world.home / "wb-root" / "files" / "manifest.json"
    assert manifest.is_file() and "manifest" in outcome.proc.stdout


def _check_servers_up(world: World, line: ReadmeLine, outcome: Outcome) -> None:
    outcome.ok()
    status = subprocess.run(
        [str(SCRIPT), "servers", "status"], env=world.env(), capture_output=True, text=True, timeout=60
    )
    assert status.returncode == 0, status.stderr
    for name in ("serve", "sshd", "smbd", "rsyncd"):
        assert name in status.stdout, status.stdout
    assert FAR_ADDRESS in outcome.proc.stdout + status.stdout


def _check_new_runs(count: int, *, fleet: bool = False) -> Callable[[World, ReadmeLine, Outcome], None]:
    def check(world: World, line: ReadmeLine, outcome: Outcome) -> None:
        outcome.ok()
        assert len(outcome.new_runs) == count, (outcome.new_runs, outcome.proc.stdout[-3000:])
        for run_id in outcome.new_runs:
            run = world.load(run_id)
            assert run.results, run_id
            # the appended bounds won over the line's own values
            assert run.meta["plan"]["sizes"] == [64 << 10] and run.meta["plan"]["repeat"] == 1, run.meta["plan"]
            small = {new.split()[-1] for old, new, _ in SMALLER_VALUES if old in line.command + " "}
            assert set(run.meta["plan"].get("small_sets") or []) == small, run.meta["plan"]
            copied = [r for r in run.results if not (r.error or "").startswith("unavailable")]
            assert copied and all(r.error is None for r in copied), [(r.label, r.error) for r in copied]
            if fleet:
                assert {r.client_host for r in run.results} == {"all", "desk1", "desk2"}
        if fleet:
            assert fleet_members() == []

    return check


def _check_tcp(world: World, line: ReadmeLine, outcome: Outcome) -> None:
    outcome.ok()
    for window in ("32K", "256K"):
        assert window in outcome.proc.stdout.replace(" KiB", "K"), outcome.proc.stdout


def _check_history(world: World, line: ReadmeLine, outcome: Outcome) -> None:
    outcome.ok()
    assert world.values["after"] in outcome.proc.stdout, outcome.proc.stdout


def _check_report(world: World, line: ReadmeLine, outcome: Outcome) -> None:
    import json

    outcome.ok()
    doc = json.loads((world.cwd / "run12.json").read_text())
    assert_valid_run_document(doc)
    assert doc["run"]["id"] == int(world.values["after"])


def _check_compare(world: World, line: ReadmeLine, outcome: Outcome) -> None:
    outcome.ok()
    assert world.values["before"] in outcome.proc.stdout and world.values["after"] in outcome.proc.stdout


def _check_ok(needle: str) -> Callable[[World, ReadmeLine, Outcome], None]:
    def check(world: World, line: ReadmeLine, outcome: Outcome) -> None:
        outcome.ok()
        assert needle in outcome.proc.stdout, outcome.proc.stdout[-3000:]

    return check


def _nas_over_ssh_and_rsync(world: World, line: ReadmeLine) -> None:
    world.stock("ssh", "rsync")
    world.iperf3()
    world.home_dir("tmp")


def _fleet_hosts(world: World, line: ReadmeLine) -> None:
    world.stock("smb")
    world.login_host()


RULES: list[Rule] = [
    Rule(lambda a: a[:3] == ["workbench", "files", "make"], _nothing, lambda a: ["--sizes", "64K"], _check_files_made),
    Rule(lambda a: a[:3] == ["workbench", "servers", "up"], lambda w, ln: w.far_host(), _no_bounds, _check_servers_up),
    Rule(
        lambda a: a[:2] == ["workbench", "run"] and "--target" in a,
        lambda w, ln: w.far_host(),
        lambda a: _run_bound("http/aiohttp,sftp/paramiko"),
        _check_new_runs(1),
    ),
    Rule(
        lambda a: a[:2] == ["workbench", "tcp"],
        lambda w, ln: w.far_host(),
        lambda a: ["--duration", "0.25"],  # the check reads which windows were swept, not their figures
        _check_tcp,
    ),
    Rule(lambda a: a[:2] == ["workbench", "history"], lambda w, ln: w.runs(2), _no_bounds, _check_history),
    Rule(lambda a: a[:2] == ["workbench", "report"], lambda w, ln: w.runs(2), _no_bounds, _check_report),
    Rule(lambda a: a[:2] == ["workbench", "compare"], lambda w, ln: w.runs(2), _no_bounds, _check_compare),
    Rule(lambda a: a == ["workbench", "doctor"], _nothing, _no_bounds, _check_ok("tcp_rmem")),
    Rule(
        lambda a: a[:2] == ["workbench", "doctor"] and len(a) == 3,
        lambda w, ln: w.stock("smb"),
        _no_bounds,
        _check_ok("smb/pysmb"),
    ),
    Rule(
        lambda a: a[:2] == ["workbench", "run"] and "--via-ssh" in a,
        lambda w, ln: w.login_host(),
        lambda a: _run_bound("http/aiohttp"),
        _check_new_runs(1),
    ),
    Rule(
        lambda a: _is_url_run(a) and a[2].startswith("smb://"),
        lambda w, ln: w.stock("smb"),
        lambda a: _run_bound("smb/smbclient"),
        _check_new_runs(1),
    ),
    Rule(
        lambda a: _is_url_run(a) and a[2].startswith("sftp://"),
        _nas_over_ssh_and_rsync,
        lambda a: _run_bound("sftp/paramiko,rsync/daemon"),
        _check_new_runs(2),
    ),
    Rule(
        lambda a: a[:2] == ["workbench", "fleet"],
        _fleet_hosts,
        lambda a: _run_bound("smb/pysmb"),
        _check_new_runs(1, fleet=True),
    ),
]


def rule_for(line: ReadmeLine) -> Rule | None:
    found = [r for r in RULES if r.matches(line.argv)]
    assert len(found) <= 1, f"{line.where} matches {len(found)} rules"
    return found[0] if found else None


def bounds_for(line: ReadmeLine) -> list[str]:
    rule = rule_for(line)
    return rule.bounds(line.argv) if rule else []


LINES = readme_lines()
RUNNABLE = [ln for ln in LINES if not ln.is_lab and ln.command not in NOT_HERE]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    if reason := Sshd.unavailable_reason():
        pytest.skip(reason)
    assert SCRIPT.is_file(), f"no console script at {SCRIPT}"
    made = World(tmp_path_factory.mktemp("readme"), LINES)
    found = subprocess.run(["bash", "-c", "command -v workbench"], env=made.env(), capture_output=True, text=True)
    assert found.stdout.strip() == str(SCRIPT), found  # the lines run the installed console script
    try:
        yield made
    finally:
        made.stop()


def test_every_readme_line_is_run_or_said_why() -> None:
    """Each shell line of the README is run here, in the lab's test, or listed in NOT_HERE with its reason;
    every entry of NOT_HERE and SUBSTITUTIONS still matches the README (a stale entry hides nothing)."""
    assert len(LINES) >= 20, [ln.command for ln in LINES]
    for line in LINES:
        if line.is_lab or line.command in NOT_HERE:
            continue
        assert rule_for(line) is not None, f"{line.where} is neither run nor listed: {line.command}"
    commands = {ln.command for ln in LINES}
    assert set(NOT_HERE) <= commands, set(NOT_HERE) - commands
    for old, _, why in SUBSTITUTIONS + SMALLER_VALUES:
        assert any(old in ln.command + " " for ln in LINES), f"stale substitution {old!r} ({why})"
    for rule in RULES:
        assert any(rule.matches(ln.argv) for ln in RUNNABLE), "a rule that no README line uses"


@pytest.mark.parametrize("line", RUNNABLE, ids=[ln.label() for ln in RUNNABLE])
def test_readme_line_runs_as_documented(world: World, line: ReadmeLine) -> None:
    rule = rule_for(line)
    assert rule is not None
    rule.prepare(world, line)
    outcome = world.run(line)
    print(outcome.command, outcome.proc.stdout, outcome.proc.stderr, sep="\n")  # shown when the test fails
    rule.check(world, line, outcome)

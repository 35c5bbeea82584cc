"""An unreachable far host fails in ≤ 15 s: `workbench run`, `workbench tcp` and every client family's connect.

The far host is a network namespace this module creates, reached through a veth pair whose root end has
an address of a private /30 (10.77.99.x, away from the lab's 10.77.0.x); no traffic goes anywhere else.
Two kinds of unreachable, as a user meets them:
- "no-answer": the peer end is UP with NO address, so ARP for the far address goes unanswered and the
  kernel reports EHOSTUNREACH after ~3 s (a host that is off, on the local segment);
- "silent": the peer HAS the far address (ARP answers) but nothing ever comes back to a SYN — not even
  the RST a closed port would send — like a host behind a firewall that drops. tc filtering is not
  available in every kernel (this one has neither a u32/matchall classifier, nor the gact drop action,
  nor netem), so the silence comes from routing instead: the address is a /32 and the namespace has no
  route back to us, so the peer's reply cannot leave. The test checks the SYNs did arrive (the peer's
  Tcp InSegs counter grows), so it is not the ARP case in disguise.

Each case must end in exactly one `error:` line (no traceback) with the documented exit code, or one
WorkbenchError, within BOUND_S of wall time — the issue's "an unreachable host fails in ≤ 15 s".
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import lab_unavailable
from tests.platform_clients import expected_clients
from workbench.protocols import registry
from workbench.protocols.base import Client, ClientOptions
from workbench.shared import procs
from workbench.shared.credentials import Credentials
from workbench.shared.errors import ExitCode, NetworkError, WorkbenchError
from workbench.shared.target import Target

REPO = Path(__file__).resolve().parents[2]
BOUND_S = 15.0
PREFIX = "wbtest-"
# /30s of this /24 are ours; the lab uses 10.77.0.x inside its own namespaces.
POOL = ipaddress.ip_network("10.77.99.0/24")
_NAME = re.compile(rf"^{PREFIX}(\d+)-")
# Every client that can run on Linux; the macOS-only ones and the kernel CIFS mount are left to their own
# unavailable rows (checked per client below: a client that cannot load here is skipped, which strict CI
# turns into a failure).
CLIENTS = [e.label for e in registry.KNOWN_CLIENTS if e.label not in ("smb/mount_smbfs", "afp/mount_afp", "smb/cifs")]
MODES = ["no-answer", "silent"]


needs_lab = pytest.mark.skipif(lab_unavailable() is not None, reason=lab_unavailable() or "")
pytestmark = [pytest.mark.lab, needs_lab]


def _ip(*args: str, check: bool = True) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _remove_stale() -> None:
    """Namespaces of a test run that was killed (its pid is gone): their veth pairs go with them."""
    for line in _ip("netns", "list").splitlines():
        name = line.split()[0] if line.split() else ""
        found = _NAME.match(name)
        if found and not procs.pid_alive(int(found.group(1))):
            _ip("netns", "del", name, check=False)


def _free_subnet() -> ipaddress.IPv4Network:
    """A /30 of POOL no interface of the root namespace uses: parallel runs (other pids) must not share one."""
    used = _ip("-4", "-o", "addr", "show")
    subnets = list(POOL.subnets(new_prefix=30))
    start = os.getpid() % len(subnets)
    for i in range(len(subnets)):
        net = subnets[(start + i) % len(subnets)]
        if f" {net[1]}/" not in used:
            return net
    raise RuntimeError(f"every /30 of {POOL} is in use")


@dataclass(frozen=True)
class FarNs:
    mode: str
    namespace: str
    peer_dev: str
    host: str  # the unreachable far address

    def tcp_segments_in(self) -> int:
        """TCP segments the peer's stack received (Tcp InSegs): our SYNs, which it could not answer."""
        snmp = subprocess.run(
            ["ip", "netns", "exec", self.namespace, "cat", "/proc/net/snmp"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
        header, values = [ln.split() for ln in snmp.splitlines() if ln.startswith("Tcp:")][:2]
        return int(values[header.index("InSegs")])


@contextlib.contextmanager
def _far_namespace(mode: str) -> Iterator[FarNs]:
    _remove_stale()
    tag = "n" if mode == "no-answer" else "s"
    namespace = f"{PREFIX}{os.getpid()}-{mode}"
    ours, peer = f"wbt{os.getpid()}{tag}a", f"wbt{os.getpid()}{tag}b"  # ≤ 15 characters (IFNAMSIZ)
    net = _free_subnet()
    near, far = net[1], net[2]
    try:
        _ip("netns", "add", namespace)
        _ip("link", "add", ours, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", namespace)
        _ip("addr", "add", f"{near}/30", "dev", ours)
        _ip("link", "set", ours, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("-n", namespace, "link", "set", peer, "up")
        if mode == "silent":
            # /32 and no route back: ARP answers, the SYN arrives, the reply has nowhere to go
            _ip("-n", namespace, "addr", "add", f"{far}/32", "dev", peer)
        yield FarNs(mode, namespace, peer, str(far))
    finally:
        # deleting the namespace destroys the peer end, and with it the pair; the explicit delete covers a
        # failure between 'link add' and 'set netns'
        _ip("netns", "del", namespace, check=False)
        _ip("link", "del", ours, check=False)
        assert namespace not in _ip("netns", "list") and ours not in _ip("-br", "link")


@pytest.fixture(scope="module", params=MODES)
def far_ns(request: pytest.FixtureRequest) -> Iterator[FarNs]:
    with _far_namespace(request.param) as far:
        yield far


def _home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    home.mkdir()
    creds = tmp_path / "credentials.json"
    creds.write_text(json.dumps({"user": "dummy", "password": "not-a-real-secret"}))
    creds.chmod(0o600)
    env = {**os.environ, "HOME": str(home), "WORKBENCH_HOME": str(home), "COLUMNS": "200"}
    env.pop("WORKBENCH_PASSWORD", None)
    env.pop("WORKBENCH_USER", None)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    return creds, env


@dataclass(frozen=True)
class Attempt:
    """One case's outcome: what a client raised (or a command's exit), and its wall time."""

    elapsed_s: float
    error: BaseException | None = None  # a client's connect + download: what it raised (None: nothing)
    done: subprocess.CompletedProcess[str] | None = None  # a `workbench` command
    unavailable: str | None = None  # a client that cannot load here: why
    close_error: BaseException | None = None  # what the client's close() raised, if anything


def _command(args: list[str], tmp_path: Path) -> Attempt:
    creds, env = _home(tmp_path)
    argv = [sys.executable, "-m", "workbench", *[str(creds) if a == "CREDS" else a for a in args]]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    return Attempt(time.monotonic() - started, done=done)


def _client_attempt(label: str, host: str, ssh_key: Path, tmp_path: Path) -> Attempt:
    entry = next(e for e in registry.KNOWN_CLIENTS if e.label == label)
    loaded = registry.load(entry)
    if isinstance(loaded, str):
        return Attempt(0.0, unavailable=loaded)
    known_hosts = tmp_path / "known_hosts"
    known_hosts.touch()
    creds = Credentials(user="dummy", password="not-a-real-secret", ssh_key=ssh_key, known_hosts=known_hosts)
    client: Client = loaded(Target(host=host, credentials=creds, remote_root="/srv/none"), ClientOptions())
    started = time.monotonic()
    error: BaseException | None = None
    close_error: BaseException | None = None
    try:
        # native clients (curl, OpenSSH, rsync, smbclient) connect per copy: the download is the connect
        client.connect()
        client.download("files/none.bin", tmp_path / "none.bin", lambda n: None)
    except BaseException as exc:  # judged by the test: it must be one NetworkError
        error = exc
    finally:
        try:
            client.close()
        except BaseException as exc:  # judged by the test: close() must not fail
            close_error = exc
    return Attempt(time.monotonic() - started, error=error, close_error=close_error)


@pytest.fixture(scope="module")
def ssh_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway key: without one the OpenSSH-based clients refuse before connecting, which would test nothing."""
    key = tmp_path_factory.mktemp("ssh") / "client_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30)
    return key


@dataclass(frozen=True)
class Attempts:
    by_case: dict[str, Attempt]
    segments_in: int  # TCP segments the far namespace received while they ran (silent mode; else 0)


@pytest.fixture(scope="module")
def attempts(far_ns: FarNs, ssh_key: Path, tmp_path_factory: pytest.TempPathFactory) -> Attempts:
    """Every case against this far namespace at once: each waits for the network, not for the others, so the
    module takes about one case's wait per mode, not the sum (each case's time is still its own)."""
    tmp = tmp_path_factory.mktemp(f"unreachable-{far_ns.mode}")
    run = ["run", "--host", far_ns.host, "--credentials", "CREDS", "--protocols", "http", "--sizes", "1M"]
    run += ["--repeat", "1", "--warmup", "0", "--db", str(tmp / "db.sqlite")]
    cases: dict[str, Callable[[Path], Attempt]] = {
        "run": functools.partial(_command, run),
        "tcp": functools.partial(_command, ["tcp", far_ns.host, "--credentials", "CREDS", "--duration", "1"]),
    }
    for label in CLIENTS:
        cases[label] = functools.partial(_client_attempt, label, far_ns.host, ssh_key)
    before = far_ns.tcp_segments_in() if far_ns.mode == "silent" else 0
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        futures = {}
        for i, (name, case) in enumerate(cases.items()):
            work = tmp / f"case{i}"
            work.mkdir()
            futures[name] = pool.submit(case, work)
        by_case = {name: future.result() for name, future in futures.items()}
    after = far_ns.tcp_segments_in() if far_ns.mode == "silent" else 0
    return Attempts(by_case, after - before)


@pytest.fixture
def silence_checked(far_ns: FarNs, attempts: Attempts) -> None:
    """In the silent mode, prove the peer did get our packets and said nothing (not an ARP failure): every case
    that tried sent at least one SYN."""
    if far_ns.mode == "silent":
        tried = sum(1 for a in attempts.by_case.values() if a.unavailable is None)
        assert attempts.segments_in >= tried, (
            f"the silent peer received {attempts.segments_in} TCP segments from {tried} cases: the case tested nothing"
        )


def _check_command(attempt: Attempt, label: str) -> None:
    done = attempt.done
    assert done is not None
    print(f"\n{label}: {attempt.elapsed_s:.1f} s, exit {done.returncode}: {done.stderr.strip()}")
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    assert done.returncode == ExitCode.NETWORK, (done.returncode, output)
    errors = [ln for ln in output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, output
    assert attempt.elapsed_s <= BOUND_S, f"{label} took {attempt.elapsed_s:.1f} s (bound {BOUND_S:.0f} s): {errors[0]}"


def test_run_fails_fast_on_an_unreachable_host(far_ns: FarNs, attempts: Attempts, silence_checked: None) -> None:
    _check_command(attempts.by_case["run"], f"run {far_ns.mode}")


def test_tcp_fails_fast_on_an_unreachable_host(far_ns: FarNs, attempts: Attempts, silence_checked: None) -> None:
    _check_command(attempts.by_case["tcp"], f"tcp {far_ns.mode}")


@pytest.mark.parametrize("label", CLIENTS)
def test_each_client_fails_fast_on_an_unreachable_host(
    far_ns: FarNs, attempts: Attempts, silence_checked: None, label: str
) -> None:
    attempt = attempts.by_case[label]
    if attempt.unavailable is not None:  # a client this platform must run fails the test, it is never skipped
        (pytest.fail if label in expected_clients() else pytest.skip)(f"{label}: {attempt.unavailable}")
    assert attempt.close_error is None, f"{label}: close() raised {attempt.close_error!r}"
    error = attempt.error
    assert isinstance(error, WorkbenchError), f"{label} did not fail with a WorkbenchError: {error!r}"
    line = error.one_line()
    print(f"\n{label} {far_ns.mode}: {attempt.elapsed_s:.1f} s: {type(error).__name__}: {line}")
    assert line and "\n" not in line and "Traceback" not in line
    # an unreachable host is a network failure (exit 3), not a login or a generic one
    assert isinstance(error, NetworkError), line
    # no byte ever moved: a connect that got no answer must not be reported as a stalled transfer
    assert "stalled for" not in line, line
    assert attempt.elapsed_s <= BOUND_S, f"{label} took {attempt.elapsed_s:.1f} s (bound {BOUND_S:.0f} s): {line}"

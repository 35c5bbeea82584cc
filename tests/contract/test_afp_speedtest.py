"""netatalk's own AFP client (afp_speedtest, the bench's native reference) against workbench's real afpd, with
no password on any command line.

afp_speedtest logs in only by cleartext, with the password of -w or, without -w, an empty one: it has no
guest login. It runs here, as in bench/bench_afp.py, as afpd's password-less unprivileged account, which only
a server started with guest = True has. What it reads it throws away and what it writes is its own data, so
its figures cannot be checked against a manifest; these tests check the login, the bytes it says it moved,
and that the password-less account is refused where it does not belong.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import afp_fixtures
from tests.afp_fixtures import AfpdRunner
from tests.argv_watch import ArgvWatch
from tests.helpers import free_port
from workbench.core.runner import UNAVAILABLE
from workbench.protocols.afp_speedtest import NEEDS_GUEST, AfpSpeedtestClient
from workbench.protocols.base import ClientOptions, FileCopy
from workbench.server.daemons.afpd import GUEST_ACCOUNT, GUEST_UID, Afpd
from workbench.shared.credentials import Credentials
from workbench.shared.errors import NetworkError, UnavailableError, WorkbenchError
from workbench.shared.netatalk import Netatalk, find
from workbench.shared.target import Target

TOOL = "/usr/bin/afp_speedtest"
NAME_PAD = "," * 16  # netatalk 4.2.3 reads -f's value after freeing it: the commas keep the name clear
RESULT_LINE = re.compile(r"^\s*\d+\s+(\d+)\s+[\d.]+\s*$")  # run, microseconds, KB/s
SIZE_MIB = 4
TOOL_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def netatalk() -> Netatalk:
    found, why = find()
    if found is None or not found.path(TOOL).exists():
        pytest.skip(f"no afp_speedtest: {why or 'netatalk-tests not installed'}")
    return found


@pytest.fixture(scope="module")
def guest_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfpdRunner]:
    yield from afp_fixtures.running(tmp_path_factory, guest=True)


@pytest.fixture(scope="module")
def plain_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfpdRunner]:
    yield from afp_fixtures.running(tmp_path_factory)


def _speedtest(netatalk: Netatalk, runner: AfpdRunner, user: str, *test: str) -> subprocess.CompletedProcess[str]:
    argv = netatalk.argv([
        TOOL, "-h", afp_fixtures.HOST, "-p", str(runner.port), "-s", runner.ctx.share, "-u", user,
        *test, "-d", str(SIZE_MIB), "-a",
    ])  # fmt: skip
    assert "-w" not in argv
    return subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, stdin=subprocess.DEVNULL)


def _microseconds(done: subprocess.CompletedProcess[str]) -> int | None:
    for line in done.stdout.splitlines():
        if found := RESULT_LINE.match(line):
            return int(found.group(1))
    return None


def _reference_volume(runner: AfpdRunner) -> Path:
    """The served root, emptied, owned by the password-less account (afp_speedtest reads and writes there)."""
    served = afp_fixtures.served(runner)
    os.chown(served.root, GUEST_UID, GUEST_UID)
    return served.root


def _log(runner: AfpdRunner) -> str:
    return (runner.server.dir / "conf" / "afpd.log").read_text(errors="replace")


def test_it_reads_our_file_logged_in_without_a_password_on_its_command_line(
    netatalk: Netatalk, guest_runner: AfpdRunner
) -> None:
    root = _reference_volume(guest_runner)
    (root / "ours.bin").write_bytes(os.urandom(SIZE_MIB << 20))
    os.chown(root / "ours.bin", GUEST_UID, GUEST_UID)
    with ArgvWatch(guest_runner.ctx.credentials.password) as watch:
        done = _speedtest(netatalk, guest_runner, GUEST_ACCOUNT, "-f", NAME_PAD + "Read", "-F", "ours.bin")
    assert watch.hits == [] and watch.scans > 0
    micros = _microseconds(done)
    assert micros is not None and micros > 0, done.stdout[-400:]
    assert "NOT TESTED" not in done.stdout and "FAILED" not in done.stdout
    assert f"Login by {GUEST_ACCOUNT}" in _log(guest_runner)
    # what it read it threw away: the file is as it was, and nothing else appeared beside it
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["ours.bin"]


def test_it_writes_its_own_file_which_nothing_can_check(netatalk: Netatalk, guest_runner: AfpdRunner) -> None:
    _reference_volume(guest_runner)
    done = _speedtest(netatalk, guest_runner, GUEST_ACCOUNT, "-f", NAME_PAD + "Write")
    micros = _microseconds(done)
    assert micros is not None and micros > 0, done.stdout[-400:]
    # the size it timed is the one asked for; the bytes are its own (no manifest to check a row against)
    assert f"size {SIZE_MIB << 20}" in done.stdout


def test_the_password_less_login_is_refused_without_guest(netatalk: Netatalk, plain_runner: AfpdRunner) -> None:
    _reference_volume(plain_runner)
    done = _speedtest(netatalk, plain_runner, GUEST_ACCOUNT, "-f", NAME_PAD + "Write")
    assert _microseconds(done) is None
    assert f"Login by {GUEST_ACCOUNT}" not in _log(plain_runner)


def test_the_served_user_never_logs_in_with_an_empty_password(netatalk: Netatalk, guest_runner: AfpdRunner) -> None:
    _reference_volume(guest_runner)
    user = guest_runner.ctx.credentials.user
    done = _speedtest(netatalk, guest_runner, user, "-f", NAME_PAD + "Write")
    assert _microseconds(done) is None
    assert f"Login by {user} " not in _log(guest_runner)


# --- the registered reference client (afp/afp_speedtest) on the reference volume of a lab-style afpd -----------


@pytest.fixture(scope="module")
def reference_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfpdRunner]:
    """afpd as the lab starts it: the served volume the served user's alone, the reference volume the
    password-less account's alone."""
    runner = AfpdRunner(tmp_path_factory.mktemp("afpd"))
    runner.ctx = dataclasses.replace(runner.ctx, afp_reference=True)
    runner.server = Afpd(runner.ctx)
    try:
        runner.ensure()
        yield runner
    finally:
        runner.stop()
        shutil.rmtree(runner.ctx.state_dir, ignore_errors=True)


def _job(tmp_path: Path, size_bytes: int, name: str = "file-4M.bin") -> list[FileCopy]:
    local = tmp_path / name
    local.write_bytes(os.urandom(size_bytes))
    return [FileCopy(local, f"files/{name}", size_bytes)]


@pytest.mark.parametrize("direction", ["download", "upload"])
def test_the_reference_row_times_its_own_test_on_its_own_volume(
    netatalk: Netatalk, reference_runner: AfpdRunner, tmp_path: Path, direction: str
) -> None:
    served = afp_fixtures.served(reference_runner)
    jobs = _job(tmp_path, SIZE_MIB << 20)
    options = ClientOptions(block_size=256 << 10, requests_in_flight=3)
    moved: list[int] = []
    with ArgvWatch(served.target.credentials.password) as watch, AfpSpeedtestClient(served.target, options) as client:
        many = client.download_many if direction == "download" else client.upload_many
        many(jobs, moved.append)
    assert watch.hits == [] and watch.scans > 0
    run = client.last_run
    assert run is not None and run.test == ("Read" if direction == "download" else "Write")
    assert run.size_bytes == SIZE_MIB << 20 and run.request_bytes == 256 << 10  # the row's file and request sizes
    assert client.timed_by_itself_s() == run.microseconds[0] / 1e6 > 0
    assert moved == [SIZE_MIB << 20]
    details = client.row_details(direction)
    assert (details.request_bytes, details.requests_in_flight) == (256 << 10, 3)
    assert details.measures and details.measures.startswith(f"afp_speedtest {run.test}:")
    assert AfpSpeedtestClient.unverifiable == "not verifiable: the tool makes its own data"
    # the tool logged in as the password-less account, on its own volume; the served root stayed untouched
    assert f"Login by {GUEST_ACCOUNT}" in _log(reference_runner)
    assert [p.name for p in served.root.iterdir()] == []


def test_a_set_of_small_files_is_not_its_kind_of_test(reference_runner: AfpdRunner, tmp_path: Path) -> None:
    served = afp_fixtures.served(reference_runner)
    jobs = [*_job(tmp_path, 8192, "a.bin"), *_job(tmp_path, 8192, "b.bin")]
    with AfpSpeedtestClient(served.target) as client, pytest.raises(WorkbenchError) as caught:
        client.download_many(jobs, lambda _n: None)
    assert caught.value.one_line().startswith(UNAVAILABLE)
    assert client.timed_by_itself_s() is None


def test_the_password_less_account_reaches_no_other_volume(netatalk: Netatalk, reference_runner: AfpdRunner) -> None:
    served = afp_fixtures.served(reference_runner)
    os.chown(served.root, GUEST_UID, GUEST_UID)  # even a served root it could write to: the volume refuses it
    done = _speedtest(netatalk, reference_runner, GUEST_ACCOUNT, "-f", NAME_PAD + "Write")
    assert _microseconds(done) is None
    assert [p.name for p in served.root.iterdir()] == []


def test_without_the_reference_volume_the_row_is_unavailable(plain_runner: AfpdRunner) -> None:
    served = afp_fixtures.served(plain_runner)
    client = AfpSpeedtestClient(served.target)
    with pytest.raises(UnavailableError) as caught:
        client.connect()
    client.close()
    assert caught.value.one_line().startswith(NEEDS_GUEST)
    assert served.target.credentials.password not in caught.value.one_line()


def test_a_server_given_by_url_is_never_tried(netatalk: Netatalk) -> None:
    # a closed loopback port: a client that tried to log in would fail with a network error, not this one
    target = Target("127.0.0.1", Credentials("someone", "secret"), ports={"afp": 9}, share="x", stock=True)
    with pytest.raises(UnavailableError) as caught:
        AfpSpeedtestClient(target).connect()
    assert caught.value.one_line().startswith(f"{NEEDS_GUEST} (in the lab)")


def test_a_closed_port_is_a_network_failure_not_unavailable(netatalk: Netatalk) -> None:
    target = Target("127.0.0.1", Credentials("someone", "secret"), ports={"afp": free_port("127.0.0.1")})
    with pytest.raises(NetworkError):
        AfpSpeedtestClient(target, ClientOptions(connect_timeout_s=2.0)).connect()

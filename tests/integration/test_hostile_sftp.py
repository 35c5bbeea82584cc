"""`workbench run sftp://…` against a real SFTP server (paramiko's, tests/hostile_sftp.py) whose status messages are
hostile, then `workbench report --markdown --csv --html --json` on the stored run.

Each message is tried on each request it can answer: the scratch directory (mkdir), the test files' and the timed
uploads' open, the downloads' reads, the check of a directory before its removal (lstat), the clean-up's listing
(opendir) and removals (remove, rmdir); and files with hostile names in the scratch directory. Both SFTP clients run:
paramiko and OpenSSH's sftp. Whatever the server says, workbench prints one line per error, exits with its
documented code, never says "internal error" nor shows a traceback, sends no control code to the terminal and shows
markup as typed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from paramiko.sftp import SFTP_FAILURE, SFTP_NO_SUCH_FILE, SFTP_PERMISSION_DENIED

from tests.forked_workbench import ForkedWorkbench
from tests.hostile_sftp import HostileSftp, SftpCase
from tests.integration.test_hostile_servers import ODD_NAMES, _assert_shown_safely, _report_everything
from tests.integration.test_hostile_servers import REPLIES as FTP_REPLIES
from tests.stock_urls import StockSite, run_workbench
from workbench.shared.errors import ExitCode

ALIAS = "hostile-sftp"
# The FTP suite's replies without their FTP codes, each with an SFTP status code of its own.
MESSAGES = {name: text.replace("550-", "").replace("550 ", "") for name, text in FTP_REPLIES.items()}
CODES = {
    "escapes": SFTP_FAILURE,
    "markup": SFTP_PERMISSION_DENIED,
    "formula": SFTP_NO_SUCH_FILE,
    "lines": SFTP_FAILURE,
    "megabyte": SFTP_FAILURE,
}
# What each request refused means for the run (name: paramiko's name of the request, the path it is refused for,
# the exit codes the documentation allows).
REQUESTS: dict[str, tuple[str, str, set[int]]] = {
    "mkdir": ("mkdir", "/workbench-", {ExitCode.ERROR, ExitCode.NOT_FOUND, ExitCode.DISK}),  # no scratch: no run
    "open-files": ("open", "/files/", {ExitCode.ERROR, ExitCode.NOT_FOUND, ExitCode.DISK}),  # no test files
    "open-incoming": ("open", "/incoming/", {ExitCode.ROWS_FAILED}),  # the timed uploads fail: their rows
    "read": ("read", "", {ExitCode.ROWS_FAILED}),  # the downloads fail: their rows
    "lstat": ("lstat", "/incoming/", {ExitCode.OK, ExitCode.ROWS_FAILED}),  # clean-up left: a note
    "opendir": ("opendir", "", {ExitCode.OK, ExitCode.ROWS_FAILED}),
    "remove": ("remove", "", {ExitCode.OK, ExitCode.ROWS_FAILED}),
    "rmdir": ("rmdir", "", {ExitCode.OK, ExitCode.ROWS_FAILED}),  # the scratch directory stays: a note says so
}
RUN = ("--protocols", "sftp/paramiko,sftp/openssh", "--sizes", "64K", "--small", "2x4K", "--repeat", "1")
# The one status case whose report draws the real charts (test_hostile_servers.CHARTED_CASE): every upload
# fails, so downloads are charted beside an empty upload side (a refused read leaves nothing to chart at all).
CHARTED_CASE = ("open-incoming", "escapes")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StockSite, HostileSftp]]:
    base = tmp_path_factory.mktemp("hostile-sftp")
    site = StockSite(base)
    site._write_client_side()  # HOME, its (unused) ~/.netrc and CA file
    server = HostileSftp(base / "sftp", site.credentials.user)
    (server.root / "srv").mkdir()
    known_hosts = site.home / "known_hosts"
    known_hosts.write_text(server.known_hosts())
    (site.home / "ssh_config").write_text(server.ssh_config(ALIAS, known_hosts))
    server.start()
    try:
        yield site, server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def forked(hostile: tuple[StockSite, HostileSftp]) -> Iterator[ForkedWorkbench]:
    """The matrix's runs, each a process forked from one that has imported workbench and both SFTP clients
    (tests/forked_workbench.py); the plain server's run is `python -m workbench` itself."""
    runner = ForkedWorkbench(hostile[0].env(), ("workbench.protocols.sftp", "workbench.protocols.openssh_sftp"))
    try:
        yield runner
    finally:
        runner.close()


def _run(
    site: StockSite, server: HostileSftp, case: SftpCase, db: Path, forked: ForkedWorkbench | None = None
) -> tuple[subprocess.CompletedProcess, int]:
    """`workbench run` against the server answering as `case` says (forked from `forked`, else `python -m
    workbench`), and how many requests got the case's status."""
    server.set_case(case)
    args = ("run", f"sftp://{ALIAS}/srv", *RUN, "--warmup", "0", "--db", str(db))
    try:
        proc = forked.run(*args, timeout=240) if forked else run_workbench(site, *args, timeout=240)
        return proc, server.answered
    finally:
        server.set_case()


@pytest.mark.parametrize("message", list(MESSAGES))
@pytest.mark.parametrize("request_name", list(REQUESTS))
def test_a_hostile_status_message_is_one_safe_line_and_the_documented_exit(
    hostile: tuple[StockSite, HostileSftp], forked: ForkedWorkbench, tmp_path: Path, request_name: str, message: str
) -> None:
    site, server = hostile
    db = tmp_path / "runs.sqlite"
    command, match, codes = REQUESTS[request_name]
    proc, answered = _run(site, server, SftpCase((command,), match, CODES[message], MESSAGES[message]), db, forked)
    assert answered >= 1  # the run did meet the hostile status
    shown = proc.stdout + proc.stderr
    _assert_shown_safely(shown)
    assert proc.returncode in codes, (proc.returncode, proc.stderr[-2000:])
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) <= 1 and len(proc.stderr.splitlines()) <= 2, proc.stderr[-2000:]  # one line per error
    assert all(len(line) < 4000 for line in shown.splitlines())  # a megabyte is cut, not printed
    if proc.returncode in (ExitCode.OK, ExitCode.ROWS_FAILED):
        _report_everything(site, tmp_path, db, charts=(request_name, message) == CHARTED_CASE)


def test_hostile_file_names_in_the_scratch_directory(
    hostile: tuple[StockSite, HostileSftp], forked: ForkedWorkbench, tmp_path: Path
) -> None:
    site, server = hostile
    db = tmp_path / "runs.sqlite"
    proc, _ = _run(site, server, SftpCase(odd_names=ODD_NAMES), db, forked)
    _assert_shown_safely(proc.stdout + proc.stderr)
    assert proc.returncode in (ExitCode.OK, ExitCode.ROWS_FAILED), proc.stderr[-2000:]
    _report_everything(site, tmp_path, db, charts=True)


def test_the_server_serves_a_run_unchanged(hostile: tuple[StockSite, HostileSftp], tmp_path: Path) -> None:
    """Without a case the server is a plain SFTP server: a run succeeds, so what fails above is the hostile status."""
    site, server = hostile
    proc, answered = _run(site, server, SftpCase(), tmp_path / "runs.sqlite")
    assert proc.returncode == ExitCode.OK and answered == 0, proc.stderr[-2000:]

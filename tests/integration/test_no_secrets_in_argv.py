"""No password on any process's command line while `workbench run` copies against workbench's own servers
started by `servers up` (the password from credentials.json). A watcher (tests/argv_watch.py) reads
/proc/*/cmdline of every process on the machine (servers, clients, helpers such as curl, smbclient, rsync, ssh)
while the run lasts; it also checks that it saw those programs, so a watch that saw nothing cannot pass. The
password must not reach the run's output, its JSON document or its database either. The same watch over a run
against every stock server by URL is in test_run_url.py, whose one run of every URL it watches.

Nothing here races a timer, so it runs beside other tests (pytest -n): their processes, which the watch reads too,
hold passwords of their own, never this test's freshly generated one.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.argv_watch import ArgvWatch, assert_secret_kept, run_watched
from tests.far_host import servers_up
from tests.stock_urls import StockSite, run_workbench
from workbench.shared import credentials as creds_mod

SMALL_RUN = ("--sizes", "1M", "--small", "3x4K", "--repeat", "1", "--warmup", "0")


def test_the_watch_catches_a_password_on_a_command_line() -> None:
    secret = creds_mod.generate().password
    with ArgvWatch(secret) as watch:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)", secret])
        child.wait(timeout=30)
    assert len(watch.hits) >= 1 and secret not in watch.hits[0] and "<PASSWORD>" in watch.hits[0]


def test_the_watch_reads_a_command_line_when_its_process_execs() -> None:
    # Passes over /proc only on entry and exit: a short-lived child in between is caught by its exec event alone.
    secret = creds_mod.generate().password
    with ArgvWatch(secret, pause_s=30.0) as watch:
        for _ in range(5):
            subprocess.run([sys.executable, "-S", "-c", "pass", secret], check=True, timeout=30)
    assert watch.execs_seen >= 5, "the kernel's process connector sent no exec events"
    assert watch.hits and all(secret not in hit for hit in watch.hits)


@pytest.fixture
def all_servers(tmp_path: Path) -> Iterator[Path]:
    """`servers up` with every server this machine has (serve, sshd, smbd, rsyncd, afpd) on free ports; its
    state dir."""
    with servers_up(tmp_path) as far:
        yield far.state_dir


def test_no_password_on_any_command_line_during_a_served_run(all_servers: Path, tmp_path: Path) -> None:
    state_dir = all_servers
    password = creds_mod.read(state_dir / "credentials.json").password
    site = StockSite(tmp_path / "client")  # only for its client environment: no stock server here
    site.home.mkdir(parents=True)
    served = (
        "--target",
        str(state_dir / "target.json"),
        "--credentials",
        str(state_dir / "credentials.json"),
        "--protocols",
        # every served client that can take a password (scp takes one only from a stock server: test_run_url.py)
        "http,ftp,sftp,rsync,smb,afp",
        *SMALL_RUN,
        "--tcp-duration",
        "0.25",  # the raw-TCP baseline runs (its probe takes the password too) but no figure of it is read
    )
    watched = run_watched(functools.partial(run_workbench, site), password, tmp_path, *served)
    proc = watched.proc
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr)
    seen = watched.watch.programs
    assert {"smbd", "sshd", "rsync", "curl", "smbclient", "ssh"} <= seen, sorted(seen)
    assert_secret_kept(password, watched)

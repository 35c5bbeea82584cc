"""`workbench run URL` end to end against stock servers (workbench/server/stock) on loopback, nothing of
workbench on their side: every client of the URL's protocol copies both ways and verifies, the scratch
directory is gone afterwards (also after SIGTERM mid-run, and a SIGKILLed run's is removed by the next run
against the same URL), the run says it has no raw-TCP baseline unless --iperf3 names one; `doctor URL`;
and the refusals of bad combinations in one line.

The CLI runs as a user would run it: its own HOME with a 0600 ~/.netrc, the password nowhere else (the one run
of every URL takes it from WORKBENCH_PASSWORD instead, with no ~/.netrc, and watches every command line for it);
SSH through a Host alias of the ssh config named by WORKBENCH_SSH_CONFIG, with keys and known_hosts only.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.argv_watch import assert_secret_kept, run_watched
from tests.helpers import free_port
from tests.platform_clients import SERVED_ONLY, expected_clients
from tests.schema_check import assert_valid_run_document
from tests.stock_urls import StockSite, run_workbench, workbench_argv
from workbench.core.stock import clients_for
from workbench.core.store import Store
from workbench.protocols import registry
from workbench.shared.errors import ExitCode
from workbench.shared.urls import parse

SMALL_RUN = ("--sizes", "1M", "--small", "4x4K", "--repeat", "1", "--warmup", "0")


def _scratch_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("workbench-"))


def _document(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    assert_valid_run_document(doc)
    return doc


def _check_rows(doc: dict[str, Any], families: tuple[str, ...]) -> None:
    """Every client of the URL's protocol has rows; those this platform must run (tests/platform_clients.py)
    verified, only the others are 'unavailable:'; upload rows say how; at least one ran per family."""
    expected = expected_clients() - SERVED_ONLY
    labels = [f"{r['protocol']}/{r['client']}" for r in doc["results"]]
    of_url = {e.label for e in clients_for(parse(doc["run"]["server"]["url"]), registry.KNOWN_CLIENTS)}
    assert set(labels) == of_url, (sorted(set(labels)), sorted(of_url))
    ran = [r for r, label in zip(doc["results"], labels, strict=True) if label in expected]
    for row, label in zip(doc["results"], labels, strict=True):
        assert label in expected or (row["error"] or "").startswith("unavailable:"), row
    assert ran, doc["results"]
    for family in families:
        assert any(r["protocol"] == family for r in ran), (family, [r["client"] for r in ran])
    for row in ran:
        assert row["error"] is None and row["verified"], row
        if row["direction"] == "upload":
            assert row["details"]["verified_by"] in ("read back", "rsync checksums"), row["details"]


# Every stock server's kind, with the protocol families whose clients its URL runs.
KINDS: dict[str, tuple[str, ...]] = {
    "smb": ("smb",),
    "ssh": ("sftp", "scp", "rsync"),
    "ftp": ("ftp",),
    "ftps": ("ftp",),
    "rsync": ("rsync",),
    "webdav": ("http",),
    "webdav-digest-https": ("http",),
}


def test_every_url_in_one_run_copies_verifies_removes_its_scratch_and_no_password_shows(
    site: StockSite, tmp_path: Path
) -> None:
    """One run of every stock server's URL (one run each, one after the other, as several URLs are run): every
    client of each URL copies both ways and verifies, each scratch directory is gone afterwards, and each run says
    it has no raw-TCP baseline. The password comes from WORKBENCH_PASSWORD alone (no ~/.netrc), as one user's for
    all of them, and a watch of every process's command line (tests/argv_watch.py) never sees it while the run
    lasts: not on the servers', the clients' nor their helpers' (curl, smbclient, rsync, ssh, scp, sftp), whose
    programs the watch must have seen. Nor is it in the output, the JSON documents or the database."""
    for kind in KINDS:
        site.start(kind)
    (site.home / ".netrc").unlink()  # the password comes from the environment only
    password = site.credentials.password
    urls = [site.url(kind) for kind in KINDS]
    run = functools.partial(run_workbench, site)
    watched = run_watched(run, password, tmp_path, *urls, *SMALL_RUN, WORKBENCH_PASSWORD=password)
    proc = watched.proc
    assert proc.returncode == 0, (proc.stdout[-4000:], proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    seen = watched.watch.programs
    assert {"smbd", "sshd", "rsync", "curl", "smbclient", "ssh", "scp", "sftp"} <= seen, sorted(seen)
    # said at the top of each run, before its table: no raw-TCP baseline, so absolute figures
    heads = proc.stdout.split("┏")[:-1]
    assert len(heads) == len(KINDS), proc.stdout[-4000:]
    for head in heads:
        assert "no raw-TCP baseline" in head and "figures are absolute" in head, head[-2000:]
    documents = [tmp_path / f"run-{index}.json" for index in range(1, len(KINDS) + 1)]
    for (kind, families), doc_path in zip(KINDS.items(), documents, strict=True):
        doc = _document(doc_path)
        server = doc["run"]["server"]
        assert server["kind"] == "stock" and server["url"] == site.url(kind).rstrip("/"), (kind, server)
        assert doc["run"]["scratch_removed"] is True, kind
        assert doc["baseline"]["up_bytes_per_s"] is None and doc["baseline"]["rtt_ms"] is not None, kind
        _check_rows(doc, families)
        if kind == "rsync":
            assert {r["details"].get("verified_by") for r in doc["results"] if r["direction"] == "upload"} == {
                "rsync checksums"
            }
        assert _scratch_dirs(site.root(kind)) == [], kind
        warnings = doc["warnings"]
        assert any("page cache" in w for w in warnings) and any("CPU is unknown" in w for w in warnings), kind
    assert_secret_kept(password, watched, *documents)


@pytest.mark.parametrize("kind", ["smb", "ssh", "ftp", "rsync", "webdav"])
def test_a_missing_url_directory_is_refused_and_never_made(site: StockSite, tmp_path: Path, kind: str) -> None:
    # The scratch directory is made with the utility client's mkdir, which makes missing parents: a mistyped
    # directory in the URL would be created on the server instead of refused.
    site.start(kind)
    url = site.url(kind).rstrip("/") + "/no%20such/dir"
    proc = run_workbench(site, "run", url, *SMALL_RUN, "--files", str(tmp_path / "files"))
    assert proc.returncode == ExitCode.NOT_FOUND, (proc.stdout[-2000:], proc.stderr)
    assert "no such/dir" in proc.stderr.replace("%20", " ") and "Traceback" not in proc.stderr + proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (site.root(kind) / "no such").exists()


def test_several_urls_one_run_each_and_an_iperf3_baseline(site: StockSite, tmp_path: Path) -> None:
    iperf3 = shutil.which("iperf3")
    assert iperf3, "iperf3 not installed: apt-get install iperf3"
    site.start("ftp")
    site.start("webdav")
    port = free_port()
    server = subprocess.Popen(
        [iperf3, "-s", "-B", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _wait_listening(port)
        proc = run_workbench(
            site,
            "run",
            site.url("ftp"),
            site.url("webdav"),
            *SMALL_RUN,
            "--protocols",
            "ftp/ftplib,http/aiohttp",
            "--iperf3",
            str(port),
            "--tcp-duration",
            "1",
            "--files",
            str(tmp_path / "files"),
            "--json",
            str(tmp_path / "run.json"),
            "--db",
            str(tmp_path / "results.db"),
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert proc.returncode == 0, (proc.stdout[-4000:], proc.stderr)
    assert "no raw-TCP baseline" not in proc.stdout
    for index, (kind, label) in enumerate((("ftp", "ftp/ftplib"), ("webdav", "http/aiohttp")), start=1):
        doc = _document(tmp_path / f"run-{index}.json")
        assert [f"{r['protocol']}/{r['client']}" for r in doc["results"]] == [label] * 4
        assert doc["baseline"]["up_bytes_per_s"] and doc["baseline"]["down_bytes_per_s"], doc["baseline"]
        assert doc["baseline"]["details"]["raw_tcp"] == "iperf3"
        assert all(r["pct_of_tcp"] is not None for r in doc["results"])
        assert _scratch_dirs(site.root(kind)) == []
    with Store(tmp_path / "results.db") as store:
        assert [r.rows for r in store.history(10)] == [4, 4]


def _wait_listening(port: int) -> None:
    from workbench.shared.net import port_open

    deadline = time.monotonic() + 10
    while not port_open("127.0.0.1", port):
        assert time.monotonic() < deadline, f"nothing listens on {port}"
        time.sleep(0.05)


def _start_long_run(site: StockSite, tmp_path: Path, db: Path, doc: Path) -> subprocess.Popen[str]:
    """A run of many copies against the FTP server: a quick 1M row first, then 32M copies long enough to be
    stopped mid-way."""
    argv = workbench_argv(
        "run",
        site.url("ftp"),
        "--protocols",
        "ftp/ftplib",
        "--sizes",
        "1M,32M",
        "--repeat",
        "30",
        "--warmup",
        "0",
        "--files",
        str(tmp_path / "files"),
        "--db",
        str(db),
        "--json",
        str(doc),
    )
    return subprocess.Popen(
        argv, env=site.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for_copies(root: Path, proc: subprocess.Popen[str]) -> str:
    """The scratch directory's name, once the 32M row's uploads land in its incoming/ (the 1M row is done)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        for scratch in _scratch_dirs(root):
            if any(p.name == "file-32M.bin" for p in (root / scratch / "incoming").rglob("*")):
                return scratch
        time.sleep(0.05)
    raise AssertionError("no upload landed in the scratch directory within 120 s")


def test_sigterm_mid_run_keeps_rows_and_removes_the_scratch(site: StockSite, tmp_path: Path) -> None:
    site.start("ftp")
    doc = tmp_path / "run.json"
    proc = _start_long_run(site, tmp_path, tmp_path / "results.db", doc)
    try:
        _wait_for_copies(site.root("ftp"), proc)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == ExitCode.TERMINATED, err
    assert "terminated" in err and "Traceback" not in err
    assert _scratch_dirs(site.root("ftp")) == []
    written = _document(doc)
    assert written["run"]["scratch_removed"] is True and "finished_utc" in written["run"]
    finished = written["results"]
    assert [(r["file_set"], r["direction"]) for r in finished] == [("1M", "upload")], finished
    assert finished[0]["verified"] and len(finished[0]["samples"]) == 30


def test_a_killed_runs_scratch_is_removed_by_the_next_run_against_the_url(site: StockSite, tmp_path: Path) -> None:
    site.start("ftp")
    site.start("webdav")
    db = tmp_path / "results.db"
    proc = _start_long_run(site, tmp_path, db, tmp_path / "killed.json")
    try:
        left = _wait_for_copies(site.root("ftp"), proc)
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert _scratch_dirs(site.root("ftp")) == [left]
    args = (*SMALL_RUN, "--directions", "upload", "--files", str(tmp_path / "files"), "--db", str(db))
    # another URL's run leaves it alone: it is not that server's
    other = run_workbench(site, "run", site.url("webdav"), "--protocols", "http/aiohttp", *args)
    assert other.returncode == 0, other.stderr
    assert _scratch_dirs(site.root("ftp")) == [left]
    again = run_workbench(site, "run", site.url("ftp"), "--protocols", "ftp/ftplib", *args)
    assert again.returncode == 0, again.stderr
    assert _scratch_dirs(site.root("ftp")) == []
    with Store(db) as store:
        killed = store.load(1)
    assert killed.meta["server"]["scratch"] == left and killed.meta.get("scratch_removed") is True


def test_doctor_url(site: StockSite) -> None:
    site.start("smb")
    site.start("ssh")
    for kind in ("smb", "ssh"):
        proc = run_workbench(site, "doctor", site.url(kind))
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        assert "reachable: yes" in proc.stdout and "login: ok" in proc.stdout, proc.stdout
    assert "smb/pysmb" in run_workbench(site, "doctor", site.url("smb")).stdout
    wrong = run_workbench(site, "doctor", site.url("smb"), WORKBENCH_PASSWORD="wrong-password")
    assert wrong.returncode == ExitCode.AUTH and "login: failed" in wrong.stdout, wrong.stdout
    assert "wrong-password" not in wrong.stdout + wrong.stderr
    closed = run_workbench(site, "doctor", f"smb://127.0.0.1:{free_port()}/plain")
    assert closed.returncode == ExitCode.NETWORK and "reachable: no" in closed.stdout, closed.stdout
    # nothing was written on the server
    assert _scratch_dirs(site.root("smb")) == [] and list(site.root("smb").iterdir()) == []


def _one_line_refusal(proc: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_refusals_in_one_line(site: StockSite, tmp_path: Path) -> None:
    site.home.mkdir(parents=True)
    url = f"ftp://127.0.0.1:{free_port()}/"
    _one_line_refusal(run_workbench(site, "run", url, "--host", "127.0.0.1"), ExitCode.USAGE, "--host", "URL")
    _one_line_refusal(run_workbench(site, "run", url, "--target", "t.json"), ExitCode.USAGE, "--target")
    _one_line_refusal(run_workbench(site, "run", url, "--credentials", "c.json"), ExitCode.USAGE, "WORKBENCH_PASSWORD")
    _one_line_refusal(run_workbench(site, "run", "--host", "127.0.0.1", "--iperf3", "5201"), ExitCode.USAGE, "--iperf3")
    _one_line_refusal(run_workbench(site, "run", url, "--iperf3", "nas:"), ExitCode.USAGE, "--iperf3")
    _one_line_refusal(run_workbench(site, "run", url, "--protocols", "smb"), ExitCode.USAGE, "no client for ftp://")
    line = _one_line_refusal(
        run_workbench(site, "run", "smb://alice:s3cret-pw@127.0.0.1/plain"), ExitCode.USAGE, "password"
    )
    assert "s3cret-pw" not in line
    _one_line_refusal(run_workbench(site, "run", "gopher://127.0.0.1/"), ExitCode.USAGE, "scheme")
    # no password anywhere and no terminal to ask on: the four ways, before any traffic
    no_netrc = run_workbench(site, "run", url, *SMALL_RUN, HOME=str(tmp_path))
    _one_line_refusal(no_netrc, ExitCode.AUTH, "WORKBENCH_PASSWORD", "netrc", "keyring", "prompt")
    # a server that does not answer: one line, the network's exit code
    closed = run_workbench(site, "run", url, *SMALL_RUN, WORKBENCH_PASSWORD="pw")
    _one_line_refusal(closed, ExitCode.NETWORK, "127.0.0.1")
    assert not os.path.exists(tmp_path / "files")

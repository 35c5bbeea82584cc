"""`workbench lab --servers stock` end to end: only stock daemons on the server host (nothing of workbench there),
every available client measured by URL over the emulated link with iperf3 as the raw-TCP baseline, then nothing
left behind."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import lab_unavailable
from tests.lab.concurrent_labs import ConcurrentLabs, LabJob
from tests.platform_clients import SERVED_ONLY, expected_clients
from tests.schema_check import assert_valid_run_document
from workbench.core.stock import clients_for
from workbench.lab.stock_daemons import STOCK_SERVICES
from workbench.protocols import registry
from workbench.shared import procs
from workbench.shared.urls import parse

REPO = Path(__file__).resolve().parents[2]
WORKBENCH_CODE = str(REPO / "workbench")
LINK_RATE_BYTES_PER_S = 1e9 / 8  # the gige preset: fast, so the run stays short
# One run per stock daemon, named by its URL's scheme (the --json PATH-SCHEME.json documents).
SCHEMES = {"http": "http", "ftp": "ftp", "ssh": "sftp", "rsync": "rsync", "smb": "smb", "afp": "afp"}


def _lab_namespaces(owner: int) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.startswith(f"wb-lab-{owner}-")]


def _server_processes(owner: int) -> dict[int, list[str]]:
    """{pid: argv} of every process in the server namespace of the lab that `owner` runs, `owner` left out: the
    lab itself steps into a host's namespace for a moment to read its interfaces and counters (netlink answers
    only there), and that reading is the measurement, not a process of the server host."""
    found: dict[int, list[str]] = {}
    for ns in (n for n in _lab_namespaces(owner) if n.endswith("-s")):
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in (p for p in pids if p != str(owner)):
            try:
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue  # gone meanwhile (a port check, a finished session)
            if raw:  # a zombie has no command line
                found[int(pid)] = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    return found


def _runs_workbench(argv: list[str]) -> bool:
    """Whether a process runs workbench's own code: its module (`-m workbench...`) or a file of its package."""
    modules = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-m"]
    return (
        any(m == "workbench" or m.startswith("workbench.") for m in modules)
        or any(a.startswith(WORKBENCH_CODE) for a in argv)
        or any(os.path.basename(a) == "workbench" for a in argv[:2])  # the console script
    )


EVERY_CLIENT = "test_stock_lab_measures_every_client_against_stock_daemons_only"


@dataclass(frozen=True)
class StockRun:
    """A whole stock lab run: its exit code and output, the server host's processes seen while it ran, and what
    was left the moment it had exited (its namespaces, those processes still alive, its work directories)."""

    returncode: int
    output: str
    seen: dict[int, list[str]]
    namespaces_left: list[str]
    alive: list[int]
    work_left: list[Path]


def _stock_run(folder: Path) -> StockRun:
    # a short TMPDIR of this run's own: the lab's work directory (served root, keys, netrc, ssh config) lives
    # there, so what it leaves can be seen; smbd's socket paths under a long pytest path would overflow AF_UNIX
    lab_tmp = Path(tempfile.mkdtemp(prefix="wbt-"))
    env = {**os.environ, "WORKBENCH_HOME": str(folder / "home"), "COLUMNS": "200", "TMPDIR": str(lab_tmp)}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    for name in ("WORKBENCH_PASSWORD", "WORKBENCH_USER", "WORKBENCH_SSH_CONFIG", "NETRC"):
        env.pop(name, None)  # the lab gives the login itself, as files a user would have
    argv = [sys.executable, "-m", "workbench", "lab", "--servers", "stock", "--link", "gige"]
    argv += ["--sizes", "1M", "--small", "5x8K", "--repeat", "1", "--warmup", "0", "--tcp-duration", "1"]
    argv += ["--goodput-duration", "0"]  # the baseline is iperf3's; the link's own meter is not read here
    argv += ["--json", str(folder / "lab.json")]
    seen: dict[int, list[str]] = {}
    try:
        with open(folder / "out.txt", "w+") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
            try:
                deadline = time.monotonic() + 600  # beside other labs: twice what it takes alone under load
                while proc.poll() is None and time.monotonic() < deadline:
                    seen.update(_server_processes(proc.pid))  # sampled all along the run
                    time.sleep(0.3)
                assert proc.poll() is not None, "the stock lab did not finish within 600 s"
            finally:
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(timeout=60)
            out.seek(0)
            output = out.read()
        # read at once: the tests read it after the other concurrent runs, when a pid may be another's
        alive = [pid for pid in seen if procs.pid_alive(pid)]  # a zombie init has yet to reap runs nothing
        left = list(lab_tmp.glob("workbench-lab-*"))
        return StockRun(proc.returncode, output, seen, _lab_namespaces(proc.pid), alive, left)
    finally:
        shutil.rmtree(lab_tmp, ignore_errors=True)


@pytest.mark.lab
@pytest.mark.concurrent_lab
@pytest.mark.skipif(lab_unavailable() is not None, reason=f"lab unavailable: {lab_unavailable()}")
def test_stock_lab_measures_every_client_against_stock_daemons_only(concurrent_labs: ConcurrentLabs) -> None:
    tmp_path, run = concurrent_labs.result("stock every client")
    output, seen = run.output, run.seen
    assert run.returncode == 0, output[-4000:]

    # Nothing of workbench ran on the server host; what did run there were the stock daemons.
    assert not [argv for argv in seen.values() if _runs_workbench(argv)], seen
    # sshd retitles itself ("sshd: /path/sshd_config [listener] ..."): the program is the first word
    programs = {os.path.basename(argv[0].split()[0]).rstrip(":") for argv in seen.values()}
    assert {"smbd", "sshd", "rsync", "iperf3", "netatalk"} <= programs, programs
    assert any("wsgidav" in " ".join(argv) for argv in seen.values()), seen
    assert any(a.endswith("ftpd.py") for argv in seen.values() for a in argv), seen

    expected = expected_clients() - SERVED_ONLY  # never what loaded
    available = [e for e in registry.KNOWN_CLIENTS if e.label in expected]
    for service in STOCK_SERVICES:
        path = tmp_path / f"lab-{SCHEMES[service]}.json"
        assert path.exists(), f"no run for the stock {service} server: {output[-3000:]}"
        doc = json.loads(path.read_text())
        assert_valid_run_document(doc)
        server = doc["run"]["server"]
        assert server["kind"] == "stock" and parse(server["url"]).service == service, server
        # the lab's link and its emulator's figures, as in a served lab run
        assert doc["link"]["preset"] == "gige" and doc["link"]["emulator"]["seconds"] > 0, doc["link"]

        # The raw-TCP baseline is the plain iperf3 on the server host, both ways, and no faster than the link.
        base = doc["baseline"]
        assert base["error"] is None and base["details"]["raw_tcp"] == "iperf3", base
        for key in ("up_bytes_per_s", "down_bytes_per_s"):
            assert 0 < base[key] <= 1.02 * LINK_RATE_BYTES_PER_S, base
            assert base[key] == base[f"iperf3_{key}"]
        # iperf3's own connections, seen from the client's side: it sends uploads and receives downloads
        sides = {d: (t["side"], t["host"]) for d, t in base["tcp"].items()}
        assert sides == {"upload": ("sender", "client"), "download": ("receiver", "client")}, base["tcp"]
        assert base["tcp"]["upload"]["bytes_seen"] > 0 and base["tcp"]["download"]["bytes_seen"] > 0

        # Every client of this protocol that can run here copied every set both ways, verified.
        rows = doc["results"]
        for entry in clients_for(parse(server["url"]), available):
            for direction in ("upload", "download"):
                for file_set in ("1M", "5x8K"):
                    got = [
                        r
                        for r in rows
                        if f"{r['protocol']}/{r['client']}" == entry.label
                        and r["direction"] == direction
                        and r["file_set"] == file_set
                    ]
                    assert len(got) == 1, f"{entry.label} {direction} {file_set}: {got}"
                    row = got[0]
                    assert row["error"] is None and row["verified"], row
                    assert 0 < row["median_bytes_per_s"] <= 1.02 * LINK_RATE_BYTES_PER_S, row
                    # no workbench on a stock server: each copy is watched on this side, which says which
                    side = "sender" if direction == "upload" else "receiver"
                    assert row["tcp"]["side"] == side and row["tcp"]["host"] == "client", row["tcp"]
        failed = [r for r in rows if r["error"] and not r["error"].startswith("unavailable:")]
        assert not failed, failed

    # Everything went: namespaces, the daemons seen, the lab's work directory with its root, keys and netrc.
    assert not run.namespaces_left, run.namespaces_left
    assert not run.alive, {pid: seen[pid] for pid in run.alive}
    assert not run.work_left, run.work_left


# A shell starting the tests in the background hands its children SIGINT ignored; Ctrl-C must reach the lab. Reset
# in a Python of its own that then becomes the lab's, not in a preexec_fn: this runs in one of the pool's threads,
# and a forked child of a threaded process may hang on a lock another thread held.
DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
)


INTERRUPTED = "test_stock_lab_interrupted_mid_copy_leaves_nothing"
SIGNALS = {"ctrl-c": (signal.SIGINT, 130), "sigterm": (signal.SIGTERM, 143)}


@dataclass(frozen=True)
class StockInterrupted:
    """A stock lab stopped by a signal during its first upload: its exit code, its output, the server host's
    processes seen while it ran, and its own temporary folder (TMPDIR: its work directory and scratch)."""

    returncode: int
    output: str
    seen: dict[int, list[str]]
    lab_tmp: Path
    owner: int


def _interrupt_mid_copy(sig: int, folder: Path) -> StockInterrupted:
    lab_tmp = Path(tempfile.mkdtemp(prefix="wbt-"))
    env = {**os.environ, "WORKBENCH_HOME": str(folder / "home"), "PYTHONUNBUFFERED": "1", "TMPDIR": str(lab_tmp)}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    # 64 MiB copies over 200 Mbit/s take about 3 s each: the signal comes during the first
    argv = [sys.executable, "-c", DEFAULT_SIGINT, sys.executable, "-m", "workbench"]
    argv += ["lab", "--servers", "stock", "--link", "gige", "--rate", "200mbit"]
    argv += ["--protocols", "http/aiohttp", "--sizes", "64M", "--small", "none", "--repeat", "3", "--warmup", "0"]
    argv += ["--tcp-duration", "1", "--goodput-duration", "0"]
    seen: dict[int, list[str]] = {}
    log = folder / "out.txt"
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)

    def upload_under_way() -> bool:  # a 64 MiB upload is landing in the run's scratch directory on the server host
        landing = lab_tmp.glob("workbench-lab-*/root/workbench-*/incoming/**/*")
        return any(p.is_file() and 0 < p.stat().st_size < 64 << 20 for p in landing)

    try:
        deadline = time.monotonic() + 120
        while not upload_under_way():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no upload under way within 120 s: " + log.read_text()[-3000:]
            seen.update(_server_processes(proc.pid))
            time.sleep(0.1)
        seen.update(_server_processes(proc.pid))
        proc.send_signal(sig)
        proc.wait(timeout=90)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(lab_tmp, ignore_errors=True)  # the test never gets it to look at
        raise
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return StockInterrupted(proc.returncode, log.read_text(), seen, lab_tmp, proc.pid)


def concurrent_lab_jobs(items: list[pytest.Item], tmp_path_factory: pytest.TempPathFactory) -> list[LabJob]:
    """The selected stock runs, beside the other concurrent lab runs (tests/lab/conftest.py): the whole run shows
    which daemons ran where, that every client copied and verified, and that nothing is left; each interruption
    shows its own lab's teardown (its namespaces, the processes it started, its TMPDIR). Neither reads a figure
    that a busy machine could push the wrong way: rates are only bounded by the link, from above."""
    jobs = []
    if any(getattr(item, "originalname", "") == EVERY_CLIENT for item in items):
        folder = tmp_path_factory.mktemp("stock-every-client")
        # one lab, but six runs by URL one after the other: as long as a story's labs, so it starts among them
        jobs.append(LabJob("stock every client", folder, functools.partial(_stock_run, folder), labs=3))
    for item in items:
        if getattr(item, "originalname", "") == INTERRUPTED and hasattr(item, "callspec"):
            name = item.callspec.id
            folder = tmp_path_factory.mktemp(f"stock-{name}")
            jobs.append(
                LabJob(f"stock {name}", folder, functools.partial(_interrupt_mid_copy, SIGNALS[name][0], folder))
            )
    return jobs


@pytest.mark.lab
@pytest.mark.concurrent_lab
@pytest.mark.skipif(lab_unavailable() is not None, reason=f"lab unavailable: {lab_unavailable()}")
@pytest.mark.parametrize("name", list(SIGNALS))
def test_stock_lab_interrupted_mid_copy_leaves_nothing(name: str, concurrent_labs: ConcurrentLabs) -> None:
    _, run = concurrent_labs.result(f"stock {name}")
    _, code = SIGNALS[name]
    try:
        output, seen = run.output, run.seen
        assert run.returncode == code, output[-3000:]
        assert {"stock-webdav", "stock-iperf3"} <= {w for line in output.splitlines() for w in line.split()[:1]}
        assert any("wsgidav" in " ".join(argv) for argv in seen.values()), seen  # the daemons were seen running
        assert not _lab_namespaces(run.owner)
        alive = [pid for pid in seen if procs.pid_alive(pid)]  # a zombie init has yet to reap runs nothing
        assert not alive, {pid: seen[pid] for pid in alive}
        # the work directory (root with the scratch directory, keys, netrc, ssh config) and the download scratch
        assert not list(run.lab_tmp.iterdir()), list(run.lab_tmp.iterdir())
    finally:
        shutil.rmtree(run.lab_tmp, ignore_errors=True)

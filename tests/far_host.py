"""A far host as users start it: `servers up` on 127.0.0.1 with free ports, a private root and state
(`servers_up`: the `far_host` fixture in tests/conftest.py, the fault matrix and the argv watch use it), and ways
to watch a `workbench run` against it from outside (its database, the far host's upload directory, its
processes)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import free_port, started_by_this_worker
from workbench.server.daemons import supervisor
from workbench.shared import procs
from workbench.shared.net import listening

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"


@dataclass
class FarHost:
    root: Path
    state_dir: Path
    ports: dict[str, int]
    pids: dict[str, int]  # server name -> pid, as `servers up` recorded them

    def run_args(self) -> list[str]:
        return [
            "--target",
            str(self.state_dir / "target.json"),
            "--credentials",
            str(self.state_dir / "credentials.json"),
        ]

    def sessions(self, server: str = "sshd") -> list[int]:
        """The per-connection processes a server runs (sshd forks one tree per login)."""
        return procs.descendants(self.pids[server])


# The ports each server of `servers up` listens on (serve's HTTP, FTP, raw-TCP probe and iperf3).
PORTS_OF = {
    "serve": ("http", "ftp", "tcp", "iperf3"),
    "sshd": ("ssh",),
    "smbd": ("smb",),
    "rsyncd": ("rsync",),
    "afpd": ("afp",),
}


@contextlib.contextmanager
def servers_up(base: Path, only: list[str] | None = None) -> Iterator[FarHost]:
    """`servers up` (every server, or `only` these) with its root and state under `base` and free ports on
    127.0.0.1; serve's iperf3 listening before the block starts; `servers down` when it ends."""
    root = base / "far-root"
    root.mkdir()
    state_dir = base / "far-state"
    ports = {port: free_port(HOST) for name in (only or PORTS_OF) for port in PORTS_OF[name]}
    state = supervisor.up(root, HOST, state_dir, only=only, ports=ports)
    try:
        pids = {s["name"]: int(s["pid"]) for s in state.servers if s.get("pid")}
        if "iperf3" in ports:
            settle_serve(ports)
        yield FarHost(root, state_dir, ports, pids)
    finally:
        supervisor.down(state_dir)


def settle_serve(ports: dict[str, int], timeout_s: float = 30) -> None:
    """Wait until serve's iperf3 listens (a client's baseline cross-checks with it), as every other port of
    serve does by then."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if listening(ports["iperf3"]):
            return
        time.sleep(0.02)
    raise AssertionError(f"serve's iperf3 never listened on {HOST}:{ports['iperf3']}")


def start_workbench(*args: str, home: Path, tmp_dir: Path | None = None) -> subprocess.Popen:
    """`workbench ARGS` in the background, output unbuffered so a test can follow its progress.

    With tmp_dir, the run's temporary files and mount points go there (TMPDIR), so a test can tell
    what this run left from what other runs on the machine are doing.
    """
    env = {**os.environ, "WORKBENCH_HOME": str(home), "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    if tmp_dir is not None:
        tmp_dir.mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = str(tmp_dir)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    env.pop("WORKBENCH_PASSWORD", None)
    return subprocess.Popen(
        [sys.executable, "-m", "workbench", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def saved_rows(db: Path) -> int:
    """Rows the run has committed so far (0 while the database does not exist yet)."""
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        try:
            return int(conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])
        except sqlite3.OperationalError:  # the tables are not created yet
            return 0


def wait_for(what: str, condition: Callable[[], bool], proc: subprocess.Popen, timeout_s: float = 120) -> None:
    """Poll `condition` until true; fail with the run's output if the run ends or time runs out first."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the run ended (exit {proc.returncode}) before {what}:\n{out[-3000:]}\n{err[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"no {what} within {timeout_s} s:\n{out[-3000:]}\n{err[-3000:]}")
        time.sleep(0.005)


def bytes_read(pid: int) -> int:
    """Bytes a process has read so far (files, pipes and sockets alike), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def with_program(name: str, pids: list[int]) -> list[int]:
    """Those of pids whose program (argv[0]) ends with name."""
    found = []
    for pid in pids:
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if argv0.decode(errors="replace").endswith(name):
            found.append(pid)
    return found


def fuse_mounts(source_contains: str, kind: str = "fuse.sshfs") -> set[str]:
    """Mount points of `kind` whose source names source_contains (e.g. one far host's root)."""
    found = set()
    for line in Path("/proc/mounts").read_text().splitlines():
        source, point, fstype = line.split()[:3]
        if fstype == kind and source_contains in source:
            found.add(point)
    return found


def fleet_members() -> list[int]:
    """Pids of fleet members (`workbench fleet-member`, the far side of a fleet's SSH sessions) this test worker
    started, on this machine; the controller's own ssh processes, whose remote command names it too, are not
    members."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            b"fleet-member" in argv
            and Path(argv[0].decode(errors="replace")).name != "ssh"
            and started_by_this_worker(int(pid))
        ):
            found.append(int(pid))
    return found

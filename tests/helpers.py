"""Small helpers shared by the tests (not fixtures: plain functions)."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

from workbench.server.daemons.base import ManagedServer, ServerContext
from workbench.shared.credentials import Credentials, generate

# pytest-xdist names each worker (gw0, gw1, ...) in this variable; every process a worker starts inherits it, and
# the login sshds hand it to their sessions (sshd_setenv), so a process can be told apart from another worker's.
XDIST_WORKER_ENV = "PYTEST_XDIST_WORKER"


# bash runs ~/.bashrc before a command sshd hands it (it sees SSH_CLIENT) unless it is a nested shell: with SHLVL=1
# in the session's environment it counts itself one. The tests' SSH sessions run their commands without the login
# user's shell start-up, which costs time in every session (whatever ~/.bashrc holds) and which no test depends
# on; nothing else changes.
NO_LOGIN_RC_ENV = "SHLVL=1"


def sshd_setenv() -> str:
    """What a test sshd's `SetEnv` adds: no ~/.bashrc (NO_LOGIN_RC_ENV), and this worker's name (under pytest -n)."""
    worker = os.environ.get(XDIST_WORKER_ENV)
    return f" {NO_LOGIN_RC_ENV}" + (f" {XDIST_WORKER_ENV}={worker}" if worker else "")


def started_by_this_worker(pid: int) -> bool:
    """Whether pid was started by this test process or what it started (its environment names this worker), so a
    check for leftovers sees this worker's runs and not those of tests running beside it. Outside pytest -n every
    process counts. Read from the environment, not the parentage: an orphaned leftover has lost its parent."""
    worker = os.environ.get(XDIST_WORKER_ENV)
    if not worker:
        return True
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{XDIST_WORKER_ENV}={worker}".encode() in environ.split(b"\0")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now on host (for servers that must be told their port up front)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def write_random(path: Path, size: int) -> bytes:
    """Write `size` random bytes to path and return them."""
    data = os.urandom(size)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def ensure_running(server: ManagedServer) -> ManagedServer:
    """(Re)start a session-scoped server that an earlier test stopped or killed."""
    if server.proc is None or server.proc.poll() is not None:
        server.stop()
        server.start()
    return server


def loopback_context(base: Path, service: str, creds: Credentials | None = None) -> ServerContext:
    """Private root and state under `base`, one free loopback port for `service`."""
    root = base / "root"
    root.mkdir(parents=True, exist_ok=True)
    return ServerContext(
        root=root,
        bind="127.0.0.1",
        state_dir=base / "state",
        credentials=creds or generate(),
        ports={service: free_port("127.0.0.1")},
    )


def assert_lab_rtt_honest(measured_ms: float, target_ms: float, notes: str | list[str]) -> None:
    """The lab's delay line is in place and a link slower than asked says so.

    Never faster than asked beyond wake-up noise (the line is never trimmed too far); slower only with a
    note, since a neighbour's CPU load on a 2-core VM can add milliseconds. How close the RTT comes on a
    quiet machine is a benchmark's question (bench/bench_lab_link.py), not a test's.
    """
    assert measured_ms >= target_ms - 0.3, f"idle RTT {measured_ms:.3f} ms, below the {target_ms} ms asked for"
    if measured_ms > target_ms + 0.3:
        text = notes if isinstance(notes, str) else " ".join(notes)
        assert "RTT" in text, f"idle RTT {measured_ms:.3f} ms for {target_ms} ms and no note says so: {notes!r}"


def lab_unavailable() -> str | None:
    """Why the lab (root, namespaces, TUN) cannot run here, or None."""
    from workbench.lab import check_available
    from workbench.shared.errors import UnavailableError

    try:
        check_available()
    except UnavailableError as exc:
        return exc.one_line()
    return None


def sum16(data: bytes) -> int:
    """The ones' complement sum of `data` as 16-bit words, folded (RFC 1071), worked out here independently of
    the lab's own arithmetic so the tests check it: 0xFFFF over a header with a valid checksum."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


# The tables a schema-1 workbench made in its results database: no verdict or cleanup column, the median named
# median_bps (the tests of migration and of reading an old file add their own rows).
SCHEMA_1_TABLES = """
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, schema INTEGER NOT NULL, started_utc TEXT NOT NULL,
    label TEXT, meta TEXT NOT NULL, baseline TEXT, link TEXT, window_sweep TEXT, warnings TEXT, finished_utc TEXT);
CREATE TABLE results (run_id INTEGER NOT NULL REFERENCES runs(id), idx INTEGER NOT NULL, protocol TEXT NOT NULL,
    client TEXT NOT NULL, direction TEXT NOT NULL, file_set TEXT NOT NULL, median_bps REAL, doc TEXT NOT NULL,
    PRIMARY KEY (run_id, idx));
"""

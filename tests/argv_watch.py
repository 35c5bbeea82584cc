"""A watch over every process's command line on this machine while a test runs: a secret seen in one is a hit.

Used wherever a password or key must reach a server but no command line (`workbench run`, the clients and
their helpers such as curl, smbclient, rsync, ssh). `programs` lists what the watch saw, so a test can check
that the processes it cares about lived long enough to be looked at, and `scans` that the watch ran at all:
a watch that saw nothing cannot pass.

Where the kernel's process connector answers (root, Linux), the watch reads a command line the moment its
process execs, and passes over the whole of /proc only every `pause_s` (for a command line rewritten after
its exec, and for any event the connector dropped). Elsewhere it passes over /proc every `pause_s` alone.
Waiting for exec events costs nothing while nothing starts; re-reading every process's command line every
2 ms burnt most of a core for the whole of a long test.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SCAN_PAUSE_S = 0.002  # between two passes over /proc without exec events: a helper (an askpass, an ssh) lives ~10 ms
EVENT_RESCAN_S = 0.1  # between two passes over /proc beside exec events

# linux/connector.h and linux/cn_proc.h: the process-events channel of the connector netlink family
_NETLINK_CONNECTOR = 11
_CN_IDX_PROC = 1
_CN_VAL_PROC = 1
_PROC_CN_MCAST_LISTEN = 1
_PROC_EVENT_EXEC = 0x00000002
_NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, sequence, port
_CN_MSG = struct.Struct("=IIIIHH")  # idx, val, sequence, ack, payload length, flags
_EVENT_HEADER = struct.Struct("=IIQ")  # what, cpu, timestamp (ns)
_EXEC_EVENT = struct.Struct("=II")  # pid (the thread's), tgid (the process's)
_NLMSG_DONE = 3


def _read(path: str) -> bytes:
    """The whole file, read with plain system calls: half the CPU of open() with its buffered file object, for a
    watch that reads every process's command line hundreds of times a second."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def exec_events() -> socket.socket | None:
    """A socket on which the kernel announces every exec on this machine; None where it will not (not root,
    no process connector, not the initial network namespace)."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_CONNECTOR)
    except (OSError, AttributeError):
        return None
    try:
        sock.bind((0, _CN_IDX_PROC))
        listen = struct.pack("=I", _PROC_CN_MCAST_LISTEN)
        message = _CN_MSG.pack(_CN_IDX_PROC, _CN_VAL_PROC, 0, 0, len(listen), 0) + listen
        sock.send(_NLMSG_HEADER.pack(_NLMSG_HEADER.size + len(message), _NLMSG_DONE, 0, 0, 0) + message)
    except OSError:
        sock.close()
        return None
    return sock


def exec_pids(datagram: bytes) -> list[int]:
    """The processes that exec'd, from one datagram of the process connector (other events are skipped)."""
    pids = []
    offset = 0
    while offset + _NLMSG_HEADER.size <= len(datagram):
        length = _NLMSG_HEADER.unpack_from(datagram, offset)[0]
        event_at = offset + _NLMSG_HEADER.size + _CN_MSG.size
        if length < _NLMSG_HEADER.size or event_at + _EVENT_HEADER.size + _EXEC_EVENT.size > len(datagram):
            break
        if _EVENT_HEADER.unpack_from(datagram, event_at)[0] == _PROC_EVENT_EXEC:
            pids.append(_EXEC_EVENT.unpack_from(datagram, event_at + _EVENT_HEADER.size)[1])
        offset += (length + 3) & ~3
    return pids


class ArgvWatch:
    """Reads every process's command line until stopped; keeps any that holds the secret, and the programs seen."""

    def __init__(self, secret: str, pause_s: float = SCAN_PAUSE_S) -> None:
        """`pause_s` between passes over /proc when there are no exec events (the default catches a helper of
        ~10 ms); with them, passes come at least every EVENT_RESCAN_S. A long run's own processes (a fleet's ssh
        sessions and members) are seen with a longer one, at a fraction of the CPU."""
        self.secret = secret.encode()
        self.pause_s = pause_s
        self.hits: list[str] = []
        self.programs: set[str] = set()
        self.scans = 0
        self.execs_seen = 0
        self._events = exec_events()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        if self._events is None:
            while not self._stop.wait(self.pause_s):
                self.scan()
            return
        # Passes keep their pace however many execs arrive (the events are machine-wide and may never pause), and
        # the wait for events is short enough that a stop is seen within it.
        rescan_s = max(self.pause_s, EVENT_RESCAN_S)
        next_scan = time.monotonic() + rescan_s
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_scan:
                self.scan()
                next_scan = now + rescan_s
            readable, _, _ = select.select([self._events], [], [], min(next_scan - now, EVENT_RESCAN_S))
            if not readable:
                continue
            try:
                datagram = self._events.recv(1 << 16)
            except OSError:  # ENOBUFS: the kernel dropped events; a pass over /proc sees what is still there
                next_scan = 0.0
                continue
            for pid in exec_pids(datagram):
                self.execs_seen += 1
                self._look(str(pid))

    def _look(self, pid: str) -> None:
        try:
            argv = _read(f"/proc/{pid}/cmdline")
        except OSError:
            return  # gone meanwhile
        if not argv:
            return  # a zombie or a kernel thread
        words = argv.split(b"\0")
        self.programs.add(os.path.basename(words[0].decode(errors="replace")))
        if self.secret in argv:
            shown = argv.replace(self.secret, b"<PASSWORD>").replace(b"\0", b" ").decode(errors="replace")
            self.hits.append(f"pid {pid}: {shown[:300]}")

    def scan(self) -> None:
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                self._look(entry.name)
        self.scans += 1

    def __enter__(self) -> ArgvWatch:
        self.scan()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if self._thread.is_alive():
            raise RuntimeError("the argv watch did not stop within 30 s")
        self.scan()
        if self._events is not None:
            with contextlib.suppress(OSError):
                self._events.close()


@dataclass(frozen=True)
class WatchedRun:
    """A `workbench run` watched for a secret on every command line, and where it wrote its results."""

    proc: subprocess.CompletedProcess
    watch: ArgvWatch
    db: Path
    document: Path


def run_watched(
    run: Callable[..., subprocess.CompletedProcess], secret: str, out: Path, *args: str, **env: str
) -> WatchedRun:
    """`run("run", *args, --files/--json/--db under out, **env)` (a run_workbench bound to its site) while an
    ArgvWatch for `secret` reads every command line; the secret must then be in none of its results either:
    checked by assert_secret_kept."""
    db, document = out / "results.db", out / "run.json"
    with ArgvWatch(secret) as watch:
        proc = run("run", *args, "--files", str(out / "files"), "--json", str(document), "--db", str(db), **env)
    return WatchedRun(proc, watch, db, document)


def assert_secret_kept(secret: str, watched: WatchedRun, *documents: Path) -> None:
    """The secret reached no command line, nor the run's output, database or JSON documents."""
    assert watched.watch.hits == []
    for text in (watched.proc.stdout, watched.proc.stderr):
        assert secret not in text
    for path in (watched.db, *(documents or (watched.document,))):
        assert secret.encode() not in path.read_bytes(), path

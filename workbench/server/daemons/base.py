"""One small interface for a supervised server process (sshd, smbd, rsync daemon, `workbench serve`).

Each server writes its private config and state under ``ctx.state_dir / name``, never touches a
system-wide file, and is started as its own process group so `down`, errors and Ctrl-C can stop
all of it. Readiness is checked by polling its port, never by sleeping.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from workbench.shared import procs
from workbench.shared.credentials import Credentials
from workbench.shared.errors import NetworkError, NotFoundError
from workbench.shared.net import listener, listening, port_open
from workbench.shared.procs import descendants

# How long a port still held at a server's start is looked at again: the socket of a process stopped or killed just
# before (a restart) goes when the kernel has ended that process, a moment later
PORT_RELEASE_WAIT_S = 2.0


@dataclass(frozen=True)
class ServerContext:
    root: Path  # the served directory; every server confines clients to it
    bind: str  # address every server binds to
    state_dir: Path  # private state; a server uses state_dir / <its name>
    credentials: Credentials
    ports: Mapping[str, int] = field(default_factory=dict)
    share: str = "workbench"  # SMB share and rsync module name
    netns: str | None = None  # run inside this network namespace (the lab's server host)
    smb_server: Mapping[str, str] = field(default_factory=dict)  # smbd.SmbServerOptions.to_json(); {}: defaults
    # afpd also serves the reference volume to its password-less account (daemons/afpd.py: REFERENCE_VOLUME)
    afp_reference: bool = False

    def dir_for(self, name: str) -> Path:
        path = self.state_dir / name
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path


class ManagedServer(ABC):
    name: ClassVar[str]  # "sshd", "smbd", "rsyncd", "serve"
    services: ClassVar[tuple[str, ...]]  # port keys it listens on ("ssh",), ("http", "ftp", "tcp")
    binary: ClassVar[str | None] = None  # executable it needs
    install_hint: ClassVar[str] = ""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self.dir = ctx.dir_for(self.name)
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if cls.binary and not (shutil.which(cls.binary) or os.path.exists(cls.binary)):
            return f"{os.path.basename(cls.binary)} not installed: {cls.install_hint}"
        return None

    @abstractmethod
    def prepare(self) -> None:
        """Write private config, keys and users (secrets through files or stdin, never argv)."""

    @abstractmethod
    def command(self) -> list[str]:
        """The argv that runs the server in the foreground."""

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    @property
    def log_path(self) -> Path:
        return self.dir / "log"

    def start(self, timeout: float = 15.0) -> int:
        """Prepare, launch as its own process group, wait until every port accepts. Returns the pid.

        A port some other process already listens on is refused first: readiness is read as the port accepting,
        which that other process would answer, and this server would die on its bind unseen. A port still held is
        looked at again for PORT_RELEASE_WAIT_S first: a server stopped or killed just before (a restart) may not
        have let go of it yet."""
        if not self.ctx.netns:  # a lab's namespace is fresh: nothing else listens in it
            for service in self.services:
                port = self.ctx.ports[service]
                deadline = time.monotonic() + PORT_RELEASE_WAIT_S
                while listening(port) and time.monotonic() < deadline:
                    time.sleep(0.05)
                holder = listener(port)
                if holder is not None:
                    raise NetworkError(
                        f"{self.name} cannot listen on {self.ctx.bind}:{port} ({service}): another process does, "
                        f"{holder}",
                        "stop it, or choose another port",
                    )
        self.prepare()
        argv = self.command()
        if self.ctx.netns:
            argv = ["ip", "netns", "exec", self.ctx.netns, *argv]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.env(), start_new_session=True
            )
        try:
            for service in self.services:
                self.wait_ready(self.ctx.ports[service], timeout)
        except BaseException:
            self.stop()
            raise
        return self.proc.pid

    def wait_ready(self, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise NotFoundError(
                    f"{self.name} exited with status {self.proc.returncode} at start",
                    f"see its log {self.log_path}",
                )
            if port_open(self.ctx.bind, port, self.ctx.netns):
                return
            time.sleep(0.05)
        raise NetworkError(
            f"{self.name} did not listen on {self.ctx.bind}:{port} within {timeout:.0f} s",
            f"see its log {self.log_path}",
        )

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            self.proc = None


def _signal(pgid: int, pids: list[int], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _alive(pgid: int, pids: list[int]) -> bool:
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    # Zombies count as dead: a descendant reparented to init stays one until init reaps it, which some inits
    # do only every second or two; waiting for that would add seconds to every stop.
    return bool(procs.in_group(pgid)) or any(procs.pid_alive(pid) for pid in pids)


def stop_group(pid: int, grace: float = 5.0) -> None:
    """SIGTERM a server's process group and every descendant, then SIGKILL whatever is left after `grace` s.

    Descendants count because per-connection children may start sessions of their own (sshd's do
    setsid): stopping only the group would leave them serving an open connection.
    """
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return
    below = descendants(pid)
    _signal(pgid, below, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _alive(pgid, [pid, *below]):
            return
        time.sleep(0.05)
    _signal(pgid, below, signal.SIGKILL)


def stop_recorded(
    pid: int, pgid: int, start_ticks: int | None, args: list[str] | None, exe: str | None = None, grace: float = 5.0
) -> str:
    """Stop a server `servers up` recorded, and only that one; returns what was done, for the user.

    The pid is signalled only while it is still the process that was started (same start time and
    command line): a pid reused by an unrelated process is left alone. When the leader itself is gone
    (e.g. `serve` was SIGKILLed), the rest of its process group is stopped: the kernel never hands out
    a pid that still names a process group, so members of `pgid` that started no earlier than the
    leader are its own children (serve's iperf3), never someone else's.
    """
    now = procs.recorded_is(pid, start_ticks, args, exe)
    if now == "unknown":
        return f"pid {pid} has no recorded start time (servers.json from an older workbench); not signalled"
    if now == "reused":
        return f"pid {pid} is now another process; not signalled"
    assert start_ticks is not None
    if procs.pid_alive(pid):
        stop_group(pid, grace)
        return f"stopped (pid {pid})"
    left = _group_survivors(pgid, start_ticks)
    if not left:
        return f"already stopped (pid {pid})"
    _stop_pids(left, grace)
    return f"stopped {len(left)} process(es) its dead leader (pid {pid}) left in group {pgid}"


def _group_survivors(pgid: int, start_ticks: int) -> dict[int, int]:
    """{pid: start ticks} of the live members of `pgid` started no earlier than the leader, and their descendants."""
    snap = procs.snapshot()
    members = [p for p in procs.in_group(pgid, snap) if int(snap[p][19]) >= start_ticks]
    return {p: int(snap[p][19]) for p in procs.tree(members, snap) if snap[p][0] != "Z"}


def _stop_pids(found: dict[int, int], grace: float) -> None:
    """SIGTERM each (pid, start) still alive as itself, SIGKILL those left after `grace` s."""

    def alive() -> list[int]:
        return [p for p, start in found.items() if procs.same_process(p, start, None) and procs.pid_alive(p)]

    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 2.0)
        while time.monotonic() < deadline and alive():
            time.sleep(0.05)

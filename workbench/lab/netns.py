"""Network namespaces for the lab: create, enter (setns via ctypes), tune, list and remove them.

Every lab namespace is named ``wb-lab-<owner pid>-<n>-<role>`` so a lab left behind by a killed
run can be recognised (its owner pid is gone) and removed by the next one.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from workbench.shared.errors import UnavailableError, WorkbenchError

PREFIX = "wb-lab-"
NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
_NAME = re.compile(r"^wb-lab-(\d+)-")


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def entered(name: str) -> Iterator[None]:
    """Move the calling thread into namespace `name` and back; threads and children started inside inherit it."""
    # thread-self, not self: setns changes only this thread, and /proc/self names the main thread's namespace
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        try:
            target = os.open(NETNS_DIR / name, os.O_RDONLY)
        except OSError as exc:
            raise WorkbenchError(f"lab namespace {name} is gone", "the lab was torn down or never started") from exc
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


def ip(*args: str, timeout: float = 10.0) -> str:
    """Run `ip ARGS`, returning stdout; a failure becomes a one-line WorkbenchError."""
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise UnavailableError("the 'ip' command (iproute2) is missing", "install iproute2") from exc
    except subprocess.TimeoutExpired as exc:
        raise WorkbenchError(f"'ip {' '.join(args)}' hung for {timeout:.0f} s") from exc
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise WorkbenchError(f"'ip {' '.join(args)}' failed: {detail[-1] if detail else done.returncode}")
    return done.stdout


def create(name: str) -> None:
    """Create namespace `name` with its loopback up."""
    ip("netns", "add", name)
    ip("-n", name, "link", "set", "lo", "up")


def pids_in(name: str) -> list[int]:
    """Pids of the processes whose network namespace is `name`."""
    try:
        return [int(p) for p in ip("netns", "pids", name).split()]
    except WorkbenchError:
        return []


def delete(name: str) -> None:
    """Kill whatever still runs inside namespace `name`, then remove it (devices in it go with it)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = pids_in(name)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and pids_in(name):
            time.sleep(0.05)
    if (NETNS_DIR / name).exists():
        ip("netns", "del", name)


def exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def lab_namespaces() -> list[str]:
    """Names of every lab namespace on this host, live or stale."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(PREFIX))


def owner_of(name: str) -> int | None:
    match = _NAME.match(name)
    return int(match.group(1)) if match else None


def write_sysctl(name: str, key: str, value: str) -> None:
    """Set a per-namespace sysctl inside namespace `name` (never the root namespace's)."""
    path = Path("/proc/sys") / key.replace(".", "/")
    with entered(name):
        # /proc/sys/net resolves to the namespace of the thread that opens it
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)


def read_sysctl(name: str, key: str) -> str:
    path = Path("/proc/sys") / key.replace(".", "/")
    with entered(name):
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.read(fd, 4096).decode().strip()
        finally:
            os.close(fd)

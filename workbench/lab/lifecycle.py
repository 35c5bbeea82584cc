"""A lab's life on this host: whether one can run, what a dead one left, and one lab's namespaces from start to end.

`Lab` (link.py) drives it: check_available and cleanup_stale first, then `Lifecycle` creates and tunes the
two namespaces, holds the cores awake (PM QoS), addresses the link once the emulator made its TUN devices,
and removes it all again with Ctrl-C and SIGTERM held off, so nothing outlives the lab.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.lab import cpucap, netns
from workbench.shared.errors import UnavailableError, UsageError, WorkbenchError
from workbench.shared.procs import pid_alive
from workbench.shared.signals import TERMINATING, held, on_signal

LOOPBACK_HINT = "run 'workbench run' against 'workbench serve' on loopback instead"
CLIENT_ADDR = "10.77.0.1"
SERVER_ADDR = "10.77.0.2"
CLIENT_DEV = "wbc0"
SERVER_DEV = "wbs0"
TCP_MEM_MAX = 64 * 1024 * 1024  # the stock 4 MiB tcp_wmem max caps a 20 ms path near 1 Gbit/s
PM_QOS_DEVICE = "/dev/cpu_dma_latency"


def check_available() -> None:
    """Raise UnavailableError saying why the lab cannot run here; return quietly when it can."""
    if platform.system() != "Linux":
        raise UnavailableError(f"the lab needs Linux network namespaces, not {platform.system()}", LOOPBACK_HINT)
    if os.geteuid() != 0:
        raise UnavailableError("the lab needs root (network namespaces and TUN devices)", LOOPBACK_HINT)
    if shutil.which("ip") is None:
        raise UnavailableError("the lab needs the 'ip' command with 'ip netns' (iproute2)", LOOPBACK_HINT)
    if not os.path.exists("/proc/self/ns/net"):
        raise UnavailableError("this kernel has no network namespaces", LOOPBACK_HINT)
    try:
        os.close(os.open("/dev/net/tun", os.O_RDWR))
    except OSError as exc:
        raise UnavailableError(f"cannot open /dev/net/tun ({exc.strerror})", LOOPBACK_HINT) from exc


def _forwarder_pids() -> dict[int, int]:
    """{forwarder pid: its owner pid} for every linkemu process on this host."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"workbench.lab.linkemu" not in argv:
                continue
            status = (entry / "status").read_text()
        except OSError:
            continue
        ppid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
        owner = next((int(a.split(b"=")[1]) for a in argv if a.startswith(b"--owner=")), ppid)
        found[int(entry.name)] = owner
    return found


def cleanup_stale() -> list[str]:
    """Remove labs whose owning process is gone; return what went.

    Their forwarders, namespaces (with the TUNs, servers and FUSE daemons inside), then the mounts,
    temporary keys and work directories they left: see leftovers.py. A live lab's are never touched.
    """
    removed = []
    for pid, owner in _forwarder_pids().items():
        if not pid_alive(owner):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            removed.append(f"forwarder pid {pid}")
    for name in netns.lab_namespaces():
        ns_owner = netns.owner_of(name)
        if ns_owner is not None and not pid_alive(ns_owner):
            netns.delete(name)  # its TUN device and every process inside go with it
            removed.append(f"namespace {name}")
    from workbench.lab.leftovers import cleanup_leftovers

    removed += cleanup_leftovers()
    removed += cpucap.cleanup_stale()  # after the namespaces: their processes are gone from the group by then
    return removed


def tune_host_namespace(ns: str, raised_buffers: bool) -> None:
    """Tune namespace `ns` as a lab host: IPv6 off, the lab's TCP buffers, no TSO deferral (not its congestion
    control, which Lifecycle sets with its fallback)."""
    # per-namespace only: the root namespace's sysctls are never touched
    netns.write_sysctl(ns, "net.ipv6.conf.all.disable_ipv6", "1")  # no router solicitations on the link
    for key, default, stock_max in (
        ("net.ipv4.tcp_rmem", "131072", 6291456),
        ("net.ipv4.tcp_wmem", "16384", 4194304),
    ):
        # raised: what a tuned host allows; else Linux's own defaults, as a host nobody tuned has them
        netns.write_sysctl(ns, key, f"4096 {default} {TCP_MEM_MAX if raised_buffers else stock_max}")
    # Linux's default (3) holds back a TSO burst until a third of the window is open when an ACK is
    # due soon: a window-limited flow then keeps a sixth of its window idle on average and reached
    # 0.78 of window/RTT at 128 KiB on the 2.8 ms link. 0 sends once three segments fit, like a host
    # that does not defer; the stories' window figures (window/RTT) are what the lab must replay.
    netns.write_sysctl(ns, "net.ipv4.tcp_tso_win_divisor", "0")


@dataclass(frozen=True)
class Hosts:
    """The lab's two hosts: a namespace each, joined by a TUN device each with a point-to-point address."""

    client_ns: str
    server_ns: str
    client_addr: str = CLIENT_ADDR
    server_addr: str = SERVER_ADDR
    client_dev: str = CLIENT_DEV
    server_dev: str = SERVER_DEV

    @contextlib.contextmanager
    def in_client(self) -> Iterator[None]:
        """Run the calling thread in the client namespace (threads and subprocesses started inside inherit it)."""
        with netns.entered(self.client_ns):
            yield

    @contextlib.contextmanager
    def in_server(self) -> Iterator[None]:
        """Run the calling thread in the server namespace."""
        with netns.entered(self.server_ns):
            yield


class Lifecycle:
    """One lab's namespaces, PM QoS request and SIGTERM handler, from creation to removal.

    `notes` is the lab's own list: what could not be set up as asked is told there.
    """

    def __init__(
        self,
        hosts: Hosts,
        mtu: int,
        cc: str | None,
        notes: list[str],
        raised_buffers: bool = True,
        server_cpu_cores: float | None = None,
    ) -> None:
        self.hosts = hosts
        self.server_cpu_cores = server_cpu_cores  # the server host's CPU cap in cores (None: not capped)
        self.cpu: cpucap.CpuCap | None = None  # its cgroup, once the namespaces are made
        self.raised_buffers = raised_buffers
        self.mtu = mtu
        self.wanted_cc = cc
        self.notes = notes
        self.cc: dict[str, str] = {}  # namespace -> the congestion control its connections use
        self._route_cc: str | None = None
        self._old_handlers: dict[int, Any] = {}  # SIGTERM, SIGHUP -> what they did before the lab
        self._up = False
        self._pm_qos: int | None = None

    @property
    def cores_awake(self) -> bool:
        return self._pm_qos is not None

    def catch_sigterm(self) -> None:
        # SIGTERM or SIGHUP would kill Python without running __exit__ (the lab is also a library, not only
        # the CLI, which catches both itself): the CLI's own handler, raising Terminated or HungUp, which unwind
        if threading.current_thread() is not threading.main_thread():
            return

        for sig in TERMINATING:
            if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
                continue  # started under nohup: stays ignored
            self._old_handlers[sig] = signal.signal(sig, on_signal) or signal.SIG_DFL

    def open_namespaces(self) -> None:
        """Hold the cores awake, then create and tune both namespaces (the emulator adds the TUN devices)."""
        self._up = True
        self._hold_cores_awake()
        for ns in (self.hosts.client_ns, self.hosts.server_ns):
            netns.create(ns)
            self._tune_namespace(ns)
        # named as the server namespace: a killed lab's group is recognised by its owner pid (cleanup_stale)
        self.cpu = cpucap.CpuCap.make(self.hosts.server_ns, self.server_cpu_cores)

    def address_link(self) -> None:
        """Bring both TUN devices up with the lab's MTU and addresses, once the emulator has made them."""
        hosts = self.hosts
        for ns, dev, addr, peer in (
            (hosts.client_ns, hosts.client_dev, hosts.client_addr, hosts.server_addr),
            (hosts.server_ns, hosts.server_dev, hosts.server_addr, hosts.client_addr),
        ):
            netns.ip("-n", ns, "link", "set", dev, "mtu", str(self.mtu), "up")
            netns.ip("-n", ns, "addr", "add", f"{addr}/32", "peer", f"{peer}/32", "dev", dev)
            if self._route_cc:
                netns.ip("-n", ns, "route", "replace", f"{peer}/32", "dev", dev, "congctl", self._route_cc)
                self.cc[ns] = f"{self._route_cc} (per-route congctl on the lab link)"

    def _hold_cores_awake(self) -> None:
        # A halted vCPU can take 0.1-0.3 ms to wake (cpuidle-haltpoll in a VM), and every emulated round
        # trip crosses two such wake-ups: idle RTT wandered 0.2-0.55 ms on a 0 ms line. A PM QoS request of
        # 0 µs (what cyclictest holds) keeps idle cores polling instead of halting, which left 0.08-0.13 ms
        # and steadied a 2.8 ms link to ±0.02 ms. The kernel drops the request when this fd closes, even
        # if the process is killed, so nothing outlives the lab.
        fd = None
        try:
            fd = os.open(PM_QOS_DEVICE, os.O_WRONLY | os.O_CLOEXEC)
            os.write(fd, (0).to_bytes(4, sys.byteorder, signed=True))
        except OSError as exc:
            if fd is not None:
                os.close(fd)
            self.notes.append(f"cores may sleep between packets ({PM_QOS_DEVICE}: {exc.strerror}): RTT may wander")
            return
        self._pm_qos = fd

    def _tune_namespace(self, ns: str) -> None:
        tune_host_namespace(ns, self.raised_buffers)
        if self.wanted_cc:
            available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
            if self.wanted_cc not in available:
                raise UsageError(
                    f"congestion control {self.wanted_cc!r} is not available here",
                    f"choose one of {', '.join(available)}",
                )
            try:
                netns.write_sysctl(ns, "net.ipv4.tcp_congestion_control", self.wanted_cc)
            except PermissionError:
                # The host allows only some algorithms as a namespace default; a per-route `congctl` on the
                # lab link (set in address_link) applies it to every connection there without touching the host.
                self._route_cc = self.wanted_cc
        self.cc[ns] = netns.read_sysctl(ns, "net.ipv4.tcp_congestion_control")

    @contextlib.contextmanager
    def signals_held(self) -> Iterator[None]:
        """Hold Ctrl-C, SIGTERM and SIGHUP for the block (delivered, and raising, right after); then give SIGTERM
        and SIGHUP back the handlers they had before the lab, unless one arrived meanwhile: its handler switched
        further ones off, and the cleanup that unwinds from here must not be cut short either."""
        try:
            with held():
                yield
        finally:
            for sig, old in self._old_handlers.items():
                if signal.getsignal(sig) is on_signal:
                    signal.signal(sig, old)
            self._old_handlers = {}

    def remove(self) -> None:
        """Delete both namespaces (with whatever runs inside), the server host's cgroup, and the PM QoS request."""
        if self._up:
            for ns in (self.hosts.client_ns, self.hosts.server_ns):
                with contextlib.suppress(WorkbenchError):
                    netns.delete(ns)
            self._up = False
        if self.cpu is not None:  # emptied by the namespaces' removal, which killed every process inside
            self.cpu.remove()
        if self._pm_qos is not None:
            os.close(self._pm_qos)  # releases the PM QoS request: cores may sleep again
            self._pm_qos = None

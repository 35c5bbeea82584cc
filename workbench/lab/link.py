"""The lab: two network namespaces (client host, server host) joined by an emulated link.

The link is a userspace delay line (``linkemu``) between a TUN device in each namespace, because
this kernel has no netem. The lab measures what it built (idle RTT at start, goodput on request)
and reports those figures, not the ones it was asked for.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workbench.lab import netns
from workbench.lab.linkemu import EmuConfig, expected_goodput_bps
from workbench.shared.errors import UnavailableError, UsageError, WorkbenchError
from workbench.shared.procs import pid_alive

LOOPBACK_HINT = "run 'workbench run' against 'workbench serve' on loopback instead"
CLIENT_ADDR = "10.77.0.1"
SERVER_ADDR = "10.77.0.2"
CLIENT_DEV = "wbc0"
SERVER_DEV = "wbs0"
MIN_QUEUE = 256 * 1024  # four 64 KiB GSO super-packets: below that one burst overflows a short link's queue
TCP_MEM_MAX = 64 * 1024 * 1024  # the stock 4 MiB tcp_wmem max caps a 20 ms path near 1 Gbit/s
READY_TIMEOUT = 10.0
PM_QOS_DEVICE = "/dev/cpu_dma_latency"


@dataclass(frozen=True)
class LinkSpec:
    """An emulated link: rate, round-trip time, loss probability, MTU, congestion control, queue size."""

    rate_bps: int
    rtt_ms: float
    mtu: int = 1500
    loss: float = 0.0
    cc: str | None = None  # None keeps the host's default (BBR here)
    queue_bytes: int | None = None  # None: one bandwidth-delay product, at least MIN_QUEUE

    def queue(self) -> int:
        if self.queue_bytes is not None:
            return self.queue_bytes
        return max(MIN_QUEUE, int(self.rate_bps / 8 * self.rtt_ms / 1000))

    def validate(self) -> None:
        if self.rate_bps <= 0:
            raise UsageError(f"link rate must be positive, not {self.rate_bps}", "e.g. 1000000000 for 1 Gbit/s")
        if not 0 <= self.rtt_ms <= 10_000:
            raise UsageError(f"link RTT {self.rtt_ms} ms is out of range", "use 0 to 10000 ms")
        if not 576 <= self.mtu <= 65_000:
            raise UsageError(f"MTU {self.mtu} is out of range", "use 576 to 65000, e.g. 1500 or 9000")
        if not 0 <= self.loss < 1:
            raise UsageError(f"loss {self.loss} is not a probability", "use e.g. 0.001 for 0.1 %")
        if self.queue_bytes is not None and self.queue_bytes < 2 * (self.mtu + 38):
            raise UsageError(f"queue of {self.queue_bytes} bytes cannot hold two packets", "give at least 4 KiB")


PRESETS: dict[str, LinkSpec] = {
    "gige": LinkSpec(rate_bps=1_000_000_000, rtt_ms=0.2),
    "wifi-ac": LinkSpec(rate_bps=533_000_000, rtt_ms=2.8),
    "10ge": LinkSpec(rate_bps=10_000_000_000, rtt_ms=0.1),
    "wan": LinkSpec(rate_bps=100_000_000, rtt_ms=40.0),
}


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
        owner = netns.owner_of(name)
        if owner is not None and not pid_alive(owner):
            netns.delete(name)  # its TUN device and every process inside go with it
            removed.append(f"namespace {name}")
    from workbench.lab.leftovers import cleanup_leftovers

    removed += cleanup_leftovers()
    return removed


class Lab:
    """Context manager: builds the two namespaces and the link, measures it, tears everything down.

    Teardown runs on exit, on exceptions and Ctrl-C, and on SIGTERM when entered from the main thread
    (SIGTERM becomes SystemExit(143) there). A lab whose owner was SIGKILLed is removed by the next one.
    """

    _serial = 0

    def __init__(self, spec: LinkSpec) -> None:
        spec.validate()
        self.spec = spec
        Lab._serial += 1
        base = f"{netns.PREFIX}{os.getpid()}-{Lab._serial}"
        self.client_ns = f"{base}-c"
        self.server_ns = f"{base}-s"
        self.client_addr = CLIENT_ADDR
        self.server_addr = SERVER_ADDR
        self.idle_rtt_ms: float | None = None
        self.goodput_bps: float | None = None
        self.notes: list[str] = []
        self.cc: dict[str, str] = {}
        self._route_cc: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self._lock = threading.Lock()
        self._old_sigterm: Any = None
        self._up = False
        self._pm_qos: int | None = None

    # -- life cycle -------------------------------------------------------------------------------

    def __enter__(self) -> Lab:
        check_available()
        cleanup_stale()
        self._catch_sigterm()
        try:
            self._build()
        except BaseException:
            self._teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._teardown()

    def _catch_sigterm(self) -> None:
        # SIGTERM would kill Python without running __exit__: turn it into an exception that unwinds
        if threading.current_thread() is not threading.main_thread():
            return

        def on_term(signum: int, frame: Any) -> None:
            # Once, as the CLI's own handler: a second SIGTERM must not cut short the teardown the first began.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            raise SystemExit(128 + signum)

        self._old_sigterm = signal.signal(signal.SIGTERM, on_term) or signal.SIG_DFL

    def _build(self) -> None:
        self._up = True
        self._hold_cores_awake()
        for ns in (self.client_ns, self.server_ns):
            netns.create(ns)
            self._tune_namespace(ns)
        self._start_forwarder()
        for ns, dev, addr, peer in (
            (self.client_ns, CLIENT_DEV, self.client_addr, self.server_addr),
            (self.server_ns, SERVER_DEV, self.server_addr, self.client_addr),
        ):
            netns.ip("-n", ns, "link", "set", dev, "mtu", str(self.spec.mtu), "up")
            netns.ip("-n", ns, "addr", "add", f"{addr}/32", "peer", f"{peer}/32", "dev", dev)
            if self._route_cc:
                netns.ip("-n", ns, "route", "replace", f"{peer}/32", "dev", dev, "congctl", self._route_cc)
                self.cc[ns] = f"{self._route_cc} (per-route congctl on the lab link)"
        self._calibrate()
        if self.spec.rate_bps > 2_000_000_000:
            self.notes.append(
                "the userspace forwarder may not reach this rate here (4-5 Gbit/s on 2 idle cores): "
                "measure_goodput() tells what the link delivers"
            )

    def _hold_cores_awake(self) -> None:
        # A halted vCPU takes 0.1-0.3 ms to wake here (cpuidle-haltpoll in a VM), and every emulated round
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
        # per-namespace only: the root namespace's sysctls are never touched
        netns.write_sysctl(ns, "net.ipv6.conf.all.disable_ipv6", "1")  # no router solicitations on the link
        for key, default in (("net.ipv4.tcp_rmem", "131072"), ("net.ipv4.tcp_wmem", "16384")):
            netns.write_sysctl(ns, key, f"4096 {default} {TCP_MEM_MAX}")
        if self.spec.cc:
            available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
            if self.spec.cc not in available:
                raise UsageError(
                    f"congestion control {self.spec.cc!r} is not available here",
                    f"choose one of {', '.join(available)}",
                )
            try:
                netns.write_sysctl(ns, "net.ipv4.tcp_congestion_control", self.spec.cc)
            except PermissionError:
                # The host allows only some algorithms as a namespace default; a per-route `congctl` on the
                # lab link (set in _build) applies it to every connection there without touching the host.
                self._route_cc = self.spec.cc
        self.cc[ns] = netns.read_sysctl(ns, "net.ipv4.tcp_congestion_control")

    def _start_forwarder(self) -> None:
        cfg = EmuConfig(
            client_ns=self.client_ns,
            server_ns=self.server_ns,
            client_dev=CLIENT_DEV,
            server_dev=SERVER_DEV,
            rate_bps=self.spec.rate_bps,
            delay_s=self.spec.rtt_ms / 2000,
            queue_bytes=self.spec.queue(),
            loss=self.spec.loss,
            owner_pid=os.getpid(),
        )
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 -- closed in _teardown, it outlives this call
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "workbench.lab.linkemu", "--config", "-", f"--owner={os.getpid()}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            start_new_session=True,  # Ctrl-C reaches the lab, which then stops the forwarder in order
        )
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps(asdict(cfg)) + "\n").encode())
        self._proc.stdin.flush()
        reply = self._read_reply(READY_TIMEOUT)
        if not reply.get("ready"):
            raise WorkbenchError(f"the link emulator failed to start: {reply.get('error', 'no reply')}")
        self.notes.extend(reply.get("notes", []))

    def _read_reply(self, timeout: float) -> dict:
        assert self._proc is not None and self._proc.stdout is not None
        out = self._proc.stdout
        if not select.select([out], [], [], timeout)[0]:
            raise WorkbenchError(f"the link emulator did not answer within {timeout:.0f} s", self._log_tail())
        line = out.readline()
        if not line:
            raise WorkbenchError("the link emulator exited", self._log_tail())
        return json.loads(line)

    def _ask(self, command: str, timeout: float = 5.0) -> dict:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                raise WorkbenchError("the link emulator is not running", self._log_tail())
            assert self._proc.stdin is not None
            self._proc.stdin.write(command.encode() + b"\n")
            self._proc.stdin.flush()
            return self._read_reply(timeout)

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        lines = self._log.read().decode(errors="replace").strip().splitlines()
        return f"emulator said: {lines[-1]}" if lines else ""

    def _teardown(self) -> None:
        # hold Ctrl-C and SIGTERM until everything is gone; they are delivered (and raise) right after
        held = {signal.SIGINT, signal.SIGTERM}
        main = threading.current_thread() is threading.main_thread()
        if main:
            signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            self._release()
        finally:
            if self._old_sigterm is not None:
                signal.signal(signal.SIGTERM, self._old_sigterm)
                self._old_sigterm = None
            if main:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, held)

    def _release(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # type: ignore[union-attr]
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=3)
            with contextlib.suppress(OSError):
                proc.stdout.close()  # type: ignore[union-attr]
        if self._up:
            for ns in (self.client_ns, self.server_ns):
                with contextlib.suppress(WorkbenchError):
                    netns.delete(ns)
            self._up = False
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._pm_qos is not None:
            os.close(self._pm_qos)  # releases the PM QoS request: cores may sleep again
            self._pm_qos = None

    # -- use --------------------------------------------------------------------------------------

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

    def _ns(self, ns: str) -> str:
        return {"client": self.client_ns, "server": self.server_ns}.get(ns, ns)

    def popen(self, ns: str, argv: list[str], **kw: Any) -> subprocess.Popen:
        """Start argv inside namespace `ns` ('client', 'server' or a namespace name)."""
        name = self._ns(ns)
        if name not in (self.client_ns, self.server_ns):
            raise UsageError(f"{ns!r} is not one of this lab's namespaces", "use 'client' or 'server'")
        return subprocess.Popen(["ip", "netns", "exec", name, *argv], **kw)

    def measure_idle_rtt(self, count: int = 20) -> float:
        """Median TCP connect time (one SYN/SYN-ACK round trip) from client to server, in ms."""
        return 1000 * statistics.median(self._connect_times(count))

    def _connect_times(self, count: int) -> list[float]:
        """`count` TCP connect times from client to server, in seconds, one connection at a time."""
        with self.in_server():
            listener = socket.socket()
        with listener:
            listener.bind((self.server_addr, 0))
            listener.listen(count + 1)
            port = listener.getsockname()[1]
            samples = []
            with self.in_client():
                socks = [socket.socket() for _ in range(count)]
            try:
                for sock in socks:
                    sock.settimeout(5)
                    t0 = time.perf_counter()
                    sock.connect((self.server_addr, port))
                    samples.append(time.perf_counter() - t0)
                    sock.close()
                    listener.accept()[0].close()
                    time.sleep(0.002)  # let the FIN exchange pass so it never queues ahead of the next SYN
            except OSError as exc:
                raise WorkbenchError(f"the lab link does not carry TCP: {exc}", self._log_tail()) from exc
            finally:
                for sock in socks:
                    sock.close()
        return samples

    def _path_overhead_ms(self, line_rtt: float) -> float:
        """What the TUN path and wake-ups add to a delay line of `line_rtt` ms per round trip.

        CPU contention only ever adds to a sample, so the quietest of three rounds is taken: trimming the
        line by one noisy round made the link faster than asked (1.2 ms for 2.8 under a neighbour's load).
        """
        rounds = [1000 * statistics.median(self._connect_times(10)) for _ in range(3)]
        return max(0.0, min(rounds) - line_rtt)

    def _calibrate(self) -> None:
        """Measure the idle RTT and trim the delay line by the forwarder's own latency, once."""
        target = self.spec.rtt_ms
        if self.spec.loss:
            self._ask("loss 0")  # a lost SYN costs a 1 s retransmission: calibrate on a clean line
        self.measure_idle_rtt(3)  # warm up caches and the forwarder's first wake-ups
        overhead = self._path_overhead_ms(target)
        line_rtt = max(0.0, target - overhead)  # what the delay line adds per round trip (both ways)
        if line_rtt != target:
            self._ask(f"delay {line_rtt / 2000:.7f}")
        measured = self.measure_idle_rtt()
        if measured < target - 0.05 and line_rtt < target:
            # trimmed too far after all (the machine got quieter): give the difference back, never more
            line_rtt = min(target, line_rtt + target - measured)
            self._ask(f"delay {line_rtt / 2000:.7f}")
            measured = self.measure_idle_rtt()
        self.idle_rtt_ms = measured
        if self.spec.loss:
            self._ask(f"loss {self.spec.loss}")
        if line_rtt == 0 and measured > target + 0.03:
            self.notes.append(
                f"idle RTT {measured:.2f} ms, not {target} ms: the TUN path and forwarder alone take that long here"
            )
        elif abs(measured - target) > 0.3:
            self.notes.append(f"idle RTT {measured:.2f} ms is off the {target} ms asked for (CPU contention?)")

    def measure_goodput(self, seconds: float = 3.0, warmup: float = 1.0) -> float:
        """TCP goodput client→server in bit/s over `seconds` after a `warmup`, with one plain socket stream."""
        total = min(seconds + warmup, 10.0)  # bounded: never more than 10 s of load
        before = self.forwarder_stats()
        with self.in_server():
            listener = socket.socket()
        marks: list[tuple[float, int]] = []
        errors: list[BaseException] = []

        def receive() -> None:
            try:
                conn, _ = listener.accept()
                with conn:
                    conn.settimeout(5)
                    buf = bytearray(1 << 20)
                    got = 0
                    while True:
                        n = conn.recv_into(buf)
                        if not n:
                            break
                        got += n
                        marks.append((time.monotonic(), got))
            except OSError as exc:
                errors.append(exc)

        with listener:
            listener.bind((self.server_addr, 0))
            listener.listen(1)
            port = listener.getsockname()[1]
            thread = threading.Thread(target=receive, daemon=True)
            thread.start()
            with self.in_client():
                sender = socket.socket()
            with sender:
                sender.settimeout(5)
                if self.spec.cc:
                    with contextlib.suppress(OSError):
                        sender.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, self.spec.cc.encode())
                sender.connect((self.server_addr, port))
                block = memoryview(bytes(1 << 20))
                end = time.monotonic() + total
                try:
                    while time.monotonic() < end:
                        sender.sendall(block)
                except OSError as exc:
                    errors.append(exc)
            thread.join(10)
        if errors or len(marks) < 2:
            raise WorkbenchError(f"goodput stream over the lab link failed: {errors[0] if errors else 'no data'}")
        start_t = marks[0][0] + warmup
        first = next(((t, b) for t, b in marks if t >= start_t), marks[0])
        last = marks[-1]
        self.goodput_bps = 8 * (last[1] - first[1]) / (last[0] - first[0])
        after = self.forwarder_stats()
        wall = max(1e-9, after["wall_seconds"] - before["wall_seconds"])
        busy = (after["cpu_seconds"] - before["cpu_seconds"]) / wall
        expected = expected_goodput_bps(self.spec.rate_bps, self.spec.mtu)
        if self.goodput_bps < 0.95 * expected:
            why = "the emulator was near a full core" if busy > 0.8 else "CPU contention or queue drops"
            self.notes.append(
                f"goodput {self.goodput_bps / 1e6:.0f} Mbit/s is below the {expected / 1e6:.0f} Mbit/s "
                f"expected: {why} (emulator used {busy:.0%} of a core)"
            )
        return self.goodput_bps

    def forwarder_stats(self) -> dict:
        """The emulator's counters: packets, bytes (on the wire), drops, max queue, CPU and wall seconds."""
        return self._ask("stats")

    def describe(self) -> dict:
        """What this lab measured (idle RTT, goodput if measured) next to what was asked for, with notes."""
        return {
            "rate_bps": self.spec.rate_bps,
            "rtt_ms": self.idle_rtt_ms,
            "mtu": self.spec.mtu,
            "loss": self.spec.loss,
            "queue_bytes": self.spec.queue(),
            "cc": self.cc.get(self.client_ns),
            "cc_server": self.cc.get(self.server_ns),
            "expected_goodput_bps": expected_goodput_bps(self.spec.rate_bps, self.spec.mtu),
            "goodput_bps": self.goodput_bps,
            "requested": asdict(self.spec),
            "client": {"netns": self.client_ns, "addr": self.client_addr},
            "server": {"netns": self.server_ns, "addr": self.server_addr},
            "cores_awake": self._pm_qos is not None,
            "notes": list(self.notes),
        }

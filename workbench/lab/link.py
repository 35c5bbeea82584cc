"""The lab: two network namespaces (client host, server host) joined by an emulated link.

The link is a userspace delay line (``linkemu``) between a TUN device in each namespace, because
this kernel has no netem; a link asked for no more RTT than that line adds by itself, with no loss or
window clamp, is built in the kernel instead (kernellink.py: veth and tbf, for 10 Gbit/s). The lab
measures what it built (idle RTT at start, goodput on request) and reports those figures, not the ones
it was asked for.

This module holds what a lab is asked for (`LinkSpec`, `Stall`, the presets) and `Lab`, the one object
the rest of workbench uses; it delegates to lifecycle.py (availability, stale labs, namespaces, PM QoS,
teardown), emulator.py (the linkemu process), kernellink.py and measure.py (idle RTT calibration,
goodput).
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import asdict, dataclass
from typing import Any

from workbench.lab import cpucap, measure, netns
from workbench.lab.emulator import Emulator
from workbench.lab.kernellink import KernelLink
from workbench.lab.lifecycle import Hosts, Lifecycle, check_available, cleanup_stale
from workbench.lab.linkemu import BREAKS, ETHERNET_OVERHEAD, EmuConfig, expected_goodput_bits_per_s
from workbench.shared import offloads
from workbench.shared.errors import UsageError, WorkbenchError
from workbench.shared.offloads import Switches

MIN_QUEUE = 256 * 1024  # four 64 KiB GSO super-packets: below that one burst overflows a short link's queue
# A super-packet is handed to the receiver in pieces that each serialise in at most this share of the RTT,
# so a window-limited flow sees the RTT it was given (window/RTT within a few %, measured 0.95 at 533 Mbit/s)
BURST_RTT_SHARE = 1 / 32
# ... but never more pieces per second than the emulator can cut and write at line rate: each costs about
# 26 µs of its CPU on a 2-core VM (8-segment pieces at 1 Gbit/s took it from 40 % to 66 % of a core)
MAX_PIECES_PER_S = 12_000
# What the delay line adds to a round trip by itself (TUN, Python, wake-ups): 0.05 ms measured on a 2-core VM with
# the cores held awake. A link asked for no more than that needs no line: the kernel builds it (veth + tbf).
LINE_OWN_RTT_MS = 0.05


STALL_DIRECTIONS = ("both", "up", "down")
HOST_BUFFERS = ("raised", "default")


@dataclass(frozen=True)
class Stall:
    """The line pauses for `duration_s` every `every_s` (periodic), or at random gaps of that mean."""

    every_s: float
    duration_s: float
    random: bool = False
    direction: str = "both"  # "up" is client to server

    @classmethod
    def parse(cls, text: str) -> Stall:
        """'EVERY:DURATION[:DIRECTION]', e.g. '5s:300ms', '~5s:10ms:down' ('~': random gaps of that mean)."""
        from workbench.shared.sizes import parse_duration_ms

        hint = "use EVERY:DURATION[:DIRECTION], e.g. 5s:300ms, or ~5s:10ms:down for random gaps"
        parts = text.strip().split(":")
        if len(parts) not in (2, 3):
            raise UsageError(f"--stall {text!r} is not EVERY:DURATION[:DIRECTION]", hint)
        every = parts[0].strip()
        random = every.startswith("~")
        try:
            every_s = parse_duration_ms(every.lstrip("~")) / 1000
            duration_s = parse_duration_ms(parts[1]) / 1000
        except UsageError as exc:
            raise UsageError(f"--stall {text!r}: {exc.message}", hint) from None
        direction = parts[2].strip().lower() if len(parts) == 3 else "both"
        stall = cls(every_s, duration_s, random, direction)
        stall.validate()
        return stall

    def validate(self) -> None:
        if self.direction not in STALL_DIRECTIONS:
            raise UsageError(f"stall direction {self.direction!r} is unknown", "use up, down or both")
        if not 0.001 <= self.duration_s <= 60:
            raise UsageError(f"a stall of {self.duration_s * 1000:g} ms is out of range", "use 1 ms to 60 s")
        if not 2 * self.duration_s <= self.every_s <= 3600:
            raise UsageError(
                f"stalls every {self.every_s:g} s for {self.duration_s:g} s leave the link no time to run",
                "make EVERY at least twice DURATION (and at most 1 h)",
            )

    def describe(self) -> str:
        gaps = "random gaps averaging" if self.random else "every"
        return f"{self.duration_s * 1000:g} ms stalls, {gaps} {self.every_s:g} s, {self.direction}"


def check_breaks(value: str | None, where: str = "--link-breaks") -> str | None:
    """`value` if the line can be asked to mishandle it (linkemu.BREAKS) or None; a usage error naming `where`
    (the flag, or the config file's key) if not."""
    if value is not None and value not in BREAKS:
        raise UsageError(f"{where}: unknown {value!r}", f"choose from {', '.join(BREAKS)}")
    return value


@dataclass(frozen=True)
class LinkSpec:
    """An emulated link: rate (by direction if asked), round-trip time, loss, MTU, congestion control, queue
    size, stalls, and a cap on the receive window the client host advertises."""

    rate_bits_per_s: int
    rtt_ms: float
    mtu: int = 1500
    loss: float = 0.0
    cc: str | None = None  # None keeps the host's default (net.ipv4.tcp_congestion_control)
    queue_bytes: int | None = None  # None: one bandwidth-delay product, at least MIN_QUEUE
    burst: int | None = None  # segments delivered at once; None: chosen from rate and RTT (burst_segments)
    offloads: Switches = ()  # offloads switched on a host's link device: (("server", (("tso", False),)),)
    rate_up_bits_per_s: int | None = None  # client to server; None: rate_bits_per_s
    rate_down_bits_per_s: int | None = None  # server to client; None: rate_bits_per_s
    client_window_bytes: int | None = None  # receive window cap on every connection of the client host
    client_window_ports: tuple[int, ...] | None = None  # ... only those to these server ports (None: all)
    stall: Stall | None = None
    host_buffers: str = "raised"  # "raised": TCP buffers up to 64 MiB on both hosts; "default": the kernel's
    breaks: str | None = None  # "offloaded": the line drops GSO super-packets of 2+ segments (linkemu.BREAKS)

    @property
    def up_bits_per_s(self) -> int:
        return self.rate_up_bits_per_s or self.rate_bits_per_s

    @property
    def down_bits_per_s(self) -> int:
        return self.rate_down_bits_per_s or self.rate_bits_per_s

    @property
    def fastest_bits_per_s(self) -> int:
        return max(self.up_bits_per_s, self.down_bits_per_s)

    def queue(self) -> int:
        if self.queue_bytes is not None:
            return self.queue_bytes
        return max(MIN_QUEUE, int(self.fastest_bits_per_s / 8 * self.rtt_ms / 1000))

    def kernel_link(self) -> bool:
        """Whether the kernel can build this link with no delay line: no delay beyond the line's own, no
        loss, no window clamp (each of those needs the line), and only then."""
        # a line that breaks offloaded packets must see them: the kernel's veth passes them whole
        no_line = not self.loss and self.client_window_bytes is None and self.breaks is None
        return self.rtt_ms <= LINE_OWN_RTT_MS and no_line

    def burst_segments(self) -> int:
        """Most full-size segments the emulator delivers at once (see BURST_RTT_SHARE and MAX_PIECES_PER_S)."""
        if self.burst is not None:
            return self.burst
        frame_s = (self.mtu + ETHERNET_OVERHEAD) * 8 / self.fastest_bits_per_s
        by_rtt = int(self.rtt_ms / 1000 * BURST_RTT_SHARE / frame_s)
        by_cpu = math.ceil(1 / (frame_s * MAX_PIECES_PER_S))
        return max(1, by_rtt, by_cpu)

    def validate(self) -> None:
        for rate in (self.rate_bits_per_s, self.rate_up_bits_per_s, self.rate_down_bits_per_s):
            if rate is not None and rate <= 0:
                raise UsageError(f"link rate must be positive, not {rate}", "e.g. 1000000000 for 1 Gbit/s")
        if self.client_window_bytes is not None and not 2048 <= self.client_window_bytes <= 1 << 30:
            raise UsageError(
                f"client window of {self.client_window_bytes} bytes is out of range", "use 2K to 1G, e.g. 64K"
            )
        if self.stall is not None:
            self.stall.validate()
        for host, wanted in self.offloads:
            if host not in ("client", "server") or any(name not in offloads.GROUPS for name, _ in wanted):
                raise UsageError(f"offloads {host}:{dict(wanted)} are not a lab host's", "e.g. server:tso=off")
        check_breaks(self.breaks)  # a spec built in code is held to the flag's check
        if self.host_buffers not in HOST_BUFFERS:
            raise UsageError(f"host buffers {self.host_buffers!r} are unknown", f"use {' or '.join(HOST_BUFFERS)}")
        if not 0 <= self.rtt_ms <= 10_000:
            raise UsageError(f"link RTT {self.rtt_ms} ms is out of range", "use 0 to 10000 ms")
        if not 576 <= self.mtu <= 65_000:
            raise UsageError(f"MTU {self.mtu} is out of range", "use 576 to 65000, e.g. 1500 or 9000")
        if not 0 <= self.loss < 1:
            raise UsageError(f"loss {self.loss} is not a probability", "use e.g. 0.001 for 0.1 %")
        if self.burst is not None and self.burst < 1:
            raise UsageError(f"a burst of {self.burst} segments delivers nothing", "use 1 or more")
        if self.queue_bytes is not None and self.queue_bytes < 2 * (self.mtu + 38):
            raise UsageError(f"queue of {self.queue_bytes} bytes cannot hold two packets", "give at least 4 KiB")


PRESETS: dict[str, LinkSpec] = {
    "gige": LinkSpec(rate_bits_per_s=1_000_000_000, rtt_ms=0.2),
    "wifi-ac": LinkSpec(rate_bits_per_s=533_000_000, rtt_ms=2.8),
    "10ge": LinkSpec(rate_bits_per_s=10_000_000_000, rtt_ms=0.05),  # in the kernel: see LINE_OWN_RTT_MS
    "wan": LinkSpec(rate_bits_per_s=100_000_000, rtt_ms=40.0),
}


class Lab:
    """Context manager: builds the two namespaces and the link, measures it, tears everything down.

    Teardown runs on exit, on exceptions and Ctrl-C, and on SIGTERM when entered from the main thread
    (SIGTERM and SIGHUP raise Terminated and HungUp there). A lab whose owner was SIGKILLed is removed by the next one.
    """

    _serial = 0

    def __init__(self, spec: LinkSpec, defer_stalls: bool = False, server_cpu_cores: float | None = None) -> None:
        """`defer_stalls`: the link's stalls start only at start_stalls(), not once the link is measured.
        `server_cpu_cores`: the server host's CPU cap (cap_server_host() puts its processes under it)."""
        spec.validate()
        cpucap.check_cores(server_cpu_cores)
        self.spec = spec
        self._defer_stalls = defer_stalls
        self._stalling = False
        Lab._serial += 1
        base = f"{netns.PREFIX}{os.getpid()}-{Lab._serial}"
        self.hosts = Hosts(client_ns=f"{base}-c", server_ns=f"{base}-s")
        self.client_ns = self.hosts.client_ns
        self.server_ns = self.hosts.server_ns
        self.client_addr = self.hosts.client_addr
        self.server_addr = self.hosts.server_addr
        self.idle_rtt_ms: float | None = None
        self.goodput_bits_per_s: float | None = None
        self.notes: list[str] = []
        self.emulator: Emulator | KernelLink = KernelLink() if spec.kernel_link() else Emulator()
        raised = spec.host_buffers == "raised"
        self._life = Lifecycle(self.hosts, spec.mtu, spec.cc, self.notes, raised, server_cpu_cores)
        self.cc = self._life.cc  # namespace -> congestion control in use
        self.offloads_switched: dict[str, offloads.Offloads] = {}  # host -> its link device as read back
        self._offloads_undo: dict[str, dict[str, bool]] = {}  # host -> kernel features to put back at teardown

    # -- life cycle -------------------------------------------------------------------------------

    def __enter__(self) -> Lab:
        check_available()
        cleanup_stale()
        self._life.catch_sigterm()
        try:
            self._build()
        except BaseException:
            self._teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._teardown()

    def _build(self) -> None:
        self._life.open_namespaces()
        self.notes.extend(self.emulator.start(self._emu_config()))  # it creates the TUN devices
        self._life.address_link()
        self._switch_offloads()  # before any measurement: the link is measured as it will carry the copies
        if isinstance(self.emulator, KernelLink):
            self.idle_rtt_ms = measure.idle_rtt_ms(self.hosts, self.emulator)  # no line to trim: as built
            if self.idle_rtt_ms < self.spec.rtt_ms - 0.01:
                self.notes.append(
                    f"idle RTT {self.idle_rtt_ms:.3f} ms, under the {self.spec.rtt_ms:g} ms asked: a kernel link "
                    "adds no delay, and a delay line would add more than was asked"
                )
        else:
            self.idle_rtt_ms = measure.calibrate(
                self.hosts, self.emulator, self.spec.rtt_ms, self.spec.loss, self.notes
            )
        if not self._defer_stalls:
            self.start_stalls()  # only now: a stall during calibration would skew the idle RTT
        if self.spec.fastest_bits_per_s > 2_000_000_000 and not isinstance(self.emulator, KernelLink):
            self.notes.append(
                "the userspace forwarder may not reach this rate here (4-5 Gbit/s on 2 idle cores): "
                "measure_goodput_bits_per_s() tells what the link delivers"
            )

    def _emu_config(self) -> EmuConfig:
        return EmuConfig(
            client_ns=self.hosts.client_ns,
            server_ns=self.hosts.server_ns,
            client_dev=self.hosts.client_dev,
            server_dev=self.hosts.server_dev,
            rate_bits_per_s=self.spec.rate_bits_per_s,
            delay_s=0.0 if self.spec.kernel_link() else self.spec.rtt_ms / 2000,
            queue_bytes=self.spec.queue(),
            loss=self.spec.loss,
            owner_pid=os.getpid(),
            burst_segments=self.spec.burst_segments(),
            mtu=self.spec.mtu,
            client_addr=self.hosts.client_addr,
            server_addr=self.hosts.server_addr,
            rate_up_bits_per_s=self.spec.rate_up_bits_per_s,
            rate_down_bits_per_s=self.spec.rate_down_bits_per_s,
            client_window_bytes=self.spec.client_window_bytes,
            client_window_ports=self.spec.client_window_ports,
            breaks=self.spec.breaks or "",
            **_stall_config(self.spec.stall),
        )

    def _teardown(self) -> None:
        # hold Ctrl-C and SIGTERM until everything is gone; they are delivered (and raise) right after
        with self._life.signals_held():
            self._restore_offloads()
            self.emulator.stop()
            self._life.remove()

    def _host(self, host: str) -> tuple[contextlib.AbstractContextManager[None], str]:
        """A lab host's namespace (to enter) and its link device."""
        if host == "client":
            return self.hosts.in_client(), self.hosts.client_dev
        return self.hosts.in_server(), self.hosts.server_dev

    def _switch_offloads(self) -> None:
        """Switch the offloads asked for on each host's link device, inside its namespace (never a device of
        this host's own), read back; a wish the kernel did not grant is told in the notes, never claimed."""
        for host, wanted in self.spec.offloads:
            entered, dev = self._host(host)
            with entered:
                state, self._offloads_undo[host] = offloads.switch(dev, dict(wanted))
            self.offloads_switched[host] = state
            if state.unmet:
                said = ", ".join(f"{name} {state.group_state(name)}" for name in state.unmet)
                self.notes.append(f"{host} offloads not as asked on {dev}, read back: {said}")

    def _restore_offloads(self) -> None:
        # the devices die with their namespaces, but one moved out or kept by a failed removal must not keep a
        # changed offload; a namespace already gone has nothing left to restore
        for host, undo in self._offloads_undo.items():
            entered, dev = self._host(host)
            with contextlib.suppress(WorkbenchError, OSError), entered:
                offloads.restore(dev, undo)
        self._offloads_undo.clear()

    def offload_states(self) -> dict[str, dict[str, Any]]:
        """Each host's link device as the kernel reports it now (offloads, size limits, qdisc, queue)."""
        states = {}
        for host in ("client", "server"):
            entered, dev = self._host(host)
            with entered:
                states[host] = offloads.read_offloads(dev).to_json()
        return states

    # -- use --------------------------------------------------------------------------------------

    def in_client(self) -> contextlib.AbstractContextManager[None]:
        """Run the calling thread in the client namespace (threads and subprocesses started inside inherit it)."""
        return self.hosts.in_client()

    def in_server(self) -> contextlib.AbstractContextManager[None]:
        """Run the calling thread in the server namespace."""
        return self.hosts.in_server()

    def start_stalls(self) -> None:
        """Start the link's stalls (if it has any); once."""
        if self.spec.stall is not None and not self._stalling:
            self._stalling = True
            self.emulator.ask("stalls")

    def measure_goodput_bits_per_s(self, seconds: float = 3.0, warmup: float = 1.0) -> float:
        """TCP goodput client→server in bit/s over `seconds` after a `warmup`, with one plain socket stream."""
        spec = self.spec
        self.goodput_bits_per_s = measure.goodput_bits_per_s(
            self.hosts, self.emulator, spec.up_bits_per_s, spec.mtu, spec.cc, self.notes, seconds, warmup
        )
        return self.goodput_bits_per_s

    def cap_server_host(self) -> int:
        """Put every process of the server host (its servers, started by now) in its cgroup, under the CPU cap if
        one was asked; what they fork later is in it too. How many processes moved (0 with no cgroup here)."""
        group = self._life.cpu
        return group.add(cpucap.server_host_pids(self.server_ns)) if group is not None else 0

    def cpu_watch(self) -> cpucap.HostCpuWatch:
        """A watch on the CPU both hosts use from its start() on (the server host's only once capped in)."""
        return cpucap.HostCpuWatch(self._life.cpu)

    def forwarder_stats(self) -> dict:
        """The emulator's counters: packets, bytes (on the wire), drops, max queue, CPU and wall seconds."""
        return self.emulator.stats()

    def describe(self) -> dict:
        """What this lab measured (idle RTT, goodput if measured) next to what was asked for, with notes."""
        return {
            "rate_bits_per_s": self.spec.rate_bits_per_s,
            "rate_up_bits_per_s": self.spec.up_bits_per_s,
            "rate_down_bits_per_s": self.spec.down_bits_per_s,
            "client_window_bytes": self.spec.client_window_bytes,
            "client_window_ports": list(self.spec.client_window_ports or []) or None,
            "stall": self.spec.stall.describe() if self.spec.stall else None,
            "breaks": self.spec.breaks,
            "rtt_ms": self.idle_rtt_ms,
            "mtu": self.spec.mtu,
            "loss": self.spec.loss,
            "queue_bytes": self.spec.queue(),
            "cc": self.cc.get(self.client_ns),
            "cc_server": self.cc.get(self.server_ns),
            "expected_goodput_bits_per_s": expected_goodput_bits_per_s(self.spec.rate_bits_per_s, self.spec.mtu),
            "expected_goodput_up_bits_per_s": expected_goodput_bits_per_s(self.spec.up_bits_per_s, self.spec.mtu),
            "expected_goodput_down_bits_per_s": expected_goodput_bits_per_s(self.spec.down_bits_per_s, self.spec.mtu),
            "goodput_bits_per_s": self.goodput_bits_per_s,
            "requested": asdict(self.spec),
            "client": {"netns": self.client_ns, "addr": self.client_addr},
            "server": {"netns": self.server_ns, "addr": self.server_addr},
            "cores_awake": self._life.cores_awake,
            "host_buffers": self.spec.host_buffers,
            "kernel_link": isinstance(self.emulator, KernelLink),
            "server_cpu_cap_cores": self._life.server_cpu_cores,
            "server_cpu_cgroup": self._life.cpu.describe() if self._life.cpu is not None else None,
            "offloads": self.offload_states(),
            "offloads_asked": {host: dict(wanted) for host, wanted in self.spec.offloads},
            "notes": list(self.notes),
        }


def _stall_config(stall: Stall | None) -> dict[str, Any]:
    if stall is None:
        return {}
    return {
        "stall_every_s": stall.every_s,
        "stall_s": stall.duration_s,
        "stall_random": stall.random,
        "stall_direction": stall.direction,
    }

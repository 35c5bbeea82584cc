"""A lab link built in the kernel: a veth pair between the two namespaces, each end rate-limited by tbf.

The userspace delay line (linkemu) moves every packet through Python: on two cores it carries 4-5 Gbit/s
at most and adds about 0.05 ms of its own to each round trip. A link asked for a round trip at or below
that (10 GbE, a Thunderbolt bridge) needs no delay line, so it is built where the kernel moves packets
itself, with no process in the path. What it cannot do without netem (absent here): add delay or loss,
or rewrite windows. `Lab` builds one only when none of those is asked for.

It answers the emulator's commands (ask, stats, stop) so the lab drives either the same way. Stalls
slow the limiter of the stalled direction to a trickle (8 kbit/s: a 1500-byte frame every 1.5 s) for
their duration, keeping what is queued, then restore it and nudge it (see `_nudge`). Restoring refills
the bucket: what queued during the stall leaves with one bucket (1/250 s of the rate) at veth speed,
then at the rate. Each change is one `tc` process (a few ms), one end after the other.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import socket
import subprocess
import threading
import time
from typing import Any

from workbench.lab import netns
from workbench.lab.linkemu import ETHERNET_OVERHEAD, EmuConfig
from workbench.shared.errors import WorkbenchError

STALL_RATE = "8kbit"
TC_TIMEOUT_S = 5.0
HZ_FLOOR = 250  # tbf's bucket must hold at least one timer tick of traffic at the rate (HZ is 250-1000)


def _tc(ns: str, *args: str) -> str:
    try:
        done = subprocess.run(
            ["ip", "netns", "exec", ns, "tc", *args], capture_output=True, text=True, timeout=TC_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkbenchError(f"tc {' '.join(args)} in {ns} failed: {exc}") from exc
    if done.returncode != 0:
        raise WorkbenchError(f"tc {' '.join(args)} in {ns} failed: {done.stderr.strip()}")
    return done.stdout


def tbf_burst_bytes(rate_bits_per_s: int) -> int:
    """The token bucket: one timer tick of traffic at the rate, at least two 64 KiB GSO packets."""
    return max(2 * 65536 + 4096, math.ceil(rate_bits_per_s / 8 / HZ_FLOOR))


class KernelLink:
    """A veth pair with a tbf on each end; `start` builds it from an EmuConfig (delay and loss must be 0)."""

    def __init__(self) -> None:
        self._cfg: EmuConfig | None = None
        self._ends: list[tuple[str, str, str, int]] = []  # (name, namespace, device, rate bits/s)
        self._started = 0.0
        self._stop = threading.Event()
        self._stall_thread: threading.Thread | None = None
        self._stalls = {"client_to_server": [0, 0.0], "server_to_client": [0, 0.0]}  # count, seconds
        self._lock = threading.Lock()

    def start(self, cfg: EmuConfig) -> list[str]:
        if cfg.delay_s > 0 or cfg.loss > 0 or cfg.client_window_bytes:
            raise WorkbenchError("a kernel link carries no delay, loss or window clamp: use the delay line")
        self._cfg = cfg
        netns.ip("link", "add", cfg.client_dev, "netns", cfg.client_ns, "type", "veth",
                 "peer", "name", cfg.server_dev, "netns", cfg.server_ns)  # fmt: skip
        up, down = cfg.rate_up_bits_per_s or cfg.rate_bits_per_s, cfg.rate_down_bits_per_s or cfg.rate_bits_per_s
        # tbf counts a frame as veth hands it over (IP packet + 14-byte Ethernet header); a wire also carries
        # the FCS, preamble and inter-frame gap (24 more): scale the rate so full frames take the wire's time
        up, down = (int(rate * (cfg.mtu + 14) / (cfg.mtu + ETHERNET_OVERHEAD)) for rate in (up, down))
        # each end shapes what it sends: the client's end is the upload direction
        self._ends = [
            ("client_to_server", cfg.client_ns, cfg.client_dev, up),
            ("server_to_client", cfg.server_ns, cfg.server_dev, down),
        ]
        for _, ns, dev, rate in self._ends:
            self._shape(ns, dev, f"{rate}bit", "add")
        self._started = time.monotonic()
        return [
            "kernel link: a veth pair with a tbf rate limiter on each end, no delay line (the RTT asked is at or "
            "below what the delay line adds by itself); the kernel's CPU for it is not counted as the emulator's"
        ]

    def _shape(self, ns: str, dev: str, rate: str, verb: str, stalled: bool = False) -> None:
        assert self._cfg is not None
        burst = tbf_burst_bytes(max(e[3] for e in self._ends))
        limit = self._cfg.queue_bytes + burst  # the same in both states: a new limit would drop the queue
        # `tc qdisc change` refills the bucket: a stall's bucket holds one frame, so the stall lets one frame
        # through where a full bucket would let `burst` bytes pass at veth speed as it begins
        bucket = self._cfg.mtu + 14 + 64 if stalled else burst
        _tc(ns, "qdisc", verb, "dev", dev, "root", "tbf", "rate", rate, "burst", str(bucket),
            "limit", str(limit))  # fmt: skip

    def ask(self, command: str, timeout: float = 5.0) -> dict:
        words = command.split()
        if words and words[0] == "stats":
            return self.stats()
        if words and words[0] == "stalls":
            return {"stalls": self._arm_stalls()}
        if words and words[0] == "delay":
            return {"delay_ms": 0.0}  # nothing to trim: there is no line
        if words and words[0] == "loss":
            return {"loss": 0.0}
        raise WorkbenchError(f"the kernel link does not do {command!r}")

    def _arm_stalls(self) -> bool:
        cfg = self._cfg
        if cfg is None or cfg.stall_every_s <= 0 or self._stall_thread is not None:
            return False
        self._stall_thread = threading.Thread(target=self._stall_loop, name="lab-stalls", daemon=True)
        self._stall_thread.start()
        return True

    def _stall_loop(self) -> None:
        cfg = self._cfg
        assert cfg is not None
        rng = random.Random(cfg.seed)
        ends = [
            e for e in self._ends if cfg.stall_direction in ("both", "up" if e[0] == "client_to_server" else "down")
        ]
        while True:
            gap = rng.expovariate(1 / cfg.stall_every_s) if cfg.stall_random else cfg.stall_every_s
            if self._stop.wait(gap):
                return
            began = time.monotonic()
            with contextlib.suppress(WorkbenchError):
                for _, ns, dev, _ in ends:
                    self._shape(ns, dev, STALL_RATE, "change", stalled=True)
            stopped = self._stop.wait(cfg.stall_s)
            with contextlib.suppress(WorkbenchError):
                for _, ns, dev, rate in ends:
                    self._shape(ns, dev, f"{rate}bit", "change")
                    self._nudge(ns)
            with self._lock:
                for name, *_ in ends:
                    self._stalls[name][0] += 1
                    self._stalls[name][1] += time.monotonic() - began
            if stopped:
                return

    def _nudge(self, ns: str) -> None:
        """Send one datagram out of namespace `ns` to the far end, so its limiter dequeues again.

        tbf re-arms its timer for when the head packet has tokens, which at the stall's trickle is in an
        hour; restoring the rate does not re-arm it. TCP cannot send the packet that would: it holds back
        new data and even retransmissions while its own packets wait in the queue (TCP small queues), so
        the link would stay stalled. Any packet enqueued behind them makes tbf look again.
        """
        cfg = self._cfg
        assert cfg is not None
        far = cfg.server_addr if ns == cfg.client_ns else cfg.client_addr
        # the socket is made inside the namespace (the context managers enter in order) and belongs to it
        with (
            contextlib.suppress(OSError, WorkbenchError),
            netns.entered(ns),
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
        ):
            udp.sendto(b"\0", (far, 9))  # discard port: the far end answers, at most, port unreachable

    def stats(self) -> dict:
        """The limiters' counters in the emulator's shape; CPU is 0: the kernel's work is nobody's process."""
        both = {}
        for name, ns, dev, _ in self._ends:
            found: dict[str, Any] = {}
            with contextlib.suppress(WorkbenchError, ValueError):
                for q in json.loads(_tc(ns, "-s", "-j", "qdisc", "show", "dev", dev)):
                    if q.get("kind") == "tbf":
                        found = q
            with self._lock:
                count, seconds = self._stalls[name]
            both[name] = {
                "packets": found.get("packets", 0),
                "wire_bytes": found.get("bytes", 0),
                "dropped_queue": found.get("drops", 0),
                "dropped_loss": 0,
                "stalls": count,
                "stalled_s": round(seconds, 4),
            }
        return {
            "kernel_link": True,
            "packets": sum(s["packets"] for s in both.values()),
            "bytes": sum(s["wire_bytes"] for s in both.values()),
            "drops": sum(s["dropped_queue"] for s in both.values()),
            "cpu_seconds": 0.0,
            "wall_seconds": round(time.monotonic() - self._started, 3),
            "delay_ms": 0.0,
            "windows_clamped": 0,
            **both,
        }

    def log_tail(self) -> str:
        return ""

    def stop(self) -> None:
        """Stop the stall thread; the veth pair goes with the namespaces."""
        self._stop.set()
        if self._stall_thread is not None:
            self._stall_thread.join(timeout=TC_TIMEOUT_S * 3)
            self._stall_thread = None

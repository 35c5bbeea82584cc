"""How many fleet clients this machine drives before its CPU, not the lab link, is the limit.

Usage (root): python bench/bench_fleet_lab.py [--link wifi-ac] [--clients 4] [--seconds 3] [--cc cubic]
One lab with N client hosts behind its switch (workbench.lab.client_hosts); for N = 1..max, each of the first N
clients sends one bulk TCP stream (plain sockets, from inside its namespace) to a sink in the server
namespace for --seconds after a short warm-up. Prints per N the total goodput over the expected goodput of
the shared link, the fairness of the split, the machine's CPU busy % (/proc/stat, all cores), and the
delay line's and this process's (senders and sinks) share of a core. Bounded: about 20 s on wifi-ac.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.core.aggregate import jain_index
from workbench.lab import PRESETS, Lab, expected_goodput_bits_per_s
from workbench.lab.client_hosts import MAX_CLIENTS, ClientHosts

WARMUP_S = 0.5
BLOCK = memoryview(bytes(1 << 20))


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _round(lab: Lab, fleet: ClientHosts, count: int, seconds: float) -> dict[str, float | list[float]]:
    """`count` clients stream at once; per-client bytes received inside [start + warm-up, + seconds]."""
    with lab.in_server():
        listener = socket.socket()
    listener.bind((lab.server_addr, 0))
    listener.listen(count)
    port = listener.getsockname()[1]
    start = time.monotonic() + 0.2  # every sender connected by then
    window = (start + WARMUP_S, start + WARMUP_S + seconds)
    counted: dict[str, int] = {}
    errors: list[BaseException] = []

    def sink(conn: socket.socket, peer: str) -> None:
        got = 0
        buf = bytearray(1 << 20)
        try:
            with conn:
                conn.settimeout(10)
                while n := conn.recv_into(buf):
                    if window[0] <= time.monotonic() <= window[1]:
                        got += n
        except OSError as exc:
            errors.append(exc)
        counted[peer] = got

    def send(alias: str) -> None:
        try:
            with fleet.in_client(alias):
                sock = socket.socket()
            with sock:
                sock.settimeout(10)
                sock.connect((lab.server_addr, port))
                while time.monotonic() < start:
                    time.sleep(0.01)
                while time.monotonic() < window[1] + 0.1:
                    sock.sendall(BLOCK)
        except OSError as exc:
            errors.append(exc)

    senders = [threading.Thread(target=send, args=(c.alias,)) for c in fleet.clients[:count]]
    for t in senders:
        t.start()
    sinks = []
    with listener:
        listener.settimeout(10)
        for _ in range(count):
            conn, (peer, _) = listener.accept()
            sinks.append(threading.Thread(target=sink, args=(conn, peer)))
            sinks[-1].start()
    while time.monotonic() < window[0]:
        time.sleep(0.01)
    emu0, ticks0, own0 = lab.forwarder_stats()["cpu_seconds"], _cpu_ticks(), os.times()
    while time.monotonic() < window[1]:
        time.sleep(0.01)
    emu1, ticks1, own1 = lab.forwarder_stats()["cpu_seconds"], _cpu_ticks(), os.times()
    for t in senders + sinks:
        t.join(15)
    if errors:
        raise SystemExit(f"N={count}: a stream failed: {errors[0]}")
    rates = [8 * counted.get(c.addr, 0) / seconds for c in fleet.clients[:count]]
    own_s = (own1.user - own0.user) + (own1.system - own0.system)
    return {
        "total_bits_per_s": sum(rates),
        "rates_bits_per_s": rates,
        "machine_busy": (ticks1[0] - ticks0[0]) / max(1, ticks1[1] - ticks0[1]),
        "emulator_core_share": (emu1 - emu0) / seconds,
        "own_core_share": own_s / seconds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--link", default="wifi-ac", choices=sorted(PRESETS))
    parser.add_argument("--clients", type=int, default=4, choices=range(1, MAX_CLIENTS + 1))
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--cc", default=None, help="congestion control on every host (default: the host's)")
    args = parser.parse_args()
    seconds = min(max(args.seconds, 1.0), 5.0)  # bounded: never more than 5 s of load per N
    spec = dataclasses.replace(PRESETS[args.link], cc=args.cc)
    expected = expected_goodput_bits_per_s(spec.rate_bits_per_s, spec.mtu)
    with (
        tempfile.TemporaryDirectory(prefix="workbench-bench-fleet-") as work,
        Lab(spec) as lab,
        ClientHosts(lab, args.clients, Path(work) / "fleet") as fleet,
    ):
        print(
            f"lab {args.link} ({lab.cc.get(lab.client_ns)}): idle RTT {lab.idle_rtt_ms:.2f} ms, "
            f"expected goodput {expected / 1e6:.0f} Mbit/s, "
            f"{os.cpu_count()} cores, {seconds:g} s per N"
        )
        print(" N  total Mbit/s  total/expected  Jain  per client Mbit/s          CPU busy  linkemu  senders+sinks")
        for count in range(1, args.clients + 1):
            got = _round(lab, fleet, count, seconds)
            rates = got["rates_bits_per_s"]
            assert isinstance(rates, list)
            per = " ".join(f"{r / 1e6:5.0f}" for r in rates)
            fairness = jain_index(rates)
            print(
                f"{count:2}  {got['total_bits_per_s'] / 1e6:12.1f}  {got['total_bits_per_s'] / expected:14.3f}  "
                f"{fairness if fairness is not None else float('nan'):4.2f}  {per:25}  "
                f"{got['machine_busy']:7.0%}  {got['emulator_core_share']:7.0%}  {got['own_core_share']:13.0%}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

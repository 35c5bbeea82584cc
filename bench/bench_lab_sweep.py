"""The lab link's fidelity: window-limited flows against window/RTT, the emulator's CPU, and 10ge raw TCP.

Usage (root): python bench/bench_lab_sweep.py [--part sweep|cpu|10ge|all] [--before] [--seconds 3]

- sweep: on wifi-ac and wan, one download per window from 16 KiB to twice the bandwidth-delay product
  through the TCP probe, as the ratio measured / min(window / idle RTT, link goodput) (goal: 0.9 to 1.1).
- cpu: the delay line's CPU (share of one core) carrying a full-rate flow at 533 Mbit/s and at 1 Gbit/s.
- 10ge: raw TCP each way on the 10ge preset (a kernel link), with the whole machine's CPU meanwhile.

--before rebuilds the link as it was before the lab delivered super-packets in pieces and stopped Linux's
TSO deferral (whole super-packets, tcp_tso_win_divisor 3), for the before/after figures.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.lab import PRESETS, Lab, LinkSpec, expected_goodput_bits_per_s
from workbench.probe.client import measure
from workbench.server.daemons import supervisor
from workbench.shared import credentials, target

SWEEPS = {"wifi-ac": [16, 32, 64, 128, 256, 384], "wan": [16, 32, 64, 128, 256, 512, 1024]}


@contextlib.contextmanager
def lab_with_probe(spec: LinkSpec, before: bool) -> Iterator[tuple[Lab, str, int, str]]:
    if before:
        spec = dataclasses.replace(spec, burst=1 << 16)
    work = Path(tempfile.mkdtemp(prefix="workbench-bench-sweep-"))
    (work / "root").mkdir()
    try:
        with Lab(spec) as lab:
            if before:
                for ns in (lab.client_ns, lab.server_ns):
                    subprocess.run(
                        ["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.tcp_tso_win_divisor=3"], check=True
                    )
            supervisor.up(work / "root", lab.server_addr, work / "state", only=["serve"], netns=lab.server_ns)
            try:
                creds = credentials.read(work / "state" / "credentials.json")
                served = target.read(work / "state" / "target.json", creds)
                with lab.in_client():
                    yield lab, served.host, served.port("tcp"), creds.password
            finally:
                supervisor.down(work / "state")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def upload_with_emulator_cpu(lab: Lab, host: str, port: int, secret: str, seconds: float) -> tuple[float, float]:
    """(bytes/s carried by one full-rate upload, the emulator's CPU meanwhile as a share of one core)."""
    first = lab.forwarder_stats()
    got = measure(host, port, secret, "upload", seconds)
    last = lab.forwarder_stats()
    share = (last["cpu_seconds"] - first["cpu_seconds"]) / max(1e-9, last["wall_seconds"] - first["wall_seconds"])
    return got.bytes_per_s, share


def sweep(before: bool, seconds: float) -> None:
    for preset, kib in SWEEPS.items():
        spec = PRESETS[preset]
        goodput_bytes_per_s = expected_goodput_bits_per_s(spec.rate_bits_per_s, spec.mtu) / 8
        with lab_with_probe(spec, before) as (lab, host, port, secret):
            rtt_s = lab.idle_rtt_ms / 1000
            print(f"{preset}: idle RTT {lab.idle_rtt_ms:.3f} ms, goodput {goodput_bytes_per_s * 8e-6:.1f} Mbit/s")
            for k in kib:
                window = k * 1024
                predicted = min(window / rtt_s, goodput_bytes_per_s)
                got = measure(host, port, secret, "download", seconds, window=window)
                print(
                    f"  {k:5} KiB  measured {got.bytes_per_s * 8e-6:7.1f} Mbit/s  predicted {predicted * 8e-6:7.1f}  "
                    f"ratio {got.bytes_per_s / predicted:.3f}",
                    flush=True,
                )


def cpu(before: bool, seconds: float) -> None:
    for rate in (533_000_000, 1_000_000_000):
        spec = LinkSpec(rate_bits_per_s=rate, rtt_ms=2.8 if rate < 1e9 else 0.2)
        with lab_with_probe(spec, before) as (lab, host, port, secret):
            carried, share = upload_with_emulator_cpu(lab, host, port, secret, seconds)
            print(
                f"{rate / 1e6:6.0f} Mbit/s, {spec.rtt_ms} ms: {carried * 8e-6:6.1f} Mbit/s carried, emulator "
                f"{share:.0%} of a core (pieces of {spec.burst_segments() if not before else 'whole'} segments)",
                flush=True,
            )


def _machine_busy() -> tuple[float, float]:
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)  # busy and total jiffies (idle, iowait excluded)


def ten_gig(seconds: float) -> None:
    spec = PRESETS["10ge"]
    with lab_with_probe(spec, False) as (lab, host, port, secret):
        kind = "kernel link" if lab.describe()["kernel_link"] else "delay line"
        for direction in ("upload", "download"):
            busy0, total0 = _machine_busy()
            started = time.monotonic()
            got = measure(host, port, secret, direction, seconds)
            busy1, total1 = _machine_busy()
            cores = (busy1 - busy0) / (total1 - total0) * (os.cpu_count() or 1)
            print(
                f"10ge ({kind}) {direction:8} {got.bytes_per_s * 8e-9:.2f} Gbit/s raw TCP"
                f" over {time.monotonic() - started:.1f}"
                f" s; the machine's CPU meanwhile: {cores:.2f} cores busy",
                flush=True,
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("sweep", "cpu", "10ge", "all"), default="all")
    parser.add_argument("--before", action="store_true", help="whole super-packets and Linux's TSO deferral")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    if args.part in ("sweep", "all"):
        sweep(args.before, args.seconds)
    if args.part in ("cpu", "all"):
        cpu(args.before, args.seconds)
    if args.part in ("10ge", "all") and not args.before:
        ten_gig(args.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The raw-TCP probe against iperf3 on the same lab link (goal: probe >= 0.97 x iperf3).

Usage (root): python bench/bench_lab_tcp.py [--link wifi-ac] [--seconds 5] [--rounds 3]
`workbench serve` (probe + iperf3 server) runs in the lab's server namespace; both clients run from
the client namespace, alternately, so a drift in the machine's speed hits both.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.core.baseline import iperf3_auth
from workbench.lab import PRESETS, Lab
from workbench.probe.client import measure
from workbench.probe.iperf import run_iperf3
from workbench.server.daemons import supervisor
from workbench.shared import credentials as creds_mod
from workbench.shared import target as target_mod


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--link", default="wifi-ac", choices=sorted(PRESETS))
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="workbench-bench-lab-"))
    (work / "root").mkdir()
    ratios: dict[str, list[float]] = {"upload": [], "download": []}
    try:
        with Lab(PRESETS[args.link]) as lab:
            print(f"lab {args.link}: idle RTT {lab.idle_rtt_ms:.2f} ms")
            supervisor.up(work / "root", lab.server_addr, work / "state", only=["serve"], netns=lab.server_ns)
            try:
                creds = creds_mod.read(work / "state" / "credentials.json")
                target = target_mod.read(work / "state" / "target.json", creds)
                with lab.in_client(), iperf3_auth(target) as auth:
                    for rnd in range(args.rounds):
                        for direction in ("upload", "download"):
                            got = measure(target.host, target.port("tcp"), creds.password, direction, args.seconds)
                            ref = run_iperf3(target.host, target.port("iperf3"), direction, args.seconds, auth=auth)
                            assert ref is not None, "iperf3 is not installed"
                            ratios[direction].append(got.bytes_per_s / ref.bytes_per_s)
                            print(
                                f"round {rnd + 1} {direction:8} probe {got.bytes_per_s * 8 / 1e6:6.1f} Mbit/s  "
                                f"iperf3 {ref.bytes_per_s * 8 / 1e6:6.1f} Mbit/s  "
                                f"ratio {got.bytes_per_s / ref.bytes_per_s:.3f}",
                                flush=True,
                            )
            finally:
                supervisor.down(work / "state")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for direction, values in ratios.items():
        print(f"{direction:8} median ratio probe/iperf3 {statistics.median(values):.3f} (goal >= 0.97)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

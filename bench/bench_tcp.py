"""Raw-TCP probe vs iperf3 on loopback: runs both alternately and prints medians and the ratio (goal >= 0.8).

Usage: python bench/bench_tcp.py [--seconds 3] [--rounds 3]. The probe server runs in a child
process (as `workbench serve` would), so client and server do not share a GIL.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.probe.client import measure
from workbench.probe.iperf import IperfAuth, iperf3_available, run_iperf3
from workbench.server.daemons.base import stop_group
from workbench.server.iperf_server import Iperf3Server, write_server_auth
from workbench.shared.errors import WorkbenchError
from workbench.shared.net import port_open

HOST = "127.0.0.1"
_SERVER = """
import os, signal, sys, time
from workbench.server.probe import ProbeServer
server = ProbeServer(sys.argv[1], int(sys.argv[2]), os.environ["WB_PROBE_SECRET"])
server.start()
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
try:
    time.sleep(float(sys.argv[3]))
finally:
    server.stop()
"""


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def start_probe(port: int, secret: str, lifetime: float) -> subprocess.Popen[bytes]:
    """The probe server in its own process; the secret travels in the environment, never argv."""
    env = dict(os.environ, WB_PROBE_SECRET=secret, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVER, HOST, str(port), f"{lifetime:.0f}"], env=env, start_new_session=True
    )
    deadline = time.monotonic() + 10
    while not port_open(HOST, port):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("probe server did not start")
        time.sleep(0.05)
    return proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if reason := iperf3_available():
        print(reason)
        return 1
    secret = secrets.token_hex(16)
    probe_port, iperf_port = free_port(), free_port()
    lifetime = args.rounds * 4 * (args.seconds + 5) + 30  # the server exits by itself even if we crash
    probe = start_probe(probe_port, secret, lifetime)
    results: dict[tuple[str, str], list[float]] = {}
    # the same authenticated iperf3 server that `serve` runs, with a throwaway user
    keys = tempfile.TemporaryDirectory(prefix="workbench-bench-iperf3-")
    server_auth = write_server_auth(Path(keys.name), "bench", secret)
    auth = IperfAuth("bench", secret, server_auth.public_key)
    try:
        with Iperf3Server(HOST, iperf_port, server_auth):
            for rnd in range(args.rounds):
                for direction in ("upload", "download"):
                    got = measure(HOST, probe_port, secret, direction, duration=args.seconds)
                    ref = run_iperf3(HOST, iperf_port, direction, args.seconds, auth=auth)
                    assert ref is not None
                    results.setdefault(("probe", direction), []).append(got.bytes_per_s)
                    results.setdefault(("iperf3", direction), []).append(ref.bytes_per_s)
                    print(
                        f"round {rnd + 1} {direction:8s} probe {got.bytes_per_s / 1e6:7.0f} MB/s"
                        f"  iperf3 {ref.bytes_per_s / 1e6:7.0f} MB/s  ratio {got.bytes_per_s / ref.bytes_per_s:.2f}",
                        flush=True,
                    )
    except WorkbenchError as exc:
        print(f"error: {exc.one_line()}")
        return 1
    finally:
        stop_group(probe.pid)
        probe.wait(timeout=10)
        keys.cleanup()
    print()
    for direction in ("upload", "download"):
        p = statistics.median(results[("probe", direction)])
        i = statistics.median(results[("iperf3", direction)])
        print(f"{direction:8s} median probe {p / 1e6:7.0f} MB/s  iperf3 {i / 1e6:7.0f} MB/s  ratio {p / i:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

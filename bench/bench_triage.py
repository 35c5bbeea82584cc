"""What the TCP triage costs: CPU per 100 ms sample, and the rates of a lab run with and without it.

1. A TcpWatch samples, for SECONDS, a namespace holding N idle TCP connections to the watched peer and N
   between two other addresses: the process CPU it used over the wall time is its share of a core.
2. Unless --no-lab: the same small wifi-ac lab run twice, with the triage and with WORKBENCH_TCP_TRIAGE=0,
   and each row's median rate with / without (a ratio near 1 within the rows' own spread is noise).

Prints figures and ratios; asserts nothing (speed goals are read, not enforced).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.shared.tcpwatch import TcpWatch


def sampling_cost(connections: int, seconds: float) -> float:
    """Share of one core the watch used while sampling, for `seconds`, a namespace holding `connections`
    idle connections to the watched peer (127.0.0.1) and as many between two other addresses."""
    held = []
    for server_address, client_address in (("127.0.0.1", "127.0.0.4"), ("127.0.0.2", "127.0.0.3")):
        server = socket.create_server((server_address, 0), backlog=4 * connections)
        for _ in range(connections):
            held.append(socket.create_connection(server.getsockname(), source_address=(client_address, 0)))
            held.append(server.accept()[0])
        held.append(server)
    cpu0, t0 = time.process_time(), time.monotonic()
    watch = TcpWatch(["127.0.0.1"], "sender", "client").start()
    time.sleep(seconds)
    watch.stop()
    share = (time.process_time() - cpu0) / (time.monotonic() - t0)
    for sock in held:
        sock.close()
    return share


def lab_rates(enabled: bool, work: Path) -> dict[str, tuple[float, float, float]]:
    doc = work / f"lab-{int(enabled)}.json"
    env = {
        **os.environ,
        "WORKBENCH_HOME": str(work / f"home-{int(enabled)}"),
        "WORKBENCH_TCP_TRIAGE": str(int(enabled)),
    }
    args = ["--protocols", "http/aiohttp,http/curl,smb/pysmb,sftp/paramiko", "--sizes", "16M", "--small", "20x64K"]
    args += ["--repeat", "3", "--warmup", "1", "--tcp-duration", "2", "--json", str(doc)]
    subprocess.run([sys.executable, "-m", "workbench", "lab", *args], env=env, check=True, capture_output=True)
    rows = json.loads(doc.read_text())["results"]
    return {
        f"{r['protocol']}/{r['client']} {r['direction']} {r['file_set']}": (
            r["median_bytes_per_s"],
            r["min_bytes_per_s"],
            r["max_bytes_per_s"],
        )
        for r in rows
        if r["median_bytes_per_s"]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--no-lab", action="store_true")
    args = parser.parse_args()
    for n in (4, 64, 512):
        print(
            f"sampling every 100 ms, {n} connections to the peer and {n} between other addresses: "
            f"{100 * sampling_cost(n, args.seconds):.2f} % of a core"
        )
    if args.no_lab:
        return
    with tempfile.TemporaryDirectory(prefix="workbench-bench-triage-") as tmp:
        with_triage = lab_rates(True, Path(tmp))
        without = lab_rates(False, Path(tmp))
    print(f"{'row':32} {'with MB/s (min-max)':>22} {'without':>22} {'ratio':>6}  within the spread")
    for key, (rate, low, high) in with_triage.items():
        if key not in without:
            continue
        other, other_low, other_high = without[key]
        overlap = low <= other_high and other_low <= high
        print(
            f"{key:32} {rate / 1e6:8.1f} ({low / 1e6:5.1f}-{high / 1e6:5.1f}) {other / 1e6:8.1f} "
            f"({other_low / 1e6:5.1f}-{other_high / 1e6:5.1f}) {rate / other:6.3f}  {'yes' if overlap else 'no'}"
        )


if __name__ == "__main__":
    main()

"""What each protocol puts on the wire per byte of file on the wifi-ac lab link, and what reading the interface
counters costs a copy.

1. Unless --no-lab: one small wifi-ac lab run (every client this host can run, one file of --size, --repeat
   copies each way; run it under the lab lock: `flock /tmp/wb-lab.lock python bench/bench_wire_overhead.py`).
   Per client and direction: the sender's wire bytes per file byte of each copy (payload, retransmissions,
   IP/TCP headers per segment, from the kernel's per-connection counters; workbench.shared.wire), their
   median and spread (min-max) over the repeats, the retransmitted share, and the sender's interface count
   over the connections' (1.000: they agree). Then each protocol's median over its rows.
2. The cost of reading the interface counters: a watch reads them when it starts and when it stops (two
   route-netlink requests). On loopback, --copies copies of --copy-mib MiB each through one TCP connection,
   watched with the counters read and without, alternately; the ratio of the median copy times (a ratio
   within the copies' own spread is noise), and the time of one reading.

Prints figures and ratios; asserts nothing (speed goals are read, not enforced).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.shared.tcpwatch import TcpWatch
from workbench.shared.triage import TcpTriage
from workbench.shared.wire import LinkReader

PROTOCOLS = "all"  # every client; those this host cannot run fail their rows as unavailable and are left out


def lab_overhead(protocols: str, size: str, repeat: int, work: Path) -> tuple[list[dict], str]:
    """The lab run's rows (JSON) and its overhead note."""
    doc = work / "lab.json"
    env = {**os.environ, "WORKBENCH_HOME": str(work / "home"), "COLUMNS": "200"}
    args = ["--link", "wifi-ac", "--protocols", protocols, "--sizes", size, "--small", "none"]
    args += ["--repeat", str(repeat), "--warmup", "0", "--tcp-duration", "2", "--json", str(doc)]
    done = subprocess.run([sys.executable, "-m", "workbench", "lab", *args], env=env, capture_output=True, text=True)
    if not doc.exists():
        raise SystemExit(f"the lab run wrote no document (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    found = json.loads(doc.read_text())
    note = next((w for w in found["warnings"] if w.startswith("wire bytes per file byte")), "(no overhead note)")
    return found["results"], note


def print_overhead(rows: list[dict]) -> None:
    print(f"{'client':18} {'dir':5} {'sender':7} {'wire/file':>9} {'min-max':>13} {'retrans':>8} {'iface/wire':>10}")
    by_protocol: dict[str, list[float]] = {}
    for row in rows:
        if row["error"] is not None or row["wire_bytes_per_file_byte"] is None:
            continue
        copies = [TcpTriage.from_json(s["tcp"]) for s in row["samples"] if s["error"] is None]
        per_copy = [t.wire_bytes_per_file_byte for t in copies if t is not None]
        spread = [v for v in per_copy if v is not None]
        tcp = TcpTriage.from_json(row["tcp"])
        iface = tcp.iface_to_wire if tcp is not None else None
        share = row["retransmitted_share"]
        way = "up" if row["direction"] == "upload" else "down"
        print(
            f"{row['protocol'] + '/' + row['client']:18} {way:5} {row['tcp']['host']:7} "
            f"{row['wire_bytes_per_file_byte']:9.4f} "
            f"{(f'{min(spread):.3f}-{max(spread):.3f}' if spread else '—'):>13} "
            f"{(f'{100 * share:.2f} %' if share is not None else '—'):>8} "
            f"{(f'{iface:.3f}' if iface is not None else '—'):>10}"
        )
        by_protocol.setdefault(row["protocol"], []).append(row["wire_bytes_per_file_byte"])
    print("per protocol (median of its rows): " + "; ".join(
        f"{p} {statistics.median(v):.3f} over {len(v)} rows" for p, v in sorted(by_protocol.items())
    ))  # fmt: skip


def _copy_once(mib: int, interface_counters: bool) -> float:
    """Seconds to send `mib` MiB through a fresh loopback connection, watched as the runner watches a copy."""
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    server.close()

    def drain() -> None:
        while peer.recv(1 << 20):
            pass

    reader = threading.Thread(target=drain)
    reader.start()
    block = b"\0" * (1 << 20)
    t0 = time.perf_counter()
    watch = TcpWatch(["127.0.0.1"], "sender", "client", interface_counters=interface_counters).start()
    for _ in range(mib):
        client.sendall(block)
    client.shutdown(socket.SHUT_WR)
    reader.join()
    watch.stop()
    seconds = time.perf_counter() - t0
    client.close()
    peer.close()
    return seconds


def counters_cost(copies: int, mib: int) -> None:
    with_counters: list[float] = []
    without: list[float] = []
    for _ in range(copies):  # alternate, so that a change of load on the machine falls on both
        with_counters.append(_copy_once(mib, True))
        without.append(_copy_once(mib, False))
    reader = LinkReader()
    try:
        index = reader.route_interface("127.0.0.1")
        t0 = time.perf_counter()
        for _ in range(1000):
            reader.counters(index)
        per_read_us = (time.perf_counter() - t0) / 1000 * 1e6
    finally:
        reader.close()
    med_with, med_without = statistics.median(with_counters), statistics.median(without)
    print(
        f"loopback copy of {mib} MiB, {copies} each: with the counters read {med_with * 1e3:.1f} ms "
        f"({min(with_counters) * 1e3:.1f}-{max(with_counters) * 1e3:.1f}), without {med_without * 1e3:.1f} ms "
        f"({min(without) * 1e3:.1f}-{max(without) * 1e3:.1f}); ratio {med_with / med_without:.3f}; "
        f"one reading of the counters {per_read_us:.0f} µs (two per copy)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocols", default=PROTOCOLS)
    parser.add_argument("--size", default="4M")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--copies", type=int, default=15)
    parser.add_argument("--copy-mib", type=int, default=64)
    parser.add_argument("--no-lab", action="store_true")
    args = parser.parse_args()
    if not args.no_lab:
        with tempfile.TemporaryDirectory(prefix="workbench-bench-wire-") as tmp:
            rows, note = lab_overhead(args.protocols, args.size, args.repeat, Path(tmp))
        print_overhead(rows)
        print(note)
    counters_cost(args.copies, args.copy_mib)


if __name__ == "__main__":
    main()

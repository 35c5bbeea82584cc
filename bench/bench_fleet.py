"""A fleet in the lab: what N clients get together, against the link's goodput, and how fairly they share it.

Usage (root): python bench/bench_fleet.py [--link wifi-ac] [--clients 3] [--protocols http/aiohttp,smb/pysmb]
    [--scaling 1,2,3] [--size 64M] [--repeat 3]

Each point is one `workbench lab --clients N` run (its own lab, its own servers, the fleet over SSH), read back
from its JSON document. Goals printed, never asserted:
- HTTP download aggregate / the link's measured goodput >= 0.90 with 3 clients, Jain's index >= 0.90;
- pysmb's aggregate rises with N: each pysmb client is bound by its own round trips (64 KiB × 1 in flight), not
  the link, so N clients carry about N times one client's rate until the link is full.
Every copy's bytes and seconds are in the JSON documents kept in the printed directory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _lab(link: str, clients: int, protocols: str, size: str, repeat: int, out: Path) -> dict:
    argv = [sys.executable, "-m", "workbench", "lab", "--link", link, "--clients", str(clients)]
    argv += ["--protocols", protocols, "--directions", "download", "--sizes", size, "--small", "none"]
    argv += ["--repeat", str(repeat), "--warmup", "1", "--tcp-duration", "3", "--json", str(out)]
    argv += ["--db", str(out.with_suffix(".sqlite"))]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800)
    if not out.exists():
        raise SystemExit(f"lab --clients {clients} wrote no document (exit {done.returncode}): {done.stderr[-800:]}")
    return json.loads(out.read_text())


def _aggregates(doc: dict) -> list[dict]:
    return [r for r in doc["results"] if r.get("client_host") == "all"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--link", default="wifi-ac")
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--protocols", default="http/aiohttp,smb/pysmb")
    parser.add_argument("--scaling", default="1,2,3", help="client counts for the pysmb scaling line")
    parser.add_argument("--size", default="64M")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="workbench-bench-fleet-"))
    print(f"documents in {work}")
    by_count: dict[int, dict] = {}
    for count in sorted({*map(int, args.scaling.split(",")), args.clients}):
        by_count[count] = _lab(args.link, count, args.protocols, args.size, args.repeat, work / f"fleet-{count}.json")
    doc = by_count[args.clients]
    goodput = doc["link"].get("goodput_bytes_per_s") or doc["link"].get("expected_goodput_down_bytes_per_s")
    print(f"\n{args.link}, {args.clients} clients: link goodput {goodput * 8 / 1e6:.0f} Mbit/s (measured by the lab)")
    together = doc["baseline"].get("down_bytes_per_s")
    if together:
        print(f"raw TCP, all clients at once: {together * 8 / 1e6:.0f} Mbit/s = {together / goodput:.3f} of goodput")
    for row in _aggregates(doc):
        rate = row["median_bytes_per_s"] or 0.0
        agg = row["aggregate"]
        jain = agg.get("jain_index")
        print(
            f"  {row['protocol']}/{row['client']:10} aggregate {rate * 8 / 1e6:6.0f} Mbit/s = {rate / goodput:.3f} "
            f"of goodput; Jain {jain if jain is None else round(jain, 3)}; first done "
            f"{', '.join(f'{t:.2f}' for t in agg['first_done_s'])} s, last done "
            f"{', '.join(f'{t:.2f}' for t in agg['last_done_s'])} s"
        )
    print("\nscaling with the number of clients (aggregate Mbit/s, ratio to 1 client):")
    for label in args.protocols.split(","):
        protocol, client = label.split("/")
        line = []
        one = None
        for count, document in sorted(by_count.items()):
            rate = next(
                (
                    r["median_bytes_per_s"]
                    for r in _aggregates(document)
                    if (r["protocol"], r["client"]) == (protocol, client)
                ),
                None,
            )
            if rate and one is None:
                one = rate
            line.append(
                f"N={count}: {rate * 8 / 1e6:.0f}" + (f" ({rate / one:.2f}×)" if one else "")
                if rate
                else f"N={count}: -"
            )
        print(f"  {label:14} " + "  ".join(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())

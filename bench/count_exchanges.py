"""Count every client's round trips per file and per set on the lab link; regenerate the declared counts.

Usage (root): python bench/count_exchanges.py [--link wifi-ac] [--protocols all] [--files 4,12] [--repeat 2]
                                              [--write] [--json counts.json]

Runs `workbench lab` on sets of 64 KiB files of two sizes (one warm-up and --repeat timed copies each), with
the client host's link device captured (workbench.lab.wirecount), and prints per client and direction the
round trips per file (the client's turns and the flights a sender waited for) and per set, the time per file
and per set that is neither (the turnaround on this machine), and the waits for a delayed ACK per file and per
set (a timer's time beyond their round trip: workbench.lab.wirecount.delayed_ack_waits). --write rewrites the
COUNTED table of protocols/exchanges.py, the clients' declared patterns the per-file ceilings use; --json keeps
every figure for bench/bench_per_file_predictions.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.lab.exchangecount import ClientCount, counted, write_table
from workbench.protocols import exchanges

TABLE = Path(__file__).resolve().parents[1] / "protocols" / "exchanges.py"


def show(counts: list[ClientCount], rtt_ms: float) -> None:
    print(f"round trips counted on the wire (idle RTT {rtt_ms:.2f} ms); turnaround = neither round trips nor bytes")
    print(
        f"{'client':<22}{'dir':<10}{'per file':>9}{'turns':>7}{'flights':>8}{'per set':>8}"
        f"{'declared':>10}{'turn/file':>11}{'turn/set':>10}{'delayed ACKs':>14}"
    )
    for c in counts:
        said = exchanges.declared(c.label, c.direction)
        declared = f"{said.per_file:g}/{said.per_set:g}" if said else "—"
        print(
            f"{c.label:<22}{c.direction:<10}{c.per_file:>9.2f}{c.turns_per_file:>7.2f}{c.flights_per_file:>8.2f}"
            f"{c.per_set:>8.2f}{declared:>10}"
            f"{c.turnaround_per_file_s * 1e3:>9.2f}ms{c.turnaround_per_set_s * 1e3:>8.0f}ms"
            f"{c.delayed_acks_per_file:>7.1f}/{c.delayed_acks_per_set:<6.1f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--link", default="wifi-ac")
    parser.add_argument("--protocols", default="all")
    parser.add_argument("--files", default="4,12", help="the two set sizes, e.g. 4,12")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--write", action="store_true", help="rewrite protocols/exchanges.py's table")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args()
    small, large = (int(n) for n in args.files.split(","))
    counts, rtt_ms = counted(args.link, args.protocols, (small, large), args.repeat)
    show(counts, rtt_ms)
    if args.json:
        doc = {"link": args.link, "rtt_ms": rtt_ms, "counts": [dataclasses.asdict(c) for c in counts]}
        args.json.write_text(json.dumps(doc, indent=1))
    if args.write:
        write_table(TABLE, counts)
        print(f"wrote {len(counts)} counts to {TABLE}")
    return 0 if counts else 1


if __name__ == "__main__":
    sys.exit(main())

"""Each client against stock servers vs against workbench's own, in the same lab: median MB/s and the ratio.

Runs `workbench lab` twice on one link preset (default wifi-ac), first with --servers workbench, then with
--servers stock, with the same sizes, small-file set and repeats, each into a results database of its own,
and prints, per client, direction and file set, the median MB/s (10^6 B/s) of each and stock / served,
flagging ratios outside ±5 %. Then the raw figures: every timed copy's bytes and seconds.

Usage (root; ~15-25 min on a 2-core machine with the defaults):
  python bench/bench_stock_vs_served.py [--link wifi-ac] [--sizes 16M] [--small 100x64K] [--repeat 3]
                                  [--protocols all] [--timeout-s 1800] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.core.results import Result, Run
from workbench.core.store import Store

REPO = Path(__file__).resolve().parents[1]
TOLERANCE = 0.05  # the bar: each client within 5 % of itself against workbench's servers
MODES = ("workbench", "stock")

Key = tuple[str, str, str]  # (protocol/client, direction, file set)


def run_lab(mode: str, args: argparse.Namespace, work: Path, deadline: float) -> Path:
    """One `workbench lab` with --servers `mode` into its own database; its path. Output goes to a log file."""
    db = work / f"{mode}.sqlite"
    log = work / f"{mode}.log"
    argv = [
        sys.executable,
        "-m",
        "workbench",
        "lab",
        "--link",
        args.link,
        "--servers",
        mode,
        "--protocols",
        args.protocols,
        "--sizes",
        args.sizes,
        "--small",
        args.small,
        "--repeat",
        str(args.repeat),
        "--db",
        str(db),
    ]
    env = {**os.environ, "WORKBENCH_HOME": str(work / "home"), "COLUMNS": "220"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    left_s = deadline - time.monotonic()
    if left_s <= 60:
        raise SystemExit(f"no time left for the {mode} lab (--timeout-s)")
    print(f"[{time.strftime('%H:%M:%S')}] lab --servers {mode} (log {log}, at most {left_s:.0f} s)…", flush=True)
    started = time.monotonic()
    with open(log, "w") as out:
        try:
            # SIGTERM on timeout: the lab tears down its namespaces and servers on the way out
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
            code = proc.wait(timeout=left_s)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(timeout=120)
            raise SystemExit(f"the {mode} lab ran out of time; see {log}") from None
    print(f"[{time.strftime('%H:%M:%S')}]   exit {code} after {time.monotonic() - started:.0f} s", flush=True)
    return db


def load_runs(db: Path) -> list[Run]:
    if not db.exists():
        return []
    with Store(db) as store:
        return [store.load(summary.id) for summary in reversed(store.history(1000))]


def rows_by_key(runs: list[Run]) -> dict[Key, Result]:
    return {(r.label, r.direction, r.file_set): r for run in runs for r in run.results}


def median_bytes_per_s(row: Result | None) -> float | None:
    if row is None or row.error is not None or not row.verified:
        return None
    return statistics.median(s.bytes / s.seconds for s in row.good_samples if s.seconds > 0)


def why_not(row: Result | None) -> str:
    if row is None:
        return "no row"
    if row.error:
        return row.error[:60]
    return "not verified"


def table(served: dict[Key, Result], stock: dict[Key, Result]) -> tuple[list[str], int]:
    """The comparison lines, and how many rows fall outside the tolerance."""
    lines = [f"{'client':20} {'direction':9} {'set':9} {'served MB/s':>11} {'stock MB/s':>11} {'stock/served':>12}"]
    outside = 0
    for key in sorted(set(served) | set(stock), key=lambda k: (k[0], k[1], k[2])):
        label, direction, file_set = key
        a, b = median_bytes_per_s(served.get(key)), median_bytes_per_s(stock.get(key))
        if a is None or b is None:
            what = f"served: {why_not(served.get(key))}" if a is None else f"stock: {why_not(stock.get(key))}"
            shown_a = f"{a / 1e6:11.1f}" if a else f"{'-':>11}"
            shown_b = f"{b / 1e6:11.1f}" if b else f"{'-':>11}"
            lines.append(f"{label:20} {direction:9} {file_set:9} {shown_a} {shown_b} {'-':>12}  ({what})")
            continue
        ratio = b / a
        flag = ""
        if abs(ratio - 1) > TOLERANCE:
            outside += 1
            flag = f"  <-- outside ±{TOLERANCE:.0%}"
        lines.append(f"{label:20} {direction:9} {file_set:9} {a / 1e6:11.1f} {b / 1e6:11.1f} {ratio:12.3f}{flag}")
    return lines, outside


def raw(mode: str, runs: list[Run]) -> list[str]:
    """Every timed copy: bytes and seconds, so the medians above can be checked by hand."""
    lines = []
    for run in runs:
        base = run.baseline
        up = f"{base.up_bytes_per_s / 1e6:.1f}" if base.up_bytes_per_s else "-"
        down = f"{base.down_bytes_per_s / 1e6:.1f}" if base.down_bytes_per_s else "-"
        lines.append(
            f"{mode} run {run.id} ({run.meta.get('server', {}).get('url') or run.meta['target']['host']}): "
            f"raw TCP up {up} down {down} MB/s{'; ' + base.error if base.error else ''}"
        )
        for row in run.results:
            copies = " ".join(f"{s.bytes}B/{s.seconds:.4f}s" for s in row.samples) or row.error or "-"
            lines.append(f"  {row.label:20} {row.direction:9} {row.file_set:9} {copies}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--link", default="wifi-ac", help="lab link preset (default wifi-ac)")
    parser.add_argument("--sizes", default="16M")
    parser.add_argument("--small", default="100x64K", help="a small-file set, or 'none' (the lab's default set)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--protocols", default="all")
    parser.add_argument("--timeout-s", type=float, default=2400.0, help="for both labs together")
    parser.add_argument("--keep", type=Path, default=None, help="keep the databases and logs in this directory")
    args = parser.parse_args()
    if not 1 <= args.repeat <= 10:
        parser.error("--repeat: use 1 to 10")
    work = args.keep or Path(tempfile.mkdtemp(prefix="workbench-bench-stock-"))
    work.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.timeout_s
    try:
        dbs = {mode: run_lab(mode, args, work, deadline) for mode in MODES}
        runs = {mode: load_runs(db) for mode, db in dbs.items()}
        lines, outside = table(rows_by_key(runs["workbench"]), rows_by_key(runs["stock"]))
        print(
            f"\n{args.link}: median MB/s (10^6 B/s) of {args.repeat} timed copies; stock / served "
            f"(flagged outside ±{TOLERANCE:.0%}: {outside})"
        )
        print("\n".join(lines))
        print("\nraw figures (bytes / seconds of each timed copy):")
        for mode in MODES:
            print("\n".join(raw(mode, runs[mode])))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

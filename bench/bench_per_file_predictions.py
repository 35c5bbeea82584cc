"""Counts taken on one link predict the small-file rows of others: the predicted/measured table per client.

Usage (root): python bench/bench_per_file_predictions.py [--counts counts.json] [--links wan,gige]
                                                         [--files wan=8,gige=30] [--repeat 2] [--protocols all]
                                                         [--count-files 4,12] [--save DIR] [--runs DIR]
                                                         [--swing OTHER/counts.json]

The counts (round trips per file and per set, each side's CPU per file and the set's setup on this machine)
come from --counts (bench/count_exchanges.py --json) or are taken first on wifi-ac (sets of --count-files).
Each other link then runs `workbench lab` with a set of 64 KiB files (--files) and one a third its size, and every
client's larger set is predicted as
round trips × that link's idle RTT + the sending side's CPU (in turn, for a client that takes turns) + the longest of
the bytes at its goodput and the other side's CPU (taken to overlap), + the setup
(workbench.lab.exchangecount.predicted_s). That is the time of the rows' own
per-file ceiling, a model of measured parts and not a proven floor: a ratio under 1 is a copy slower than its
ceiling, over 1 a ceiling the copy beat (which that row would say is unexplained). A client that keeps files in
flight (under IN_FLIGHT_TURNS turns per file counted; its row's ceiling reads the same from the files in flight it
declares) is charged its round trips per set only, by the one rule both follow (exchanges.waited_per_file).
CPU is time on a core, which load does not stretch. A prediction within 25 % of the measured median holds. The
table also shows the waits for a core the measured copies read (schedstat, per file) and the prediction with them
added.
A second table per link gives the expectation (exchangecount.expected_s): the counted round trips, setup and waits
for delayed ACKs with that link's own CPU per file (the slope between its two sets: a side's CPU per file grows
with the link's RTT, so the counting link's over-charges a faster one), through the ceiling's model, which adds both
sides' CPU for a client that takes turns. Its CPU comes from the copies it is checked against: it checks the counts
and that model, not that CPU carries between links.
--save DIR keeps the counts (counts.json), the run they were counted in (wifi-ac.json) and each link's run
(LINK.json); --runs DIR predicts from those again without a lab (after a change to the model). --swing prints
each side's CPU per file beside another counting's (its counts.json): how far two runs' readings are apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.core.ceiling import link_goodput_bytes_per_s
from workbench.core.explain import paces_bursts
from workbench.core.results import Result, Run
from workbench.lab.exchangecount import (
    ClientCount,
    count_clients,
    cpu_per_file_s,
    expected_s,
    lab_run,
    predicted_s,
    run_rtt_s,
    waited_round_trips,
    waits_of,
    with_setups,
)
from workbench.protocols.exchanges import COUNTED_FILE_BYTES

HOLDS = 0.25


Prediction = tuple[str, str, int, float, float, float, float, float, float | None]


def _largest_sets(run: Run) -> list[Result]:
    """Each client and direction's row of its largest small-file set (the set predicted; a smaller one, where the
    link copied two, is there for the link's own CPU per file), where that row measured: a failed largest set is
    left out, not replaced by the smaller one."""
    largest: dict[tuple[str, str], Result] = {}
    for row in run.results:
        key = (row.label, row.direction)
        if row.files > 1 and (key not in largest or row.files > largest[key].files):
            largest[key] = row
    return [row for row in largest.values() if row.good_samples and row.error is None]


def _predictable(run: Run, counts: list[ClientCount]) -> Iterator[tuple[Result, ClientCount, float, bool]]:
    """Each client's largest small-file set (_largest_sets) that has a count and a path rate: the row, its count,
    the path's rate in bytes/s that way, and whether its sender paced each burst (BBR in start-up:
    explain.paces_bursts, as in the row's ceiling)."""
    by_client = {(c.label, c.direction): c for c in counts}
    for row in _largest_sets(run):
        count = by_client.get((row.label, row.direction))
        path = link_goodput_bytes_per_s(run.link, row.direction) or run.baseline.for_direction(row.direction)
        if count is not None and path:
            yield row, count, path, paces_bursts(row, run.link)


def predictions(run: Run, counts: list[ClientCount]) -> list[Prediction]:
    """(client, direction, files, round trips per file charged (none for a client that keeps files in flight),
    predicted s with the measured waits for a core added, measured s, predicted s, the waits added in s, the
    count's server CPU per file in s) of every client's largest small-file set."""
    rtt_s = run_rtt_s(run)
    found = []
    for row, count, path, paced in _predictable(run, counts):
        file_bytes = row.bytes // row.files
        quiet = predicted_s(count, row.files, file_bytes, rtt_s, path, paced=paced)
        loaded = predicted_s(count, row.files, file_bytes, rtt_s, path, waits_of(row), paced)
        median = statistics.median(s.seconds for s in row.good_samples)
        found.append(
            (
                row.label,
                row.direction,
                row.files,
                waited_round_trips(count),
                loaded,
                median,
                quiet,
                loaded - quiet,
                count.server_cpu_per_file_s,
            )
        )
    return found


Expected = tuple[str, str, int, float, float, float, float]


def expectations(run: Run, counts: list[ClientCount]) -> list[Expected]:
    """(client, direction, files, measured s, expected s, this link's client and server CPU per file in s) of
    every client's largest small-file set that has the link's own CPU per file (two set sizes copied)."""
    rtt_s = run_rtt_s(run)
    own = cpu_per_file_s(run)
    found = []
    for row, count, path, paced in _predictable(run, counts):
        client_s, server_s = own.get((row.label, row.direction), (None, None))
        if count.setup_s is None or client_s is None or server_s is None:
            continue
        expected = expected_s(count, row.files, row.bytes // row.files, rtt_s, path, client_s, server_s, paced)
        measured = statistics.median(s.seconds for s in row.good_samples)
        found.append((row.label, row.direction, row.files, measured, expected, client_s, server_s))
    return found


def show_expected(link: str, rows: list[Expected], counts: list[ClientCount]) -> int:
    """The expected/measured table of one link; returns the misses."""
    if not rows:
        print(f"\n{link}: no expectation: the run has no two set sizes of a client (saved before they were copied?)")
        return 0
    by_client = {(c.label, c.direction): c for c in counts}
    print(
        f"\n{link}: expected with this link's own CPU per file (its two sets' slope), the round trips, setup and"
        " delayed-ACK waits from the counts, by the ceiling's model (a client that takes turns: both sides' CPU)"
    )
    head = f"{'client':<22}{'dir':<10}{'CPU':>6}{'expected':>10}{'measured':>10}{'ratio':>7}  holds"
    print(f"{head}{'client':>9}{'server':>9}")
    held = 0
    for label, direction, files, measured, expected, client_s, server_s in rows:
        ratio = expected / measured
        ok = abs(ratio - 1) <= HOLDS
        held += ok
        in_turn = waited_round_trips(by_client[(label, direction)]) > 0
        print(
            f"{label:<22}{direction:<10}{'sum' if in_turn else 'max':>6}{expected / files * 1e3:>8.1f}ms"
            f"{measured / files * 1e3:>8.1f}ms{ratio:>7.2f}  {'yes' if ok else 'NO ':<5}"
            f"{client_s * 1e3:>7.2f}ms{server_s * 1e3:>7.2f}ms"
        )
    print(f"{held} of {len(rows)} expectations within {HOLDS:.0%}")
    return len(rows) - held


def _server_cpu_method(run: Run) -> str:
    """How a run's copies read the server's CPU (its link document says, since the lab read it from its cgroup)."""
    return str((run.link or {}).get("server_cpu_per_copy") or "process trees")


def _flags(link: str, small: list[str], protocols: str, repeat: int) -> dict[str, object]:
    return {
        "link": link,
        "protocols": protocols,
        "sizes": "",
        "small": small,
        "repeat": repeat,
        "warmup": 1,
        "tcp_duration": 1.0,
    }


def measure(link: str, files: int, protocols: str, repeat: int) -> Run:
    """A lab run on `link` of a set of `files` 64 KiB files, and of one a third its size for the link's own CPU per
    file (cpu_per_file_s)."""
    sets = [f"{n}x64K" for n in sorted({max(2, files // 3), files})]
    return lab_run(_flags(link, sets, protocols, repeat), f"per-file predictions on {link}")[0]


def show(link: str, run: Run, rows: list[Prediction], counted_by: str) -> int:
    rtt = run_rtt_s(run) * 1e3
    print(
        f"\n{link}: idle RTT {rtt:.2f} ms; predicted from the counts by the per-file ceiling's model, per file (the"
        " set's time / its files)"
    )
    print(f"server CPU per copy read from: {counted_by} (counts), {_server_cpu_method(run)} ({link})")
    head = f"{'client':<22}{'dir':<10}{'RT/file':>8}{'predicted':>11}{'measured':>10}{'ratio':>7}  holds"
    print(f"{head}{'+waits':>9}{'ratio':>7}{'wait':>9}{'srv CPU':>9}")
    held = held_waits = 0
    for label, direction, files, trips, waits, measured, predicted, waited, server_s in rows:
        ratio = predicted / measured
        ok = abs(ratio - 1) <= HOLDS
        held += ok
        held_waits += abs(waits / measured - 1) <= HOLDS
        per_file_ms = [value / files * 1e3 for value in (predicted, measured, waits, waited)]
        print(
            f"{label:<22}{direction:<10}{trips:>8.2f}{per_file_ms[0]:>9.1f}ms{per_file_ms[1]:>8.1f}ms"
            f"{ratio:>7.2f}  {'yes' if ok else 'NO ':<5}{per_file_ms[2]:>7.1f}ms{waits / measured:>7.2f}"
            f"{per_file_ms[3]:>7.2f}ms{'' if server_s is None else f'{server_s * 1e3:>7.2f}ms'}"
        )
    print(f"{held} of {len(rows)} predictions within {HOLDS:.0%} ({held_waits} with the waits for a core added)")
    return len(rows) - held


def _load_counts(path: Path) -> list[ClientCount]:
    return [ClientCount(**{**c, "files": tuple(c["files"])}) for c in json.loads(path.read_text())["counts"]]


def show_swing(counts: list[ClientCount], other: list[ClientCount]) -> None:
    """Each side's CPU per file in two countings, and how far apart they are: the reading's noise between runs."""
    by_client = {(c.label, c.direction): c for c in other}
    print(f"\nCPU per file in two countings (ms): {'server':>15}{'client':>16}")
    gaps: dict[str, list[float]] = {"server": [], "client": []}
    for count in counts:
        again = by_client.get((count.label, count.direction))
        if again is None:
            continue
        cells = []
        for side in gaps:
            first, second = getattr(count, f"{side}_cpu_per_file_s"), getattr(again, f"{side}_cpu_per_file_s")
            if first is None or second is None:
                cells.append(f"{'-':>16}")
                continue
            gaps[side].append(abs(first - second) * 1e3)
            cells.append(f"{first * 1e3:>8.2f}{second * 1e3:>8.2f}")
        print(f"{count.label:<22}{count.direction:<10}{''.join(cells)}")
    for side, found in gaps.items():
        if found:
            print(
                f"{side} CPU per file, the two countings apart: median {statistics.median(found):.2f} ms, "
                f"largest {max(found):.2f} ms, {sum(g <= 0.25 for g in found)} of {len(found)} within 0.25 ms"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=Path, help="bench/count_exchanges.py --json output (else counted now)")
    parser.add_argument("--links", default="wan,gige")
    parser.add_argument("--files", default="wan=8,gige=30", help="files per set on each link")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--protocols", default="all")
    parser.add_argument("--count-files", default="4,12", help="the two wifi-ac set sizes counted, e.g. 4,12")
    parser.add_argument("--save", type=Path, help="keep the counts and each link's run in this directory")
    parser.add_argument("--runs", type=Path, help="predict from a --save directory's counts and runs, no lab")
    parser.add_argument("--swing", type=Path, help="another counts.json: each side's CPU per file in both, apart")
    args = parser.parse_args()
    counts_file = args.runs / "counts.json" if args.runs else args.counts
    counted_by = "unknown"
    if counts_file:
        counts = _load_counts(counts_file)
        counting_file = counts_file.parent / "wifi-ac.json"
        if counting_file.exists():  # the run they were counted in: each count's setup under the current model
            counting = Run.from_json(json.loads(counting_file.read_text()))
            counts = with_setups(counting, counts)
            counted_by = _server_cpu_method(counting)
    else:
        flags = {**_flags("wifi-ac", [f"{n}x64K" for n in args.count_files.split(",")], args.protocols, args.repeat)}
        counting, packets, marks = lab_run(flags, "count exchanges on wifi-ac")
        counts = count_clients(counting, packets, marks)
        counted_by = _server_cpu_method(counting)
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            doc = {"link": "wifi-ac", "counts": [dataclasses.asdict(c) for c in counts]}
            (args.save / "counts.json").write_text(json.dumps(doc, indent=1))
            (args.save / "wifi-ac.json").write_text(json.dumps(counting.to_json()))
    files = dict((k, int(v)) for k, v in (item.split("=") for item in args.files.split(",")))
    missed = 0
    for link in args.links.split(","):
        if args.runs:
            run = Run.from_json(json.loads((args.runs / f"{link}.json").read_text()))
        else:
            run = measure(link, files.get(link, 10), args.protocols, args.repeat)
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                (args.save / f"{link}.json").write_text(json.dumps(run.to_json()))
        missed += show(link, run, predictions(run, counts), counted_by)
        missed += show_expected(link, expectations(run, counts), counts)
    if args.swing:
        show_swing(counts, _load_counts(args.swing))
    print(f"\nfile size counted on: {COUNTED_FILE_BYTES // 1024} KiB")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

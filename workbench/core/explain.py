"""Explain each row: its share of the raw TCP limit, the ceiling that bounds it (workbench.core.ceiling) when
one does, what the kernel's TCP counters said limited it (workbench.shared.triage), and the run's verdict.

A ceiling explains a row only when it is within 25 % of the measured rate; a row no ceiling explains is
labelled `unexplained`, with its lowest ceiling and its triage beside it rather than a label that misleads.
`explain` returns the explanation as its own value; the run and its rows are left as they are.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from workbench.core import fixedcost
from workbench.core.ceiling import (
    DELAYED_ACK_S,
    EXPLAINS,
    UNEXPLAINED,
    Bound,
    CryptoSide,
    bounds_from_details,
    crypto_bound,
    crypto_in_use,
    explaining_bound,
    format_bound,
    format_ms,
    holds,
    link_goodput_bytes_per_s,
    noise_share,
    path_rate,
    per_file_bound,
    sender_paces_bursts,
    with_fixed_cost,
)
from workbench.core.results import INTERVAL_S, Baseline, Explanation, Result, RowExplanation, Run, Sample
from workbench.core.verdict import verdict, verdict_notes
from workbench.protocols import exchanges
from workbench.protocols.exchanges import COUNTED_FILE_BYTES
from workbench.shared import cryptocost
from workbench.shared.cryptocost import CryptoCosts
from workbench.shared.triage import TcpTriage
from workbench.shared.wire import RowWire, overhead_notes

# Which ceilings a triage limit agrees with: the model and the kernel tell one story when they match.
AGREES = {
    "application": {"requests", "per-file", "cpu", "ssh-window"},
    "receive-window": {"window", "ssh-window"},
    "send-buffer": {"window"},
    "network": {"link", "raw-tcp"},
}


def _cpu_fraction(row: Result, attr: str) -> float | None:
    values = [getattr(s, attr) / s.seconds for s in row.good_samples if getattr(s, attr) is not None and s.seconds > 0]
    return statistics.median(values) if values else None


def _median_seconds(row: Result) -> float | None:
    secs = [s.seconds for s in row.good_samples if s.seconds > 0]
    return statistics.median(secs) if secs else None


def _median_cpu_s(row: Result, attr: str) -> float | None:
    """The median CPU seconds one copy of the row took on one side (`client_cpu_s` or `server_cpu_s`)."""
    values = [getattr(s, attr) for s in row.good_samples if getattr(s, attr) is not None]
    return statistics.median(values) if values else None


def _turnaround_s(row: Result, side: str, cost: fixedcost.FixedCost | None) -> float | None:
    """One side's ("client", "server") CPU time per request of a request/response client: its share of each
    request's turn (ceiling.requests_s). Less, as per file (_per_file_ceiling), the work a copy does once
    (fixedcost.PER_COPY_CPU_S) and, for the client, what a fitted fixed cost's start-up could have taken of it: the
    login that the fixed cost charges is not charged again spread over the requests."""
    size = row.details.request_bytes
    cpu = _median_cpu_s(row, f"{side}_cpu_s")
    if not size or cpu is None or row.bytes <= 0:
        return None
    once_s = fixedcost.PER_COPY_CPU_S
    if side == "client" and cost is not None and cost.client_cpu_s is not None:
        once_s += cost.client_cpu_s
    requests = max(1, -(-row.bytes // size)) + (row.files if row.files > 1 else 0)
    return max(0.0, cpu - once_s) / requests


def _seen_pacing(row: Result) -> bool:
    """Whether the row's sender was seen pacing each burst after a turn: its sockets read in BBR's start-up for
    most of its bytes (TcpTriage.bbr_in_startup). What the requests ceiling charges a paced burst on, where the
    per-file one also takes the run's record of the sending host (paces_bursts): a wifi-ac lab run made before the
    watch read the sockets' state, BBR recorded, had pysmb's 64 KiB requests take 4.1 ms each, less than the 2.8 ms
    RTT and a 1.5 ms paced burst, while runs whose sockets read start-up took 4.5 to 5.6 ms."""
    return paces_bursts(row, None)  # no record of the link: what the sockets said, else nothing paced


@dataclasses.dataclass(frozen=True)
class _Trips:
    """What a small-file set waits for by its client's pattern: round trips per file and per set, files in flight,
    and the waits for a delayed ACK per file and per set (each a timer's time beyond its round trip)."""

    per_file: float
    per_set: float
    in_flight: int
    delayed_acks_per_file: float = 0.0
    delayed_acks_per_set: float = 0.0


def _per_file_trips(row: Result) -> _Trips | None:
    """What a small-file set waits for per file and per set (_Trips); None: no per-file model.

    The client's counted exchanges (workbench.protocols.exchanges) when it has them: taken on files of
    COUNTED_FILE_BYTES, so a request-bound client's other file sizes add or drop their data requests, and
    taken on the wall clock, so files in flight are in the count already; the round trips per file it waits
    for are those of the rule the predictions use too (exchanges.waited_per_file): none when it declares more
    than one file in flight; and its counted waits for delayed ACKs. Else its declared round trips besides the
    data requests (one when it says nothing), with its declared files in flight.
    """
    details = row.details
    if row.files <= 1 or details.streams_sets:  # rsync: no round trip per file
        return None
    per_file = row.bytes / row.files
    size = details.request_bytes
    counted = exchanges.declared(row.label, row.direction)
    if counted is not None:
        more = -(-int(per_file) // size) - -(-COUNTED_FILE_BYTES // size) if size else 0
        keeps_files_in_flight = (details.files_in_flight or 1) > 1
        return _Trips(
            exchanges.waited_per_file(counted.per_file + more, keeps_files_in_flight),
            counted.per_set,
            1,
            counted.delayed_acks_per_file,
            counted.delayed_acks_per_set,
        )
    data_trips = -(-int(per_file) // size) if size else 1  # a request-bound client asks for each request's worth
    in_flight = details.files_in_flight if details.files_in_flight is not None else 1
    if not in_flight:
        return None
    return _Trips(float(data_trips + (details.round_trips_per_file or 0)), 0.0, in_flight)


def _per_file_ceiling(
    row: Result,
    rtt_s: float | None,
    path_bytes_per_s: float | None,
    cost: fixedcost.FixedCost | None,
    paced: bool = False,
) -> Bound | None:
    """The per-file ceiling of a small-file set, one rule for every client and every row: exchanges × RTT, the
    sending side's CPU per file for a client that takes a turn per file, then the longest of the file's bytes at the
    path's rate and the other side's CPU per file, taken to overlap (ceiling.per_file_s says why, and why it is a
    model of measured parts rather than a proven bound).

    The rule is fixed from the inputs before the row's rate is looked at, so a copy that beats it is unexplained
    rather than met by a looser charge. The client's CPU per file (fixedcost.client_cpu_per_file_s, less what its
    start-up could have taken) is charged for a client that copies one file at a time; a client with files in
    flight may overlap it with anything: not charged (nor a round trip per file: _per_file_trips), its set's round
    trips and the longest of its bytes and the server's CPU per file are. Where the sender paced its bursts (`paced`:
    seen in BBR's start-up, else a lab run's BBR sender: paces_bursts), a file's bytes after a turn take at least
    BBR's paced burst (ceiling.paced_burst_s). The time either side waited for a core
    is not charged: measured per thread, the client's and the server's waits
    overlap each other, the other side's work and the wire (charged, they put the ceiling under copies on every
    link); a row that misses its ceiling says how long each side waited. A row with a fixed cost pays its set's
    login in that cost, so the set's own exchanges are not charged twice. A counted wait for a delayed ACK is
    charged ceiling.DELAYED_ACK_S, the shortest timer Linux waits, per file, and per set where no fixed cost holds
    the set's login.
    """
    trips = _per_file_trips(row)
    if trips is None or not rtt_s:
        return None
    per_file, per_set, in_flight = trips.per_file, trips.per_set, trips.in_flight
    server_cpu = _median_cpu_s(row, "server_cpu_s")
    # the server's work once per copy left out (fixedcost.PER_COPY_CPU_S)
    server_s = max(0.0, server_cpu - fixedcost.PER_COPY_CPU_S) / row.files if server_cpu else None
    set_trips = 0.0 if cost is not None else per_set
    set_acks_s = 0.0 if cost is not None else trips.delayed_acks_per_set * DELAYED_ACK_S
    one_at_a_time = (row.details.files_in_flight or 1) == 1
    client_cpu = fixedcost.client_cpu_per_file_s(row, cost) if one_at_a_time else None
    if not (per_file or set_trips or path_bytes_per_s or server_s or client_cpu or trips.delayed_acks_per_file):
        # Nothing known to charge: a client that keeps files in flight and counted no round trip per set (or whose
        # set's own trips are in its fitted fixed cost), on a path without a rate (no raw-TCP baseline) to a server
        # whose CPU is unknown (a stock one).
        return None
    bound = per_file_bound(
        row.bytes,
        row.files,
        per_file,
        rtt_s,
        path_bytes_per_s,
        in_flight,
        server_s,
        client_cpu or None,
        set_trips,
        paced=paced,
        delayed_ack_wait_per_file_s=trips.delayed_acks_per_file * DELAYED_ACK_S,
        direction=row.direction,
    )
    if cost is not None:
        return with_fixed_cost(bound, cost.fixed_s, row.bytes)
    if not set_acks_s:
        return bound
    waited = with_fixed_cost(bound, set_acks_s, row.bytes)  # once per copy, like a fixed cost, but named
    return dataclasses.replace(
        waited, explanation=f"{bound.explanation}, + {format_ms(set_acks_s)} waiting for delayed ACKs per set"
    )


@dataclasses.dataclass(frozen=True)
class _CryptoCosts:
    """What the crypto ceiling needs of the run: each host's measured costs and the server's cap."""

    client: CryptoCosts | None
    server: CryptoCosts | None
    server_cap_cores: float | None


def _crypto_ceiling(row: Result, costs: _CryptoCosts) -> Bound | None:
    """The crypto ceiling of a signed or encrypted SMB row, from both hosts' measured costs per byte.

    The client does its crypto in one process on one core (smbprotocol and pysmb in Python's one thread, smbclient
    in its one process). So does the server: smbd forks one process per client, hands a client's further
    multichannel connections to that same process, and signs and encrypts in its main thread (its thread pool only
    reads and writes files), so it uses one core at most, or its cap when that is less."""
    use = crypto_in_use(row.details)
    if use is None or row.bytes <= 0:
        return None
    server_cores = min(costs.server_cap_cores, 1.0) if costs.server_cap_cores else 1.0
    sides = []
    for name, measured, cores, attr in (
        ("client", costs.client, 1.0, "client_cpu_s"),
        ("server", costs.server, server_cores, "server_cpu_s"),
    ):
        per_byte = measured.for_side(use.algorithm, name) if measured is not None else None
        if per_byte is None:
            continue  # not known there (a stock server, an algorithm not measured): no ceiling from that host
        cpu_s = _median_cpu_s(row, attr)
        whole = cpu_s / row.bytes if cpu_s else None
        sides.append(CryptoSide(name, cores, per_byte, whole, _cpu_fraction(row, attr)))
    return crypto_bound(use, sides)


# What a beaten ceiling's model leaves out, by label.
_MISSING = {
    "per-file": (
        "exchanges or CPU time the client overlaps: round trips that overlap its bytes, a sender's CPU that runs"
        " while its bytes cross or its answer comes back, a side's CPU spread over more than one core, or a counted"
        " pattern gone stale (bench/count_exchanges.py)"
    ),
    "requests": (
        "requests the client keeps in flight beyond the depth it declares, a burst BBR did not pace as slowly as"
        " charged, or CPU charged in turn that ran beside the bytes"
    ),
    "window": "a window larger than the one the copy's sender was seen offered",
    "ssh-window": "an SSH window larger than the one the client declares",
    "link": "a link faster than its measured goodput",
    "raw-tcp": "a path faster than the raw-TCP probe reached (the probe fell short of it)",
    "cpu": "nothing: a CPU ceiling is scaled from the measured rate",
    "crypto": "crypto cheaper there than OpenSSL's was here (another library, or the kernel's), or more cores doing it",
}


def _streamed_cpu(row: Result) -> str:
    """For a set streamed whole (rsync), which has no per-file ceiling: its work per file, each side's CPU per
    file as measured (its start-up's CPU among it)."""
    if not row.details.streams_sets:
        return ""
    sides = [(side, _median_cpu_s(row, f"{side}_cpu_s")) for side in ("client", "server")]
    said = ", ".join(f"{side} {format_ms(cpu / row.files)}" for side, cpu in sides if cpu)
    return (
        f", a set streamed whole doing each file's own work (CPU per file: {said}, its start-up's among it)"
        if said
        else ""
    )


LUMPY = 1.2  # a slot 1.2 × the path's rate or more moved what the link cannot: the meter saw the copy in lumps


def _lost_after_start_s(sample: Sample, rate_bytes_per_s: float, path_bytes_per_s: float) -> float | None:
    """How much longer one copy's progress took, after the slot its data started in (fixedcost.data_started, as
    its start-up is read) and before its last moving slot (both partial), than its bytes there at
    `rate_bytes_per_s`, less the time at that rate of its largest slot (a lump's edge may move that much in or out
    of the slots between, as fixedcost.startup_s allows): an under-estimate. None where the meter saw the copy in
    lumps (a slot of LUMPY × the path's rate or more) or no slot lies between."""
    slots = sample.intervals
    if not slots or rate_bytes_per_s <= 0 or max(slots) >= LUMPY * path_bytes_per_s * INTERVAL_S:
        return None
    started = fixedcost.data_started(slots, sample.bytes)
    last = max((i for i, moved in enumerate(slots) if moved > 0), default=None)
    if started is None or last is None or last <= started + 1:
        return None
    between = slots[started + 1 : last]
    return max(0.0, INTERVAL_S * len(between) - (sum(between) + max(slots)) / rate_bytes_per_s)


def _after_start(
    row: Result, bound: Bound, gap_s: float, path_bytes_per_s: float | None, cost: fixedcost.FixedCost | None
) -> str:
    """', ≈X of it … after its data started, …' for a copy that streams (one file, or a set streamed whole) whose
    fixed cost was read before its data moved (fixedcost.startup): how much longer than its bytes at the rate its
    `bound` streams at (_lost_after_start_s) the median copy took after that, where at least half its copies tell
    and it is LOST_SAID_S or more, and never more than the `gap_s` per copy that the row misses its bound by. Time
    such a fixed cost cannot hold, said apart from the rest of the gap."""
    if cost is None or cost.method != "start-up" or not path_bytes_per_s:
        return ""
    if row.files > 1 and not row.details.streams_sets:
        return ""
    copies = row.good_samples
    lost = [s for c in copies if (s := _lost_after_start_s(c, bound.streaming, path_bytes_per_s)) is not None]
    if 2 * len(lost) < len(copies) or statistics.median(lost) < LOST_SAID_S:
        return ""
    return (
        f", ≈{format_ms(min(statistics.median(lost), gap_s))} of it in the median copy after its data started, which"
        " a fixed cost read before its data moved leaves out"
    )


LOST_SAID_S = 0.01  # under 10 ms a copy's time lost after its data started is within its slots' rounding


def _in_turn(bound: Bound, unit: str = "file", per_copy: str = "") -> str:
    """The first place a row slower than its per-file or requests ceiling may have spent its time: that ceiling
    charges only the longest of the parts it takes to overlap (Bound.overlapping, ceiling.per_file_s and
    ceiling.requests_s), and they may have run one after another; what they would add then per file or per
    request (`unit`; Bound.in_turn_s) is said so that a reader sees whether it covers the time missing, left out
    under IN_TURN_SAID_S, with `per_copy` after it (", ≈… per copy") where the gap is said per copy. Nothing where
    one part alone was charged."""
    if len(bound.overlapping) < 2:
        return ""
    parts = f"{', '.join(bound.overlapping[:-1])} and {bound.overlapping[-1]}"
    adds = ""
    if bound.in_turn_s is not None and bound.in_turn_s >= IN_TURN_SAID_S:
        adds = f" (in turn they would add ≈{format_ms(bound.in_turn_s)} per {unit}{per_copy})"
    return f"the parts charged as overlapping ({parts}) may have run in turn{adds}, or "


IN_TURN_SAID_S = 1e-5  # under 0.01 ms per file, what running in turn would add is not worth a figure


def _off_cpu(row: Result) -> str:
    """Where a one-file-at-a-time client's time beyond its charged CPU may have gone: waiting for a core, with
    how long each side's most-waiting thread waited per file where measured (not charged, see _per_file_ceiling)."""
    said = []
    for side in ("client", "server"):
        waits = [w for s in row.good_samples if (w := getattr(s, f"{side}_wait_s")) is not None]
        if waits:
            said.append(f"the {side} ≈{format_ms(statistics.median(waits) / row.files)}")
    if said:
        return (
            f" and off its CPU: waiting for a core ({' and '.join(said)} per file, measured; waits overlap each "
            "other and the wire, so they are not charged), or on the client's own threads"
        )
    return (
        " and off its CPU: waiting for a core on a loaded host, or on the client's own threads (CPU wait is not "
        "measured)"
    )


def _unmodelled(
    row: Result,
    median: float,
    bound: Bound,
    rtt_s: float | None,
    cost: fixedcost.FixedCost | None,
    path_bytes_per_s: float | None,
) -> str:
    """What a row's time holds beyond its lowest ceiling, in words: per file for a set, else per copy."""
    fixed_s = cost.fixed_s if cost is not None else None
    spent_s = row.bytes / median
    modelled_s = row.bytes / bound.bytes_per_s
    gap_s = max(0.0, spent_s - modelled_s)
    trips = f" (≈{gap_s / row.files / rtt_s:.1f} RTT)" if rtt_s else ""
    if row.files > 1:
        setup = (
            ", its process start and login among it (no fixed cost fitted)"
            if row.details.timed_includes_setup and fixed_s is None
            else ""
        )
        # a per-file ceiling of a client one file at a time charged the busier side's CPU already (_per_file_ceiling)
        one_at_a_time = bound.label == "per-file" and (row.details.files_in_flight or 1) == 1
        cpu = _off_cpu(row) if one_at_a_time else _streamed_cpu(row)
        per_file = format_ms(gap_s / row.files)
        starved = "" if one_at_a_time else _starved(row)  # said per file by _off_cpu
        in_turn = _in_turn(bound) if bound.label == "per-file" else ""
        after = _after_start(row, bound, gap_s, path_bytes_per_s, cost)
        return (
            f"≈{per_file} per file{trips}{after}: {in_turn}time the client or server spends off the wire{cpu}{setup}"
            f"{starved}"
        )
    triage = row.tcp
    said = f"; the {triage.side}'s TCP counters say {triage.limit}" if triage is not None and triage.limit else ""
    said += _starved(row)
    if row.details.timed_includes_setup and fixed_s is None:
        return (
            f"≈{format_ms(gap_s)} per copy, the process start and login each copy pays: no fixed cost could be "
            f"fitted (it needs single files of two sizes){said}"
        )
    after = _after_start(row, bound, gap_s, path_bytes_per_s, cost)
    in_turn = ""
    if bound.label == "requests" and row.details.request_bytes and bound.in_turn_s:
        # the ceiling's parts are per round of the requests outstanding (ceiling.requests_s)
        n = max(1, row.details.requests_in_flight or 1)
        rounds = -(-row.bytes // (row.details.request_bytes * n))
        unit = "request" if n == 1 else f"round of {n} requests"
        in_turn = _in_turn(bound, unit, f", ≈{format_ms(rounds * bound.in_turn_s)} per copy")
    if in_turn:  # "...may have run in turn (...), or " leads the rest of the sentence
        return f"≈{format_ms(gap_s)} per copy: {in_turn}time no ceiling counts{after}{said}"
    return f"≈{format_ms(gap_s)} per copy that no ceiling counts{after}{said}"


STARVED = 0.1  # a copy whose client or server waited for a core a tenth of its time or more was CPU-starved


def _wait_shares(row: Result, side: str) -> list[float]:
    """Each good copy's wait for a core on one side (its most-waiting thread's) as a share of the copy's time."""
    attr = f"{side}_wait_s"
    return [w / s.seconds for s in row.good_samples if (w := getattr(s, attr)) is not None and s.seconds > 0]


def _starved(row: Result) -> str:
    """'; CPU-starved: …' when a side of a single copy waited for a core STARVED of its time or more (median over
    the copies): what the copy lost to other work on a loaded host, which no ceiling of one copy charges."""
    said = []
    for side in ("client", "server"):
        shares = _wait_shares(row, side)
        if shares and statistics.median(shares) >= STARVED:
            said.append(f"the {side} waited for a core {statistics.median(shares):.0%} of the copy")
    return f"; CPU-starved: {' and '.join(said)}" if said else ""


def _load_note(run: Run) -> str | None:
    """How much of the copies' time their threads waited for a core (median over copies, each side's
    most-waiting thread), where that is STARVED or more on either side: the host was loaded by other work."""
    said = []
    for side in ("client", "server"):
        shares = [share for row in run.results for share in _wait_shares(row, side)]
        if shares:
            said.append((side, statistics.median(shares), max(shares)))
    if not any(median >= STARVED for _, median, _ in said):
        return None
    parts = ", ".join(f"the {side}'s {median:.0%} (up to {most:.0%})" for side, median, most in said)
    return (
        f"a loaded host: the copies waited for a core a median {parts} of their time; rows that miss their ceiling "
        "say how long they waited"
    )


METER_AGREES = 0.02  # the lab's goodput meter and raw TCP up within 2 % are one figure


def _goodput_note(run: Run) -> str | None:
    """Where the lab's goodput meter and the raw-TCP probe up (both one stream, client to server, on the same
    link) read more than 2 % apart: the two figures and which one fell short. The ceilings take the link's
    expected goodput and raw TCP, never the meter's figure."""
    meter = (run.link or {}).get("goodput_bytes_per_s")
    raw = run.baseline.up_bytes_per_s
    if not meter or not raw or abs(meter - raw) <= METER_AGREES * raw:
        return None
    low = (
        "the meter's round met CPU contention the probe did not (see the link's notes)"
        if meter < raw
        else "the raw-TCP probe fell short of the link"
    )
    return (
        f"the lab's goodput meter read {meter * 8 / 1e6:,.0f} Mbit/s and raw TCP {raw * 8 / 1e6:,.0f} Mbit/s up "
        f"on the same link: {low}; the ceilings use the link's expected goodput and raw TCP"
    )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def explain(run: Run, host: str) -> Explanation:
    """Every row's share of raw TCP, the ceiling that explains it (or `unexplained`), the run-level notes and
    the verdict.

    `host` is the far host the run copied to: a loopback one explains every row by this host's CPU.
    """
    rtt_s = run.least_rtt_ms / 1e3 if run.least_rtt_ms else None
    # The link bound is the TCP goodput the link can carry this way (rate less framing and headers), not its rate.
    costs, notes_on_costs = _fixed_costs(run.results, run.link, run.baseline)
    cap = cryptocost.server_cpu_cap_cores(run.link)
    crypto = _CryptoCosts(cryptocost.from_run(run.meta, "client"), cryptocost.from_run(run.meta, "server"), cap)
    rows: list[RowExplanation] = []
    for index, row in enumerate(run.results):
        link_bytes_per_s = link_goodput_bytes_per_s(run.link, row.direction)
        paced = paces_bursts(row, run.link)
        rows.append(_explain_row(row, run.baseline, link_bytes_per_s, rtt_s, costs.get(index), crypto, paced))
    notes: list[str] = []
    cpu_rows = sum(why.bound == "cpu" for why in rows)
    loopback = _is_loopback(host)
    if loopback:
        notes.append(
            "loopback: no wire between client and server, so raw TCP is a memory-copy rate and the copies are "
            "bound by CPU on this host (client, server and kernel share its cores); use the lab or a second host "
            "for link-bound figures"
        )
    elif cpu_rows:
        notes.append(f"{cpu_rows} row(s) were CPU-bound: a process sat near a full core, not the network")
    notes.extend(notes_on_costs)
    meter = _goodput_note(run)
    if meter:
        notes.append(meter)
    load = _load_note(run)
    if load:
        notes.append(load)
    stalled = [f"{r.label} {r.direction} {r.file_set}" for r in run.results if r.stall_count]
    if stalled:
        notes.append(f"stalls (100 ms intervals with almost no progress mid-copy) in: {', '.join(stalled)}")
    notes.extend(overhead_notes([_row_wire(r) for r in run.results]))
    said = verdict(run, rows, loopback=loopback)
    notes.extend(verdict_notes(run, rows, said))
    return Explanation(rows=tuple(rows), notes=tuple(notes), verdict=tuple(said))


def paces_bursts(row: Result, link: Mapping[str, Any] | None) -> bool:
    """Whether the row's sender paced each burst after a turn: what its sockets said (TcpTriage.bbr_in_startup:
    most of the bytes sent by BBR in start-up), else, where they did not say, what the run recorded of the sending
    host (`link`: a lab run's congestion control, ceiling.sender_paces_bursts).

    The state decides, not the congestion control alone: BBR paces a burst per turn slowly only in start-up, which a
    connection that sends a burst per turn never leaves, and which one that carried a bulk copy before has left. On
    the wan lab aiohttp's 100 × 64 KiB sets on the session its 64 MiB copy had used took 48 ms per file, where the
    paced ceiling charged 62.6; with a 1 KiB copy before them, 61 ms, within 2 % of it."""
    seen = row.tcp.bbr_in_startup if row.tcp is not None else None
    return sender_paces_bursts(link, row.direction) if seen is None else seen


def _row_wire(row: Result) -> RowWire:
    tcp = row.wire_tcp
    return RowWire(
        protocol=row.protocol,
        label=f"{row.label} {row.direction} {row.file_set}",
        per_file_byte=row.wire_bytes_per_file_byte,
        iface_to_wire=tcp.iface_to_wire if tcp is not None else None,
        wire_bytes=tcp.wire_bytes if tcp is not None else None,
        iface_kind=tcp.iface_kind if tcp is not None else None,
        iface_name=tcp.iface_name if tcp is not None else None,
        retransmitted_share=row.retransmitted_share,
    )


def _explain_row(
    row: Result,
    base: Baseline,
    link_bytes_per_s: float | None,
    rtt_s: float | None,
    cost: fixedcost.FixedCost | None,
    crypto: _CryptoCosts | None = None,
    paced: bool = False,
) -> RowExplanation:
    median = row.median_bytes_per_s
    if not median:
        return RowExplanation()
    tcp = base.for_direction(row.direction)
    triage = row.tcp
    window_bytes = window_rtt_s = None
    if triage is not None and triage.seen_enough and triage.max_window_bytes and triage.rtt_ms:
        # The window the copy's sender was actually offered, over the RTT it saw under load.
        window_bytes, window_rtt_s = triage.max_window_bytes, triage.rtt_ms / 1e3
    found = bounds_from_details(
        row.details,
        link_bytes_per_s=link_bytes_per_s,
        rtt_s=rtt_s,
        window_bytes=window_bytes,
        window_rtt_s=window_rtt_s,
        raw_tcp_bytes_per_s=tcp,
        server_turnaround_s=_turnaround_s(row, "server", cost),
        client_turnaround_s=_turnaround_s(row, "client", cost),
        direction=row.direction,
        paced=_seen_pacing(row),
        client_cpu=_cpu_fraction(row, "client_cpu_s"),
        server_cpu=_cpu_fraction(row, "server_cpu_s"),
        measured_bytes_per_s=median,
        server_cores=crypto.server_cap_cores if crypto is not None else None,
    )
    crypto_ceiling = _crypto_ceiling(row, crypto) if crypto is not None else None
    if crypto_ceiling is not None:
        found.append(crypto_ceiling)
    path_bytes_per_s = path_rate(link_bytes_per_s, tcp)
    if cost is not None:
        found = [with_fixed_cost(b, cost.fixed_s, row.bytes) for b in found]
    noise = noise_share([s.bytes_per_s for s in row.good_samples if s.seconds > 0], median)
    per_file = _per_file_ceiling(row, rtt_s, path_bytes_per_s, cost, paced)
    if per_file is not None:
        found.append(per_file)
    beaten = [b for b in found if not holds(b, median, noise)]
    kept = [b for b in found if b not in beaten]
    bound, explains = explaining_bound(kept, median)
    label = explanation = None
    if beaten:
        lowest = min(beaten, key=lambda b: b.bytes_per_s)
        label, bound = UNEXPLAINED, lowest
        explanation = (
            f"the copy beats its {lowest.label} ceiling by {100 * (median / lowest.bytes_per_s - 1):.0f} % "
            f"(noise {100 * noise:.0f} %): {format_bound(lowest)}; the model is missing {_MISSING[lowest.label]}"
        )
    elif bound is not None:
        label = bound.label if explains else UNEXPLAINED
        explanation = (
            format_bound(bound)
            if explains
            else f"no ceiling within {100 * EXPLAINS:.0f} %: the lowest, {format_bound(bound)}, "
            f"is {bound.bytes_per_s / median:.2g}× the rate; the model is missing "
            f"{_unmodelled(row, median, bound, rtt_s, cost, path_bytes_per_s)}"
        )
    why = RowExplanation(
        pct_of_tcp=100.0 * median / tcp if tcp else None,
        ceiling_bytes_per_s=bound.bytes_per_s if bound is not None else None,
        bound=label,
        bound_explanation=explanation,
        bounds=tuple(found),
        per_file_s=_per_file_cost(row, cost, path_bytes_per_s),
        triage_note=_disagreement(triage, label),
    )
    if cost is not None:
        why = dataclasses.replace(
            why, fixed_cost_s=round(cost.fixed_s, 4), streaming_bytes_per_s=round(cost.streaming_bytes_per_s)
        )
    return why


def _per_file_cost(row: Result, cost: fixedcost.FixedCost | None, path_bytes_per_s: float | None) -> float | None:
    """Seconds each file of a set costs beyond its bytes at the streaming rate and the fixed cost per copy:
    fitted from the set against the single files (their fit, else the path's rate)."""
    seconds = _median_seconds(row)
    streaming = cost.streaming_bytes_per_s if cost is not None else path_bytes_per_s
    if row.files <= 1 or seconds is None or not streaming:
        return None
    fixed = cost.fixed_s if cost is not None else 0.0
    return round(max(seconds - fixed - row.bytes / streaming, 0.0) / row.files, 6)


def _disagreement(triage: TcpTriage | None, label: str | None) -> str | None:
    """A line when the kernel's counters name another limit than the ceiling that binds: both are shown."""
    if triage is None or triage.limit in (None, "mixed") or label is None:
        return None
    if label != UNEXPLAINED and label in AGREES.get(triage.limit, set()):
        return None
    what = "no ceiling explains the rate" if label == UNEXPLAINED else f"the model's ceiling is {label}"
    return f"the {triage.side}'s TCP counters say {triage.limit} ({triage.short()}); {what}"


def _fixed_costs(
    rows: Sequence[Result], link: Mapping[str, Any] | None, base: Baseline
) -> tuple[dict[int, fixedcost.FixedCost], list[str]]:
    """Per client and direction, the fixed cost every copy pays (fixedcost.of_rows): fitted over its single-file
    rows and the sets it streams whole, else seen in a client started per copy before its data moved.

    Returns the fit of each row (by index) that has one, small-file sets of the same client and direction
    included, and a note per client and direction.
    """
    groups: dict[tuple[str, str], list[int]] = {}
    for index, row in enumerate(rows):
        if (row.files == 1 or row.details.streams_sets) and row.good_samples:
            groups.setdefault((row.label, row.direction), []).append(index)
    costs: dict[int, fixedcost.FixedCost] = {}
    notes = []
    for (label, direction), group in groups.items():
        path = path_rate(link_goodput_bytes_per_s(link, direction), base.for_direction(direction))
        cost = fixedcost.of_rows([rows[i] for i in group], path)
        if cost is None:
            continue
        for index, row in enumerate(rows):
            if row.label == label and row.direction == direction and row.good_samples:
                costs[index] = cost
        smallest = min((rows[i] for i in group), key=lambda r: r.bytes)
        notes.append(
            f"{label} {direction}: ≈{format_ms(cost.fixed_s)} fixed per copy"
            f"{' (before its data moved)' if cost.method == 'start-up' else ''}, "
            f"{cost.streaming_bytes_per_s / 1e6:.1f} MB/s "
            f"once streaming ({cost.share_of(smallest.bytes):.0%} of a {smallest.file_set} copy is the fixed part)"
        )
    return costs, notes

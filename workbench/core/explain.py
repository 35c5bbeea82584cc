"""Explain each row: its share of the raw TCP limit, and the ceiling (link, window, requests, ssh-window,
cpu) that bounds it, computed by workbench.core.ceiling from what this run measured.

`explain` returns the explanation as its own value; the run and its rows are left as they are.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import statistics
from collections.abc import Sequence

from workbench.core import fixedcost
from workbench.core.ceiling import Bound, binding_bound, bounds_from_details, format_bound, format_bytes, format_ms
from workbench.core.results import Baseline, Explanation, Result, RowExplanation, Run


def _cpu_fraction(row: Result, attr: str) -> float | None:
    values = [getattr(s, attr) / s.seconds for s in row.good_samples if getattr(s, attr) is not None and s.seconds > 0]
    return statistics.median(values) if values else None


def _per_file_bound(row: Result, rtt_s: float | None) -> Bound | None:
    """Small-file sets: a client that waits for each file needs at least one round trip per file."""
    if row.files <= 1 or not rtt_s:
        return None
    if row.details.streams_sets:  # rsync: no round trip per file
        return None
    in_flight = row.details.files_in_flight if row.details.files_in_flight is not None else 1
    if not in_flight:
        return None
    per_file = row.bytes // row.files
    return Bound(
        "requests",
        per_file * in_flight / rtt_s,
        f"{format_bytes(per_file)} × {in_flight} file(s) in flight / {format_ms(rtt_s)}: one round trip per file",
    )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def explain(run: Run, host: str) -> Explanation:
    """Every row's share of raw TCP and the ceiling that bounds it, and the notes on the whole run.

    `host` is the far host the run copied to: a loopback one explains every row by this host's CPU.
    """
    rtt_s = run.baseline.rtt_ms / 1e3 if run.baseline.rtt_ms else None
    # The link bound is the TCP goodput the link can carry (rate less framing and headers), not its raw rate.
    link = run.link or {}
    link_bps = link.get("expected_goodput_bps") or link.get("rate_bps")
    costs, notes_on_costs = _fixed_costs(run.results)
    rows: list[RowExplanation] = []
    for index, row in enumerate(run.results):
        why = _explain_row(row, run.baseline, link_bps, rtt_s)
        cost = costs.get(index)
        if cost is not None:
            why = dataclasses.replace(
                why, fixed_cost_s=round(cost.fixed_s, 4), streaming_bytes_per_s=round(cost.streaming_bytes_per_s)
            )
        rows.append(why)
    notes: list[str] = []
    cpu_rows = sum(why.bound == "cpu" for why in rows)
    if _is_loopback(host):
        notes.append(
            "loopback: no wire between client and server, so raw TCP is a memory-copy rate and the copies are "
            "bound by CPU on this host (client, server and kernel share its cores); use the lab or a second host "
            "for link-bound figures"
        )
    elif cpu_rows:
        notes.append(f"{cpu_rows} row(s) were CPU-bound: a process sat near a full core, not the network")
    notes.extend(notes_on_costs)
    stalled = [f"{r.label} {r.direction} {r.file_set}" for r in run.results if r.stall_count]
    if stalled:
        notes.append(f"stalls (100 ms intervals with almost no progress mid-copy) in: {', '.join(stalled)}")
    return Explanation(rows=tuple(rows), notes=tuple(notes))


def _explain_row(row: Result, base: Baseline, link_bps: float | None, rtt_s: float | None) -> RowExplanation:
    median = row.median_bps
    if not median:
        return RowExplanation()
    tcp = base.for_direction(row.direction)
    found = bounds_from_details(
        row.details,
        link_bps=link_bps,
        rtt_s=rtt_s,
        window_bytes=base.window_bytes,
        client_cpu=_cpu_fraction(row, "client_cpu_s"),
        server_cpu=_cpu_fraction(row, "server_cpu_s"),
        measured_bps=median,
    )
    per_file = _per_file_bound(row, rtt_s)
    if per_file is not None:
        found.append(per_file)
    bound = binding_bound(found)
    return RowExplanation(
        pct_of_tcp=100.0 * median / tcp if tcp else None,
        ceiling_bytes_per_s=bound.bps if bound is not None else None,
        bound=bound.label if bound is not None else None,
        bound_explanation=format_bound(bound) if bound is not None else None,
        bounds=tuple(found),
    )


def _fixed_costs(rows: Sequence[Result]) -> tuple[dict[int, fixedcost.FixedCost], list[str]]:
    """Per client and direction, the fixed cost every copy pays, fitted over its single-file rows.

    Returns the fit of each row (by index) that has one, and a note per client and direction.
    """
    groups: dict[tuple[str, str], list[int]] = {}
    for index, row in enumerate(rows):
        if row.files == 1 and row.good_samples:
            groups.setdefault((row.label, row.direction), []).append(index)
    costs: dict[int, fixedcost.FixedCost] = {}
    notes = []
    for (label, direction), group in groups.items():
        cost = fixedcost.fit([(s.bytes, s.seconds) for i in group for s in rows[i].good_samples])
        if cost is None:
            continue
        costs.update(dict.fromkeys(group, cost))
        smallest = min((rows[i] for i in group), key=lambda r: r.bytes)
        notes.append(
            f"{label} {direction}: ≈{format_ms(cost.fixed_s)} fixed per copy, "
            f"{cost.streaming_bytes_per_s / 1e6:.1f} MB/s "
            f"once streaming ({cost.share_of(smallest.bytes):.0%} of a {smallest.file_set} copy is the fixed part)"
        )
    return costs, notes

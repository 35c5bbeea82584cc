"""Explain each row: its share of the raw TCP limit, and the ceiling (link, window, requests, ssh-window,
cpu) that bounds it, computed by workbench.core.ceiling from what this run measured."""

from __future__ import annotations

import ipaddress
import statistics

from workbench.core import fixedcost
from workbench.core.ceiling import Bound, binding_bound, bounds_from_details, format_bound, format_bytes, format_ms
from workbench.core.plan import Plan
from workbench.core.results import Result, Run


def _cpu_fraction(row: Result, attr: str) -> float | None:
    values = [getattr(s, attr) / s.seconds for s in row.good_samples if getattr(s, attr) is not None and s.seconds > 0]
    return statistics.median(values) if values else None


def _per_file_bound(row: Result, rtt_s: float | None) -> Bound | None:
    """Small-file sets: a client that waits for each file needs at least one round trip per file."""
    if row.files <= 1 or not rtt_s:
        return None
    in_flight = row.details.get("files_in_flight", 1)
    if not in_flight:  # the client streams the set (rsync)
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


def explain_rows(run: Run, plan: Plan) -> list[str]:
    """Fill pct_of_tcp, ceiling_bps, bound on every measured row; return run-level notes."""
    notes: list[str] = []
    base = run.baseline
    rtt_s = base.rtt_ms / 1e3 if base.rtt_ms else None
    # The link bound is the TCP goodput the link can carry (rate less framing and headers), not its raw rate.
    link = run.link or {}
    link_bps = link.get("expected_goodput_bps") or link.get("rate_bps")
    cpu_rows = 0
    for row in run.results:
        median = row.median_bps
        if not median:
            continue
        tcp = base.for_direction(row.direction)
        if tcp:
            row.pct_of_tcp = 100.0 * median / tcp
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
        if bound is not None:
            row.ceiling_bps = bound.bps
            row.bound = bound.label
            row.bound_explanation = format_bound(bound)
            cpu_rows += bound.label == "cpu"
        row.details["bounds"] = [{"label": b.label, "bps": b.bps, "explanation": b.explanation} for b in found]
    if _is_loopback(plan.target.host):
        notes.append(
            "loopback: no wire between client and server, so raw TCP is a memory-copy rate and the copies are "
            "bound by CPU on this host (client, server and kernel share its cores); use the lab or a second host "
            "for link-bound figures"
        )
    elif cpu_rows:
        notes.append(f"{cpu_rows} row(s) were CPU-bound: a process sat near a full core, not the network")
    notes.extend(_fixed_cost_notes(run.results))
    stalled = [f"{r.label} {r.direction} {r.file_set}" for r in run.results if r.stall_count]
    if stalled:
        notes.append(f"stalls (100 ms intervals with almost no progress mid-copy) in: {', '.join(stalled)}")
    return notes


def _fixed_cost_notes(rows: list[Result]) -> list[str]:
    """Per client and direction, the fixed cost every copy pays, fitted over its single-file rows."""
    groups: dict[tuple[str, str], list[Result]] = {}
    for row in rows:
        if row.files == 1 and row.good_samples:
            groups.setdefault((row.label, row.direction), []).append(row)
    notes = []
    for (label, direction), group in groups.items():
        cost = fixedcost.fit([(s.bytes, s.seconds) for row in group for s in row.good_samples])
        if cost is None:
            continue
        for row in group:
            row.details["fixed_cost_s"] = round(cost.fixed_s, 4)
            row.details["streaming_bps"] = round(cost.streaming_bps)
        smallest = min(group, key=lambda r: r.bytes)
        notes.append(
            f"{label} {direction}: ≈{format_ms(cost.fixed_s)} fixed per copy, {cost.streaming_bps / 1e6:.1f} MB/s "
            f"once streaming ({cost.share_of(smallest.bytes):.0%} of a {smallest.file_set} copy is the fixed part)"
        )
    return notes

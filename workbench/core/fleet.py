"""A fleet: the same plan run on several client hosts at once, one server, and what the clients did together.

The clients talk to the controller only over their SSH sessions, in JSON lines (see workbench.core.fleet_member):
each says which step it waits at (observe.STEP_* or a copy's step), the controller's `Barrier` lets steps start,
and each copy's timing comes back with the time since its "go". Steps are tuples compared in plan order, so a
client whose row failed (and skipped that row's copies) simply waits further ahead until the others catch up.

Preparing the test files and each client's own raw-TCP baseline run one client at a time: the files are made
once on the server, and a client's baseline alone is its path to the server with nobody else on it. The
baseline measured by every client at once, and every copy, start together.

`fleet_rows` and `explain_fleet` turn what the clients sent into one run: every client's rows (`client_host` = its
name) and, per plan step, an aggregate row (`client_host` = "all") counted only over the window when every client
was copying (workbench.core.aggregate). Clocks: each copy's start is placed at the controller's time of sending its "go"
plus the time the client reports from receiving it to the copy's first request; the one-way delay of the "go"
(an SSH round trip's half, under a millisecond on a LAN) is the residual offset between clients.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from workbench.core.aggregate import ClientCopy, aggregate_rounds, overlap
from workbench.core.ceiling import Bound
from workbench.core.observe import STEP_BASELINE, STEP_PREPARE
from workbench.core.results import Baseline, Explanation, Result, RowExplanation, Run, Sample

PROTOCOL = "workbench-fleet/1"
ALL_CLIENTS = "all"  # the client_host of an aggregate row
SERIAL_STEPS = (STEP_PREPARE, STEP_BASELINE)  # one client at a time


class Barrier:
    """Which members may start which step: every live member must be waiting before any step starts.

    Then the lowest waited-for step starts: for every member waiting at it, or for the first of them only when
    it is a serial step. A member waiting further ahead (it skipped steps) waits until the others get there.
    """

    def __init__(self, members: Sequence[str]) -> None:
        self.members = list(members)
        self._waiting: dict[str, tuple[int, ...]] = {}
        self._live = set(members)

    def wait(self, member: str, step: Sequence[int]) -> None:
        self._waiting[member] = tuple(step)

    def gone(self, member: str) -> None:
        """The member ended (done or failed): it holds nobody back any more."""
        self._live.discard(member)
        self._waiting.pop(member, None)

    @property
    def live(self) -> list[str]:
        return [m for m in self.members if m in self._live]

    def release(self) -> tuple[tuple[int, ...], list[str]] | None:
        """The step that may start now and who starts it (in member order), or None while someone is busy."""
        live = self.live
        if not live or any(m not in self._waiting for m in live):
            return None
        step = min(self._waiting[m] for m in live)
        going = [m for m in live if self._waiting[m] == step]
        if step in SERIAL_STEPS:
            going = going[:1]
        for member in going:
            del self._waiting[member]
        return step, going


@dataclass(frozen=True)
class CopyEvent:
    """One copy as a member reported it, placed on the controller's clock."""

    host: str  # the client that made it
    step: tuple[int, ...]  # (COPY_STEP, entry, direction, set, attempt)
    label: str
    direction: str
    file_set: str
    started_s: float  # controller's wall clock at the copy's first request
    sample: Sample


@dataclass
class MemberReport:
    """Everything one client sent, kept as it arrived (a client that dies mid-run keeps what it sent)."""

    host: str
    rows: list[Result] = field(default_factory=list)
    copies: list[CopyEvent] = field(default_factory=list)
    baseline: Baseline | None = None
    together: dict[str, tuple[float, float, int]] = field(default_factory=dict)  # direction: start, seconds, bytes
    meta: Mapping[str, Any] | None = None  # the member's run meta (its host, the server, the plan)
    link: Mapping[str, Any] | None = None
    warnings: tuple[str, ...] = ()
    failure: str | None = None  # why it stopped early, in one line; None when it finished
    failure_exit: int = 0  # the exit code that failure would have alone (ExitCode), 0 when none
    started: bool = False  # it answered with a compatible workbench


def together_baseline(reports: Sequence[MemberReport]) -> tuple[Baseline, dict[str, Baseline]]:
    """The raw-TCP rate of all clients at once, each way: what their probes moved inside the window when all of
    them were measuring (as an aggregate row is counted), and each client's own rate inside that window.

    Adding the clients' own rates instead would count the same capacity twice wherever their probes did not
    overlap (an upload's probe ends when its queued bytes have drained, which differs from client to client)."""
    total: dict[str, float | None] = {}
    per_host: dict[str, dict[str, float]] = {r.host: {} for r in reports}
    notes: list[str] = []
    for direction in ("upload", "download"):
        copies = [ClientCopy(r.host, *r.together[direction]) for r in reports if r.together.get(direction) is not None]
        total[direction] = None
        if not copies:
            continue
        window = overlap(copies)
        if window.note:
            notes.append(f"{direction}: {window.note}")
        total[direction] = window.total_bytes_per_s
        for host, rate in (window.per_host_bytes_per_s or {}).items():
            per_host[host][direction] = rate
    return (
        Baseline(
            up_bytes_per_s=total["upload"],
            down_bytes_per_s=total["download"],
            details={"how": "every client's probe at once, counted while all were measuring", "notes": notes},
            error=None if any(total.values()) else "no raw-TCP rate with every client at once",
        ),
        {
            host: Baseline(up_bytes_per_s=rates.get("upload"), down_bytes_per_s=rates.get("download"))
            for host, rates in per_host.items()
            if rates
        },
    )


def _row_key(row: Result) -> tuple[str, str, str]:
    return (row.label, row.direction, row.file_set)


def aggregate_row(
    key: tuple[str, str, str], events: Sequence[CopyEvent], clients: Sequence[str], warmup: int
) -> Result:
    """The aggregate row of one plan step from every client's timed copies of it (warm-ups left out)."""
    label, direction, file_set = key
    protocol, client = label.split("/", 1)
    by_attempt: dict[int, list[CopyEvent]] = {}
    for event in events:
        if event.step[-1] >= warmup:
            by_attempt.setdefault(event.step[-1], []).append(event)
    rounds: list[list[ClientCopy]] = []
    verified: list[bool | None] = []
    notes: list[str] = []
    per_copy_bytes = max((e.sample.bytes for e in events if e.sample.error is None), default=0)
    per_copy_files = max((e.sample.files for e in events), default=1)
    hosts_of: dict[int, list[str]] = {}
    for attempt in sorted(by_attempt):
        good = [e for e in by_attempt[attempt] if e.sample.error is None]
        failed = [e for e in by_attempt[attempt] if e.sample.error is not None]
        if failed:
            notes.append(f"round {attempt - warmup + 1}: {len(failed)} client copy failed and is left out")
        if good and len(good) < len(clients):
            absent = [c for c in clients if c not in {e.host for e in good}]
            notes.append(
                f"round {attempt - warmup + 1}: {len(good)} of {len(clients)} clients copied (not {', '.join(absent)})"
            )
        if not good:
            continue
        hosts_of[len(rounds)] = [e.host for e in good]
        rounds.append(
            [ClientCopy(e.host, e.started_s, e.sample.seconds, e.sample.bytes, tuple(e.sample.intervals)) for e in good]
        )
        verified.append(all(e.sample.verified is True for e in good))
    if not rounds:
        return Result(
            protocol, client, direction, file_set, 0, 0,
            error="no client copy of this step succeeded", client_host=ALL_CLIENTS,
            aggregate=_aggregate_doc(None, [], notes),
        )  # fmt: skip
    # who took part: the clients with a good copy in some round (a client that failed or stopped is not counted)
    took_part = [c for c in clients if any(c in hosts for hosts in hosts_of.values())]
    agg = aggregate_rounds(rounds)
    samples = []
    for index, (o, ok) in enumerate(zip(agg.rounds, verified, strict=True)):
        if o.note:
            notes.append(f"round {index + 1}: {o.note}")
        if o.total_bytes_per_s is None:
            continue
        samples.append(
            Sample(
                bytes=round(sum(o.bytes_by_host.values())),
                seconds=o.seconds,
                files=per_copy_files * len(hosts_of[index]),
                verified=ok,
            )
        )
    if not samples:
        # not a failure: every client's copy stands in its own row; they just never ran at once long enough
        notes.append("no aggregate: the clients never copied at the same time for one 100 ms interval")
    error = None
    return Result(
        protocol, client, direction, file_set, per_copy_bytes * len(took_part), per_copy_files * len(took_part),
        samples=tuple(samples), error=error, client_host=ALL_CLIENTS,
        aggregate=_aggregate_doc(agg, took_part, notes),
    )  # fmt: skip


def _aggregate_doc(agg: Any, clients: Sequence[str], notes: list[str]) -> dict[str, Any]:
    per_client: dict[str, float] = {}
    if agg is not None:
        for host in clients:
            rates = [o.per_host_bytes_per_s.get(host) for o in agg.rounds if o.per_host_bytes_per_s]
            rates = [r for r in rates if r is not None]
            if rates:
                per_client[host] = statistics.median(rates)
    return {
        "clients": list(clients),
        "jain_index": agg.jain_index if agg is not None else None,
        "first_done_s": list(agg.first_done_elapsed_s) if agg is not None else [],
        "last_done_s": list(agg.last_done_elapsed_s) if agg is not None else [],
        "done_spread_s": agg.done_spread_s if agg is not None else None,
        "rounds_without_overlap": agg.rounds_without_overlap if agg is not None else 0,
        "sum_of_rates_bytes_per_s": agg.sum_of_rates_bytes_per_s if agg is not None else None,
        "per_client_bytes_per_s": per_client,
        "notes": notes,
    }


def _keys_in_order(reports: Sequence[MemberReport]) -> list[tuple[str, str, str]]:
    """Every (label, direction, set) any client reported, in plan order (each client reports in plan order)."""
    keys: list[tuple[str, str, str]] = []
    for report in sorted(reports, key=lambda r: -len(r.rows)):
        for row in report.rows:
            key = _row_key(row)
            if key not in keys:
                keys.append(key)
    return keys


def _missing_row(key: tuple[str, str, str], report: MemberReport) -> Result:
    protocol, client = key[0].split("/", 1)
    why = report.failure or "it sent no row for this step"
    return Result(
        protocol, client, key[1], key[2], 0, 0, error=f"{report.host} stopped: {why}", client_host=report.host
    )


def fleet_rows(reports: Sequence[MemberReport], warmup: int, planned: Sequence[tuple[str, str]]) -> list[Result]:
    """The fleet run's rows: per plan step its aggregate row, then each client's row (in client order).

    A client that stopped early gets a failed row, saying why, for each step it did not finish; one that never
    started gets one per planned (client, direction), as a client that cannot connect does in a single run.
    """
    clients = [r.host for r in reports]
    keys = _keys_in_order(reports)
    rows: list[Result] = []
    for key in keys:
        events = [e for r in reports for e in r.copies if (e.label, e.direction, e.file_set) == key]
        rows.append(aggregate_row(key, events, clients, warmup))
        for report in reports:
            mine = [row for row in report.rows if _row_key(row) == key]
            rows.extend(replace(row, client_host=report.host) for row in mine)
            if not mine:
                rows.append(_missing_row(key, report))
    if not keys:
        for report in reports:
            for label, direction in planned:
                rows.append(_missing_row((label, direction, "-"), report))
    return rows


def explain_fleet(
    rows: Sequence[Result],
    reports: Sequence[MemberReport],
    together: Baseline,
    link: Mapping[str, Any] | None,
    host: str,
) -> Explanation:
    """Each client's rows explained against that client's own baseline (as its single run would be); each
    aggregate row's share of the raw-TCP rate all clients reached at once. An aggregate row gets no ceiling:
    the ceilings are one client's (its requests in flight, its CPU), and N clients do not add them up simply."""
    from workbench.core.explain import explain

    by_host = {r.host: r for r in reports}
    mine: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        if row.client_host and row.client_host != ALL_CLIENTS:
            mine.setdefault(row.client_host, []).append(index)
    why: dict[int, RowExplanation] = {}
    said: dict[str, list[str]] = {}
    for client, indexes in mine.items():
        report = by_host[client]
        alone = Run(None, {}, report.baseline or Baseline(), tuple(rows[i] for i in indexes), link=link)
        explained = explain(alone, host)
        for index, one in zip(indexes, explained.rows, strict=True):
            why[index] = _with_share(one, rows[index], rows, together)
        said[client] = [*explained.notes, *report.warnings]
    notes = merged_notes(said, [r.host for r in reports])
    for index, row in enumerate(rows):
        if row.client_host == ALL_CLIENTS:
            rate, tcp = row.median_bytes_per_s, together.for_direction(row.direction)
            why[index] = RowExplanation(
                pct_of_tcp=round(100 * rate / tcp, 1) if rate and tcp else None,
                bound_explanation="aggregate of every client over the time all were copying; no single ceiling",
            )
    return Explanation(
        rows=tuple(why.get(i, RowExplanation()) for i in range(len(rows))),
        notes=tuple(notes),
        verdict=tuple(fleet_verdict(rows, together)),
    )


SHARE = "share"  # a client's ceiling in a fleet: the raw-TCP rate all clients reached at once, split evenly


def _with_share(why: RowExplanation, row: Result, rows: Sequence[Result], together: Baseline) -> RowExplanation:
    """A client's row explained by its share of the path when that explains it better than its ceilings alone.

    Measured alone, a client's ceilings are its own (its window, its requests in flight, the link): copying
    beside others it also gets only a share of the path. The share is the raw-TCP rate of all clients at once
    divided among the clients that copied the same step; it binds when it is the lowest ceiling and lies within
    EXPLAINS of the row's rate, as any bound must (workbench.core.ceiling)."""
    from workbench.core.ceiling import EXPLAINS, UNEXPLAINED

    rate, at_once = row.median_bytes_per_s, together.for_direction(row.direction)
    aggregate = next(
        (r for r in rows if r.client_host == ALL_CLIENTS and _row_key(r) == _row_key(row) and r.aggregate), None
    )
    clients = len((aggregate.aggregate or {}).get("per_client_bytes_per_s") or {}) if aggregate else 0
    if not rate or not at_once or clients < 2:
        return why
    share = at_once / clients
    lowest = why.ceiling_bytes_per_s if why.bound not in (None, UNEXPLAINED) else None
    if (lowest is not None and lowest <= share) or abs(rate - share) > EXPLAINS * share:
        return why
    bound = Bound(
        SHARE, share, f"share ≤ {share / 1e6:.1f} MB/s (raw TCP at once {at_once / 1e6:.1f} MB/s / {clients} clients)"
    )
    return replace(
        why,
        bound=SHARE,
        ceiling_bytes_per_s=share,
        bound_explanation=bound.explanation,
        bounds=(*(why.bounds or ()), bound),
        # "no ceiling explains it" was said for want of this one; a note that names another limit stays
        triage_note=None if why.bound == UNEXPLAINED else why.triage_note,
    )


def merged_notes(said: Mapping[str, Sequence[str]], clients: Sequence[str]) -> list[str]:
    """Each note once: plain when every client said it, else after the names of the clients that did."""
    by_note: dict[str, list[str]] = {}
    for client in clients:
        for note in said.get(client, ()):
            hosts = by_note.setdefault(note, [])
            if client not in hosts:
                hosts.append(client)
    return [note if len(hosts) == len(clients) else f"{', '.join(hosts)}: {note}" for note, hosts in by_note.items()]


def fleet_verdict(rows: Sequence[Result], together: Baseline) -> list[str]:
    """A few sentences: the best and worst aggregate, their fairness, and the clients that failed."""
    aggregates = [r for r in rows if r.client_host == ALL_CLIENTS and r.median_bytes_per_s]
    said: list[str] = []
    if aggregates:
        clients = len((aggregates[0].aggregate or {}).get("clients") or ())
        best = max(aggregates, key=lambda r: r.median_bytes_per_s or 0)
        worst = min(aggregates, key=lambda r: r.median_bytes_per_s or 0)
        for what, row in (("fastest", best), ("slowest", worst)):
            tcp = together.for_direction(row.direction)
            share = (
                f" ({100 * (row.median_bytes_per_s or 0) / tcp:.0f} % of raw TCP with all clients at once)"
                if tcp
                else ""
            )
            jain = (row.aggregate or {}).get("jain_index")
            fair = f", Jain's fairness {jain:.2f}" if jain is not None else ""
            said.append(
                f"The {what} aggregate: {clients} clients together moved {(row.median_bytes_per_s or 0) / 1e6:.1f} "
                f"MB/s with {row.label} {row.direction} {row.file_set}{share}{fair}."
            )
            if best is worst:
                break
    else:
        said.append("No step had all clients copying at once: there is no aggregate to report.")
    failed = sorted({r.client_host for r in rows if r.client_host not in (None, ALL_CLIENTS) and r.error})
    if failed:
        said.append(f"Rows failed on {', '.join(str(h) for h in failed)}; the other clients' rows stand.")
    return said

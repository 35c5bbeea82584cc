"""What a run produced, as plain frozen values, and its versioned JSON document.

Every sample keeps its bytes and seconds so anyone can recompute the rates; summaries are derived.
A row (`Result`) is what was measured; its `RowExplanation` (share of raw TCP, the ceiling that bounds
it) is computed afterwards by workbench.core.explain and kept beside it in the run's `Explanation`.
The JSON document (schema 3, workbench.core.schema) writes both into one object per row.

A fleet run (several client hosts copying at once) holds two kinds of row: a client's own row, whose
`client_host` names that client, and an aggregate row (`client_host` "all") whose `aggregate` says how the
clients shared the server while all of them were copying. Outside a fleet both are None.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from workbench.core.ceiling import Bound
from workbench.core.schema import SCHEMA, upgrade_document
from workbench.core.stats import Summary, find_stalls, summarize
from workbench.protocols.details import ClientDetails
from workbench.shared.jsontypes import JSONValue
from workbench.shared.triage import TcpTriage, merge

INTERVAL_S = 0.1  # per-interval throughput sampling period


@dataclass(frozen=True)
class Sample:
    """One timed copy of a file set."""

    bytes: int
    seconds: float
    files: int = 1
    verified: bool | None = None  # None: could not be checked
    client_cpu_s: float | None = None  # CPU of the client process(es) during the copy (kept to 0.1 ms)
    server_cpu_s: float | None = None  # CPU of the server process(es), when known locally
    intervals: tuple[int, ...] = ()  # bytes moved in each INTERVAL_S slot, from the first request
    error: str | None = None
    tcp: TcpTriage | None = None  # what the kernel's TCP counters said of the copy's connections
    client_wait_s: float | None = None  # run-queue wait of the client's most-waiting thread (schedstat); None: unread
    server_wait_s: float | None = None  # the same of the server's most-waiting thread, when its host reports it

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else 0.0

    @property
    def stalls(self) -> list[tuple[int, int]]:
        """(first interval, length) of each stall."""
        return find_stalls(self.intervals)


@dataclass(frozen=True)
class RowExplanation:
    """What one row reached and what bounds it; every field None (or empty) when it could not be said."""

    pct_of_tcp: float | None = None  # median rate as a percentage of the raw TCP rate the same way
    ceiling_bytes_per_s: float | None = None  # bytes/s: the binding bound's rate
    bound: str | None = None  # the binding bound's label (workbench.core.ceiling.LABELS)
    bound_explanation: str | None = None  # 'window ≤ 46.8 MB/s (window 128 KiB / 2.8 ms)'
    bounds: tuple[Bound, ...] | None = None  # every ceiling found; None: the row had no rate to explain
    fixed_cost_s: float | None = None  # seconds every copy of this client and direction pays (fixedcost.fit)
    streaming_bytes_per_s: float | None = None  # bytes/s of the same fit once the copy streams
    per_file_s: float | None = None  # small-file sets: seconds per file beyond the bytes and the fixed cost
    triage_note: str | None = None  # the TCP counters name another limit than the binding ceiling

    def row_json(self) -> dict[str, Any]:
        """The explanation's keys on the row object (schema 2 onwards)."""
        return {
            "pct_of_tcp": self.pct_of_tcp,
            "ceiling_bytes_per_s": self.ceiling_bytes_per_s,
            "bound": self.bound,
            "bound_explanation": self.bound_explanation,
            "triage_note": self.triage_note,
        }

    def details_json(self) -> dict[str, Any]:
        """The explanation's keys in the row's `details` (only those that were found; schema 2 onwards)."""
        doc: dict[str, Any] = {}
        if self.bounds is not None:
            doc["bounds"] = [
                {"label": b.label, "bytes_per_s": b.bytes_per_s, "explanation": b.explanation} for b in self.bounds
            ]
        if self.fixed_cost_s is not None:
            doc["fixed_cost_s"] = self.fixed_cost_s
        if self.streaming_bytes_per_s is not None:
            doc["streaming_bytes_per_s"] = self.streaming_bytes_per_s
        if self.per_file_s is not None:
            doc["per_file_s"] = self.per_file_s
        return doc

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> RowExplanation:
        """Read back from a row object of schema 2 or later (its own keys and the ones it put in `details`)."""
        details = row.get("details") or {}
        raw_bounds = details.get("bounds")
        return cls(
            pct_of_tcp=row.get("pct_of_tcp"),
            ceiling_bytes_per_s=row.get("ceiling_bytes_per_s"),
            bound=row.get("bound"),
            bound_explanation=row.get("bound_explanation"),
            bounds=tuple(Bound(b["label"], b["bytes_per_s"], b["explanation"]) for b in raw_bounds)
            if isinstance(raw_bounds, list)
            else None,
            fixed_cost_s=details.get("fixed_cost_s"),
            streaming_bytes_per_s=details.get("streaming_bytes_per_s"),
            per_file_s=details.get("per_file_s"),
            triage_note=row.get("triage_note"),
        )


# The keys of an aggregate row's `aggregate` object, every one present (workbench.core.run_schema.json types them).
AGGREGATE_KEYS = (
    "clients",  # the client hosts that took part, in inventory order
    "jain_index",  # median over rounds of Jain's index of the clients' rates in the window; None: no window
    "first_done_s",  # per round: first start -> first client done, seconds
    "last_done_s",  # per round: first start -> last client done, seconds
    "done_spread_s",  # median of last done - first done; None: no round
    "rounds_without_overlap",  # rounds whose clients never all copied at once
    "sum_of_rates_bytes_per_s",  # each client's whole-copy rate added up: for contrast only
    "per_client_bytes_per_s",  # host -> median over rounds of its rate inside the window
    "notes",  # why a round had no window, etc.
)


def _plain(value: JSONValue) -> JSONValue:
    """`value` as its JSON document holds it: mappings as dicts, tuples as lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


# The keys of a row's `details` that are the explanation's, not the client's.
_EXPLANATION_DETAILS = ("bounds", "fixed_cost_s", "streaming_bytes_per_s", "per_file_s")
_UNEXPLAINED = RowExplanation()


@dataclass(frozen=True)
class Explanation:
    """The explanation of a whole run: one RowExplanation per row (in the run's row order) and run-level notes.

    The notes are also among the run's warnings, where the JSON document keeps them (one list since schema 2).
    """

    rows: tuple[RowExplanation, ...]
    notes: tuple[str, ...] = ()
    verdict: tuple[str, ...] = ()  # three to six sentences on the whole run (workbench.core.verdict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(self.rows))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "verdict", tuple(self.verdict))


@dataclass(frozen=True)
class Result:
    """One row: a protocol/client copying a file set in one direction, several times."""

    protocol: str
    client: str
    direction: str  # "upload" | "download"
    file_set: str
    bytes: int  # per copy
    files: int  # per copy
    samples: tuple[Sample, ...] = ()
    warmup: int = 0  # untimed copies made first
    error: str | None = None  # why the row failed, or "unavailable: ..."
    details: ClientDetails = field(default_factory=ClientDetails)
    client_host: str | None = None  # in a fleet run: the client host that measured it, or "all" (aggregate)
    aggregate: Mapping[str, Any] | None = None  # an aggregate row's figures (AGGREGATE_KEYS); None on any other
    # Why the row's copies cannot be checked against the manifest (a reference tool of its own data), or None:
    # such a row is never verified and never a failure for it.
    unverifiable: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "samples", tuple(self.samples))
        if self.aggregate is not None:
            # As JSON holds it (lists, plain dicts), so that a row read back from its document equals the row.
            object.__setattr__(self, "aggregate", _plain(self.aggregate))

    @property
    def label(self) -> str:
        return f"{self.protocol}/{self.client}"

    @property
    def good_samples(self) -> list[Sample]:
        return [s for s in self.samples if s.error is None]

    @property
    def summary(self) -> Summary | None:
        return summarize([s.bytes_per_s for s in self.good_samples])

    @property
    def median_bytes_per_s(self) -> float | None:
        s = self.summary
        return s.median if s else None

    @property
    def files_per_s(self) -> float | None:
        secs = [s.seconds for s in self.good_samples]
        # An aggregate row's samples are overlap windows, which end when the first client is done: its clients'
        # whole file counts over them would overstate the rate (each client's own row has its files/s).
        if not secs or self.files <= 1 or self.aggregate is not None:  # one file per copy says nothing either
            return None
        mid = statistics.median(secs)
        return self.files / mid if mid > 0 else None

    @property
    def verified(self) -> bool:
        good = self.good_samples
        return bool(good) and all(s.verified is True for s in good)

    @property
    def tcp(self) -> TcpTriage | None:
        """The triage of the row's good copies, merged (None when none was watched)."""
        return merge([s.tcp for s in self.good_samples if s.tcp is not None])

    @property
    def wire_tcp(self) -> TcpTriage | None:
        """The triage of the good copies whose sender's wire was seen whole, merged: the row's wire figures are
        theirs (a copy the watch saw only part of would count too few bytes on the wire for its file)."""
        return merge(
            [t for s in self.good_samples if (t := s.tcp) is not None and t.wire_bytes_per_file_byte is not None]
        )

    @property
    def wire_bytes_per_file_byte(self) -> float | None:
        """Bytes the sender put on the wire (payload, retransmissions, IP/TCP headers, Ethernet's where the path
        is Ethernet) per byte of file, over the row's copies seen whole (workbench.shared.wire); None unwatched."""
        return tcp.wire_bytes_per_file_byte if (tcp := self.wire_tcp) is not None else None

    @property
    def retransmitted_share(self) -> float | None:
        """The sender's retransmitted bytes as a share of the bytes it sent; None where only the receiver was seen."""
        tcp = self.tcp
        return tcp.retrans_fraction if tcp is not None and tcp.side == "sender" else None

    @property
    def stall_count(self) -> int:
        return sum(len(s.stalls) for s in self.good_samples)

    @property
    def stall_seconds(self) -> float:
        return sum(length for s in self.good_samples for _, length in s.stalls) * INTERVAL_S

    def to_json(self, explanation: RowExplanation | None = None) -> dict[str, Any]:
        """The row object of schema 3, with what `explanation` says about it (all null without one)."""
        why = explanation or _UNEXPLAINED
        summary = self.summary
        return {
            "protocol": self.protocol,
            "client": self.client,
            "direction": self.direction,
            "file_set": self.file_set,
            "client_host": self.client_host,
            "bytes": self.bytes,
            "files": self.files,
            "warmup": self.warmup,
            "samples": [
                {**asdict(s), "intervals": list(s.intervals), "stalls": [list(run) for run in s.stalls]}
                for s in self.samples
            ],
            "median_bytes_per_s": summary.median if summary else None,
            "mean_bytes_per_s": summary.mean if summary else None,
            "stdev_bytes_per_s": summary.stdev if summary else None,
            "min_bytes_per_s": summary.minimum if summary else None,
            "max_bytes_per_s": summary.maximum if summary else None,
            "files_per_s": self.files_per_s,
            **why.row_json(),
            "stalls": self.stall_count,
            "stall_s": round(self.stall_seconds, 3),
            "verified": self.verified,
            "unverifiable": self.unverifiable,
            "tcp": tcp.to_json() if (tcp := self.tcp) is not None else None,
            "wire_bytes_per_file_byte": self.wire_bytes_per_file_byte,
            "retransmitted_share": self.retransmitted_share,
            "error": self.error,
            "details": {**self.details.to_json(), **why.details_json()},
            "interval_s": INTERVAL_S,
            "aggregate": _plain(self.aggregate) if self.aggregate is not None else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Result:
        """The measured row of a schema-3 row object (RowExplanation.from_json reads the rest); a row object of
        schema 2 or 1 reads too (no `client_host`, no `aggregate`: None)."""
        samples = []
        for raw in data.get("samples", []):
            known = {k: raw.get(k) for k in Sample.__dataclass_fields__ if k in raw}
            known["intervals"] = tuple(raw.get("intervals") or ())
            known["tcp"] = TcpTriage.from_json(raw.get("tcp"))
            samples.append(Sample(**known))
        details = {k: v for k, v in (data.get("details") or {}).items() if k not in _EXPLANATION_DETAILS}
        return cls(
            protocol=data["protocol"],
            client=data["client"],
            direction=data["direction"],
            file_set=data["file_set"],
            bytes=data["bytes"],
            files=data.get("files", 1),
            samples=tuple(samples),
            warmup=data.get("warmup", 0),
            error=data.get("error"),
            details=ClientDetails.from_json(details),
            client_host=data.get("client_host"),
            aggregate=data.get("aggregate"),
            unverifiable=data.get("unverifiable"),
        )


@dataclass(frozen=True)
class Baseline:
    """The raw TCP limit of the path, measured in the same run before the copies."""

    up_bytes_per_s: float | None = None
    down_bytes_per_s: float | None = None
    rtt_ms: float | None = None  # application-level ping median
    connect_rtt_ms: float | None = None  # TCP connect time median
    window_bytes: int | None = None  # window in use during the probe (from TCP_INFO)
    iperf3_up_bytes_per_s: float | None = None
    iperf3_down_bytes_per_s: float | None = None
    tcp: Mapping[str, Any] | None = None  # direction -> the probe's TCP triage (TcpTriage as JSON)
    details: Mapping[str, Any] = field(default_factory=dict)  # the probe's own figures, as JSON
    error: str | None = None

    def for_direction(self, direction: str) -> float | None:
        return self.up_bytes_per_s if direction == "upload" else self.down_bytes_per_s

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: dict(value) if isinstance(value := getattr(self, f.name), Mapping) else value for f in fields(self)
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Baseline:
        data = data or {}
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class Run:
    """A whole run: metadata, baseline, rows and their explanation; `link` and `window_sweep` only in the lab.

    `warnings` are what the run has to say beyond its rows, the explanation's notes among them.
    """

    id: int | None
    meta: Mapping[str, Any]
    baseline: Baseline
    results: tuple[Result, ...] = ()
    link: Mapping[str, Any] | None = None
    window_sweep: tuple[Mapping[str, Any], ...] | None = None
    warnings: tuple[str, ...] = ()
    explanation: Explanation | None = None

    def __post_init__(self) -> None:
        # Sequences given as lists (a caller's own, or a JSON document's) become tuples: the run never changes.
        object.__setattr__(self, "results", tuple(self.results))
        object.__setattr__(self, "warnings", tuple(self.warnings))
        if self.window_sweep is not None:
            object.__setattr__(self, "window_sweep", tuple(self.window_sweep))
        if self.explanation is not None and len(self.explanation.rows) != len(self.results):
            raise ValueError(f"an explanation of {len(self.explanation.rows)} rows for {len(self.results)} rows")

    @property
    def least_rtt_ms(self) -> float | None:
        """The round trip the ceilings charge, and the notes count round trips in: the least the path showed, of
        the lab link's idle RTT, the raw-TCP probe's fastest ping and its median. A ceiling may not be lowered by
        pings that other work on a host slowed (the probe's median once read 3.44 ms on a link whose idle RTT was
        2.81 ms, and every per-file ceiling fell under the copies it bounds); None where no RTT was measured."""
        seen = ((self.link or {}).get("rtt_ms"), self.baseline.details.get("rtt_min_ms"), self.baseline.rtt_ms)
        measured = [float(v) for v in seen if isinstance(v, int | float) and not isinstance(v, bool) and v > 0]
        return min(measured) if measured else None

    def explained(self, explanation: Explanation) -> Run:
        """This run with `explanation` (of these very rows), its notes added to the warnings."""
        return replace(self, explanation=explanation, warnings=(*self.warnings, *explanation.notes))

    def explanation_of(self, index: int) -> RowExplanation:
        """What the explanation says about row `index` (all None when the run has none)."""
        return self.explanation.rows[index] if self.explanation is not None else _UNEXPLAINED

    def explained_rows(self) -> list[tuple[Result, RowExplanation]]:
        return [(row, self.explanation_of(i)) for i, row in enumerate(self.results)]

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "run": {"id": self.id, **self.meta},
            "baseline": self.baseline.to_json(),
            "results": [row.to_json(why) for row, why in self.explained_rows()],
            "warnings": list(self.warnings),
            "verdict": list(self.explanation.verdict) if self.explanation is not None else [],
        }
        if self.link is not None:
            doc["link"] = dict(self.link)
        if self.window_sweep is not None:
            doc["window_sweep"] = [dict(point) for point in self.window_sweep]
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Run:
        """Read a run document of schema 3, or of schema 2 or 1 (older runs), into the current values."""
        doc = upgrade_document(doc)
        meta = dict(doc.get("run") or {})
        run_id = meta.pop("id", None)
        rows = doc.get("results", [])
        return cls(
            id=run_id,
            meta=meta,
            baseline=Baseline.from_json(doc.get("baseline")),
            results=tuple(Result.from_json(r) for r in rows),
            link=doc.get("link"),
            window_sweep=doc.get("window_sweep"),
            warnings=tuple(doc.get("warnings") or ()),
            explanation=explanation_from_json(rows, doc.get("verdict") or ()),
        )


def explanation_from_json(rows: Sequence[Mapping[str, Any]], verdict: Sequence[str] = ()) -> Explanation | None:
    """The explanation held in schema-2 row objects and the document's verdict; None when no row carries one
    (a run stopped before it).

    Its notes stay among the run's warnings: the document does not tell them apart.
    """
    explained = tuple(RowExplanation.from_json(r) for r in rows)
    if not any(why != _UNEXPLAINED for why in explained):
        return None
    return Explanation(rows=explained, verdict=tuple(verdict))

"""What a run produced, as plain frozen data, and its versioned JSON document.

Every sample keeps its bytes and seconds so anyone can recompute the rates; summaries are derived.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from workbench.core.stats import Summary, find_stalls, summarize

SCHEMA = 1
INTERVAL_S = 0.1  # per-interval throughput sampling period


@dataclass(frozen=True)
class Sample:
    """One timed copy of a file set."""

    bytes: int
    seconds: float
    files: int = 1
    verified: bool | None = None  # None: could not be checked
    client_cpu_s: float | None = None  # CPU of the client process(es) during the copy
    server_cpu_s: float | None = None  # CPU of the server process(es), when known locally
    intervals: tuple[int, ...] = ()  # bytes moved in each INTERVAL_S slot, from the first request
    error: str | None = None

    @property
    def bps(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else 0.0

    @property
    def stalls(self) -> list[tuple[int, int]]:
        """(first interval, length) of each stall."""
        return find_stalls(self.intervals)


@dataclass
class Result:
    """One row: a protocol/client copying a file set in one direction, several times."""

    protocol: str
    client: str
    direction: str  # "upload" | "download"
    file_set: str
    bytes: int  # per copy
    files: int  # per copy
    samples: list[Sample] = field(default_factory=list)
    warmup: int = 0
    error: str | None = None  # why the row failed, or "unavailable: ..."
    details: dict[str, Any] = field(default_factory=dict)
    pct_of_tcp: float | None = None
    ceiling_bps: float | None = None
    bound: str | None = None
    bound_explanation: str | None = None

    @property
    def label(self) -> str:
        return f"{self.protocol}/{self.client}"

    @property
    def good_samples(self) -> list[Sample]:
        return [s for s in self.samples if s.error is None]

    @property
    def summary(self) -> Summary | None:
        return summarize([s.bps for s in self.good_samples])

    @property
    def median_bps(self) -> float | None:
        s = self.summary
        return s.median if s else None

    @property
    def files_per_s(self) -> float | None:
        secs = [s.seconds for s in self.good_samples]
        if not secs or self.files <= 1:
            return None
        mid = statistics.median(secs)
        return self.files / mid if mid > 0 else None

    @property
    def verified(self) -> bool:
        good = self.good_samples
        return bool(good) and all(s.verified is True for s in good)

    @property
    def stall_count(self) -> int:
        return sum(len(s.stalls) for s in self.good_samples)

    @property
    def stall_seconds(self) -> float:
        return sum(length for s in self.good_samples for _, length in s.stalls) * INTERVAL_S

    def to_json(self) -> dict[str, Any]:
        summary = self.summary
        return {
            "protocol": self.protocol,
            "client": self.client,
            "direction": self.direction,
            "file_set": self.file_set,
            "bytes": self.bytes,
            "files": self.files,
            "warmup": self.warmup,
            "samples": [
                {**asdict(s), "intervals": list(s.intervals), "stalls": [list(run) for run in s.stalls]}
                for s in self.samples
            ],
            "median_bps": summary.median if summary else None,
            "mean_bps": summary.mean if summary else None,
            "stdev_bps": summary.stdev if summary else None,
            "min_bps": summary.minimum if summary else None,
            "max_bps": summary.maximum if summary else None,
            "files_per_s": self.files_per_s,
            "pct_of_tcp": self.pct_of_tcp,
            "ceiling_bps": self.ceiling_bps,
            "bound": self.bound,
            "bound_explanation": self.bound_explanation,
            "stalls": self.stall_count,
            "stall_seconds": round(self.stall_seconds, 3),
            "verified": self.verified,
            "error": self.error,
            "details": self.details,
            "interval_s": INTERVAL_S,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Result:
        samples = []
        for raw in data.get("samples", []):
            fields = {k: raw.get(k) for k in Sample.__dataclass_fields__ if k in raw}
            fields["intervals"] = tuple(raw.get("intervals") or ())
            samples.append(Sample(**fields))
        return cls(
            protocol=data["protocol"],
            client=data["client"],
            direction=data["direction"],
            file_set=data["file_set"],
            bytes=data["bytes"],
            files=data.get("files", 1),
            samples=samples,
            warmup=data.get("warmup", 0),
            error=data.get("error"),
            details=data.get("details") or {},
            pct_of_tcp=data.get("pct_of_tcp"),
            ceiling_bps=data.get("ceiling_bps"),
            bound=data.get("bound"),
            bound_explanation=data.get("bound_explanation"),
        )


@dataclass
class Baseline:
    """The raw TCP limit of the path, measured in the same run before the copies."""

    up_bps: float | None = None
    down_bps: float | None = None
    rtt_ms: float | None = None  # application-level ping median
    connect_rtt_ms: float | None = None  # TCP connect time median
    window_bytes: int | None = None  # window in use during the probe (from TCP_INFO)
    iperf3_up_bps: float | None = None
    iperf3_down_bps: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def for_direction(self, direction: str) -> float | None:
        return self.up_bps if direction == "upload" else self.down_bps

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Baseline:
        data = data or {}
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__ if k in data})


@dataclass
class Run:
    """A whole run: metadata, baseline, rows; `link` and `window_sweep` only in the lab."""

    id: int | None
    meta: dict[str, Any]
    baseline: Baseline
    results: list[Result] = field(default_factory=list)
    link: dict[str, Any] | None = None
    window_sweep: list[dict[str, Any]] | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "run": {"id": self.id, **self.meta},
            "baseline": self.baseline.to_json(),
            "results": [r.to_json() for r in self.results],
            "warnings": self.warnings,
        }
        if self.link is not None:
            doc["link"] = self.link
        if self.window_sweep is not None:
            doc["window_sweep"] = self.window_sweep
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Run:
        meta = dict(doc.get("run") or {})
        run_id = meta.pop("id", None)
        return cls(
            id=run_id,
            meta=meta,
            baseline=Baseline.from_json(doc.get("baseline")),
            results=[Result.from_json(r) for r in doc.get("results", [])],
            link=doc.get("link"),
            window_sweep=doc.get("window_sweep"),
            warnings=list(doc.get("warnings") or []),
        )

"""What a fleet member may say to its controller, as typed messages: every line is checked here, or refused.

A member is another host: whoever answers the SSH login there runs it, so its lines are untrusted input. Each
line is one JSON object whose `event` picks its type (a discriminated union). The checks, in order, each
cheap enough for a line of the largest size allowed:

- the line's length (MAX_LINE_BYTES; the reader never buffers more, see workbench.core.fleet_lines);
- its nesting depth, counted over the raw text before any parser recurses (MAX_DEPTH; a real message is
  about 6 deep);
- its types (pydantic, strict: "1" is no integer, true no count; floats finite; counts, seconds, strings and
  lists bounded);
- every string in it, keys too: no control character, bidi override or lone surrogate (what
  safetext.strip_controls would change; tab is allowed: the hosts' socket buffer figures hold tabs). A member
  strips them before sending (fleet_member), so a string holding one is a hostile or broken member.

Unknown fields of a message are ignored: another release speaking the same protocol may add some, and an
ignored field is never stored nor shown. The run-metadata documents a member sends (its host, the server, the
plan) keep their unknown keys as data: they are stored with the run as they came (bounded by the line), typed
where anything reads them.

Any failure is a MalformedMessage whose text is one terminal-safe line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints, TypeAdapter, ValidationError

from workbench.core.results import Baseline, Result, Sample
from workbench.protocols.details import ClientDetails
from workbench.shared.safetext import cut, strip_controls
from workbench.shared.triage import TcpTriage

# One row's samples carry ten interval counts per second copied, about 100 bytes per second of copying at up to
# 1 GB/s: 4 MiB holds about 11 hours of one row's copies, more than the 4 h a plan may take at the raw TCP rate
# even when the protocol runs at a third of it. At 64 clients the readers hold at most 256 MiB.
MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 16
MAX_TEXT = 8192  # characters of one string: an error message, a note
MAX_NAME = 256  # a label, a file set, a host name
MAX_ITEMS = 1024  # entries of a list or keys of a document (warnings, notes, details)
MAX_INTERVALS = 500_000  # 100 ms counts of one copy: about 14 hours
MAX_SAMPLES = 1100  # warm-ups (at most 100) and repeats (at most 1000) of one row
MAX_COUNT = (1 << 63) - 1  # bytes and files as SQLite stores them
MAX_SECONDS = 1e7  # about 116 days
MAX_STEP_INDEX = 1_000_000


class MalformedMessage(ValueError):
    """A member's line that is not a message of the protocol; str() is one terminal-safe line saying why."""


def _plain_text(text: str) -> str:
    if strip_controls(text.replace("\t", " ")) != text.replace("\t", " "):
        raise ValueError("a string holds a control character")
    return text


def clean_text(text: str) -> str:
    """`text` as a member sends it: what the controller would refuse (controls, bidi, surrogates) removed."""
    return strip_controls(text)


Name = Annotated[str, StringConstraints(max_length=MAX_NAME)]
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Seconds = Annotated[float, Field(ge=0.0, le=MAX_SECONDS)]
Rate = Annotated[float, Field(ge=0.0, le=1e15)]  # bytes/s; a petabyte per second is beyond any link
Millis = Annotated[float, Field(ge=0.0, le=MAX_SECONDS * 1e3)]
Index = Annotated[int, Field(ge=0, le=MAX_STEP_INDEX)]
Direction = Literal["upload", "download"]
Document = Annotated[dict[Name, JsonValue], Field(max_length=MAX_ITEMS)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False, frozen=True)


class _Open(BaseModel):
    """A metadata document: typed where read, its other keys kept as data."""

    model_config = ConfigDict(strict=True, extra="allow", allow_inf_nan=False, frozen=True)


class HostDoc(_Open):
    """A host as hostinfo.describe() says it (summary.host_line reads these)."""

    hostname: Name | None = None
    system: Name | None = None
    kernel: Name | None = None
    machine: Name | None = None
    cpus: Annotated[int, Field(ge=0, le=1 << 20)] | None = None
    versions: Annotated[dict[Name, Name], Field(max_length=MAX_ITEMS)] | None = None
    tcp: Annotated[dict[Name, Name | int | None], Field(max_length=MAX_ITEMS)] | None = None
    interface: Name | None = None
    mtu: Annotated[int, Field(ge=0, le=1 << 20)] | None = None
    offloads: Document | None = None  # the send path toward the far host (workbench.shared.offloads)


class ServerDoc(HostDoc):
    """The far host as the member's info() found it (a stock server's scratch directory among it)."""

    kind: Name | None = None
    url: Text | None = None
    scratch: Name | None = None
    scratch_path: Text | None = None
    notes: Annotated[list[Text], Field(max_length=MAX_ITEMS)] | None = None
    unavailable: Text | None = None


class MetaDoc(_Open):
    """A member's run metadata (runner.run_meta and what execute() adds)."""

    client: HostDoc | None = None
    server: ServerDoc | None = None
    target: Document | None = None
    plan: Document | None = None
    started_utc: Name | None = None
    finished_utc: Name | None = None
    scratch_removed: bool | None = None


class SampleDoc(_Strict):
    bytes: Count
    seconds: Seconds
    files: Count = 1
    verified: bool | None = None
    client_cpu_s: Seconds | None = None
    server_cpu_s: Seconds | None = None
    client_wait_s: Seconds | None = None
    server_wait_s: Seconds | None = None
    intervals: Annotated[tuple[Count, ...], Field(max_length=MAX_INTERVALS)] = ()
    error: Text | None = None
    tcp: TcpTriage | None = None

    def to_sample(self) -> Sample:
        return Sample(
            bytes=self.bytes, seconds=self.seconds, files=self.files, verified=self.verified,
            client_cpu_s=self.client_cpu_s, server_cpu_s=self.server_cpu_s, client_wait_s=self.client_wait_s,
            server_wait_s=self.server_wait_s, intervals=self.intervals, error=self.error, tcp=self.tcp,
        )  # fmt: skip


class RowDoc(_Strict):
    """A measured row as Result.to_json() writes it; its summary figures are recomputed, not taken."""

    protocol: Name
    client: Name
    direction: Direction
    file_set: Name
    bytes: Count
    files: Count = 1
    samples: Annotated[tuple[SampleDoc, ...], Field(max_length=MAX_SAMPLES)] = ()
    warmup: Annotated[int, Field(ge=0, le=MAX_SAMPLES)] = 0
    error: Text | None = None
    details: Document = Field(default_factory=dict)

    def to_result(self) -> Result:
        details = ClientDetails.from_json(self.details)
        # keys this version does not know are a member's words nothing reads: not kept
        details = ClientDetails(**{k: v for k, v in vars(details).items() if k != "unknown"})
        return Result(
            self.protocol, self.client, self.direction, self.file_set, self.bytes, self.files,
            samples=tuple(s.to_sample() for s in self.samples), warmup=self.warmup, error=self.error, details=details,
        )  # fmt: skip


class BaselineDoc(_Strict):
    up_bytes_per_s: Rate | None = None
    down_bytes_per_s: Rate | None = None
    rtt_ms: Millis | None = None
    connect_rtt_ms: Millis | None = None
    window_bytes: Count | None = None
    iperf3_up_bytes_per_s: Rate | None = None
    iperf3_down_bytes_per_s: Rate | None = None
    tcp: dict[Direction, TcpTriage] | None = None
    details: Document = Field(default_factory=dict)
    error: Text | None = None

    def to_baseline(self) -> Baseline:
        fields = {k: getattr(self, k) for k in BaselineDoc.model_fields if k != "tcp"}
        tcp: dict[str, Any] | None = {d: asdict(t) for d, t in self.tcp.items()} if self.tcp is not None else None
        return Baseline(**fields, tcp=tcp)


class Hello(_Strict):
    event: Literal["hello"]
    protocol: Name
    version: Name | None = None
    pid: Count | None = None


class Wait(_Strict):
    event: Literal["wait"]
    step: Annotated[tuple[Index, ...], Field(min_length=1, max_length=5)]


class Copy(_Strict):
    event: Literal["copy"]
    step: tuple[Index, Index, Index, Index, Index]
    row: tuple[Name, Direction, Name]
    started_after_go_s: Seconds
    sample: SampleDoc


class Row(_Strict):
    event: Literal["row"]
    row: RowDoc


class BaselineMessage(_Strict):
    event: Literal["baseline"]
    baseline: BaselineDoc


class Together(_Strict):
    event: Literal["together"]
    direction: Direction
    error: Text | None = None
    started_after_go_s: Seconds = 0.0
    seconds: Seconds = 0.0
    bytes: Count = 0


class Begin(_Strict):
    event: Literal["begin"]
    meta: MetaDoc


class Finish(_Strict):
    event: Literal["finish"]
    warnings: Annotated[tuple[Text, ...], Field(max_length=MAX_ITEMS)] = ()
    meta: MetaDoc | None = None


class Cleaned(_Strict):
    """The scratch directories an earlier fleet run's members left, removed (see workbench.core.fleet_scratch)."""

    event: Literal["cleaned"]
    run_id: Count
    hosts: Annotated[tuple[Name, ...], Field(max_length=MAX_ITEMS)]


class Done(_Strict):
    event: Literal["done"]
    failed_rows: Count = 0


class Error(_Strict):
    event: Literal["error"]
    message: Text
    exit_code: Annotated[int, Field(ge=0, le=255)] = 1


Message = Hello | Wait | Copy | Row | BaselineMessage | Together | Begin | Finish | Cleaned | Done | Error
_MESSAGE: TypeAdapter[Message] = TypeAdapter(Annotated[Message, Field(discriminator="event")])

# A string (skipped whole) or a bracket: enough to count nesting without parsing. The closing quote is optional
# and the string's body unrolled (runs of plain bytes, each escape followed by another run) so that no match can
# fail after its opening quote: a required closing quote made a line of `"\"\"…` rescan to its end from every
# quote (quadratic: days for a 4 MiB line). An unclosed string runs to the line's end, as a parser would read it.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


def nesting_depth(line: bytes, limit: int = MAX_DEPTH) -> int:
    """How deep `line`'s brackets nest, counted up to `limit` + 1 (a deeper line stops the count there)."""
    depth = deepest = 0
    for match in _TOKENS.finditer(line):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                break
        elif token in (b"]", b"}"):
            depth -= 1
    return deepest


def _check_strings(value: Any, where: str = "") -> None:
    """Every string of a parsed value, keys too, free of control characters; numbers finite and bounded."""
    if isinstance(value, str):
        _plain_text(value)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"a number that is not finite{where}")
    elif isinstance(value, int):
        if abs(value) > MAX_COUNT:
            raise ValueError(f"a number beyond 2^63{where}")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _plain_text(str(key))
            _check_strings(item, where)
    elif isinstance(value, Sequence):
        for item in value:
            _check_strings(item, where)
    elif isinstance(value, BaseModel):
        _check_strings(value.model_dump(), where)
    else:
        _check_strings(asdict(value) if hasattr(value, "__dataclass_fields__") else str(value), where)


def _why(exc: ValidationError) -> str:
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    text = f"{where}: {first['msg']}" if where else first["msg"]
    more = exc.error_count() - 1
    return text + (f" (and {more} more)" if more > 0 else "")


def short(text: str, limit: int = 200) -> str:
    """A member's words for a one-line message: terminal-safe and at most `limit` characters."""
    return cut(strip_controls(text), limit)


def parse_message(line: bytes) -> Message:
    """The typed message of one line from a member (without its newline), or MalformedMessage saying why."""
    if len(line) > MAX_LINE_BYTES:
        raise MalformedMessage(f"a line longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB")
    if nesting_depth(line) > MAX_DEPTH:
        raise MalformedMessage(f"a line nested deeper than {MAX_DEPTH} levels")
    try:
        message = _MESSAGE.validate_json(line)
        _check_strings(message)
    except ValidationError as exc:
        raise MalformedMessage(short(_why(exc))) from None
    except ValueError as exc:
        raise MalformedMessage(short(str(exc))) from None
    return message

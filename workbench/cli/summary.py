"""The summary table of a run as plain values: one `SummaryRow` per raw-TCP direction and per row, its cells
as text, for every way a run is shown (the terminal, Markdown, CSV, HTML) to say the same thing.

MB/s is 10^6 bytes/s and Mbit/s 10^6 bits/s throughout, so figures compare directly with iperf.

A fleet run (several client hosts at once) has a `host` on every line: "all" on each aggregate row and on the
all-at-once raw TCP, the client's alias on its own rows and on its raw TCP measured alone. Every format shows
every line with a host column, except the terminal's default table: it folds a client's healthy lines into
`per_client` of the line they belong to (`folded`), and keeps a failed one in sight.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from workbench.core.ceiling import UNEXPLAINED, format_ms
from workbench.core.results import Baseline, Result, RowExplanation, Run
from workbench.protocols.smb_negotiated import negotiated_note
from workbench.shared.triage import TcpTriage

SHORT_DIRECTION = {"upload": "up", "download": "down"}

# (name, justify) of each cell of a SummaryRow, in order; `notes` is the last.
Justify = Literal["left", "right"]  # a column's alignment, as rich and Markdown take it
COLUMNS: tuple[tuple[str, Justify], ...] = (
    ("client", "left"),
    ("dir", "left"),
    ("set", "left"),
    ("MB/s", "right"),
    ("Mbit/s", "right"),
    ("min–max σ", "right"),
    ("% TCP", "right"),
    ("bound MB/s", "left"),
    ("TCP limit", "left"),
    ("files/s", "right"),
    ("verified", "left"),
    ("notes", "left"),
)

# A fleet run's tables have this column after `client`: the client host, "all" for the clients together.
HOST_COLUMN: tuple[str, Justify] = ("host", "left")
ALL_HOSTS = "all"  # the client_host of an aggregate row


@dataclass(frozen=True)
class SummaryRow:
    """One line of the summary table. `status` is what `verified` says, as a word: ok, failed, MISMATCH,
    unchecked, not verifiable (a reference tool's own data), or "" (nothing to check: an unavailable client, a
    raw-TCP line)."""

    group: str  # the protocol ("raw TCP" for the baseline's lines): the table is grouped by it
    client: str
    direction: str  # up | down
    file_set: str
    mb_per_s: str
    mbit_per_s: str
    spread: str
    pct_of_tcp: str
    bound: str  # the binding ceiling in MB/s: 'window 23'
    tcp_limit: str
    files_per_s: str
    status: str
    notes: tuple[str, ...]
    unavailable: bool = False  # a client this host cannot run: shown dimmed
    baseline: bool = False  # a raw-TCP line
    sigma: str = ""  # the copies' relative standard deviation, '±4%' ('—' for one copy)
    bound_mbit: str = ""  # the binding ceiling in Mbit/s: 'window 187'
    host: str = ""  # fleet runs only: the client host, or "all" (an aggregate row, the all-at-once raw TCP)
    folded: bool = False  # a client's own healthy line, which the default terminal table folds into `per_client`
    per_client: str = ""  # on the line the clients' lines fold into: 'per client MB/s: c1 20.1 · c2 19.8'

    def named(self) -> dict[str, str]:
        """The cells by column name: COLUMNS' and `host`."""
        return {"host": self.host, **dict(zip((name for name, _ in COLUMNS), self.cells(), strict=True))}

    def cells(self) -> tuple[str, ...]:
        """The cells in COLUMNS order, the notes joined with '; '."""
        return (
            self.client,
            self.direction,
            self.file_set,
            self.mb_per_s,
            self.mbit_per_s,
            self.spread,
            self.pct_of_tcp,
            self.bound,
            self.tcp_limit,
            self.files_per_s,
            self.status,
            "; ".join(self.notes),
        )


def mb(bytes_per_s: float | None) -> str:
    return "—" if bytes_per_s is None else f"{bytes_per_s / 1e6:,.1f}"


def mbit(bytes_per_s: float | None) -> str:
    return "—" if bytes_per_s is None else f"{bytes_per_s * 8 / 1e6:,.0f}"


def spread(row: Result) -> str:
    s = row.summary
    if s is None:
        return "—"
    text = f"{s.minimum / 1e6:,.0f}–{s.maximum / 1e6:,.0f}"
    if s.relative_stdev is not None:
        text += f" σ{s.relative_stdev * 100:.0f}%"
    return text


def sigma(row: Result) -> str:
    s = row.summary
    if s is None:
        return "—"
    return f"±{s.relative_stdev * 100:.0f}%" if s.relative_stdev is not None else "—"


def ceiling(why: RowExplanation, bits: bool = False) -> str:
    """The binding ceiling and its rate, in MB/s (or Mbit/s with `bits`)."""
    if why.bound is None or why.ceiling_bytes_per_s is None:
        return "—"
    rate = why.ceiling_bytes_per_s * 8 if bits else why.ceiling_bytes_per_s
    if why.bound == UNEXPLAINED:  # the lowest ceiling is shown, but as what it is: no explanation
        return f"unexpl. ≤{rate / 1e6:,.0f}"
    return f"{why.bound} {rate / 1e6:,.0f}"


def triage(found: TcpTriage | None) -> str:
    """What the kernel's counters said limited the copy: 'rwnd 92 %', 'app 71 %'; 'rx' marks a receiver's view."""
    return "—" if found is None else found.short()


def notes(row: Result, why: RowExplanation, rtt_ms: float | None = None) -> tuple[str, ...]:
    said: list[str] = []
    if row.error:
        said.append(row.error)
    if row.good_samples:  # what a reference tool's figures are; an unavailable or failed row has none
        said.extend(text for text in (row.unverifiable, row.details.measures) if text)
    if why.triage_note:
        said.append(why.triage_note)
    if row.files_per_s and rtt_ms:
        # A small file's time, and as RTTs: the yardstick a set's round trips are read against. It is time, not a
        # count (on a fast link most of it may be CPU): the row's per-file ceiling says what it charged.
        per_file_s = 1 / row.files_per_s
        said.append(f"≈{format_ms(per_file_s)} per file (≈{per_file_s * 1000 / rtt_ms:.0f} RTT)")
    if row.stall_count:
        said.append(f"{row.stall_count} stall(s), {row.stall_seconds:.1f} s")
    details = row.details
    fixed = why.fixed_cost_s
    if details.timed_includes_setup:
        said.append(f"incl. session setup ≈{fixed * 1000:.0f} ms" if fixed else "incl. session setup")
    elif fixed:
        said.append(f"≈{fixed * 1000:.0f} ms fixed per copy")
    if details.request_bytes and details.requests_in_flight and not details.credits:  # else the SMB line says it
        said.append(f"{details.request_bytes // 1024} KiB × {details.requests_in_flight} in flight")
    if details.readahead_bytes:
        said.append(f"readahead {details.readahead_bytes // 1024} KiB")
    if details.cipher:
        said.append(details.cipher)
    if details.mount and details.page_cache:
        said.append("local page cache bypassed")  # how: details.page_cache in the JSON
    negotiated = negotiated_note(details)
    if negotiated:
        said.append(negotiated)
    if details.verified_by == "read back":
        said.append("verified by reading back, untimed")
    elif details.verified_by:
        said.append(f"verified by {details.verified_by}")
    return tuple(said)


NOT_VERIFIABLE = "not verifiable"


def status(row: Result) -> str:
    if not row.good_samples:
        return "failed" if row.error and not row.error.startswith("unavailable") else ""
    if row.verified:
        return "ok"
    if row.unverifiable:  # a reference tool's own data: nothing to check, said as such (never "ok")
        return NOT_VERIFIABLE
    return "MISMATCH" if any(s.verified is False for s in row.samples) else "unchecked"


def baseline_notes(run: Run, direction: str, base: Baseline | None = None) -> tuple[str, ...]:
    """The raw-TCP line's notes: of the run's baseline, or of `base` (a fleet client's own)."""
    base = base if base is not None else run.baseline
    iperf = base.iperf3_up_bytes_per_s if direction == "upload" else base.iperf3_down_bytes_per_s
    said = []
    if iperf:
        said.append(f"iperf3 {mb(iperf)} MB/s")
    if base.rtt_ms is not None:
        said.append(f"RTT {base.rtt_ms:.2f} ms")
    if base.window_bytes:
        said.append(f"window {base.window_bytes // 1024} KiB")
    return tuple(said)


def fleet_meta(run: Run) -> Mapping[str, Any]:
    """The run's `fleet` metadata (empty outside a fleet run)."""
    found = run.meta.get("fleet")
    return found if isinstance(found, Mapping) else {}


def is_fleet(run: Run) -> bool:
    """Several client hosts at once: its tables have a host column."""
    return bool(fleet_meta(run)) or any(row.client_host for row in run.results)


def fleet_clients(run: Run) -> list[str]:
    """The fleet's client hosts in inventory order (as the metadata lists them, else as the rows name them)."""
    listed = [str(h) for h in fleet_meta(run).get("clients") or ()]
    for row in run.results:
        if row.client_host and row.client_host != ALL_HOSTS and row.client_host not in listed:
            listed.append(row.client_host)
    return listed


def client_baselines(run: Run) -> dict[str, Baseline]:
    """Each fleet client's raw TCP measured alone, by host (empty outside a fleet run)."""
    found = fleet_meta(run).get("baselines")
    if not isinstance(found, Mapping):
        return {}
    return {str(host): Baseline.from_json(doc) for host, doc in found.items() if isinstance(doc, Mapping)}


def raw_tcp_for(run: Run, row: Result) -> float | None:
    """The raw TCP rate `row` compares with: the client's own measured alone for a fleet client's row, the run's
    (in a fleet, all clients at once) for any other."""
    own = client_baselines(run).get(row.client_host or "") if row.client_host != ALL_HOSTS else None
    return (own or run.baseline).for_direction(row.direction)


def _median(values: object) -> float | None:
    numbers = [v for v in values if isinstance(v, int | float)] if isinstance(values, list | tuple) else []
    return statistics.median(numbers) if numbers else None


def _per_client(label: str, figures: Sequence[tuple[str, str]]) -> str:
    return f"{label}: " + " · ".join(f"{host} {figure}" for host, figure in figures) if figures else ""


def _client_rate(row: Result | None) -> str:
    """A client's median MB/s on the line its row folds into; 'failed' (its own line says why) or '—'."""
    if row is None or row.median_bytes_per_s is None:
        return "failed" if row is not None and status(row) == "failed" else "—"
    return mb(row.median_bytes_per_s)


def aggregate_notes(row: Result) -> tuple[str, ...]:
    """What an aggregate row says beyond its rate: how evenly the clients shared it, when they finished (medians
    over the rounds), rounds with no moment when all copied, the naive sum of rates, and its own notes."""
    figures = row.aggregate or {}
    said: list[str] = []
    if isinstance(jain := figures.get("jain_index"), int | float):
        said.append(f"Jain {jain:.2f}")
    first, last = _median(figures.get("first_done_s")), _median(figures.get("last_done_s"))
    if first is not None and last is not None:
        said.append(f"first done {first:.1f} s · last done {last:.1f} s")
    if figures.get("rounds_without_overlap"):
        said.append(f"{figures['rounds_without_overlap']} round(s) with no moment all clients copied")
    if isinstance(naive := figures.get("sum_of_rates_bytes_per_s"), int | float):
        said.append(f"naive sum of rates {mb(naive)} MB/s")
    said.extend(str(note) for note in figures.get("notes") or ())
    return tuple(said)


def _baseline_line(
    run: Run, base: Baseline, direction: str, client: str, host: str, *, folded: bool = False, per_client: str = ""
) -> SummaryRow:
    tcp = base.for_direction(direction)
    return SummaryRow(
        group="raw TCP",
        client=client,
        direction=SHORT_DIRECTION[direction],
        file_set="mem",
        mb_per_s=mb(tcp),
        mbit_per_s=mbit(tcp),
        spread="",
        pct_of_tcp="100" if tcp else "—",
        bound="",
        tcp_limit=triage(TcpTriage.from_json((base.tcp or {}).get(direction))),
        files_per_s="",
        status="",
        notes=baseline_notes(run, direction, base),
        baseline=True,
        host=host,
        folded=folded,
        per_client=per_client,
    )


def _baseline_lines(run: Run) -> list[SummaryRow]:
    """Each direction measured: the run's raw TCP; in a fleet run the clients' at once (the run's), then each
    client's alone (the terminal folds these into the first)."""
    base = run.baseline
    fleet = is_fleet(run)
    alone = client_baselines(run)
    together = fleet_meta(run).get("together")
    together = together if isinstance(together, Mapping) else {}
    hosts = [h for h in fleet_clients(run) if h in alone]
    lines: list[SummaryRow] = []
    for direction in ("upload", "download"):
        measured = [h for h in hosts if alone[h].for_direction(direction) or alone[h].error]
        if not base.for_direction(direction) and not measured:
            continue
        if not fleet:
            lines.append(_baseline_line(run, base, direction, "raw TCP", ""))
            continue
        shares = [
            (h, mb(Baseline.from_json(together[h]).for_direction(direction)))
            for h in hosts
            if isinstance(together.get(h), Mapping)
        ]
        total = _baseline_line(
            run,
            base,
            direction,
            f"raw TCP ×{len(fleet_clients(run))}",
            ALL_HOSTS,
            per_client=_per_client("alone MB/s", [(h, mb(alone[h].for_direction(direction))) for h in measured]),
        )
        if shares:  # how the all-at-once total was shared
            total = replace(total, notes=(*total.notes, _per_client("at once MB/s", shares)))
        lines.append(total)
        for h in measured:
            own = alone[h]
            line = _baseline_line(run, own, direction, "raw TCP", h, folded=not own.error)
            said = f"alone: {own.error}" if own.error else "alone"  # a failed probe stays in sight
            lines.append(replace(line, notes=(said, *line.notes)))
    return lines


def _folds(row: Result, line_status: str) -> bool:
    """A fleet client's row that the default terminal table may fold: it has no error to show."""
    return not row.error and line_status not in ("failed", "MISMATCH")


def summary_rows(run: Run) -> list[SummaryRow]:
    """The raw-TCP lines (each direction measured), then every row in the run's order.

    In a fleet run an aggregate row's client reads 'http/aiohttp ×3' and carries its clients' rates in
    `per_client`; each client's own row that says nothing wrong is `folded` when its aggregate row is there."""
    lines = _baseline_lines(run)
    fleet = is_fleet(run)
    members: dict[tuple[str, str, str, str], list[Result]] = {}
    for row in run.results:
        if row.client_host and row.client_host != ALL_HOSTS:
            members.setdefault((row.protocol, row.client, row.direction, row.file_set), []).append(row)
    aggregated = {
        (row.protocol, row.client, row.direction, row.file_set) for row in run.results if row.client_host == ALL_HOSTS
    }
    for row, why in run.explained_rows():
        key = (row.protocol, row.client, row.direction, row.file_set)
        client, per_client, folded = row.label, "", False
        # Round trips per file are one client's connection's; the aggregate row's files/s are all clients'.
        said = notes(row, why, run.least_rtt_ms if row.client_host != ALL_HOSTS else None)
        line_status = status(row)
        if row.client_host == ALL_HOSTS:
            hosts = (row.aggregate or {}).get("clients") or [m.client_host for m in members.get(key, ())]
            client = f"{row.label} ×{len(hosts)}"
            said = (*aggregate_notes(row), *said)
            own = {m.client_host: m for m in members.get(key, ())}
            per_client = _per_client(
                "per client MB/s",
                [(str(h), _client_rate(own.get(h))) for h in hosts],
            )
        elif row.client_host:
            folded = key in aggregated and _folds(row, line_status)
        lines.append(
            SummaryRow(
                group=row.protocol,
                client=client,
                direction=SHORT_DIRECTION.get(row.direction, row.direction),
                file_set=row.file_set,
                mb_per_s=mb(row.median_bytes_per_s),
                mbit_per_s=mbit(row.median_bytes_per_s),
                spread=spread(row),
                pct_of_tcp=f"{why.pct_of_tcp:.0f}" if why.pct_of_tcp is not None else "—",
                bound=ceiling(why),
                bound_mbit=ceiling(why, bits=True),
                sigma=sigma(row),
                tcp_limit=triage(row.tcp),
                files_per_s=f"{row.files_per_s:,.0f}" if row.files_per_s else "",
                status=line_status,
                notes=said,
                unavailable=bool(row.error and row.error.startswith("unavailable")),
                host=(row.client_host or "") if fleet else "",
                folded=folded,
                per_client=per_client,
            )
        )
    return lines


def table_columns(lines: Sequence[SummaryRow]) -> tuple[tuple[str, Justify], ...]:
    """The full table's columns for `lines`: COLUMNS, with HOST_COLUMN after `client` in a fleet run."""
    if not any(line.host for line in lines):
        return COLUMNS
    return (COLUMNS[0], HOST_COLUMN, *COLUMNS[1:])


def link_line(link: Mapping[str, Any]) -> str:
    """The lab's link in one line: rates, idle RTT, MTU, clamp, stalls, goodput, the emulator's load, notes."""
    bits = link.get("rate_bits_per_s") or 0
    up, down = link.get("rate_up_bits_per_s") or bits, link.get("rate_down_bits_per_s") or bits
    rates = f"{up / 1e6:,.0f} Mbit/s" if up == down else f"{up / 1e6:,.0f} Mbit/s up, {down / 1e6:,.0f} down"
    text = f"lab link ({link.get('preset', 'custom')}): {rates}"
    if link.get("rtt_ms") is not None:
        text += f", RTT {link['rtt_ms']:.2f} ms measured idle"
    text += f", MTU {link.get('mtu')}"
    if link.get("client_window_bytes"):
        ports = link.get("client_window_ports")
        text += f"; client host's receive window capped at {link['client_window_bytes'] // 1024} KiB"
        text += f" (server ports {', '.join(map(str, ports))})" if ports else ""
    if link.get("stall"):
        text += f"; {link['stall']}"
    if link.get("breaks") == "offloaded":
        text += "; the line drops TSO/GSO super-packets (--link-breaks offloaded)"
    smb = link.get("smb_server") or {}
    if smb:
        text += f"; smbd: signing {smb.get('signing')}, encryption {smb.get('encryption')}, "
        text += f"SMB {smb.get('max_dialect')} at most"
    if link.get("server_cpu_cap_cores") is not None:
        text += f"; server host's CPU capped at {link['server_cpu_cap_cores']:g} core"
    host_cpu = link.get("host_cpu") or {}
    if host_cpu.get("server_cpu_s_per_s") is not None:
        text += f"; CPU during the copies: server host {host_cpu['server_cpu_s_per_s']:.2f} core"
        text += f", client host {host_cpu.get('client_cpu_s_per_s') or 0:.2f}"
    if link.get("goodput_bytes_per_s"):
        text += f"; TCP goodput measured {link['goodput_bytes_per_s'] * 8 / 1e6:,.0f} Mbit/s"
        expected = link.get("expected_goodput_up_bytes_per_s") or link.get("expected_goodput_bytes_per_s")
        if expected:  # the goodput is measured upward
            text += f" (expected {expected * 8 / 1e6:,.0f})"
    elif link.get("goodput_duration_s") == 0:  # asked not to measure: said, so the missing figure is not a gap
        text += "; goodput meter skipped (--goodput-duration 0)"
    elif link.get("goodput_error"):
        text += f"; goodput not measured: {link['goodput_error']}"
    emulator = link.get("emulator") or {}
    if emulator.get("cpu_fraction") is not None:
        text += f"; emulator {emulator['cpu_fraction']:.0%} of a core, {emulator.get('drops', 0)} queue/loss drops"
    if link.get("notes"):
        text += f" — {link['notes']}"
    return text


def host_line(role: str, host: Mapping[str, Any] | None) -> str | None:
    """One host of the run in one line: name, kernel, CPUs, congestion control, socket buffers, MTU."""
    if not isinstance(host, Mapping) or not host.get("hostname"):
        return None
    tcp = host.get("tcp") or {}
    parts = [f"{role} {host.get('hostname', '?')}"]
    if host.get("kernel"):
        parts.append(f"{host.get('system', '')} {host['kernel']}".strip())
    if host.get("cpus"):
        parts.append(f"{host['cpus']} CPUs")
    if tcp.get("congestion_control"):
        parts.append(f"cc {tcp['congestion_control']}")
    for key in ("tcp_rmem", "tcp_wmem"):
        if tcp.get(key):
            parts.append(f"{key} {' '.join(str(tcp[key]).split())}")
    if tcp.get("rmem_max") and tcp.get("wmem_max"):
        parts.append(f"rmem_max {tcp['rmem_max']}, wmem_max {tcp['wmem_max']}")
    if host.get("mtu"):
        parts.append(f"MTU {host['mtu']}")
    return ", ".join(parts)


def host_lines(run: Run) -> list[str]:
    """Both hosts of the run, as far as the run's metadata knows them (a stock server's host is not known)."""
    found = (host_line("client", run.meta.get("client")), host_line("server", run.meta.get("server")))
    return [line for line in found if line]

"""The summary table of a run as plain values: one `SummaryRow` per raw-TCP direction and per row, its cells
as text, for every way a run is shown (the terminal, Markdown, CSV, HTML) to say the same thing.

MB/s is 10^6 bytes/s and Mbit/s 10^6 bits/s throughout, so figures compare directly with iperf.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workbench.core.ceiling import UNEXPLAINED
from workbench.core.results import Result, RowExplanation, Run
from workbench.shared.triage import TcpTriage

SHORT_DIRECTION = {"upload": "up", "download": "down"}

# (name, justify) of each cell of a SummaryRow, in order; `notes` is the last.
COLUMNS: tuple[tuple[str, str], ...] = (
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


@dataclass(frozen=True)
class SummaryRow:
    """One line of the summary table. `status` is what `verified` says, as a word: ok, failed, MISMATCH,
    unchecked, or "" (nothing to check: an unavailable client, a raw-TCP line)."""

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
    if why.triage_note:
        said.append(why.triage_note)
    if row.files_per_s and rtt_ms:
        # Small files are bound by round trips per file, not bytes: the number users can act on.
        said.append(f"≈{1000 / row.files_per_s / rtt_ms:.0f} RTT per file")
    if row.stall_count:
        said.append(f"{row.stall_count} stall(s), {row.stall_seconds:.1f} s")
    details = row.details
    fixed = why.fixed_cost_s
    if details.timed_includes_setup:
        said.append(f"incl. session setup ≈{fixed * 1000:.0f} ms" if fixed else "incl. session setup")
    elif fixed:
        said.append(f"≈{fixed * 1000:.0f} ms fixed per copy")
    if details.request_bytes and details.requests_in_flight:
        said.append(f"{details.request_bytes // 1024} KiB × {details.requests_in_flight} in flight")
    if details.readahead_bytes:
        said.append(f"readahead {details.readahead_bytes // 1024} KiB")
    if details.cipher:
        said.append(details.cipher)
    if details.mount and details.page_cache:
        said.append("local page cache bypassed")  # how: details.page_cache in the JSON
    if details.dialect:
        said.append(f"SMB {details.dialect}")
    if details.verified_by == "read back":
        said.append("verified by reading back, untimed")
    elif details.verified_by:
        said.append(f"verified by {details.verified_by}")
    return tuple(said)


def status(row: Result) -> str:
    if not row.good_samples:
        return "failed" if row.error and not row.error.startswith("unavailable") else ""
    if row.verified:
        return "ok"
    return "MISMATCH" if any(s.verified is False for s in row.samples) else "unchecked"


def baseline_notes(run: Run, direction: str) -> tuple[str, ...]:
    base = run.baseline
    iperf = base.iperf3_up_bytes_per_s if direction == "upload" else base.iperf3_down_bytes_per_s
    said = []
    if iperf:
        said.append(f"iperf3 {mb(iperf)} MB/s")
    if base.rtt_ms is not None:
        said.append(f"RTT {base.rtt_ms:.2f} ms")
    if base.window_bytes:
        said.append(f"window {base.window_bytes // 1024} KiB")
    return tuple(said)


def summary_rows(run: Run) -> list[SummaryRow]:
    """The raw-TCP lines (each direction measured), then every row in the run's order."""
    base = run.baseline
    lines: list[SummaryRow] = []
    for direction in ("upload", "download"):
        tcp = base.for_direction(direction)
        if tcp:
            lines.append(
                SummaryRow(
                    group="raw TCP",
                    client="raw TCP",
                    direction=SHORT_DIRECTION[direction],
                    file_set="mem",
                    mb_per_s=mb(tcp),
                    mbit_per_s=mbit(tcp),
                    spread="",
                    pct_of_tcp="100",
                    bound="",
                    tcp_limit=triage(TcpTriage.from_json((base.tcp or {}).get(direction))),
                    files_per_s="",
                    status="",
                    notes=baseline_notes(run, direction),
                    baseline=True,
                )
            )
    for row, why in run.explained_rows():
        lines.append(
            SummaryRow(
                group=row.protocol,
                client=row.label,
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
                status=status(row),
                notes=notes(row, why, base.rtt_ms),
                unavailable=bool(row.error and row.error.startswith("unavailable")),
            )
        )
    return lines


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
    if link.get("goodput_bytes_per_s"):
        text += f"; TCP goodput measured {link['goodput_bytes_per_s'] * 8 / 1e6:,.0f} Mbit/s"
        expected = link.get("expected_goodput_up_bytes_per_s") or link.get("expected_goodput_bytes_per_s")
        if expected:  # the goodput is measured upward
            text += f" (expected {expected * 8 / 1e6:,.0f})"
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

"""Terminal rendering: the summary table of a run, the TCP limit, history and run comparison.

MB/s is 10^6 bytes/s and Mbit/s 10^6 bits/s throughout, so figures compare directly with iperf.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from workbench.core.ceiling import UNEXPLAINED
from workbench.core.results import Result, RowExplanation, Run
from workbench.core.store import RunSummary
from workbench.shared.triage import TcpTriage

_SHORT = {"upload": "up", "download": "down"}


def _mb(bytes_per_s: float | None) -> str:
    return "—" if bytes_per_s is None else f"{bytes_per_s / 1e6:,.1f}"


def _mbit(bytes_per_s: float | None) -> str:
    return "—" if bytes_per_s is None else f"{bytes_per_s * 8 / 1e6:,.0f}"


def _spread(row: Result) -> str:
    s = row.summary
    if s is None:
        return "—"
    text = f"{s.minimum / 1e6:,.0f}–{s.maximum / 1e6:,.0f}"
    if s.relative_stdev is not None:
        text += f" σ{s.relative_stdev * 100:.0f}%"
    return text


def _ceiling(why: RowExplanation) -> str:
    if why.bound is None or why.ceiling_bytes_per_s is None:
        return "—"
    if why.bound == UNEXPLAINED:  # the lowest ceiling is shown, but as what it is: no explanation
        return f"unexpl. ≤{why.ceiling_bytes_per_s / 1e6:,.0f}"
    return f"{why.bound} {why.ceiling_bytes_per_s / 1e6:,.0f}"


def _triage(triage: TcpTriage | None) -> str:
    """What the kernel's counters said limited the copy: 'rwnd 92 %', 'app 71 %'; 'rx' marks a receiver's view."""
    if triage is None:
        return "—"
    return triage.short()


def _note(row: Result, why: RowExplanation, rtt_ms: float | None = None) -> str:
    notes: list[str] = []
    if row.error:
        notes.append(row.error)
    if why.triage_note:
        notes.append(why.triage_note)
    if row.files_per_s and rtt_ms:
        # Small files are bound by round trips per file, not bytes: the number users can act on.
        notes.append(f"≈{1000 / row.files_per_s / rtt_ms:.0f} RTT per file")
    if row.stall_count:
        notes.append(f"{row.stall_count} stall(s), {row.stall_seconds:.1f} s")
    details = row.details
    fixed = why.fixed_cost_s
    if details.timed_includes_setup:
        notes.append(f"incl. session setup ≈{fixed * 1000:.0f} ms" if fixed else "incl. session setup")
    elif fixed:
        notes.append(f"≈{fixed * 1000:.0f} ms fixed per copy")
    if details.request_bytes and details.requests_in_flight:
        notes.append(f"{details.request_bytes // 1024} KiB × {details.requests_in_flight} in flight")
    if details.readahead_bytes:
        notes.append(f"readahead {details.readahead_bytes // 1024} KiB")
    if details.cipher:
        notes.append(details.cipher)
    if details.mount and details.page_cache:
        notes.append("local page cache bypassed")  # how: details.page_cache in the JSON
    if details.dialect:
        notes.append(f"SMB {details.dialect}")
    if details.verified_by == "read back":
        notes.append("verified by reading back, untimed")
    elif details.verified_by:
        notes.append(f"verified by {details.verified_by}")
    return "; ".join(notes)


def _verified(row: Result) -> str:
    if not row.good_samples:
        return "[red]failed[/]" if row.error and not row.error.startswith("unavailable") else "—"
    if row.verified:
        return "[green]ok[/]"
    return "[red]MISMATCH[/]" if any(s.verified is False for s in row.samples) else "[yellow]unchecked[/]"


def results_table(run: Run) -> Table:
    base = run.baseline
    title = f"run {run.id}" if run.id is not None else "run"
    table = Table(title=title, title_justify="left", show_lines=False, pad_edge=False)
    for name, justify in (
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
    ):
        table.add_column(name, justify=justify, overflow="fold")
    for direction in ("upload", "download"):
        tcp = base.for_direction(direction)
        if tcp:
            table.add_row(
                "[bold]raw TCP[/]",
                _SHORT[direction],
                "mem",
                _mb(tcp),
                _mbit(tcp),
                "",
                "100",
                "",
                _triage(TcpTriage.from_json((base.tcp or {}).get(direction))),
                "",
                "",
                _tcp_note(run, direction),
            )
    for row, why in run.explained_rows():
        pct = f"{why.pct_of_tcp:.0f}" if why.pct_of_tcp is not None else "—"
        fps = f"{row.files_per_s:,.0f}" if row.files_per_s else ""
        style = "dim" if row.error and row.error.startswith("unavailable") else None
        table.add_row(
            row.label,
            _SHORT.get(row.direction, row.direction),
            row.file_set,
            _mb(row.median_bytes_per_s),
            _mbit(row.median_bytes_per_s),
            _spread(row),
            pct,
            _ceiling(why),
            _triage(row.tcp),
            fps,
            _verified(row),
            _note(row, why, base.rtt_ms),
            style=style,
        )
    return table


def _tcp_note(run: Run, direction: str) -> str:
    base = run.baseline
    iperf = base.iperf3_up_bytes_per_s if direction == "upload" else base.iperf3_down_bytes_per_s
    parts = []
    if iperf:
        parts.append(f"iperf3 {_mb(iperf)} MB/s")
    if base.rtt_ms is not None:
        parts.append(f"RTT {base.rtt_ms:.2f} ms")
    if base.window_bytes:
        parts.append(f"window {base.window_bytes // 1024} KiB")
    return "; ".join(parts)


def render_run(console: Console, run: Run) -> None:
    server = run.meta.get("server") or {}
    if server.get("kind") == "stock":
        scratch = f"; scratch directory {server['scratch_path']}" if server.get("scratch_path") else ""
        where = f"{server.get('url')} (not started by workbench{scratch})"
        console.print(f"server: {escape(where)}")
    if run.link:
        console.print(_link_line(run.link))
    if run.baseline.error:
        console.print(f"[yellow]raw TCP baseline failed:[/] {run.baseline.error}")
    no_baseline = _no_baseline_line(run)
    if no_baseline:
        console.print(no_baseline)
    console.print(results_table(run))
    if run.window_sweep:
        render_sweep(console, run.window_sweep)
    if run.explanation is not None and run.explanation.verdict:
        console.print("[bold]verdict:[/] " + escape(" ".join(run.explanation.verdict)))
    for warning in run.warnings:
        console.print(f"[yellow]note:[/] {warning}")


def _no_baseline_line(run: Run) -> str | None:
    """A run without raw-TCP figures (a stock server and no iperf3) says so first: its shares of raw TCP are
    '—' and its ceilings come from the RTT and the clients' windows and requests alone."""
    base = run.baseline
    if base.up_bytes_per_s or base.down_bytes_per_s or not base.details.get("no_baseline"):
        return None
    why = "" if base.error else f" ({escape(str(base.details['no_baseline']))})"  # an error is shown above
    text = f"[yellow]no raw-TCP baseline[/]{why}: figures are absolute, '% TCP' is '—'"
    if base.rtt_ms is not None:
        text += f"; RTT {base.rtt_ms:.2f} ms from TCP connects to the service (the ceilings use it)"
    return text


def _link_line(link: Mapping[str, Any]) -> str:
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
        expected = link.get("expected_goodput_up_bytes_per_s") or link.get(
            "expected_goodput_bytes_per_s"
        )  # it is measured up
        if expected:
            text += f" (expected {expected * 8 / 1e6:,.0f})"
    emulator = link.get("emulator") or {}
    if emulator.get("cpu_fraction") is not None:
        text += f"; emulator {emulator['cpu_fraction']:.0%} of a core, {emulator.get('drops', 0)} queue/loss drops"
    if link.get("notes"):
        text += f" — {link['notes']}"
    return text


def render_sweep(console: Console, points: Sequence[Mapping[str, Any]]) -> None:
    title = "TCP window sweep (predicted: window / RTT, or the path's rate once the window exceeds its BDP)"
    table = Table(title=title, title_justify="left")
    for name in ("window", "in use", "measured MB/s", "predicted MB/s", "by", "measured/predicted"):
        table.add_column(name, justify="right")
    for p in points:
        predicted = p.get("predicted_bytes_per_s") or 0
        ratio = f"{p['measured_bytes_per_s'] / predicted:.2f}" if predicted else "—"
        used = p.get("effective_window_bytes")
        table.add_row(
            f"{p['window_bytes'] // 1024} KiB",
            f"{used // 1024} KiB" if used else "—",
            _mb(p.get("measured_bytes_per_s")),
            _mb(predicted),
            p.get("predicted_by", "window"),
            ratio,
        )
    console.print(table)


def render_tcp(console: Console, doc: dict[str, Any]) -> None:
    console.print(
        f"{doc['host']}: RTT {doc['rtt_ms']:.3f} ms (ping median, min {doc['rtt_min_ms']:.3f}); "
        f"TCP connect {doc['connect_rtt_ms']:.3f} ms"
    )
    table = Table(title_justify="left")
    for name in ("direction", "probe MB/s", "probe Mbit/s", "iperf3 MB/s", "probe/iperf3", "window in use"):
        table.add_column(name, justify="right")
    for direction, d in doc["directions"].items():
        iperf = d.get("iperf3_bytes_per_s")
        table.add_row(
            direction,
            _mb(d["probe_bytes_per_s"]),
            _mbit(d["probe_bytes_per_s"]),
            _mb(iperf) if iperf else "not run",
            f"{d['probe_bytes_per_s'] / iperf:.2f}" if iperf else "—",
            f"{d['window_bytes'] // 1024} KiB" if d.get("window_bytes") else "—",
        )
    console.print(table)
    if doc.get("window_sweep"):
        render_sweep(console, doc["window_sweep"])


def render_history(console: Console, runs: list[RunSummary]) -> None:
    table = Table(title="runs")
    for name in ("id", "started (UTC)", "label", "rows", "finished"):
        table.add_column(name)
    for r in runs:
        table.add_row(str(r.id), r.started_utc, r.label or "", str(r.rows), "yes" if r.finished else "no")
    console.print(table)


def render_compare(console: Console, before: Run, after: Run) -> None:
    def key(r: Result) -> tuple[str, str, str]:
        return (r.label, r.direction, r.file_set)

    old = {key(r): r for r in before.results}
    table = Table(title=f"run {before.id} → run {after.id}")
    for name in ("client", "dir", "set", f"run {before.id} MB/s", f"run {after.id} MB/s", "after/before"):
        table.add_column(name, justify="right" if "MB/s" in name or "/" in name else "left")
    for direction in ("upload", "download"):
        a, b = before.baseline.for_direction(direction), after.baseline.for_direction(direction)
        if a or b:
            table.add_row("raw TCP", _SHORT[direction], "mem", _mb(a), _mb(b), f"{b / a:.2f}" if a and b else "—")
    new = {key(r) for r in after.results}
    # Rows of the later run in its order, then rows only the earlier run had: a client that vanished
    # from the later run (it failed to start, or was not asked for) is part of the comparison too.
    pairs: list[tuple[Result, Result | None, Result | None]] = [(r, old.get(key(r)), r) for r in after.results]
    pairs += [(r, r, None) for r in before.results if key(r) not in new]
    for shown, prev, row in pairs:
        a = prev.median_bytes_per_s if prev else None
        b = row.median_bytes_per_s if row else None
        ratio = f"{b / a:.2f}" if a and b else "—"
        table.add_row(shown.label, _SHORT.get(shown.direction, shown.direction), shown.file_set, _mb(a), _mb(b), ratio)
    console.print(table)


def render_story(console: Console, story: Any, runs: Mapping[str, Any], quick: bool) -> None:
    """A scenario's published figures beside the lab's, its notes, and each variant's verdict."""
    from workbench.lab.scenarios import figures

    form = " (reduced form: small files, fewer copies; figures are not the story's)" if quick else ""
    table = Table(title=f"story: {story.name}{form}", title_justify="left")
    for name, justify in (("what", "left"), ("published", "right"), ("lab", "right"), ("unit", "left")):
        table.add_column(name, justify=justify)
    for published, measured in figures(story, runs):
        if measured is None:
            lab = "—"
        elif published.unit == "s":
            lab = f"{measured:.1f}"
        else:
            lab = f"{measured / 1e6:,.1f}"
        table.add_row(published.what, published.figure, lab, published.unit)
    console.print(table)
    console.print(escape(story.story), highlight=False)
    for note in story.notes:
        console.print(f"note: {escape(note)}", highlight=False)
    for name, run in runs.items():
        said = run.explanation.verdict if run.explanation else ()
        if said:
            console.print(f"verdict ({escape(name)}): {escape(' '.join(said))}", highlight=False)

"""Terminal rendering: the summary table of a run, the TCP limit and history (a comparison: cli.compare).

MB/s is 10^6 bytes/s and Mbit/s 10^6 bits/s throughout, so figures compare directly with iperf. Every word from
outside (a server's reply, a host name, a label, an error) is printed through for_markup: shown as it reads,
never parsed as markup nor sent to the terminal as control codes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console, JustifyMethod
from rich.table import Table

from workbench.cli.run_table import print_results, table_width
from workbench.cli.summary import link_line, mb, mbit
from workbench.core.results import Run
from workbench.core.store import RunSummary
from workbench.shared.safetext import for_markup


def render_run(console: Console, run: Run, wide: bool = False) -> None:
    """The run's setting (server, link, baseline), its verdict, the table and its footnotes, then the window
    sweep and the notes. The table fits 120 columns, its notes numbered under it; `wide` shows every column
    and the notes inline (workbench.cli.run_table)."""
    server = run.meta.get("server") or {}
    if server.get("kind") == "stock":
        scratch = f"; scratch directory {server['scratch_path']}" if server.get("scratch_path") else ""
        where = f"{server.get('url')} (not started by workbench{scratch})"
        console.print(f"server: {for_markup(where)}")
    if run.link:
        console.print(for_markup(link_line(run.link)))
    if run.baseline.error:
        console.print(f"[yellow]raw TCP baseline failed:[/] {for_markup(run.baseline.error)}")
    no_baseline = _no_baseline_line(run)
    if no_baseline:
        console.print(no_baseline)
    # the answer first: a reader of a long run sees it without scrolling back over the table
    if run.explanation is not None and run.explanation.verdict:
        verdict = "[bold]verdict:[/] " + for_markup(" ".join(run.explanation.verdict))
        console.print(verdict, width=table_width(console, wide))
    print_results(console, run, wide)
    if run.window_sweep:
        render_sweep(console, run.window_sweep)
    for warning in run.warnings:
        console.print(f"[yellow]note:[/] {for_markup(warning)}")


def _no_baseline_line(run: Run) -> str | None:
    """A run without raw-TCP figures (a stock server and no iperf3) says so first: its shares of raw TCP are
    '—' and its ceilings come from the RTT and the clients' windows and requests alone."""
    base = run.baseline
    if base.up_bytes_per_s or base.down_bytes_per_s or not base.details.get("no_baseline"):
        return None
    why = "" if base.error else f" ({for_markup(base.details['no_baseline'])})"  # an error is shown above
    text = f"[yellow]no raw-TCP baseline[/]{why}: figures are absolute, '% TCP' is '—'"
    if base.rtt_ms is not None:
        text += f"; RTT {base.rtt_ms:.2f} ms from TCP connects to the service"
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
            mb(p.get("measured_bytes_per_s")),
            mb(predicted),
            for_markup(p.get("predicted_by", "window")),
            ratio,
        )
    console.print(table)


def render_tcp(console: Console, doc: dict[str, Any]) -> None:
    console.print(
        f"{for_markup(doc['host'])}: RTT {doc['rtt_ms']:.3f} ms (ping median, min {doc['rtt_min_ms']:.3f}); "
        f"TCP connect {doc['connect_rtt_ms']:.3f} ms"
    )
    table = Table(title_justify="left")
    for name in ("direction", "probe MB/s", "probe Mbit/s", "iperf3 MB/s", "probe/iperf3", "window in use"):
        table.add_column(name, justify="right")
    for direction, d in doc["directions"].items():
        iperf = d.get("iperf3_bytes_per_s")
        table.add_row(
            for_markup(direction),
            mb(d["probe_bytes_per_s"]),
            mbit(d["probe_bytes_per_s"]),
            mb(iperf) if iperf else "not run",
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
        finished = "yes" if r.finished else "no"
        table.add_row(str(r.id), for_markup(r.started_utc), for_markup(r.label or ""), str(r.rows), finished)
    console.print(table)


def render_story(console: Console, story: Any, runs: Mapping[str, Any], quick: bool) -> None:
    """A scenario's published figures beside the lab's, its notes, and each variant's verdict."""
    from workbench.lab.scenarios import figures

    form = " (reduced form: small files, fewer copies; figures are not the story's)" if quick else ""
    table = Table(title=f"story: {for_markup(story.name)}{form}", title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("what", "left"),
        ("published", "right"),
        ("lab", "right"),
        ("unit", "left"),
    )
    for name, justify in columns:
        table.add_column(name, justify=justify)
    for published, measured in figures(story, runs):
        if measured is None:
            lab = "—"
        elif published.unit != "Mbit/s":  # seconds, a share in %, bytes per byte: as measured
            lab = f"{measured:.1f}"
        else:
            lab = f"{measured / 1e6:,.1f}"
        table.add_row(for_markup(published.what), for_markup(published.figure), lab, for_markup(published.unit))
    console.print(table)
    console.print(for_markup(story.story, one_line=False), highlight=False)
    for note in story.notes:
        console.print(f"note: {for_markup(note)}", highlight=False)
    for name, run in runs.items():
        said = run.explanation.verdict if run.explanation else ()
        if said:
            console.print(f"verdict ({for_markup(name)}): {for_markup(' '.join(said))}", highlight=False)

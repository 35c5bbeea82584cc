"""A run as one self-contained HTML page (`workbench report RUN --html FILE`): the verdict, the link and both hosts,
the summary table, the window sweep, the plots as inline SVG, and the notes.

Nothing on the page comes from the network: CSS and SVG are inline, the fonts are the reader's own (a system
font stack), and there is no script. A Content-Security-Policy in the page refuses any fetch, so even text that
mentions a URL can never load anything. The table is built from workbench.cli.summary, as the terminal's is.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from workbench import __version__
from workbench.cli import plots
from workbench.cli.summary import COLUMNS, SummaryRow, host_lines, link_line, mb, summary_rows, table_columns
from workbench.core.results import Result, Run
from workbench.shared.offloads import send_paths
from workbench.shared.safetext import for_html as escape  # escaped, and no control characters

CSS = """
:root { color-scheme: light; --fg: #1d1d1f; --dim: #6e6e73; --rule: #d2d2d7; --band: #f5f5f7; }
* { box-sizing: border-box; }
body { margin: 0 auto; padding: 1.5rem 1.25rem 3rem; max-width: 1280px; color: var(--fg); background: #fff;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
h1 { font-size: 1.6rem; margin: 0 0 .2rem; }
h2 { font-size: 1.2rem; margin: 2rem 0 .6rem; border-bottom: 1px solid var(--rule); padding-bottom: .2rem; }
.sub { color: var(--dim); margin: 0 0 1rem; }
.verdict { background: var(--band); border-left: 4px solid #0a66c2; padding: .8rem 1rem; font-size: 1.05rem; }
.verdict p { margin: 0; }
ul.setup, ul.notes { padding-left: 1.2rem; margin: .4rem 0; }
ul.setup li, ul.notes li { margin: .15rem 0; }
code, .mono { font-family: ui-monospace, "SF Mono", Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: .9em; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; width: 100%; }
table.sweep { width: auto; }
caption { text-align: left; color: var(--dim); padding: .3rem 0; }
th, td { padding: .25rem .5rem; border-bottom: 1px solid var(--rule); vertical-align: top; text-align: left; }
thead th { background: var(--band); white-space: nowrap; position: sticky; top: 0; }
tbody th.group { background: #fff; padding-top: .8rem; font-size: 14px; border-bottom: 2px solid var(--rule); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.notes { min-width: 16rem; color: #3a3a3c; }
tr.baseline td { font-weight: 600; }
tr.unavailable td { color: var(--dim); }
.status-ok { color: #1a7f37; font-weight: 600; }
.status-failed, .status-mismatch { color: #c5221f; font-weight: 700; }
.status-unchecked { color: #9a6700; font-weight: 600; }
.status-unverifiable { color: #0550ae; font-weight: 600; }
.warn { color: #9a6700; }
figure.plot { margin: 1rem 0 1.5rem; }
.plot-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 560px), 1fr)); gap: 0 1.5rem; }
figure.plot svg { display: block; max-width: 100%; height: auto; }
figure.plot svg * { stroke-linejoin: round; stroke-linecap: butt; }
figcaption { color: var(--dim); font-size: 13px; margin-top: .2rem; }
footer { margin-top: 3rem; color: var(--dim); font-size: 12px; }
"""

# No fetch of any kind (a style sheet, an image, a font, a frame), inline styles only, no script at all.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

_NUMERIC = {name for name, justify in COLUMNS if justify == "right"}
_STATUS_CLASS = {"ok": "status-ok", "failed": "status-failed", "MISMATCH": "status-mismatch",
                 "unchecked": "status-unchecked", "not verifiable": "status-unverifiable"}  # fmt: skip


def render_html(run: Run) -> str:
    """The whole page for `run`."""
    title = f"workbench run {run.id}" if run.id is not None else "workbench run"
    started = str(run.meta.get("started_utc") or "")
    day = started[:10]
    parts = [
        "<!doctype html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title + (' — ' + day if day else ''))}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        f"<header><h1>{escape(title)}</h1>{_when(run)}</header>",
        _verdict(run),
        _setup(run),
        _summary_table(summary_rows(run)),
        _sweep_table(run.window_sweep or ()),
        _wire_table(run),
        _plots(run),
        _notes(run.warnings),
        f"<footer>workbench {escape(__version__)}. MB/s is 10<sup>6</sup> bytes/s and Mbit/s 10<sup>6</sup> bits/s,"
        " as iperf reports.</footer>",
        "</body>",
        "</html>",
    ]
    return "\n".join(part for part in parts if part) + "\n"


def _when(run: Run) -> str:
    started, finished = run.meta.get("started_utc"), run.meta.get("finished_utc")
    if not started:
        return ""
    text = f"started {started}" + (f", finished {finished}" if finished else ", not finished")
    return f'<p class="sub">{escape(text)} (UTC)</p>'


def _verdict(run: Run) -> str:
    said = run.explanation.verdict if run.explanation is not None else ()
    body = escape(" ".join(said)) if said else "No verdict: the run stopped before its rows were explained."
    return f'<section><h2>Verdict</h2><div class="verdict"><p>{body}</p></div></section>'


def _setup(run: Run) -> str:
    lines: list[tuple[str, str]] = []  # (css class, text)
    server = run.meta.get("server") or {}
    if isinstance(server, Mapping) and server.get("kind") == "stock":
        scratch = f"; scratch directory {server['scratch_path']}" if server.get("scratch_path") else ""
        lines.append(("", f"server: {server.get('url')} (not started by workbench{scratch})"))
    if run.link:
        lines.append(("", link_line(run.link)))
    lines += [("", line) for line in host_lines(run)]
    lines += [("", f"{role} send path {said}") for role, said in send_paths(run.meta)]
    base = run.baseline
    if base.error:
        lines.append(("warn", f"raw TCP baseline failed: {base.error}"))
    elif not (base.up_bytes_per_s or base.down_bytes_per_s) and base.details.get("no_baseline"):
        text = f"no raw-TCP baseline ({base.details['no_baseline']}): figures are absolute, '% TCP' is '—'"
        if base.rtt_ms is not None:
            text += f"; RTT {base.rtt_ms:.2f} ms from TCP connects to the service"
        lines.append(("warn", text))
    if not lines:
        return ""
    items = "".join(
        f'<li class="{css}">{escape(text)}</li>' if css else f"<li>{escape(text)}</li>" for css, text in lines
    )
    return f'<section><h2>Link and hosts</h2><ul class="setup">{items}</ul></section>'


def _groups(rows: Sequence[SummaryRow]) -> list[tuple[str, list[SummaryRow]]]:
    """The rows by protocol, each protocol where it first appears, rows in their own order within it."""
    grouped: dict[str, list[SummaryRow]] = {}
    for row in rows:
        grouped.setdefault(row.group, []).append(row)
    return list(grouped.items())


def _summary_table(rows: Sequence[SummaryRow]) -> str:
    columns = table_columns(rows)  # a fleet run's host column too: the page shows every client's own rows
    head = "".join(
        f'<th scope="col" class="num">{escape(name)}</th>'
        if name in _NUMERIC
        else f'<th scope="col">{escape(name)}</th>'
        for name, _ in columns
    )
    bodies = []
    for group, members in _groups(rows):
        lines = [f'<tr><th class="group" scope="rowgroup" colspan="{len(columns)}">{escape(group)}</th></tr>']
        for row in members:
            classes = " ".join(c for c, on in (("baseline", row.baseline), ("unavailable", row.unavailable)) if on)
            cells = []
            named = row.named()
            for name, _ in columns:
                text = named[name]
                css = "num" if name in _NUMERIC else ("notes" if name == "notes" else "")
                if name == "verified" and row.status:
                    cells.append(f'<td><span class="{_STATUS_CLASS.get(row.status, "")}">{escape(text)}</span></td>')
                else:
                    cells.append(f'<td class="{css}">{escape(text)}</td>' if css else f"<td>{escape(text)}</td>")
            lines.append(
                f'<tr class="{classes}">' + "".join(cells) + "</tr>" if classes else "<tr>" + "".join(cells) + "</tr>"
            )
        bodies.append("<tbody>" + "\n".join(lines) + "</tbody>")
    caption = (
        "Median of the timed copies; % TCP is the share of raw TCP the same way; bound: the ceiling that explains it."
    )
    return (
        '<section><h2>Summary</h2><div class="table-wrap"><table class="summary">'
        f"<caption>{escape(caption)}</caption><thead><tr>{head}</tr></thead>"
        + "\n".join(bodies)
        + "</table></div></section>"
    )


def _sweep_table(points: Sequence[Mapping[str, Any]]) -> str:
    if not points:
        return ""
    names = ("window", "in use", "measured MB/s", "predicted MB/s", "by", "measured/predicted")
    head = "".join(f'<th scope="col" class="num">{escape(n)}</th>' for n in names)
    lines = []
    for p in points:
        predicted = p.get("predicted_bytes_per_s") or 0
        measured = p.get("measured_bytes_per_s")
        used = p.get("effective_window_bytes")
        cells = (
            f"{p['window_bytes'] // 1024} KiB",
            f"{used // 1024} KiB" if used else "—",
            mb(measured),
            mb(predicted or None),
            str(p.get("predicted_by", "window")),
            f"{measured / predicted:.2f}" if predicted and measured is not None else "—",
        )
        lines.append("<tr>" + "".join(f'<td class="num">{escape(c)}</td>' for c in cells) + "</tr>")
    caption = "Predicted: window / RTT, or the path's rate once the window exceeds its bandwidth-delay product."
    return (
        '<section><h2>TCP window sweep</h2><div class="table-wrap"><table class="sweep">'
        f"<caption>{escape(caption)}</caption><thead><tr>{head}</tr></thead><tbody>"
        + "".join(lines)
        + "</tbody></table></div></section>"
    )


def _wire_table(run: Run) -> str:
    """What each row's sender put on the wire (workbench.shared.wire), with its interface's count beside it."""
    lines = []
    for row in run.results:
        tcp = row.wire_tcp
        per_file = row.wire_bytes_per_file_byte
        if tcp is None or per_file is None:
            continue
        share = row.retransmitted_share
        iface = tcp.iface_to_wire
        compared = iface is not None and tcp.iface_kind != "loopback"
        cells = (
            (row.label, ""),
            (row.direction, ""),
            (row.file_set, ""),
            (tcp.host, ""),
            (f"{per_file:.3f}", "num"),
            (f"{100 * share:.2f} %" if share is not None else "—", "num"),
            (f"{tcp.segs_out:,}" if tcp.segs_out is not None else "—", "num"),
            (tcp.iface_name or "—", ""),
            (f"{iface:.3f}" if compared and iface is not None else "—", "num"),
        )
        tds = [(f'<td class="{css}">' if css else "<td>") + escape(text) + "</td>" for text, css in cells]
        lines.append("<tr>" + "".join(tds) + "</tr>")
    if not lines:
        return ""
    names = ("client", "dir", "set", "sender", "wire bytes / file byte", "retransmitted", "segments", "interface",
             "interface / wire")  # fmt: skip
    head = "".join(f'<th scope="col">{escape(n)}</th>' for n in names)
    caption = (
        "Payload, retransmissions and IP/TCP headers per segment (Ethernet's where the path is Ethernet) that the "
        "sender put on the wire, per byte of file; the sender's interface counted over the same copies, as a share "
        "of it (not compared on loopback, where it counts both directions of every loopback connection)."
    )
    return (
        '<section><h2>The wire</h2><div class="table-wrap"><table class="wire">'
        f"<caption>{escape(caption)}</caption><thead><tr>{head}</tr></thead><tbody>"
        + "".join(lines)
        + "</tbody></table></div></section>"
    )


_XMLNS = re.compile(r'\s+xmlns(:\w+)?="[^"]*"')
_MPL_STYLE = re.compile(r"<style[^>]*>\*\{[^<]*\}</style>")


def inline_svg(svg: str, label: str) -> str:
    """An SVG document as an element of the HTML page: no namespace declarations (the HTML parser puts <svg>
    in its namespace; the declarations are URLs the page would otherwise carry), `href` for `xlink:href`,
    matplotlib's page-wide `*` style moved to the page's CSS (scoped to the plots), and a label for readers."""
    svg = _XMLNS.sub("", svg)
    svg = svg.replace("xlink:href=", "href=")
    svg = _MPL_STYLE.sub("", svg)
    return svg.replace("<svg", f'<svg role="img" aria-label="{escape(label)}"', 1).strip()


def _figure(svg: str | None, caption: str) -> str:
    if svg is None:
        return ""
    return f'<figure class="plot">{inline_svg(svg, caption)}<figcaption>{escape(caption)}</figcaption></figure>'


def _plot_view(run: Run) -> Run:
    """The run as the plots draw it: in a fleet run each row's client names its host (`aiohttp @client1`, the
    aggregate `aiohttp ×3`), so rows of one client on several hosts are told apart rather than drawn on one line."""
    if not any(row.client_host for row in run.results):
        return run

    def named(row: Result) -> Result:
        if row.client_host == "all":
            count = len((row.aggregate or {}).get("clients") or ())
            return dataclasses.replace(row, client=f"{row.client} ×{count}")
        return dataclasses.replace(row, client=f"{row.client} @{row.client_host}") if row.client_host else row

    return dataclasses.replace(run, results=tuple(named(row) for row in run.results))


def _plots(run: Run) -> str:
    run = _plot_view(run)
    parts = []
    chosen = plots.time_plot_rows(run)
    drawable = sum(1 for r in run.results if plots.timed_long_enough(r))
    if chosen:
        why = "every row whose copies stalled, and per client and direction its largest single-file set"
        left = drawable - len(chosen)
        intro = f"Mbit/s in each 100 ms of each timed copy, for {len(chosen)} of the {drawable} rows whose copies "
        intro += f"lasted half a second or more: {why}" + (f" ({left} more not drawn)." if left else ".")
        intro += " Dashed: raw TCP the same way" + ("; dotted: the lab link's goodput" if run.link else "")
        intro += "; shaded: stalls."
        figures = []
        for index in chosen:
            row = run.results[index]
            caption = f"{row.label} {row.direction} {row.file_set}" + (
                f": {row.stall_count} stall(s), {row.stall_seconds:.1f} s" if row.stall_count else ""
            )
            figures.append(_figure(plots.throughput_over_time(run, index), caption))
        parts.append(f'<h3>Throughput over time</h3><p class="sub">{escape(intro)}</p>')
        parts.append('<div class="plot-grid">' + "\n".join(f for f in figures if f) + "</div>")
    spread = plots.spread_by_client(run)
    if spread:
        parts.append("<h3>Spread across repeats</h3>")
        caption = (
            "Each timed copy's rate (dots) and the row's median (bar), by client and file set; "
            "uploads left, downloads right; dashed: raw TCP."
        )
        parts.append(_figure(spread, caption))
    sweep = plots.window_sweep(run)
    if sweep:
        parts.append("<h3>TCP window sweep</h3>")
        parts.append(_figure(sweep, "Measured rate per TCP window against window / RTT, capped at the path's rate."))
    files = plots.files_per_s(run)
    if files:
        parts.append("<h3>Small files</h3>")
        parts.append(_figure(files, "Files per second of the small-file sets, upload and download side by side."))
    if not parts:
        return '<section><h2>Plots</h2><p class="sub">Nothing to plot: no copy of this run finished.</p></section>'
    return "<section><h2>Plots</h2>" + "\n".join(parts) + "</section>"


def _notes(warnings: Sequence[str]) -> str:
    if not warnings:
        return ""
    items = "".join(f"<li>{escape(w)}</li>" for w in warnings)
    return f'<section><h2>Notes</h2><ul class="notes">{items}</ul></section>'

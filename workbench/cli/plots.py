"""The plots of a run as SVG text, for the HTML report: throughput over time, spread across repeats,
the window sweep and files/s of small-file sets.

Each function takes the run as measured (`Run`, its `Result`s and their `Sample`s) and returns one complete SVG
document, or None when there is nothing to draw. Drawing uses matplotlib `Figure` objects only (no pyplot, so
no global figure state); the few settings SVG output reads from matplotlib's global rcParams are applied under
a lock, so plots may be drawn from several threads. Text stays text (`svg.fonttype` none): a tenth of the size
of glyph paths, and it names only local font families, so the page never reaches for a font. Every element id
is prefixed with the plot's own name so several plots can sit in one HTML page without clashing.

Throughput over time is in Mbit/s (as iperf and the link's rate), rates elsewhere in MB/s (10^6 B/s, as the
summary table).

Every word from the run on a plot (a client's name, a host's, a file set's) goes through
workbench.shared.safetext.for_plot: its `$` are escaped, so mathtext never parses data (`$\\foo$` in a client
name would make drawing fail), control characters, which SVG text may not hold, are removed, and a long name is
cut.
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import matplotlib
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from workbench.core.ceiling import link_goodput_bytes_per_s
from workbench.core.results import INTERVAL_S, Result, Run, Sample
from workbench.shared.safetext import for_plot

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

# What SVG output reads from the global rcParams: text as <text> with a short family list (DejaVu Sans is
# matplotlib's own, so the layout is measured with it; the browser falls back to its sans-serif), and a fixed
# hash salt so the same run draws the same file.
_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "workbench",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial"],
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_RC_LOCK = threading.Lock()
# No creator, date or licence block: the file says nothing beyond the plot (and no URL).
_NO_METADATA = {"Creator": None, "Date": None, "Format": None, "Type": None}

WIDTH_IN = 7.5  # inches (72 SVG units each, 96 px at 100 %): 720 px, within the report's column
TIME_WIDTH_IN = 6.2  # two time plots side by side on a wide page
STALL_COLOUR = "#d62728"
RAW_TCP_COLOUR = "#222222"
LINK_COLOUR = "#7f7f7f"
DIRECTIONS = ("upload", "download")
DIRECTION_COLOURS = {"upload": "#1f77b4", "download": "#ff7f0e"}
# A strip plot switches to a log axis when its rates span more than this factor (a small-file set beside
# a large file): on a linear axis the slow rows' spread would be a dot at zero.
LOG_SPAN = 20.0


@contextmanager
def _drawing() -> Iterator[None]:
    with _RC_LOCK, matplotlib.rc_context(_RC):
        yield


def _slug(*parts: object) -> str:
    """An id fragment: letters, digits, '-' and '_' only (client labels have '/', file sets 'x')."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", "-".join(str(p) for p in parts)).strip("-")


_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.S)
_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')


def _svg(fig: Figure, prefix: str) -> str:
    """The figure as an SVG document (no XML prolog or DTD), every id and reference to one prefixed."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=_NO_METADATA)
    text = _PROLOG.sub("", buf.getvalue(), count=1)
    text = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', text)
    return _REF.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", text)


def _mbit(bytes_per_s: float) -> float:
    return bytes_per_s * 8 / 1e6


def _row_index(run: Run, row: int | Result) -> int:
    if isinstance(row, int):
        if not 0 <= row < len(run.results):
            raise IndexError(f"run has {len(run.results)} rows, no row {row}")
        return row
    for index, candidate in enumerate(run.results):
        if candidate is row:
            return index
    return run.results.index(row)


# ---------------------------------------------------------------- throughput over time


def copy_timeline(sample: Sample) -> tuple[list[float], list[float]]:
    """When each interval of a copy began (s, and where the copy ended, last) and its rate (bytes/s).

    The last interval is partial (the copy ended inside it): its rate is over the part of it the copy lasted, from
    the copy's own seconds, so a copy that ends 10 ms into its last interval does not show a false drop, and a copy
    shorter than one interval shows its real rate. The part is taken as at least a quarter of an interval: the
    sampler's clock and the copy's timer start a moment apart, and a sliver would make a spike.
    """
    count = len(sample.intervals)
    if not count:
        return [], []
    last_s = sample.seconds - (count - 1) * INTERVAL_S
    if count == 1 and 0 < last_s <= INTERVAL_S:
        pass  # the whole copy: its seconds are the interval's length
    elif 0 < last_s <= INTERVAL_S:
        last_s = max(last_s, INTERVAL_S / 4)
    else:  # the timer and the intervals disagree: show whole intervals only
        last_s = INTERVAL_S
    lengths = [INTERVAL_S] * (count - 1) + [last_s]
    starts = [i * INTERVAL_S for i in range(count)]
    return [*starts, starts[-1] + last_s], [
        moved / length for moved, length in zip(sample.intervals, lengths, strict=True)
    ]


def throughput_over_time(run: Run, row: int | Result, prefix: str | None = None) -> str | None:
    """One line per timed copy of the row (Mbit/s in each 100 ms interval), the raw-TCP rate of its direction
    and the lab link's goodput as horizontal lines, stalls shaded. None when no copy kept its intervals."""
    index = _row_index(run, row)
    result = run.results[index]
    copies = [(n, s) for n, s in enumerate(result.samples, 1) if s.error is None and s.intervals]
    if not copies:
        return None
    raw_tcp = run.baseline.for_direction(result.direction)
    link = link_goodput_bytes_per_s(run.link, result.direction)
    with _drawing():
        fig = Figure(figsize=(TIME_WIDTH_IN, 2.6), layout="constrained")
        ax = fig.add_subplot()
        handles: list[Artist] = []
        for n, sample in copies:
            times, rates_bytes_per_s = copy_timeline(sample)
            rates = [_mbit(rate) for rate in rates_bytes_per_s]
            (line,) = ax.plot(
                times,
                [*rates, rates[-1]],
                drawstyle="steps-post",
                linewidth=1.2,
                label=f"copy {n}: {_mbit(sample.bytes_per_s):,.0f} Mbit/s",
            )
            line.set_gid(f"copy-{n}")
            handles.append(line)
            for k, (first, length) in enumerate(sample.stalls):
                span = ax.axvspan(first * INTERVAL_S, (first + length) * INTERVAL_S, color=STALL_COLOUR, alpha=0.15)
                span.set_gid(f"stall-{n}-{k}")
        if any(s.stalls for _, s in copies):
            handles.append(Patch(color=STALL_COLOUR, alpha=0.15, label="stall"))
        for rate, name, gid, colour, style, width in (
            (raw_tcp, "raw TCP", "raw-tcp", RAW_TCP_COLOUR, "--", 1.0),
            (link, "link goodput", "link-goodput", LINK_COLOUR, ":", 1.2),
        ):
            if rate:
                label = f"{name} {_mbit(rate):,.0f} Mbit/s"
                line = ax.axhline(_mbit(rate), color=colour, linestyle=style, linewidth=width, label=label)
                line.set_gid(gid)
                handles.append(line)
        ax.set_xlabel("time since the first request (s)")
        ax.set_ylabel("Mbit/s")
        ax.set_xlim(0, max(copy_timeline(s)[0][-1] for _, s in copies))
        ax.set_ylim(bottom=0)
        ax.set_title(for_plot(f"{result.label} {result.direction} {result.file_set}", max_chars=80), loc="left")
        ax.grid(True, alpha=0.3)
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
        return _svg(fig, prefix or f"wb-time-{index}")


# A copy over in fewer intervals than this is a step or two, not a curve: its rate is in the table already.
MIN_TIME_PLOT_INTERVALS = 5


def timed_long_enough(row: Result) -> bool:
    """Whether a good copy of the row lasted MIN_TIME_PLOT_INTERVALS intervals (half a second) or more."""
    return any(s.error is None and len(s.intervals) >= MIN_TIME_PLOT_INTERVALS for s in row.samples)


# Rows with stalls are always worth a look; beyond those, one large copy per client and direction shows how a
# client streams. Each time plot is about 15-30 KB of SVG: the cap keeps a run of every client (15 clients × 2
# directions) near 1 MB of HTML. The report says how many rows it left out.
MAX_TIME_PLOTS = 24


def time_plot_rows(run: Run, limit: int = MAX_TIME_PLOTS) -> list[int]:
    """The rows that get a throughput-over-time plot, in the run's order: every row whose copies stalled, then per
    client and direction the largest single-file set (the largest set when it copied none), up to `limit`; only
    rows with a copy of half a second or more."""
    drawable = [i for i, r in enumerate(run.results) if timed_long_enough(r)]
    stalled = [i for i in drawable if run.results[i].stall_count]
    largest: dict[tuple[str, str], int] = {}
    for i in drawable:
        row = run.results[i]
        key = (row.label, row.direction)
        best = largest.get(key)
        if best is None or (row.files <= 1, row.bytes) > (run.results[best].files <= 1, run.results[best].bytes):
            largest[key] = i
    chosen: list[int] = []
    for i in (*stalled, *largest.values()):
        if i not in chosen and len(chosen) < limit:
            chosen.append(i)
    return sorted(chosen)


# ---------------------------------------------------------------- spread across repeats


def _rows_by_client(rows: Sequence[Result]) -> tuple[list[str], list[str]]:
    """The client labels and file sets of `rows`, each in first-seen order."""
    labels = list(dict.fromkeys(r.label for r in rows))
    sets = list(dict.fromkeys(r.file_set for r in rows))
    return labels, sets


def _offsets(count: int, band: float = 0.8) -> list[float]:
    """Positions of `count` items side by side within one category of width `band`, centred on 0."""
    step = band / count
    return [(j - (count - 1) / 2) * step for j in range(count)]


def spread_by_client(run: Run, prefix: str = "wb-spread") -> str | None:
    """Every timed copy's rate (MB/s) as a dot, the row's median as a bar, one line per client, file sets side by
    side within it; uploads in the left panel, downloads in the right, with raw TCP the same way. None when no
    row has a good copy."""
    rows = [r for r in run.results if r.good_samples]
    if not rows:
        return None
    labels, sets = _rows_by_client(rows)
    offsets = dict(zip(sets, _offsets(len(sets)), strict=True))
    rates = [s.bytes_per_s / 1e6 for r in rows for s in r.good_samples if s.bytes_per_s > 0]
    raw = [b / 1e6 for d in DIRECTIONS if (b := run.baseline.for_direction(d))]
    span = max(rates + raw) / min(rates) if rates and min(rates) > 0 else 1.0
    height = max(2.4, 1.1 + len(labels) * (0.22 + 0.1 * len(sets)))
    colours = [f"C{j % 10}" for j in range(len(sets))]
    with _drawing():
        fig = Figure(figsize=(WIDTH_IN, height), layout="constrained")
        axes = fig.subplots(1, 2, sharey=True, sharex=True)
        for ax, direction in zip(axes, DIRECTIONS, strict=True):
            for row in (r for r in rows if r.direction == direction):
                y = labels.index(row.label) + offsets[row.file_set]
                colour = colours[sets.index(row.file_set)]
                values = [s.bytes_per_s / 1e6 for s in row.good_samples]
                dots = ax.scatter(values, [y] * len(values), s=14, color=colour, alpha=0.7, linewidths=0)
                dots.set_gid(_slug("copies", direction, row.label, row.file_set))
                median = row.median_bytes_per_s or 0
                mark = ax.scatter([median / 1e6], [y], marker="|", s=140, color=colour, linewidths=2)
                mark.set_gid(_slug("median", direction, row.label, row.file_set))
            tcp = run.baseline.for_direction(direction)
            if tcp:
                line = ax.axvline(tcp / 1e6, color=RAW_TCP_COLOUR, linestyle="--", linewidth=1)
                line.set_gid(f"raw-tcp-{direction}")
            ax.set_title(for_plot(direction), loc="left")
            ax.set_xlabel("MB/s (log)" if span > LOG_SPAN else "MB/s")
            ax.grid(True, axis="x", alpha=0.3)
        if span > LOG_SPAN:
            axes[0].set_xscale("log")
        else:
            axes[0].set_xlim(left=0)
        axes[0].set_yticks(range(len(labels)), [for_plot(label) for label in labels])
        axes[0].set_ylim(len(labels) - 0.5, -0.5)  # first client at the top, as in the table
        handles: list[Artist] = [
            Patch(color=c, label=for_plot(f"set {name}")) for c, name in zip(colours, sets, strict=True)
        ]
        handles.append(Line2D([], [], color=RAW_TCP_COLOUR, linestyle="--", label="raw TCP"))
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 6), frameon=False, fontsize=8)
        return _svg(fig, prefix)


# ---------------------------------------------------------------- window sweep


def window_sweep(run: Run, prefix: str = "wb-sweep") -> str | None:
    """Measured rate (MB/s) against the window (KiB, log axis), beside the prediction: window / RTT, capped at the
    path's rate once the window exceeds its bandwidth-delay product. None without a sweep."""
    points = sorted(
        (p for p in run.window_sweep or () if p.get("window_bytes") and p.get("measured_bytes_per_s") is not None),
        key=lambda p: p["window_bytes"],
    )
    if not points:
        return None
    kib = [p["window_bytes"] / 1024 for p in points]
    with _drawing():
        fig = Figure(figsize=(WIDTH_IN, 3.0), layout="constrained")
        ax = fig.add_subplot()
        predicted = [
            (k, p["predicted_bytes_per_s"] / 1e6)
            for k, p in zip(kib, points, strict=True)
            if p.get("predicted_bytes_per_s")
        ]
        if predicted:
            (line,) = ax.plot(
                *zip(*predicted, strict=True),
                linestyle="--",
                color=RAW_TCP_COLOUR,
                marker="x",
                label="predicted: window / RTT, capped at the path's rate",
            )
            line.set_gid("predicted")
        (line,) = ax.plot(
            kib, [p["measured_bytes_per_s"] / 1e6 for p in points], marker="o", color="C0", label="measured"
        )
        line.set_gid("measured")
        ax.set_xscale("log", base=2)
        ax.set_xticks(kib, [f"{k:g}" for k in kib])
        ax.minorticks_off()
        ax.set_xlabel("TCP window (KiB)")
        ax.set_ylabel("MB/s")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize=8, frameon=False)
        return _svg(fig, prefix)


# ---------------------------------------------------------------- small files


def files_per_s(run: Run, prefix: str = "wb-files") -> str | None:
    """Small-file sets (rows of more than one file): files/s per client and set as bars at the median, upload and
    download side by side, each copy's own files/s as a dot. None when the run copied no small-file set."""
    rows = [r for r in run.results if r.files > 1 and r.files_per_s]
    if not rows:
        return None
    categories = list(dict.fromkeys((r.label, r.file_set) for r in rows))
    offsets = dict(zip(DIRECTIONS, _offsets(2), strict=True))
    with _drawing():
        fig = Figure(figsize=(WIDTH_IN, max(2.0, 0.9 + 0.45 * len(categories))), layout="constrained")
        ax = fig.add_subplot()
        for row in rows:
            y = categories.index((row.label, row.file_set)) + offsets.get(row.direction, 0)
            colour = DIRECTION_COLOURS.get(row.direction, "C2")
            (bar,) = ax.barh([y], [row.files_per_s or 0.0], height=0.38, color=colour, alpha=0.55)
            bar.set_gid(_slug("bar", row.direction, row.label, row.file_set))
            each = [s.files / s.seconds for s in row.good_samples if s.seconds > 0]
            dots = ax.scatter(each, [y] * len(each), s=12, color=colour, linewidths=0)
            dots.set_gid(_slug("copies", row.direction, row.label, row.file_set))
        ax.set_yticks(range(len(categories)), [for_plot(f"{label} {name}") for label, name in categories])
        ax.set_ylim(len(categories) - 0.5, -0.5)
        ax.set_xlim(left=0)
        ax.set_xlabel("files/s")
        ax.grid(True, axis="x", alpha=0.3)
        present = [d for d in DIRECTIONS if any(r.direction == d for r in rows)]
        ax.legend(
            handles=[Patch(color=DIRECTION_COLOURS[d], alpha=0.55, label=for_plot(d)) for d in present],
            loc="upper left",
            bbox_to_anchor=(1.01, 1),
            fontsize=8,
            frameon=False,
        )
        return _svg(fig, prefix)

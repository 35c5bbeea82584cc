"""The verdict: three to six sentences computed from a run's rows, never written per protocol name.

In order of what a reader needs: the raw-TCP limit (and what limited the probe itself), which clients reach
it, the largest shortfalls with their measured cause and ceiling, advice where the limit is a setting
(the sysctl or socket buffer on the host that was seen, its value and the path's need), fixed costs per copy
where they dominate, and stalls. Settings are named, never changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workbench.core.ceiling import UNEXPLAINED, format_bytes, format_ms, link_goodput
from workbench.core.results import Result, RowExplanation, Run
from workbench.shared.triage import TcpTriage

REACHES = 0.9  # a copy at >= 90 % of raw TCP the same way reaches it
MAX_SENTENCES = 6
DOMINANT_FIXED = 0.25  # a fixed cost taking a quarter of a copy dominates it

_CAUSE = {
    "application": "a client or server limit, not the network",
    "receive-window": "the receiver's window, a setting",
    "send-buffer": "the sender's socket buffer, a setting",
    "network": "the network path",
}
_BOUND_CAUSE = {
    "requests": "round trips per request, a client limit",
    "per-file": "round trips per file",
    "cpu": "CPU",
    "link": "the network path",
    "raw-tcp": "the network path",
    "window": "the TCP window",
    "ssh-window": "the SSH channel window, a client limit",
}


def _mbit(rate_bytes_per_s: float) -> str:
    return f"{rate_bytes_per_s * 8 / 1e6:,.0f} Mbit/s"


def _triage_words(t: TcpTriage) -> str:
    if t.side == "receiver":
        return f"the receiver saw a window of {format_bytes(t.max_window_bytes or 0)}"
    shares = t.fractions()
    words = {
        "application": "idle or app-limited",
        "receive-window": "waiting on the receive window",
        "send-buffer": "limited by its send buffer",
        "network": "limited by the network",
    }
    key = t.limit if t.limit in shares else max(shares, key=lambda k: shares[k])  # "mixed": the largest share
    return f"the {t.host}'s sender {words[key]} {100 * shares[key]:.0f} % of the time"


def _raw_tcp(run: Run) -> str:
    base = run.baseline
    if not (base.up_bytes_per_s or base.down_bytes_per_s):
        return "There is no raw-TCP baseline for this run, so rates are absolute, not shares of the path's limit."
    parts = []
    for direction, rate in (("up", base.up_bytes_per_s), ("down", base.down_bytes_per_s)):
        if rate:
            parts.append(f"{_mbit(rate)} {direction}")
    rtt = f" at {base.rtt_ms:.2f} ms RTT" if base.rtt_ms else ""
    limited = []
    for direction, doc in (base.tcp or {}).items():
        t = TcpTriage.from_json(doc)
        if t is not None and t.limit and t.limit != "network":
            limited.append(f"{direction} it was itself {t.limit}-limited ({t.short()})")
    tail = "; " + ", ".join(limited) if limited else ""
    return f"Raw TCP reached {' and '.join(parts)}{rtt}{tail}."


def _reach(measured: Sequence[tuple[Result, RowExplanation]]) -> str | None:
    shares = [(row, why.pct_of_tcp) for row, why in measured if why.pct_of_tcp is not None]
    if not shares:
        return None
    reaching = sorted({row.label for row, pct in shares if pct >= 100 * REACHES})
    if reaching:
        rows = sum(1 for _, pct in shares if pct >= 100 * REACHES)
        return f"{rows} of {len(shares)} rows reach {REACHES * 100:.0f} % of it or more, by {', '.join(reaching)}."
    best_row, best = max(shares, key=lambda item: item[1])
    return (
        f"No copy reaches {REACHES * 100:.0f} % of it; the best is {best_row.label} {best_row.direction} "
        f"{best_row.file_set} at {best:.0f} %."
    )


def _binding(why: RowExplanation) -> str | None:
    """The binding ceiling's own explanation ('64 KiB × 1 request / (2.8 ms + 1.0 ms to send)')."""
    for bound in why.bounds or ():
        if bound.bytes_per_s == why.ceiling_bytes_per_s:
            return bound.explanation
    return None


def _shortfall(row: Result, why: RowExplanation) -> str:
    t = row.tcp
    text = f"{row.label} {row.direction} {row.file_set} reaches {why.pct_of_tcp:.0f} % of raw TCP: "
    if why.bound == UNEXPLAINED or why.bound is None:
        text += "no ceiling explains it"
    else:
        text += f"{why.bound} ceiling {(why.ceiling_bytes_per_s or 0) / 1e6:,.1f} MB/s ({_binding(why) or why.bound})"
    if t is not None and t.limit:
        text += f", {_triage_words(t)}"
    named = t.limit if t is not None and t.limit in _CAUSE else None
    cause = _CAUSE[named] if named else _BOUND_CAUSE.get(why.bound or "")
    return text + (f" — {cause}." if cause else ".")


def _shortfalls(measured: Sequence[tuple[Result, RowExplanation]], count: int, skip: set[str]) -> list[str]:
    """The largest shortfalls of single-file copies, one per client; `skip` names clients said elsewhere."""
    singles = [(r, w) for r, w in measured if w.pct_of_tcp is not None and r.files == 1 and w.pct_of_tcp < 75]
    singles.sort(key=lambda item: item[1].pct_of_tcp or 0)
    said: list[str] = []
    seen: set[str] = set(skip)
    for row, why in singles:
        if row.label in seen:
            continue
        seen.add(row.label)
        said.append(_shortfall(row, why))
        if len(said) == count:
            break
    return said


def _sysctl_max(meta: Mapping[str, Any], host: str, name: str) -> int | None:
    value = (((meta.get(host) or {}).get("tcp") or {}).get(name)) or ""
    fields = str(value).split()
    return int(fields[-1]) if fields and fields[-1].isdigit() else None


def _path_rate(run: Run, direction: str) -> float | None:
    """The rate the path can carry this way: the link's goodput in the lab, else raw TCP when the probe was
    not itself window- or buffer-limited (a window-limited probe would understate what the path needs)."""
    goodput = link_goodput(run.link, direction)
    if goodput:
        return float(goodput)
    probe = TcpTriage.from_json((run.baseline.tcp or {}).get(direction))
    if probe is not None and probe.limit in ("receive-window", "send-buffer"):
        return None
    return run.baseline.for_direction(direction)


def _advice(run: Run, measured: Sequence[tuple[Result, RowExplanation]]) -> list[str]:
    """Where a row was receive-window or send-buffer limited: the setting that bounds it, on the host seen."""
    said: list[str] = []
    done: set[tuple[str, str]] = set()
    rtt_s = (run.baseline.rtt_ms or 0) / 1e3
    for row, _ in measured:
        t = row.tcp
        if t is None or t.limit not in ("receive-window", "send-buffer"):
            continue
        rate = _path_rate(run, row.direction)
        bdp = int(rate * rtt_s) if rate and rtt_s else None
        if t.limit == "receive-window":
            host = "server" if row.direction == "upload" else "client"
            setting, fixed, seen_bytes = "net.ipv4.tcp_rmem", "net.core.rmem_max", t.max_window_bytes
            what = "window"
        else:
            host = "client" if row.direction == "upload" else "server"
            setting, fixed, seen_bytes = "net.ipv4.tcp_wmem", "net.core.wmem_max", t.max_sndbuf_bytes
            what = "send buffer"
        if (host, setting) in done:
            continue
        done.add((host, setting))
        current = _sysctl_max(run.meta, host, setting.rsplit(".", 1)[-1])
        need = f"the path needs about {format_bytes(bdp)} (its bandwidth-delay product)" if bdp else ""
        seen = f"a {what} of {format_bytes(seen_bytes)}" if seen_bytes else f"its {what} unknown"
        where = f"{row.label} {row.direction} is {t.limit}-limited ({seen})"
        if current is not None and bdp and current >= 2 * bdp:
            said.append(
                f"{where} although {setting} on the {host} allows {format_bytes(current)}: the application there "
                f"sets its own socket buffer (capped by {fixed}) or clamps the window; {need}."
            )
        else:
            now = f"its maximum is {format_bytes(current)}" if current is not None else "its value there is unknown"
            tail = f"; {need}, twice that for the buffer" if need else ""
            said.append(
                f"{where}: raise the maximum of {setting} on the {host} ({now}), or {fixed} if the application "
                f"sets its own buffer{tail}."
            )
    return said[:2]


def _heavy_fixed(measured: Sequence[tuple[Result, RowExplanation]]) -> dict[str, tuple[float, float, str]]:
    """Clients whose fixed cost per copy takes at least DOMINANT_FIXED of a single-file copy:
    label -> (seconds, largest share, that copy's set)."""
    heavy: dict[str, tuple[float, float, str]] = {}
    for row, why in measured:
        if why.fixed_cost_s is None or not why.streaming_bytes_per_s or row.files != 1:
            continue
        share = why.fixed_cost_s / (why.fixed_cost_s + row.bytes / why.streaming_bytes_per_s)
        if share >= DOMINANT_FIXED and share > heavy.get(row.label, (0.0, 0.0, ""))[1]:
            heavy[row.label] = (why.fixed_cost_s, share, row.file_set)
    return heavy


def _fixed(heavy: dict[str, tuple[float, float, str]]) -> str | None:
    if not heavy:
        return None
    parts = [
        f"{label} (≈{format_ms(seconds)} per copy, {share * 100:.0f} % of a {file_set} copy)"
        for label, (seconds, share, file_set) in heavy.items()
    ]
    return f"A fixed cost per copy (process start, login) dominates {', '.join(parts)}."


def _small_files(run: Run, measured: Sequence[tuple[Result, RowExplanation]]) -> str | None:
    """The cost of one small file at best and at worst, in milliseconds and round trips."""
    rtt_ms = run.baseline.rtt_ms
    sets = [(row, row.files_per_s) for row, _ in measured if row.files > 1 and row.files_per_s]
    if not sets:
        return None
    best_row, best = max(sets, key=lambda item: item[1])
    worst_row, worst = min(sets, key=lambda item: item[1])

    def cost(row: Result, files_per_s: float) -> str:
        trips = f", ≈{1000 / files_per_s / rtt_ms:.0f} RTT" if rtt_ms else ""
        return f"{1000 / files_per_s:.1f} ms ({row.label} {row.direction}{trips})"

    if best_row is worst_row:
        return f"Small files cost {cost(best_row, best)} each."
    return f"Small files cost {cost(best_row, best)} each at best and {cost(worst_row, worst)} at worst."


def _stalls(run: Run) -> str | None:
    stalled = [r for r in run.results if r.stall_count]
    if not stalled:
        return None
    total = sum(r.stall_seconds for r in stalled)
    names = ", ".join(f"{r.label} {r.direction} {r.file_set}" for r in stalled[:3])
    more = f" and {len(stalled) - 3} more" if len(stalled) > 3 else ""
    return f"Copies stalled for {total:.1f} s in all ({names}{more}): the path or a host paused mid-copy."


def verdict(run: Run, rows: Sequence[RowExplanation], *, loopback: bool = False) -> list[str]:
    """Three to six sentences on `run`, whose row explanations are `rows` (in the run's row order)."""
    measured = [(row, why) for row, why in zip(run.results, rows, strict=True) if row.median_bytes_per_s]
    if not measured:
        return ["No row was measured, so there is nothing to explain."]
    first = [_raw_tcp(run)]
    reach = _reach(measured)
    if reach:
        first.append(reach)
    if loopback:
        first.append("On loopback there is no wire: the copies share this host's CPU, which is their limit.")
    heavy = _heavy_fixed(measured)
    # The rest by priority, lowest last: what to change, then what else stood out, then the worst shortfalls.
    rest = [*_advice(run, measured), *(x for x in (_stalls(run), _fixed(heavy)) if x)]
    room = MAX_SENTENCES - len(first) - len(rest)
    said = [*first, *_shortfalls(measured, max(1, min(2, room)), set(heavy)), *rest]
    small = _small_files(run, measured)
    if small and len(said) < MAX_SENTENCES:
        said.append(small)
    if len(said) > MAX_SENTENCES:  # keep the raw-TCP sentence, the advice and the first shortfall
        said = [*first, *_shortfalls(measured, 1, set(heavy)), *rest][:MAX_SENTENCES]
    return said

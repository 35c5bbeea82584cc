"""The verdict: three to six short sentences computed from a run's rows, never written per protocol name.

In order of what a reader needs: the raw-TCP limit (and what limited the probe itself), how close the copies
get to it, the worst client and its measured cause (its TCP counters', or its ceiling's where they say network
against a ceiling other than the path's), the biggest cause that can be fixed (advice where it is a
setting: the sysctl or socket buffer on the host that was seen, its value and the path's need), and stalls.
The rest (other shortfalls and advice, fixed costs per copy, what a small file costs) goes to the run's notes
(`verdict_notes`). Settings are named, never changed. The sentences quote the run's own words (client labels,
file sets): every renderer shows them through workbench.shared.safetext.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from workbench.core.ceiling import (
    UNEXPLAINED,
    crypto_in_use,
    crypto_side,
    format_bytes,
    format_ms,
    link_goodput_bytes_per_s,
)
from workbench.core.results import Result, RowExplanation, Run
from workbench.shared import cryptocost
from workbench.shared.triage import TcpTriage

REACHES = 0.9  # a copy at >= 90 % of raw TCP the same way reaches it
MAX_SENTENCES = 6
NAMED = 3  # clients named in one sentence; the rest are counted
DOMINANT_FIXED = 0.25  # a fixed cost taking a quarter of a copy dominates it
CRYPTO_WORTH_SAYING = 0.1  # a CPU-bound signed or encrypted row's crypto is named from this share of that CPU on

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
    "crypto": "SMB signing or encryption on a host's CPU",
}


# ceilings of the path itself: a sender the TCP counters call network-limited agrees with them
_PATH_BOUNDS = ("link", "raw-tcp", "window")


def _cause(t: TcpTriage | None, why: RowExplanation) -> str:
    """The few words of why a row fell short: what its sender's TCP counters named, else its binding ceiling's.

    Where the counters say network but a ceiling other than the path's explains the rate, the ceiling's words are
    said: a sender that sends one request's data and waits is busy with its bytes in flight for most of each turn
    (smbd's 64 KiB per request read as network in two of five lab runs, at under a quarter of raw TCP), while what
    holds the rate is the turn; the row's notes say both (RowExplanation.triage_note)."""
    named = t.limit if t is not None and t.limit in _CAUSE else None
    labelled = why.bound in _BOUND_CAUSE
    if named == "network" and labelled and why.bound not in _PATH_BOUNDS:
        named = None
    return _CAUSE[named] if named else _BOUND_CAUSE.get(why.bound or "", "")


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
    cause = _cause(t, why)
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
    goodput = link_goodput_bytes_per_s(run.link, direction)
    if goodput:
        return float(goodput)
    probe = TcpTriage.from_json((run.baseline.tcp or {}).get(direction))
    if probe is not None and probe.limit in ("receive-window", "send-buffer"):
        return None
    return run.baseline.for_direction(direction)


def _held_by_the_lab(run: Run, seen_bytes: int | None) -> bool:
    """Whether a client window of `seen_bytes` is the lab's `--client-window` clamp: the link can only lower a
    window, to the clamp rounded down to the window scale's step (at most a sixteenth below it with the scales a
    clamp of 2 KiB or more needs); a window outside that range was not the clamp's doing (a port the clamp spares,
    or a window the client chose below it)."""
    clamp = (run.link or {}).get("client_window_bytes")
    if not isinstance(clamp, int) or isinstance(clamp, bool) or clamp <= 0 or not seen_bytes:
        return False
    return clamp - (clamp >> 4) <= seen_bytes <= clamp


def _advice(run: Run, measured: Sequence[tuple[Result, RowExplanation]], short: bool = False) -> list[str]:
    """Where a row was receive-window or send-buffer limited: the setting that bounds it, on the host seen;
    `short`: the verdict's form (the setting, its value and the path's need), the notes have the rest."""
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
        seen = f"a {what} of {format_bytes(seen_bytes)}" if seen_bytes else f"its {what} unknown"
        where = f"{row.label} {row.direction} is {t.limit}-limited ({seen})"
        if host == "client" and t.limit == "receive-window" and _held_by_the_lab(run, seen_bytes):
            said.append(
                f"{'Biggest cause: ' if short else ''}{where}: the lab's link holds every window the client host "
                f"advertises to {format_bytes((run.link or {})['client_window_bytes'])} (--client-window), as this "
                "run asked."
            )
            continue
        done.add((host, setting))  # a row the lab's clamp held leaves the host's own setting to the next row
        current = _sysctl_max(run.meta, host, setting.rsplit(".", 1)[-1])
        need = f"the path needs about {format_bytes(bdp)} (its bandwidth-delay product)" if bdp else ""
        if short:
            now = format_bytes(current) if current is not None else "unknown"
            needs = f"; the path needs {format_bytes(bdp)}" if bdp else ""
            roomy = current is not None and bdp and current >= 2 * bdp
            said.append(
                f"Biggest fixable cause: {where}: "
                + (
                    f"the application on the {host} sets its own buffer ({setting} allows {now}{needs})."
                    if roomy
                    else f"raise the maximum of {setting} on the {host} (now {now}{needs})."
                )
            )
            continue
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
    """The cost of one small file at best and at worst, in milliseconds and round trips (of the RTT the ceilings
    charge: Run.least_rtt_ms)."""
    rtt_ms = run.least_rtt_ms
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


def _headline(measured: Sequence[tuple[Result, RowExplanation]]) -> str | None:
    """How close copies get to raw TCP: the range and median of the rows' shares, and who reaches it."""
    shares = sorted(why.pct_of_tcp for _, why in measured if why.pct_of_tcp is not None)
    if not shares:
        return None
    reaching = sorted({row.label for row, why in measured if (why.pct_of_tcp or 0) >= 100 * REACHES})
    rows = sum(1 for pct in shares if pct >= 100 * REACHES)
    span = f"{shares[0]:.0f}–{shares[-1]:.0f} %" if len(shares) > 1 else f"{shares[0]:.0f} %"
    text = f"Copies reach {span} of it (median {statistics.median(shares):.0f} %)"
    if reaching:
        names = ", ".join(reaching[:NAMED]) + (f" and {len(reaching) - NAMED} more" if len(reaching) > NAMED else "")
        return f"{text}; {rows} of {len(shares)} rows reach {REACHES * 100:.0f} % or more ({names})."
    return f"{text}; none reaches {REACHES * 100:.0f} %."


def _client_shares(measured: Sequence[tuple[Result, RowExplanation]]) -> dict[str, float]:
    """Each client's median share of raw TCP over its rows."""
    by_client: dict[str, list[float]] = {}
    for row, why in measured:
        if why.pct_of_tcp is not None:
            by_client.setdefault(row.label, []).append(why.pct_of_tcp)
    return {label: statistics.median(pcts) for label, pcts in by_client.items()}


def _worst(measured: Sequence[tuple[Result, RowExplanation]]) -> str | None:
    """The client furthest from raw TCP (by the median of its rows) and why: its lowest row's cause."""
    shares = _client_shares(measured)
    if len(shares) < 2:
        return None
    label = min(shares, key=lambda name: shares[name])
    if shares[label] >= 100 * REACHES:
        return None
    mine = [(r, w) for r, w in measured if r.label == label and w.pct_of_tcp is not None]
    row, why = min(mine, key=lambda item: (item[0].files > 1, item[1].pct_of_tcp or 0))  # a single file first
    cause = _cause(row.tcp, why)
    if why.bound in (None, UNEXPLAINED):
        because = f"no ceiling explains its {row.direction} {row.file_set}"
    else:
        because = f"{row.direction} {row.file_set} held by its {why.bound} ceiling, {_binding(why) or why.bound}"
    return f"Worst: {label} at {shares[label]:.0f} % of raw TCP (median of its rows): {because}" + (
        f" — {cause}." if cause else "."
    )


class CryptoSentence(NamedTuple):
    text: str
    held: bool  # the row it speaks of is held by its crypto or cpu ceiling (else no ceiling explains it)


def _crypto(run: Run, measured: Sequence[tuple[Result, RowExplanation]]) -> CryptoSentence | None:
    """When a signed or encrypted SMB row is held by a host's CPU (its crypto or its cpu ceiling): what the signing
    or encryption costs that host per 100 MB/s and its share of that host's CPU per byte, so the reader sees whether
    the crypto or the host's other work is the limit (the row furthest below raw TCP among such rows).

    When no such row is held by either but one that pays for its crypto is unexplained, the cost measured is still
    said, with that row's own words: no ceiling explains it (its note says what the model misses). Held by the cpu
    ceiling or unexplained, a crypto under a tenth of that CPU per byte is not worth the sentence."""
    paying = [(r, w) for r, w in measured if crypto_in_use(r.details) is not None]
    held = [(r, w) for r, w in paying if w.bound in ("crypto", "cpu")]
    unexplained = [(r, w) for r, w in paying if w.bound == UNEXPLAINED and _crypto_bound(w) is not None]
    if not held and not unexplained:
        return None
    row, why = min(held or unexplained, key=lambda item: 100.0 if item[1].pct_of_tcp is None else item[1].pct_of_tcp)
    use = crypto_in_use(row.details)
    side = crypto_side(_binding(why) or "") if held else crypto_side(_crypto_bound(why) or "")
    costs = cryptocost.from_run(run.meta, side) if side else None
    per_byte = costs.for_side(use.algorithm, side) if costs is not None and use is not None and side else None
    if use is None or side is None or per_byte is None:
        return None
    cap = cryptocost.server_cpu_cap_cores(run.link) if side == "server" else None
    whose = f"the server's CPU (capped at {cap:g} core)" if cap else f"the {side}'s CPU"
    spent = [c for s in row.good_samples if (c := s.server_cpu_s if side == "server" else s.client_cpu_s) is not None]
    whole = statistics.median(spent) / row.bytes if spent and row.bytes > 0 else None
    if why.bound != "crypto" and (not whole or per_byte < CRYPTO_WORTH_SAYING * whole):
        return None  # a CPU the crypto hardly weighs on (GMAC, GCM): nothing to say about the crypto
    share = f", {per_byte / whole:.0%} of its CPU per byte" if whole else ""
    costs_words = f"SMB {use.what} ({use.algorithm}) costs the {side} {per_byte * 1e8:.2g} core per 100 MB/s{share}"
    rate = f"{(row.median_bytes_per_s or 0) / 1e6:,.1f} MB/s"
    if why.bound == UNEXPLAINED:
        where = f"{row.label} {row.direction} {row.file_set} reached {rate} on {whose}"
        return CryptoSentence(f"{costs_words}: {where}; no ceiling explains it.", held=False)
    cause = f"by {whose}, not the network." if why.bound == "crypto" else f"by {whose}, but by its other work."
    return CryptoSentence(f"{costs_words}: {row.label} {row.direction} {row.file_set} is held at {rate} {cause}", True)


def _crypto_bound(why: RowExplanation) -> str | None:
    """The explanation of a row's crypto ceiling (it names the host whose CPU pays), None when it has none."""
    found = [b for b in why.bounds or () if b.label == "crypto"]
    return min(found, key=lambda b: b.bytes_per_s).explanation if found else None


# A sender's congestion control keeps its own losses to a few % of the bytes (1-2 % at a full lab link); a tenth
# sent again, with no loss set and no queue overflow, is a path losing packets it was not filling.
RESENT_SUSPECT = 0.1


def _sender_offloads(run: Run, host: str) -> tuple[str, dict[str, Any]]:
    """The interface of `host`'s path and its offloads ({"tso": "on", …}) as recorded: the lab's read-back of its
    link device, else the host's metadata; ("", {}) when neither says."""
    for record in (((run.link or {}).get("offloads") or {}).get(host), (run.meta.get(host) or {}).get("offloads")):
        if isinstance(record, Mapping) and isinstance(record.get("offloads"), Mapping):
            return str(record.get("interface") or ""), dict(record["offloads"])
    return "", {}


def _offload_cause(run: Run, measured: Sequence[tuple[Result, RowExplanation]]) -> str | None:
    """Retransmissions on a path that was otherwise idle (a large resent share with no loss set and nothing dropped
    from the lab link's queue) from a sender whose TSO/GSO were on or not known: a path that mishandles offloaded
    super-packets, with the fix to try. None when the sender's TSO and GSO were both off, or nothing resent much."""
    link = run.link or {}
    emulator = link.get("emulator") or {}
    if link and (link.get("loss") or (emulator.get("drops") and not emulator.get("offloaded_drops"))):
        return None  # losses the link was asked for, or a full queue, explain retransmissions by themselves
    seen: list[tuple[float, str, TcpTriage, float | None]] = []
    probes = [TcpTriage.from_json(doc) for doc in (run.baseline.tcp or {}).values()]
    # Off the lab, nothing says whether a queue overflowed: a short copy's slow start can lose a tenth of its
    # bytes to a full queue by itself, so the raw-TCP probe's long flows decide where there was one.
    rows_count = bool(link) or not any(p is not None and p.side == "sender" for p in probes)
    for row, _ in measured if rows_count else ():
        t = row.tcp
        if row.retransmitted_share is not None and t is not None:
            seen.append((row.retransmitted_share, f"{row.label} {row.direction}", t, row.wire_bytes_per_file_byte))
    for direction, doc in (run.baseline.tcp or {}).items():
        probe = TcpTriage.from_json(doc)
        if probe is not None and probe.side == "sender" and probe.retrans_fraction is not None:
            seen.append((probe.retrans_fraction, f"raw TCP {direction}", probe, probe.wire_bytes_per_file_byte))
    if not seen:
        return None
    share, what, t, wire = max(seen, key=lambda item: item[0])
    if share < RESENT_SUSPECT:
        return None
    iface, state = _sender_offloads(run, t.host)
    on = [name.upper() for name in ("tso", "gso") if str(state.get(name, "")).startswith("on")]
    if state and not on and all(str(state.get(n, "")).startswith("off") for n in ("tso", "gso")):
        return None  # the sender's offloads were off: they are not what the path broke
    where = f" ({iface})" if iface else ""
    offloads = f"{' and '.join(on)} on{where}" if on else "its offloads not known"
    per_byte = f", {wire:.1f} wire bytes per file byte" if wire else ""
    # the emulator's drops are known once the copies are done (a stored run's link has them, a fresh one not yet)
    drops_known = (link.get("emulator") or {}).get("drops") == 0
    idle = "far above congestion's few %"
    if link:
        idle = "with no loss set and no queue overflow" if drops_known else "with no loss set"
    return (
        f"Biggest fixable cause: {what} resent {100 * share:.0f} % of its bytes{per_byte}, {idle}, "
        f"from a {t.host} with {offloads}: the path mishandles offloaded super-packets; "
        f"turn TSO/GSO off on the sender: `ethtool -K {iface or 'IF'} tso off gso off`; "
        "macOS `sysctl net.inet.tcp.tso=0`."
    )


# The causes a user or a client's author can change, by binding ceiling: what changing them means.
_FIXABLE = {
    "requests": "requests in flight: a deeper queue of read/write requests",
    "ssh-window": "the SSH channel window: a larger one",
    "per-file": "round trips per file: pipelined or batched opens and closes",
    "window": "the TCP window: a larger socket buffer",
    "fixed": "a process start and login per copy: one session for many copies",
}


def _fixable(
    measured: Sequence[tuple[Result, RowExplanation]], heavy: dict[str, tuple[float, float, str]]
) -> str | None:
    """The fixable cause that costs the most: the shortfalls from raw TCP of the rows it binds, summed."""
    cost: dict[str, float] = {}
    clients: dict[str, set[str]] = {}
    for row, why in measured:
        if why.pct_of_tcp is None or why.pct_of_tcp >= 100 * REACHES:
            continue
        cause = "fixed" if row.label in heavy and row.files == 1 else why.bound or ""
        if cause not in _FIXABLE:
            continue
        cost[cause] = cost.get(cause, 0.0) + (100 - why.pct_of_tcp)
        clients.setdefault(cause, set()).add(row.label)
    if not cost:
        return None
    cause = max(cost, key=lambda name: cost[name])
    named = sorted(clients[cause])
    who = ", ".join(named[:NAMED]) + (f" and {len(named) - NAMED} more" if len(named) > NAMED else "")
    rows = sum(1 for row, why in measured if (why.bound == cause or (cause == "fixed" and row.label in heavy)))
    return f"Biggest fixable cause: {_FIXABLE[cause]} ({who}; {rows} row{'s' if rows != 1 else ''})."


def verdict(run: Run, rows: Sequence[RowExplanation], *, loopback: bool = False) -> list[str]:
    """Three to six sentences on `run`, whose row explanations are `rows` (in the run's row order): raw TCP and
    how close the copies get to it, the worst client and why, the biggest fixable cause (a setting's advice
    when that is it), stalls. The rest goes to the notes (`verdict_notes`)."""
    measured = [(row, why) for row, why in zip(run.results, rows, strict=True) if row.median_bytes_per_s]
    if not measured:
        return ["No row was measured, so there is nothing to explain."]
    said = [_raw_tcp(run)]
    headline = _headline(measured)
    if headline:
        said.append(headline)
    if loopback:
        said.append("On loopback there is no wire: the copies share this host's CPU, which is their limit.")
    worst = _worst(measured)
    if worst:
        said.append(worst)
    crypto = _crypto(run, measured)
    # the cost of the crypto behind a row it holds is its cause; beside a row no ceiling explains, it comes last
    if crypto and crypto.held:
        said.append(crypto.text)
    advice = _advice(run, measured, short=True)
    fixable = _offload_cause(run, measured) or (advice[0] if advice else _fixable(measured, _heavy_fixed(measured)))
    if fixable:
        said.append(fixable)
    stalls = _stalls(run)
    if stalls:
        said.append(stalls)
    if crypto and not crypto.held:
        said.append(crypto.text)
    if len(said) < 3:
        small = _small_files(run, measured)
        if small:
            said.append(small)
    return said[:MAX_SENTENCES]


def verdict_notes(run: Run, rows: Sequence[RowExplanation], said: Sequence[str]) -> list[str]:
    """What the verdict leaves to the table's notes: the other shortfalls, the other advice, small files' cost, and
    the crypto's cost when the verdict had no room for it."""
    measured = [(row, why) for row, why in zip(run.results, rows, strict=True) if row.median_bytes_per_s]
    if not measured:
        return []
    heavy = _heavy_fixed(measured)
    notes = [*_advice(run, measured), *_shortfalls(measured, 3, set()), *(x for x in (_fixed(heavy),) if x)]
    crypto = _crypto(run, measured)
    if crypto:
        notes.append(crypto.text)
    small = _small_files(run, measured)
    if small:
        notes.append(small)
    return [note for note in notes if not any(note in sentence for sentence in said)]

"""Two runs side by side: each row's change with its noise test, and what else changed between the runs.

`compare_runs(before, after)` matches rows by (protocol/client, direction, file set), in the later run's order
and then the rows only the earlier run had, and holds each row's per-copy rates of one run against the
other's with `workbench.core.noise.compare_rates` (Welch's t-test on log rates, 95 %). A row's change means
something only if the path and the hosts stayed the same, so the comparison also says, as run-level
warnings, when they did not: the raw-TCP baseline moved, the lab link differs, the far host, a host's kernel
or TCP settings, or the plan. Rendering lives in workbench.cli.compare.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.core.noise import FASTER, SLOWER, TOO_FEW, WITHIN_NOISE, Change, compare_rates
from workbench.core.results import Result, Run
from workbench.shared import offloads
from workbench.shared.sizes import format_size

CONFIDENCE = 0.95
# Smaller changes are never called faster or slower, however sure the test is of them (noise.compare_rates
# says why: cache state, CPU frequency and server builds move a copy by that much between runs).
MIN_CHANGE = 0.02
# A raw-TCP figure is one probe per direction and run: there is no scatter to test a change against. On the
# lab's steady link, two runs' probes agree within a few per cent; a probe's change beyond 10 % either way is
# larger than that and than the scatter of most rows, so it is taken as the path changing under the rows.
RAW_TCP_TOLERANCE = 0.10
# The idle RTT is measured, not set: on the lab it varies by ~0.03 ms between runs (wake-up latency of the
# cores). A change beyond 10 % and beyond 0.1 ms (links of a few microseconds vary by more than 10 % of
# themselves) changes every window- and request-bound ceiling, so it is a different link.
RTT_TOLERANCE = 0.10
RTT_FLOOR_MS = 0.1

RAW_TCP = "raw TCP"
NETWORK = "the network changed, not the protocol"
VERDICTS = (FASTER, SLOWER, WITHIN_NOISE, TOO_FEW)  # the summary's order


@dataclass(frozen=True)
class RowChange:
    """One line of the comparison: a row present in either run, or a raw-TCP direction (`baseline`).

    `before_bytes_per_s` and `after_bytes_per_s` are the medians of the good copies (a raw-TCP line: the
    probe's one figure), None where that run has no rate for it. `change` is the noise test of the per-copy
    rates. `notes` say why a side has no rate (only in one run, failed, unavailable) or what the test cannot do.
    """

    client: str  # protocol/client, or RAW_TCP
    direction: str  # upload | download
    file_set: str  # "mem" for raw TCP (the probe sends from memory)
    before_bytes_per_s: float | None
    after_bytes_per_s: float | None
    change: Change
    notes: tuple[str, ...] = ()
    baseline: bool = False

    @property
    def verdict(self) -> str:
        return self.change.verdict


@dataclass(frozen=True)
class Comparison:
    """Run `before_id` against run `after_id`: raw-TCP lines, rows, run-level warnings and the test's name."""

    before_id: int | None
    after_id: int | None
    baseline_rows: tuple[RowChange, ...]
    rows: tuple[RowChange, ...]
    warnings: tuple[str, ...]
    method: str  # e.g. "Welch's t-test on log rates, 95 %"
    min_change: float = MIN_CHANGE

    def counts(self) -> dict[str, int]:
        """How many rows (raw-TCP lines excluded) got each verdict, in VERDICTS order, zeros kept."""
        found = {verdict: 0 for verdict in VERDICTS}
        for row in self.rows:
            found[row.verdict] = found.get(row.verdict, 0) + 1
        return found

    def summary(self) -> str:
        """One line: '2 faster, 1 slower, 5 within noise of 8 rows' (verdicts no row got are left out)."""
        counts = self.counts()
        said = [f"{n} {verdict}" for verdict, n in counts.items() if n]
        total = len(self.rows)
        if not said:
            return "no rows to compare"
        return f"{', '.join(said)} of {total} row{'s' if total != 1 else ''}"


# ---------------------------------------------------------------- rows


def _key(row: Result) -> tuple[str, str, str]:
    return (row.label, row.direction, row.file_set)


def _rates(row: Result | None) -> list[float]:
    return [s.bytes_per_s for s in row.good_samples] if row is not None else []


def _side_note(row: Result | None, run_id: int | None) -> str | None:
    """Why a run has no rate for a row it should have: it lacks the row, the row is unavailable or failed."""
    name = _name(run_id)
    if row is None:
        return f"not in {name}"
    if row.good_samples:
        return None
    if row.error and row.error.startswith("unavailable"):
        return f"unavailable in {name}"
    reason = (row.error or "").strip().splitlines()
    return f"failed in {name}: {reason[0]}" if reason else f"no good copy in {name}"


def _flag(value: bool | None) -> str:
    return "not known" if value is None else ("on" if value else "off")


def _session_note(before: Result | None, after: Result | None, change: Change) -> str | None:
    """What an SMB row's two sessions negotiated differently (dialect, signing, encryption and their algorithms):
    the likely cause of a change beyond noise, and worth saying beside one within it too."""
    if before is None or after is None:
        return None
    a, b = before.details, after.details
    found = []
    if a.dialect and b.dialect and a.dialect != b.dialect:
        found.append(f"dialect {a.dialect} → {b.dialect}")
    for what, on_a, on_b, alg_a, alg_b in (
        ("signing", a.signing, b.signing, a.signing_algorithm, b.signing_algorithm),
        ("encryption", a.encryption, b.encryption, a.encryption_cipher, b.encryption_cipher),
    ):
        if on_a is None and on_b is None:
            continue
        if on_a != on_b:
            used = alg_b if on_b else alg_a
            found.append(f"{what} {_flag(on_a)} → {_flag(on_b)}" + (f" ({used})" if used else ""))
        elif on_a and alg_a and alg_b and alg_a != alg_b:
            found.append(f"{what} {alg_a} → {alg_b}")
    if not found:
        return None
    moved = change.verdict in (FASTER, SLOWER)
    return f"{'; '.join(found)}: {'the likely cause' if moved else 'no change beyond noise with it'}"


def _row_change(before: Result | None, after: Result | None, before_id: int | None, after_id: int | None) -> RowChange:
    shown = after if after is not None else before
    assert shown is not None  # a row is in at least one run
    change = compare_rates(_rates(before), _rates(after), confidence=CONFIDENCE, min_change=MIN_CHANGE)
    session = _session_note(before, after, change)
    notes = tuple(n for n in (_side_note(before, before_id), _side_note(after, after_id), session) if n)
    return RowChange(
        client=shown.label,
        direction=shown.direction,
        file_set=shown.file_set,
        before_bytes_per_s=before.median_bytes_per_s if before is not None else None,
        after_bytes_per_s=after.median_bytes_per_s if after is not None else None,
        change=change,
        notes=notes,
    )


def _baseline_rows(before: Run, after: Run) -> list[RowChange]:
    lines = []
    for direction in ("upload", "download"):
        a, b = before.baseline.for_direction(direction), after.baseline.for_direction(direction)
        if not a and not b:
            continue
        # One figure a side: compare_rates gives the ratio and `too few samples`, never a verdict it cannot back.
        change = compare_rates([a] if a else [], [b] if b else [], confidence=CONFIDENCE, min_change=MIN_CHANGE)
        lines.append(
            RowChange(
                client=RAW_TCP,
                direction=direction,
                file_set="mem",
                before_bytes_per_s=a,
                after_bytes_per_s=b,
                change=change,
                notes=("one probe per run: no noise estimate",),
                baseline=True,
            )
        )
    return lines


# ---------------------------------------------------------------- warnings


def _name(run_id: int | None) -> str:
    return f"run {run_id}" if run_id is not None else "the run"


def _pct(ratio: float) -> str:
    return f"{(ratio - 1.0) * 100.0 + 0.0:+.1f} %"


def _raw_tcp_warnings(before: Run, after: Run) -> list[str]:
    said = []
    names = _name(before.id), _name(after.id)
    for direction in ("upload", "download"):
        a, b = before.baseline.for_direction(direction), after.baseline.for_direction(direction)
        if a and b:
            ratio = b / a
            if abs(ratio - 1.0) > RAW_TCP_TOLERANCE:
                said.append(
                    f"raw TCP {direction} went from {a / 1e6:,.1f} to {b / 1e6:,.1f} MB/s ({_pct(ratio)}, beyond "
                    f"the {RAW_TCP_TOLERANCE * 100:g} % a single probe varies by on a steady path): {NETWORK}."
                )
        elif a or b:
            has, lacks = names if a else names[::-1]
            said.append(
                f"{has} has a raw-TCP {direction} figure and {lacks} none: whether the network changed "
                "cannot be told from the baseline."
            )
    return said


def _mbit(bits_per_s: object) -> str:
    return f"{bits_per_s / 1e6:,.0f}" if isinstance(bits_per_s, int | float) else "?"


def _rates_of(link: Mapping[str, Any]) -> tuple[Any, Any]:
    rate = link.get("rate_bits_per_s")
    return link.get("rate_up_bits_per_s") or rate, link.get("rate_down_bits_per_s") or rate


def _show(value: object) -> str:
    return "none" if value is None else " ".join(str(value).split())


def _link_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What differs between two lab links. A key is compared only when both documents have it (an older run
    may not know a setting), and None is a value there: no stalls, no window cap."""
    found = []
    if "rate_bits_per_s" in a and "rate_bits_per_s" in b:
        (up_a, down_a), (up_b, down_b) = _rates_of(a), _rates_of(b)
        if (up_a, down_a) != (up_b, down_b):
            if up_a == down_a and up_b == down_b:
                found.append(f"rate {_mbit(up_a)} → {_mbit(up_b)} Mbit/s")
            else:
                found.append(f"rate up {_mbit(up_a)} → {_mbit(up_b)}, down {_mbit(down_a)} → {_mbit(down_b)} Mbit/s")
    rtt_a, rtt_b = a.get("rtt_ms"), b.get("rtt_ms")
    if isinstance(rtt_a, int | float) and isinstance(rtt_b, int | float):
        gap = abs(rtt_b - rtt_a)
        if gap > RTT_FLOOR_MS and gap > RTT_TOLERANCE * min(rtt_a, rtt_b):
            found.append(f"idle RTT {rtt_a:.2f} → {rtt_b:.2f} ms")
    plain: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
        ("preset", "preset", _show),
        ("mtu", "MTU", _show),
        ("loss", "loss", _show),
        ("cc", "congestion control", _show),
        ("client_window_bytes", "client window", lambda v: "none" if v is None else format_size(int(v))),
        ("stall", "stalls", _show),
        ("breaks", "link breaks", _show),
    )
    for key, what, show in plain:
        if key in a and key in b and a[key] != b[key]:
            found.append(f"{what} {show(a[key])} → {show(b[key])}")
    buffers_a = (a.get("requested") or {}).get("host_buffers")
    buffers_b = (b.get("requested") or {}).get("host_buffers")
    if buffers_a is not None and buffers_b is not None and buffers_a != buffers_b:
        found.append(f"host buffers {buffers_a} → {buffers_b}")
    return found


def _link_warnings(before: Run, after: Run) -> list[str]:
    if before.link is not None and after.link is not None:
        found = _link_differences(before.link, after.link)
        return [f"the lab link differs ({'; '.join(found)}): {NETWORK}."] if found else []
    if before.link is not None or after.link is not None:
        lab, other = (before, after) if before.link is not None else (after, before)
        return [f"{_name(lab.id)} ran in the lab and {_name(other.id)} did not: {NETWORK}."]
    return []


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _far_host_warnings(before: Run, after: Run) -> list[str]:
    a, b = _mapping(before.meta.get("target")), _mapping(after.meta.get("target"))
    said = []
    for key, what in (("host", "far host"), ("url", "server URL")):
        if a.get(key) and b.get(key) and a[key] != b[key]:
            said.append(f"the {what} differs ({a[key]} → {b[key]}): {NETWORK}, and the server with it.")
    return said


_HOST_ROLES = (("client", "client host"), ("server", "server host"))


def _host_warnings(before: Run, after: Run) -> list[str]:
    """Kernels and TCP tunables (congestion control, buffer limits) of each host: settings that bound every
    row, so a row that moved with them moved for the host's sake."""
    said = []
    for role, what in _HOST_ROLES:
        a, b = _mapping(before.meta.get(role)), _mapping(after.meta.get(role))
        found = []
        if a.get("kernel") and b.get("kernel") and a["kernel"] != b["kernel"]:
            found.append(f"kernel {a['kernel']} → {b['kernel']}")
        tcp_a, tcp_b = _mapping(a.get("tcp")), _mapping(b.get("tcp"))
        for key in sorted(set(tcp_a) & set(tcp_b)):
            if tcp_a[key] is not None and tcp_b[key] is not None and _show(tcp_a[key]) != _show(tcp_b[key]):
                found.append(f"{key} {_show(tcp_a[key])} → {_show(tcp_b[key])}")
        if found:
            said.append(f"the {what} changed ({'; '.join(found)}): the host changed, not the protocol.")
    return said


def _offload_warnings(before: Run, after: Run) -> list[str]:
    """Each host's send path toward the other (offloads, size limits, MTU, qdisc): TSO/GSO decide whether a path
    that mishandles super-packets collapses, so a row that moved with them moved for the host's sake."""
    said = []
    for role, what in _HOST_ROLES:
        a = _mapping(_mapping(before.meta.get(role)).get("offloads"))
        b = _mapping(_mapping(after.meta.get(role)).get("offloads"))
        found = offloads.differences(a, b) if a and b else []
        if found:
            said.append(f"the {what}'s send path differs ({'; '.join(found)}): rows that moved with it moved for that.")
    return said


def _sizes(value: object) -> str:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return ",".join(format_size(v) if isinstance(v, int) else str(v) for v in value) or "none"
    return _show(value)


# The plan's keys that change how a row is measured. Protocols and directions are left out: a row only one run
# has is already a line of its own.
_PLAN_KEYS: tuple[tuple[str, Callable[[Any], str]], ...] = (
    ("sizes", _sizes),
    ("small_sets", _sizes),
    ("profile", _show),
    ("repeat", _show),
    ("warmup", _show),
    ("compress", _show),
    ("block_size", lambda v: format_size(v) if isinstance(v, int) else _show(v)),
    ("seed", _show),
)


# What the SMB client options and the lab's SMB server ask of a session, and the server host's CPU cap: they move
# SMB rows (and the cap every row the server's CPU bounds) without the network changing.
_SMB_PLAN_KEYS = (
    ("smb_signing", "client signing"),
    ("smb_encryption", "client encryption"),
    ("smb_max_dialect", "client highest dialect"),
)


def _smb_warnings(before: Run, after: Run) -> list[str]:
    plan_a, plan_b = _mapping(before.meta.get("plan")), _mapping(after.meta.get("plan"))
    found = [
        f"{what} {_show(plan_a[key])} → {_show(plan_b[key])}"
        for key, what in _SMB_PLAN_KEYS
        if key in plan_a and key in plan_b and _show(plan_a[key]) != _show(plan_b[key])
    ]
    # compared only where both lab links have the key (an older run may not know the setting); None is a value
    link_a, link_b = _mapping(before.link), _mapping(after.link)
    for key, what in (("smb_server", "lab SMB server"), ("server_cpu_cap_cores", "server CPU cap (cores)")):
        if key in link_a and key in link_b and _show(link_a[key]) != _show(link_b[key]):
            found.append(f"{what} {_show(link_a[key])} → {_show(link_b[key])}")
    if not found:
        return []
    return [f"the SMB settings differ ({'; '.join(found)}): rows that moved with them moved for that, not the network."]


def _plan_warnings(before: Run, after: Run) -> list[str]:
    a, b = _mapping(before.meta.get("plan")), _mapping(after.meta.get("plan"))
    found = [
        f"{key} {show(a[key])} → {show(b[key])}"
        for key, show in _PLAN_KEYS
        if key in a and key in b and show(a[key]) != show(b[key])
    ]
    if not found:
        return []
    return [f"the plans differ ({'; '.join(found)}): the rows were measured differently, so compare with care."]


# ---------------------------------------------------------------- the comparison


def run_warnings(before: Run, after: Run) -> list[str]:
    """Everything that changed between the runs besides the protocols: path, hosts, plan; each one sentence."""
    return [
        *_link_warnings(before, after),
        *_raw_tcp_warnings(before, after),
        *_far_host_warnings(before, after),
        *_host_warnings(before, after),
        *_offload_warnings(before, after),
        *_plan_warnings(before, after),
        *_smb_warnings(before, after),
    ]


def compare_runs(before: Run, after: Run) -> Comparison:
    """Every row of either run, each with its noise test, the raw-TCP lines, and the run-level warnings."""
    old = {_key(r): r for r in before.results}
    new = {_key(r) for r in after.results}
    # Rows of the later run in its order, then rows only the earlier run had: a client that vanished from the
    # later run (it failed to start, or was not asked for) is part of the comparison too.
    rows = [_row_change(old.get(_key(r)), r, before.id, after.id) for r in after.results]
    rows += [_row_change(r, None, before.id, after.id) for r in before.results if _key(r) not in new]
    method = compare_rates([], [], confidence=CONFIDENCE, min_change=MIN_CHANGE).method
    return Comparison(
        before_id=before.id,
        after_id=after.id,
        baseline_rows=tuple(_baseline_rows(before, after)),
        rows=tuple(rows),
        warnings=tuple(run_warnings(before, after)),
        method=method,
    )

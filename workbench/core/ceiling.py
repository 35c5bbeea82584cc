"""Ceilings: the rates a copy cannot exceed on this path, and the one that explains a measured rate.

Pure maths. Rates are bytes/s like everywhere in workbench; RTT in seconds; windows in bytes.
A window-like limit W allows at most W per round trip: W / RTT.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workbench.protocols.details import ClientDetails

LABELS = ("link", "window", "requests", "ssh-window", "cpu")
CPU_SATURATED = 0.9  # a process at >= 90 % of one core is CPU-bound, whatever the other bounds say


@dataclass(frozen=True)
class Bound:
    """One ceiling: at most `bps` bytes/s because of `label`, explained in one line."""

    label: str
    bps: float
    explanation: str
    saturated: bool = False  # a resource measured as fully used (cpu >= CPU_SATURATED)


def bounds(
    *,
    link_bps: float | None = None,
    rtt_s: float | None = None,
    window_bytes: int | None = None,
    request_bytes: int | None = None,
    requests_in_flight: int | None = None,
    ssh_window_bytes: int | None = None,
    client_cpu: float | None = None,
    server_cpu: float | None = None,
    measured_bps: float | None = None,
) -> list[Bound]:
    """Every ceiling the inputs allow, in LABELS order; absent inputs drop their bound.

    client_cpu/server_cpu are process CPU seconds / wall seconds (1.0 = one full core); the cpu bound
    scales the measured rate to one full core of the busier process, so it needs `measured_bps`.
    """
    found: list[Bound] = []
    if link_bps and link_bps > 0:
        found.append(Bound("link", float(link_bps), f"link {format_bits(link_bps)}"))
    rtt_ok = rtt_s is not None and rtt_s > 0
    if rtt_ok and window_bytes and window_bytes > 0:
        found.append(Bound("window", window_bytes / rtt_s, f"window {format_bytes(window_bytes)} / {format_ms(rtt_s)}"))
    if rtt_ok and request_bytes and request_bytes > 0:
        n = max(1, requests_in_flight or 1)
        noun = "request" if n == 1 else "requests"
        found.append(
            Bound(
                "requests",
                request_bytes * n / rtt_s,
                f"{format_bytes(request_bytes)} × {n} {noun} / {format_ms(rtt_s)}",
            )
        )
    if rtt_ok and ssh_window_bytes and ssh_window_bytes > 0:
        found.append(
            Bound(
                "ssh-window",
                ssh_window_bytes / rtt_s,
                f"SSH window {format_bytes(ssh_window_bytes)} / {format_ms(rtt_s)}",
            )
        )
    cpu = _cpu_bound(client_cpu, server_cpu, measured_bps)
    if cpu is not None:
        found.append(cpu)
    return found


def bounds_from_details(
    details: ClientDetails,
    *,
    link_bps: float | None = None,
    rtt_s: float | None = None,
    window_bytes: int | None = None,
    client_cpu: float | None = None,
    server_cpu: float | None = None,
    measured_bps: float | None = None,
) -> list[Bound]:
    """`bounds` fed with what a client reports: its request size and depth, its SSH window."""
    return bounds(
        link_bps=link_bps,
        rtt_s=rtt_s,
        window_bytes=window_bytes,
        request_bytes=details.request_bytes,
        requests_in_flight=details.requests_in_flight,
        ssh_window_bytes=details.ssh_window_bytes,
        client_cpu=client_cpu,
        server_cpu=server_cpu,
        measured_bps=measured_bps,
    )


def _cpu_bound(client_cpu: float | None, server_cpu: float | None, measured_bps: float | None) -> Bound | None:
    sides = [(name, f) for name, f in (("client", client_cpu), ("server", server_cpu)) if f is not None and f > 0]
    if not sides or not measured_bps or measured_bps <= 0:
        return None
    name, fraction = max(sides, key=lambda side: side[1])
    # A process already at (or past, if multi-threaded) a full core cannot go faster: the bound is the rate seen.
    scale = min(fraction, 1.0)
    return Bound(
        "cpu",
        measured_bps / scale,
        f"{name} CPU {fraction * 100:.0f} % of a core",
        saturated=fraction >= CPU_SATURATED,
    )


def binding_bound(found: Sequence[Bound]) -> Bound | None:
    """The bound that explains a measured rate: a saturated CPU first, else the lowest other ceiling.

    A CPU that was not near a full core is no explanation (its extrapolated ceiling stays in the list
    for information but never binds): the copy was waiting on something else.
    """
    saturated = [b for b in found if b.saturated]
    if saturated:
        return min(saturated, key=lambda b: b.bps)
    others = [b for b in found if b.label != "cpu"]
    return min(others, key=lambda b: b.bps) if others else None


def format_bound(bound: Bound) -> str:
    """'window ≤ 46.8 MB/s (window 128 KiB / 2.8 ms)'."""
    return f"{bound.label} ≤ {bound.bps / 1e6:.1f} MB/s ({bound.explanation})"


def format_bytes(n: int) -> str:
    """Binary units, exact where possible: 65536 -> '64 KiB', 1536 -> '1.5 KiB'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if n % scale == 0 else f"{value:.1f} {unit}"
    return f"{n} B"


def format_ms(seconds: float) -> str:
    """Two significant figures: '0.40 ms', '2.8 ms', '31 ms'."""
    ms = seconds * 1e3
    if ms < 1:
        return f"{ms:.2f} ms"
    if ms < 10:
        return f"{ms:.1f} ms"
    return f"{ms:.0f} ms"


def format_bits(bps: float) -> str:
    """A link rate given in bytes/s, shown the way links are named: '1 Gbit/s', '100 Mbit/s'."""
    bits = bps * 8
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits >= scale:
            value = bits / scale
            return f"{value:.0f} {unit}" if value == int(value) or value >= 100 else f"{value:.3g} {unit}"
    return f"{bits:.0f} bit/s"

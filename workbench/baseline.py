"""The raw TCP limit of a path: workbench's own probe both ways, RTT, and iperf3 as a cross-check."""

from __future__ import annotations

import contextlib
from typing import Any

from workbench import iperf, tcpprobe
from workbench.errors import WorkbenchError
from workbench.plan import Plan
from workbench.results import Baseline


def _iperf3(host: str, port: int, direction: str, duration: float, window: int | None = None) -> float | None:
    if iperf.iperf3_available() is not None:
        return None
    with contextlib.suppress(WorkbenchError, OSError):
        result = iperf.run_iperf3(host, port, direction, duration, window)
        return result.bps if result else None
    return None


def measure_baseline(plan: Plan) -> Baseline:
    """Measure before the copies; a failure is recorded in the baseline, never fatal to the run."""
    host = plan.target.host
    port = plan.target.port("tcp")
    secret = plan.target.credentials.password
    base = Baseline()
    try:
        rtt = tcpprobe.rtt(host, port, secret, count=20)
        base.rtt_ms = rtt.ping_median * 1e3
        base.connect_rtt_ms = rtt.connect_median * 1e3
        up = tcpprobe.measure(host, port, secret, "upload", plan.tcp_duration)
        down = tcpprobe.measure(host, port, secret, "download", plan.tcp_duration)
    except WorkbenchError as exc:
        base.error = exc.one_line()
        return base
    base.up_bps, base.down_bps = up.bps, down.bps
    base.window_bytes = max(w for w in (up.window_bytes, down.window_bytes, 0) if w is not None) or None
    base.details = {"probe": {"upload": up.to_json(), "download": down.to_json()}, "rtt_min_ms": rtt.ping_min * 1e3}
    if plan.iperf3:
        base.iperf3_up_bps = _iperf3(host, plan.target.port("iperf3"), "upload", plan.tcp_duration)
        base.iperf3_down_bps = _iperf3(host, plan.target.port("iperf3"), "download", plan.tcp_duration)
    return base


def measure_tcp(
    host: str,
    port: int,
    secret: str,
    directions: list[str],
    duration: float,
    window: int | None = None,
    sweep: list[int] | None = None,
    iperf3_port: int = 5201,
) -> dict[str, Any]:
    """What `workbench tcp` shows: RTT, throughput per direction (probe and iperf3), optional window sweep."""
    rtt = tcpprobe.rtt(host, port, secret, count=20)
    doc: dict[str, Any] = {
        "host": host,
        "rtt_ms": rtt.ping_median * 1e3,
        "rtt_min_ms": rtt.ping_min * 1e3,
        "connect_rtt_ms": rtt.connect_median * 1e3,
        "directions": {},
    }
    for direction in directions:
        probe = tcpprobe.measure(host, port, secret, direction, duration, window=window)
        doc["directions"][direction] = {
            "probe_bps": probe.bps,
            "bytes": probe.bytes,
            "seconds": probe.seconds,
            "window_requested": window,
            "window_bytes": probe.window_bytes,
            "iperf3_bps": _iperf3(host, iperf3_port, direction, duration, window),
        }
    if sweep:
        points = tcpprobe.window_sweep(host, port, secret, sweep, rtt.ping_median * 1e3, min(duration, 3.0), "download")
        doc["window_sweep"] = [sweep_point_json(p) for p in points]
    return doc


def sweep_point_json(point: Any) -> dict[str, Any]:
    return {
        "window_bytes": point.window_bytes,
        "effective_window_bytes": point.effective_window_bytes,
        "measured_bps": point.measured_bps,
        "predicted_bps": point.predicted_bps,
    }

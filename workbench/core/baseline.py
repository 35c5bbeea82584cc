"""The raw TCP limit of a path: workbench's own probe both ways, RTT, and iperf3 as a cross-check."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from workbench.core.copy_watcher import CopyWatcher
from workbench.core.plan import Plan
from workbench.core.results import Baseline
from workbench.probe import client as probe_client
from workbench.probe import iperf
from workbench.protocols.control import Control
from workbench.shared.errors import WorkbenchError
from workbench.shared.target import Target


def _iperf3(
    host: str,
    port: int,
    direction: str,
    duration: float,
    window: int | None = None,
    auth: iperf.IperfAuth | None = None,
) -> iperf.IperfResult | None:
    if iperf.iperf3_available() is not None:
        return None
    with contextlib.suppress(WorkbenchError, OSError):
        return iperf.run_iperf3(host, port, direction, duration, window, auth)
    return None


def _rate(result: iperf.IperfResult | None) -> float | None:
    return result.bytes_per_s if result else None


@contextlib.contextmanager
def iperf3_auth(target: Target) -> Iterator[iperf.IperfAuth | None]:
    """Credentials for the far host's authenticated iperf3: its public key, fetched over the control API."""
    key = None
    with contextlib.suppress(WorkbenchError), Control(target, timeout=10) as control:
        key = control.iperf3_key()
    if key is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix=f"workbench-iperf3-{os.getpid()}-") as tmp:
        path = Path(tmp) / "public.pem"
        path.write_bytes(key)
        yield iperf.IperfAuth(target.credentials.user, target.credentials.password, path)


def measure_baseline(plan: Plan, watcher: CopyWatcher) -> Baseline:
    """Measure before the copies; a failure is recorded in the baseline, never fatal to the run.

    Each direction of the probe carries the TCP triage its copies get (`watcher`), so the baseline shows
    when it was itself window- or buffer-limited.
    """
    host = plan.target.host
    port = plan.target.port("tcp")
    secret = plan.target.credentials.password
    base = Baseline()
    triage: dict[str, Any] = {}
    try:
        rtt = probe_client.rtt(host, port, secret, count=20)
        base = dataclasses.replace(base, rtt_ms=rtt.ping_median_s * 1e3, connect_rtt_ms=rtt.connect_median_s * 1e3)
        measured = {}
        for direction in ("upload", "download"):
            probe = functools.partial(probe_client.measure, host, port, secret, direction, plan.tcp_duration)
            measured[direction], seen = watcher.measured(direction, probe)
            if seen is not None:
                triage[direction] = seen
        up, down = measured["upload"], measured["download"]
    except WorkbenchError as exc:
        return dataclasses.replace(base, error=exc.one_line())
    base = dataclasses.replace(
        base,
        up_bytes_per_s=up.bytes_per_s,
        down_bytes_per_s=down.bytes_per_s,
        tcp=triage or None,
        window_bytes=max(w for w in (up.window_bytes, down.window_bytes, 0) if w is not None) or None,
        details={"probe": {"upload": up.to_json(), "download": down.to_json()}, "rtt_min_ms": rtt.ping_min_s * 1e3},
    )
    if plan.iperf3:
        with iperf3_auth(plan.target) as auth:
            port3 = plan.target.port("iperf3")
            up3 = _iperf3(host, port3, "upload", plan.tcp_duration, auth=auth)
            down3 = _iperf3(host, port3, "download", plan.tcp_duration, auth=auth)
        # iperf3's own bytes and seconds (what its receiver counted), so its rate can be recomputed like the probe's
        counted = {
            direction: {"bytes": result.bytes, "seconds": result.seconds}
            for direction, result in (("upload", up3), ("download", down3))
            if result is not None
        }
        base = dataclasses.replace(
            base,
            iperf3_up_bytes_per_s=_rate(up3),
            iperf3_down_bytes_per_s=_rate(down3),
            details={**(base.details or {}), "iperf3": counted} if counted else base.details,
        )
    return base


def measure_tcp(
    target: Target,
    directions: Sequence[probe_client.Direction],
    duration: float,
    window: int | None = None,
    sweep: list[int] | None = None,
) -> dict[str, Any]:
    """What `workbench tcp` shows: RTT, throughput per direction (probe and iperf3), optional window sweep."""
    host, port, secret = target.host, target.port("tcp"), target.credentials.password
    rtt = probe_client.rtt(host, port, secret, count=20)
    doc: dict[str, Any] = {
        "host": host,
        "rtt_ms": rtt.ping_median_s * 1e3,
        "rtt_min_ms": rtt.ping_min_s * 1e3,
        "connect_rtt_ms": rtt.connect_median_s * 1e3,
        "directions": {},
    }
    with iperf3_auth(target) as auth:
        for direction in directions:
            probe = probe_client.measure(host, port, secret, direction, duration, window=window)
            iperf3 = _iperf3(host, target.port("iperf3"), direction, duration, window, auth)
            doc["directions"][direction] = {
                "probe_bytes_per_s": probe.bytes_per_s,
                "bytes": probe.bytes,
                "seconds": probe.seconds,
                "window_requested": window,
                "window_bytes": probe.window_bytes,
                "iperf3_bytes_per_s": _rate(iperf3),
                # what iperf3's receiver counted, so its rate can be recomputed as the probe's can
                "iperf3_bytes": iperf3.bytes if iperf3 else None,
                "iperf3_seconds": iperf3.seconds if iperf3 else None,
            }
    if sweep:
        # the path's best is what the probe just carried downloading (the sweep's direction), when it ran
        down = doc["directions"].get("download", {}).get("probe_bytes_per_s")
        doc["window_sweep"] = sweep_windows(target, sweep, rtt.ping_median_s * 1e3, min(duration, 3.0), down)
    return doc


def sweep_windows(
    target: Target, windows: list[int], rtt_ms: float, duration: float, path_bytes_per_s: float | None = None
) -> list[dict[str, Any]]:
    """Throughput per clamped receive window (server to client) beside min(window / RTT, path), as JSON rows."""
    points = probe_client.window_sweep(
        target.host,
        target.port("tcp"),
        target.credentials.password,
        windows,
        rtt_ms,
        duration,
        "download",
        path_bytes_per_s,
    )
    return [
        {
            "window_bytes": p.window_bytes,
            "effective_window_bytes": p.effective_window_bytes,
            "measured_bytes_per_s": p.measured_bytes_per_s,
            "predicted_bytes_per_s": p.predicted_bytes_per_s,
            "predicted_by": p.predicted_by,
        }
        for p in points
    ]

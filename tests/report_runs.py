"""A lab run made of plain values, for the tests of what renders a run (plots, the HTML report).

It has what a `wifi-ac` lab run has: a link, both hosts, a raw-TCP baseline, single-file and small-file sets of
three clients in both directions (one upload with a stall in one copy), a failed row, a window sweep, and the
explanation and verdict `explain` computes from them. The rates are made up; the rows' intervals add up to
their bytes, as a sampled copy's do.
"""

from __future__ import annotations

import random
from dataclasses import replace

from workbench.core.explain import explain
from workbench.core.results import INTERVAL_S, Baseline, Result, Run, Sample

MIB = 1 << 20
LINK_GOODPUT_BYTES_PER_S = 533e6 / 8 * 0.941
LINK = {
    "preset": "wifi-ac",
    "rate_bits_per_s": 533e6,
    "rate_up_bits_per_s": None,
    "rate_down_bits_per_s": None,
    "rtt_ms": 2.81,
    "mtu": 1500,
    "expected_goodput_bytes_per_s": LINK_GOODPUT_BYTES_PER_S,
    "expected_goodput_up_bytes_per_s": LINK_GOODPUT_BYTES_PER_S,
    "expected_goodput_down_bytes_per_s": LINK_GOODPUT_BYTES_PER_S,
    "goodput_bytes_per_s": LINK_GOODPUT_BYTES_PER_S * 0.998,
    "notes": "",
}
RAW_TCP_UP_BYTES_PER_S = 62.1e6
RAW_TCP_DOWN_BYTES_PER_S = 62.4e6
SWEEP = (
    {
        "window_bytes": 32 << 10,
        "measured_bytes_per_s": 10.9e6,
        "predicted_bytes_per_s": 11.7e6,
        "predicted_by": "window",
    },
    {
        "window_bytes": 64 << 10,
        "measured_bytes_per_s": 21.9e6,
        "predicted_bytes_per_s": 23.3e6,
        "predicted_by": "window",
    },
    {
        "window_bytes": 128 << 10,
        "measured_bytes_per_s": 42.0e6,
        "predicted_bytes_per_s": 46.6e6,
        "predicted_by": "window",
    },
    {
        "window_bytes": 256 << 10,
        "measured_bytes_per_s": 60.9e6,
        "predicted_bytes_per_s": 62.7e6,
        "predicted_by": "path",
    },
)


def host(name: str) -> dict:
    return {
        "hostname": name,
        "system": "Linux",
        "kernel": "6.1.0-18-amd64",
        "cpus": 2,
        "mtu": 1500,
        "tcp": {
            "congestion_control": "bbr",
            "tcp_rmem": "4096 131072 33554432",
            "tcp_wmem": "4096 16384 33554432",
            "rmem_max": 33554432,
            "wmem_max": 33554432,
        },
    }


def intervals(size: int, bytes_per_s: float, rng: random.Random, stall_at: int | None = None) -> tuple[int, ...]:
    """Bytes per 100 ms of a copy of `size` bytes at about `bytes_per_s`, with 5 empty intervals from `stall_at`."""
    slots: list[int] = []
    left = size
    while left > 0:
        if stall_at is not None and stall_at <= len(slots) < stall_at + 5:
            slots.append(0)
            continue
        moved = min(left, int(bytes_per_s * INTERVAL_S * rng.uniform(0.9, 1.1)))
        slots.append(moved)
        left -= moved
    return tuple(slots)


def copies(size: int, files: int, rates: list[float], seed: int, stall_in: int | None = None) -> tuple[Sample, ...]:
    """One sample per rate (bytes/s); copy number `stall_in` (from 0) stalls 0.5 s a third of the way in."""
    rng = random.Random(seed)
    samples = []
    for n, rate in enumerate(rates):
        stall_at = max(3, int(size / rate / INTERVAL_S / 3)) if n == stall_in else None
        slots = intervals(size, rate, rng, stall_at)
        # the last interval is partial, as a meter's: the copy ended inside it
        seconds = (len(slots) - 1) * INTERVAL_S + min(slots[-1] / rate, INTERVAL_S)
        samples.append(Sample(size, seconds, files=files, verified=True, client_cpu_s=0.2, intervals=slots))
    return tuple(samples)


def lab_run(*, with_sweep: bool = True) -> Run:
    rows = [
        Result("http", "aiohttp", "upload", "16M", 16 * MIB, 1, copies(16 * MIB, 1, [55e6, 57e6, 56e6], 1)),
        Result(
            "http", "aiohttp", "upload", "128M", 128 * MIB, 1, copies(128 * MIB, 1, [60e6, 61e6, 59e6], 2, stall_in=1)
        ),
        Result("http", "aiohttp", "download", "128M", 128 * MIB, 1, copies(128 * MIB, 1, [61e6, 61.5e6, 60e6], 3)),
        Result("http", "aiohttp", "upload", "100x64K", 100 << 16, 100, copies(100 << 16, 100, [30e6, 32e6, 31e6], 4)),
        Result("http", "aiohttp", "download", "100x64K", 100 << 16, 100, copies(100 << 16, 100, [35e6, 36e6, 33e6], 5)),
        Result("smb", "pysmb", "download", "128M", 128 * MIB, 1, copies(128 * MIB, 1, [21e6, 21.5e6, 20.8e6], 6)),
        Result("smb", "pysmb", "upload", "128M", 128 * MIB, 1, copies(128 * MIB, 1, [40e6, 41e6, 39e6], 7)),
        Result("sftp", "paramiko", "upload", "100x64K", 100 << 16, 100, copies(100 << 16, 100, [4e6, 4.2e6, 3.9e6], 8)),
        Result(
            "sftp", "paramiko", "download", "100x64K", 100 << 16, 100, copies(100 << 16, 100, [5e6, 5.3e6, 4.8e6], 9)
        ),
        Result("smb", "smbprotocol", "upload", "128M", 128 * MIB, 1, error="connection reset by 10.77.0.2:445"),
    ]
    run = Run(
        id=None,
        meta={
            "started_utc": "2026-11-24T10:00:00Z",
            "finished_utc": "2026-11-24T10:04:00Z",
            "client": host("wb-client"),
            "server": host("wb-server"),
        },
        baseline=Baseline(
            up_bytes_per_s=RAW_TCP_UP_BYTES_PER_S,
            down_bytes_per_s=RAW_TCP_DOWN_BYTES_PER_S,
            rtt_ms=2.86,
            window_bytes=4 << 20,
        ),
        results=tuple(rows),
        link=dict(LINK),
        window_sweep=SWEEP if with_sweep else None,
        warnings=("the client host's CPU was busy 40 % of the run (another process)",),
    )
    return run.explained(explain(run, "10.77.0.2"))


def without_intervals(run: Run) -> Run:
    """The run with every copy's intervals dropped (an old run, or a client that reports no progress)."""
    return replace(
        run,
        results=tuple(replace(r, samples=tuple(replace(s, intervals=()) for s in r.samples)) for r in run.results),
    )

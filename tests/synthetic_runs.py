"""Synthetic runs for the tests of what is made from a run (its JSON document against the schema, Markdown,
CSV): built from the same values and by the same code as the runner and the lab build theirs (explain(),
link_document(), the emulator's report, TcpTriage), with nothing measured."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from typing import Any

from workbench.core.aggregate import ClientCopy, aggregate_rounds
from workbench.core.context import EmulatorReport, LabContext
from workbench.core.explain import explain
from workbench.core.results import Baseline, Explanation, Result, RowExplanation, Run, Sample
from workbench.lab.run import link_document
from workbench.protocols.details import ClientDetails
from workbench.shared.triage import TcpTriage, classified

MIB = 1 << 20
LAB_HOST = "10.77.0.2"
# An error as a server may word it: quotes, a comma, a pipe and a second line, which Markdown and CSV must
# keep in one cell.
ODD_ERROR = 'server said: 550 "no | such file", sorry\nsecond line'


def host(name: str) -> dict[str, Any]:
    return {
        "hostname": name,
        "system": "Linux",
        "kernel": "6.1.0-18-amd64",
        "cpus": 2,
        "versions": {"workbench": "0.1.0", "python": "3.11.7"},
        "tcp": {"tcp_rmem": "4096\t131072\t6291456", "tcp_wmem": "4096\t16384\t4194304", "congestion_control": "bbr"},
        "interface": "wbc0",
        "mtu": 1500,
    }


def sender(host_name: str, app: float, rwnd: float, nbytes: int = 16 * MIB) -> TcpTriage:
    """A sender's triage of one copy over 1 s, idle `app` of it and window-limited `rwnd` of it."""
    totals = TcpTriage(
        side="sender",
        host=host_name,
        elapsed_s=1.0,
        connections=1,
        bytes_seen=nbytes,
        busy_s=1.0 - app,
        rwnd_limited_s=rwnd,
        sndbuf_limited_s=0.0,
        app_limited_busy_s=0.0,
        rtt_ms=3.1,
        min_rtt_ms=2.8,
        bytes_sent=nbytes,
        bytes_retrans=0,
        max_window_bytes=8 * MIB,
        max_sndbuf_bytes=4 * MIB,
    )
    return classified(totals, 1.0, nbytes)


def receiver(nbytes: int = 16 * MIB) -> TcpTriage:
    """What the receiving side alone saw of a download (a server workbench did not start)."""
    return TcpTriage(
        side="receiver",
        host="client",
        elapsed_s=1.0,
        connections=1,
        bytes_seen=nbytes,
        copy_bytes=nbytes,
        rtt_ms=2.9,
        max_window_bytes=65536,
        limit="receive-window",
    )


def _copies(
    nbytes: int, seconds: tuple[float, ...], triage: TcpTriage | None, files: int = 1, stall: bool = False
) -> tuple[Sample, ...]:
    """Verified copies of `nbytes` taking `seconds` each; with `stall`, each pauses 300 ms mid-copy."""
    step = nbytes // 4
    pause = (0, 0, 0) if stall else ()
    return tuple(
        Sample(
            nbytes,
            s,
            files=files,
            verified=True,
            client_cpu_s=0.05,
            server_cpu_s=0.1,
            intervals=(step, step, *pause, step, nbytes - 3 * step),
            tcp=triage,
        )
        for s in seconds
    )


def lab_run(run_id: int | None = 12) -> Run:
    """A lab run on wifi-ac: the link with its emulator's figures, a window sweep, rows measured with TCP triage
    (one with a stall), a small-file set, a failed row whose error has a pipe and a newline, an unavailable
    client; explained as the runner explains it."""
    described = {
        "rate_bits_per_s": 533_000_000,
        "rate_up_bits_per_s": 533_000_000,
        "rate_down_bits_per_s": 533_000_000,
        "client_window_bytes": None,
        "client_window_ports": None,
        "stall": None,
        "rtt_ms": 2.81,
        "mtu": 1500,
        "loss": 0.0,
        "queue_bytes": 262144,
        "cc": "bbr",
        "expected_goodput_bits_per_s": 501_800_000,
        "expected_goodput_up_bits_per_s": 501_800_000,
        "expected_goodput_down_bits_per_s": 501_800_000,
        "goodput_bits_per_s": 497_300_000,
        "requested": {"rate_bits_per_s": 533_000_000, "rtt_ms": 2.8, "mtu": 1500, "stall": None},
        "cores_awake": True,
        "notes": ["idle RTT within 0.1 ms of the 2.8 ms asked for"],
    }
    link = LabContext(link=link_document(described, "wifi-ac")).link_after(EmulatorReport(0.29, 8439, 903.3))
    sweep = (
        {
            "window_bytes": 65536,
            "effective_window_bytes": 65536,
            "measured_bytes_per_s": 21.9e6,
            "predicted_bytes_per_s": 23.4e6,
            "predicted_by": "window",
        },
        {
            "window_bytes": 262144,
            "effective_window_bytes": None,
            "measured_bytes_per_s": 61.0e6,
            "predicted_bytes_per_s": 62.7e6,
            "predicted_by": "path",
        },
    )
    small = 100 * 65536
    rows = (
        Result(
            "http",
            "aiohttp",
            "upload",
            "16M",
            16 * MIB,
            1,
            samples=_copies(16 * MIB, (0.28, 0.29, 0.30), sender("client", 0.03, 0.0)),
            warmup=1,
            details=ClientDetails(block_bytes=MIB, read_bufsize=262144),
        ),
        Result(
            "smb",
            "pysmb",
            "download",
            "16M",
            16 * MIB,
            1,
            samples=_copies(16 * MIB, (1.05, 1.0, 1.1), sender("server", 0.95, 0.0), stall=True),
            warmup=1,
            details=ClientDetails(request_bytes=65536, requests_in_flight=1, dialect="2.0.2"),
        ),
        Result(
            "http",
            "curl",
            "upload",
            "100x64K",
            small,
            100,
            samples=_copies(small, (0.45, 0.46), sender("client", 0.9, 0.0, small), files=100),
            warmup=1,
            details=ClientDetails(timed_includes_setup=True, process="one curl process per copy"),
        ),
        Result("ftp", "ftplib", "download", "-", 0, 0, error=ODD_ERROR),
        Result("afp", "mount_afp", "download", "-", 0, 0, error="unavailable: mount_afp is macOS only"),
    )
    baseline = Baseline(
        up_bytes_per_s=62.5e6,
        down_bytes_per_s=62.6e6,
        rtt_ms=2.80,
        connect_rtt_ms=2.82,
        window_bytes=8884224,
        iperf3_up_bytes_per_s=62.4e6,
        iperf3_down_bytes_per_s=62.5e6,
        tcp={"upload": sender("client", 0.01, 0.0).to_json(), "download": sender("server", 0.0, 0.0).to_json()},
        details={"rtt_min_ms": 2.79, "probe": {"upload": {"tcp_info": {"pacing_rate": 79172614}}}},
    )
    meta = {
        "started_utc": "2026-11-25T17:57:50Z",
        "finished_utc": "2026-11-25T18:12:53Z",
        "client": host("lab-client"),
        "server": {**host("lab-server"), "kind": "served"},
        "target": {"host": LAB_HOST, "ports": {"http": 8181, "ftp": 2121}},
        "plan": {"protocols": ["http/aiohttp", "smb/pysmb"], "sizes": [16 * MIB], "repeat": 3},
    }
    run = Run(run_id, meta, baseline, results=rows, link=link, window_sweep=sweep)
    return run.explained(explain(run, LAB_HOST))


def stock_run(run_id: int | None = 3) -> Run:
    """A run against a server workbench did not start (`run sftp://...`, no --iperf3): no raw-TCP baseline, the
    RTT from TCP connects, uploads verified by reading back, a download seen from the receiver only."""
    notes = ["uploads are verified by reading each file back with paramiko, outside the timed copy"]
    server = {
        "kind": "stock",
        "url": "sftp://nas.local/~/tmp",
        "service": "sftp",
        "login": "key from the SSH agent",
        "utility": "paramiko",
        "scratch": "workbench-0123456789ab",
        "scratch_path": "/home/u/tmp/workbench-0123456789ab",
        "notes": notes,
    }
    rows = (
        Result(
            "sftp",
            "paramiko",
            "upload",
            "1M",
            MIB,
            1,
            samples=_copies(MIB, (0.1, 0.12), sender("client", 0.5, 0.0, MIB)),
            details=ClientDetails(request_bytes=32768, requests_in_flight=64, verified_by="read back"),
        ),
        Result(
            "sftp",
            "paramiko",
            "download",
            "1M",
            MIB,
            1,
            samples=_copies(MIB, (0.09, 0.1), receiver(MIB)),
            details=ClientDetails(request_bytes=32768, requests_in_flight=64),
        ),
    )
    baseline = Baseline(rtt_ms=1.2, connect_rtt_ms=1.2, details={"no_baseline": "no iperf3 server given (--iperf3)"})
    meta = {
        "started_utc": "2026-11-24T09:00:00Z",
        "client": host("laptop"),
        "server": server,
        "target": {"host": "nas.local", "ports": {"ssh": 22}, "url": "sftp://nas.local/~/tmp"},
        "scratch_removed": True,
    }
    run = Run(run_id, meta, baseline, results=rows, warnings=tuple(notes))
    return run.explained(explain(run, "nas.local"))


def stopped_run() -> Run:
    """A run stopped (Ctrl-C) after its baseline, before any row finished: nothing explained, no verdict."""
    return dataclasses.replace(lab_run(13), results=(), explanation=None, warnings=())


FLEET_CLIENTS = ("c1", "c2", "c3")
FLEET_FAILURE = "connection refused by 10.77.0.2:22"


def _fleet_step(
    protocol: str,
    client: str,
    direction: str,
    seconds_by_host: dict[str, tuple[float, ...]],
    failed: Sequence[str] = (),
    nbytes: int = 16 * MIB,
) -> list[Result]:
    """One plan step of a fleet run: the aggregate row (made by workbench.core.aggregate from each round's copies,
    the clients starting 50 ms apart) then each client's own row in inventory order; a client in `failed` has a
    failed row and takes no part."""
    own = {
        host: Result(
            protocol,
            client,
            direction,
            "16M",
            nbytes,
            1,
            samples=_copies(nbytes, seconds, None),
            warmup=1,
            client_host=host,
        )
        for host, seconds in seconds_by_host.items()
    }
    for host in failed:
        own[host] = Result(protocol, client, direction, "16M", nbytes, 1, error=FLEET_FAILURE, client_host=host)
    copying = [h for h in FLEET_CLIENTS if h in seconds_by_host]
    rounds = [
        [
            ClientCopy(host, 1000.0 + 0.05 * at, copy.seconds, copy.bytes, copy.intervals)
            for at, host in enumerate(copying)
            for copy in (own[host].samples[index],)
        ]
        for index in range(len(seconds_by_host[copying[0]]))
    ]
    agg = aggregate_rounds(rounds)
    samples = tuple(
        Sample(round(sum(o.bytes_by_host.values())), o.seconds, files=len(copying), verified=True)
        for o in agg.rounds
        if o.total_bytes_per_s is not None
    )
    per_client = {
        host: statistics.median(o.per_host_bytes_per_s[host] for o in agg.rounds if o.per_host_bytes_per_s)
        for host in copying
    }
    figures = {
        "clients": list(FLEET_CLIENTS),
        "jain_index": agg.jain_index,
        "first_done_s": list(agg.first_done_elapsed_s),
        "last_done_s": list(agg.last_done_elapsed_s),
        "done_spread_s": agg.done_spread_s,
        "rounds_without_overlap": agg.rounds_without_overlap,
        "sum_of_rates_bytes_per_s": agg.sum_of_rates_bytes_per_s,
        "per_client_bytes_per_s": per_client,
        "notes": [f"{h} failed and is left out" for h in failed],
    }
    total = Result(
        protocol,
        client,
        direction,
        "16M",
        nbytes * len(FLEET_CLIENTS),
        len(FLEET_CLIENTS),
        samples=samples,
        client_host="all",
        aggregate=figures,
    )
    return [total, *(own[h] for h in FLEET_CLIENTS)]


def _fleet_baseline(up_mb: float, down_mb: float) -> Baseline:
    return Baseline(up_bytes_per_s=up_mb * 1e6, down_bytes_per_s=down_mb * 1e6, rtt_ms=0.4, window_bytes=4 * MIB)


def fleet_run(run_id: int | None = 21) -> Run:
    """A fleet run of three clients (c1, c2, c3): http/aiohttp up and down with every client, sftp/openssh up where
    c2 failed; each client's raw TCP alone and all at once in the metadata, the run's baseline the total at once.
    Explained as the fleet explains it: an aggregate row against the total, a client's row against its own."""
    alone = {
        "c1": _fleet_baseline(117.5, 117.6),
        "c2": _fleet_baseline(117.2, 117.4),
        "c3": _fleet_baseline(117.6, 117.5),
    }
    together = {"c1": _fleet_baseline(39.3, 39.1), "c2": _fleet_baseline(38.9, 39.0), "c3": _fleet_baseline(39.1, 39.2)}
    total = Baseline(
        up_bytes_per_s=sum(b.up_bytes_per_s or 0 for b in together.values()),
        down_bytes_per_s=sum(b.down_bytes_per_s or 0 for b in together.values()),
        rtt_ms=0.4,
        details={"clients": 3, "how": "every client's probe at once, rates added"},
    )
    rows = [
        *_fleet_step(
            "http", "aiohttp", "upload", {"c1": (0.83, 0.84, 0.85), "c2": (0.85, 0.86, 0.84), "c3": (0.82, 0.83, 0.84)}
        ),
        *_fleet_step(
            "http",
            "aiohttp",
            "download",
            {"c1": (0.80, 0.81, 0.80), "c2": (0.81, 0.82, 0.80), "c3": (0.79, 0.80, 0.81)},
        ),
        *_fleet_step("sftp", "openssh", "upload", {"c1": (1.20, 1.22, 1.21), "c3": (1.19, 1.20, 1.22)}, failed=("c2",)),
    ]
    meta = {
        "started_utc": "2026-11-26T08:00:00Z",
        "finished_utc": "2026-11-26T08:04:00Z",
        "client": host("c1"),
        "target": {"host": LAB_HOST, "ports": {"http": 8181, "ssh": 22}},
        "fleet": {
            "clients": list(FLEET_CLIENTS),
            "baselines": {h: b.to_json() for h, b in alone.items()},
            "together": {h: b.to_json() for h, b in together.items()},
            "together_up_bytes_per_s": total.up_bytes_per_s,
            "together_down_bytes_per_s": total.down_bytes_per_s,
            "failed_clients": {},
        },
    }
    why = []
    for row in rows:
        base = total if row.client_host == "all" else alone[row.client_host or ""]
        tcp, median = base.for_direction(row.direction), row.median_bytes_per_s
        why.append(RowExplanation(pct_of_tcp=100 * median / tcp if median and tcp else None))
    verdict = ("Three clients at once reached 117 MB/s up over HTTP.",)
    return Run(run_id, meta, total, results=tuple(rows), explanation=Explanation(rows=tuple(why), verdict=verdict))

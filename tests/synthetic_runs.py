"""Synthetic runs for the tests of what is made from a run (its JSON document against the schema, Markdown,
CSV): built from the same values and by the same code as the runner and the lab build theirs (explain(),
link_document(), the emulator's report, TcpTriage), with nothing measured."""

from __future__ import annotations

import dataclasses
from typing import Any

from workbench.core.context import EmulatorReport, LabContext
from workbench.core.explain import explain
from workbench.core.results import Baseline, Result, Run, Sample
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

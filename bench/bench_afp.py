"""workbench's AFP client (afp/python) against netatalk's own AFP client (afp_speedtest), and AFP against SMB and HTTP.

Part 1, on loopback and on the lab's wifi-ac link: one netatalk afpd (workbench's, daemons/afpd.py, with the
lab's reference volume); per direction, afp_speedtest's timed Read or Write of its own SIZE-MiB file, through the
registered reference client (protocols/afp_speedtest.py: the same argv and parsing as the lab's afp/afp_speedtest
rows), and afp/python's download or upload of a SIZE-MiB file, with the same request size (the server's quantum)
and requests in flight; REPEAT alternating pairs (native then python, python then native, ...: a load that comes
and goes on a shared machine falls on both), each client's median and spread, the ratio python / native of the
medians (goal: >= 0.9) and the median and spread of the pairs' ratios, with the load average before and after
(loopback figures are CPU-bound: a busy machine moves them). What afp_speedtest
measures: Read writes a file of its own (untimed), then times FPReadExt requests over it, -r at a time, from
the first request to the last reply, the data thrown away; Write times FPWriteExt requests of its own data into
a file of its own, without FPFlushFork (-a: afp/python flushes nothing). Its figures cannot be verified (it
keeps no data it read, and what it wrote is its own); afp/python's copy is compared with its source here.

afp/python downloads into a new local file each time, as the runner does (a file truncated and written again
is flushed to disk on close by ext4, which would charge the client for the local disk), and uploads from a file
in the page cache (mapped: the kernel copies its pages into the socket) into a new file on the server (removed
before each timed copy, for the same reason). The local file is beyond what afp_speedtest does (it neither keeps
nor reads one, and its Write sends the same request-sized buffer every time, cache-hot, where afp/python's bytes
come from the file's pages), so the ratio holds its cost too.

No password goes on a command line: afp_speedtest logs in as afpd's password-less unprivileged account, on the
reference volume only (an empty folder in the server's private state); afp/python logs in as the served user
with a generated password, by DHX2, in-process.

Part 2, on wifi-ac: `workbench lab --link wifi-ac` with afp/python, afp/afp_speedtest, smb/smbclient and
http/curl, the same file: AFP against SMB and HTTP on the same link (Mbit/s, median).

Usage (root; netatalk prepared by scripts/afp_root.sh; about 3 minutes; a lab, so under the lab lock):
  python bench/bench_afp.py [--size-mib 64] [--repeat 5] [--in-flight 4] [--skip-lab] [--skip-loopback]
The files live in a temporary folder under TMPDIR: TMPDIR=/dev/shm keeps the disk's writeback of the written
files out of the loopback figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.lab import PRESETS, Lab, netns
from workbench.protocols.afp import AfpPythonClient
from workbench.protocols.afp_speedtest import AfpSpeedtestClient
from workbench.protocols.base import ClientOptions, FileCopy
from workbench.server.daemons.afpd import Afpd
from workbench.server.daemons.base import ServerContext
from workbench.shared.credentials import Credentials, generate
from workbench.shared.net import free_ports
from workbench.shared.netatalk import find
from workbench.shared.target import Target

REPO = Path(__file__).resolve().parents[1]


def speedtest_bytes_per_s(native: AfpSpeedtestClient, direction: str, size_mib: int, scratch: Path) -> float:
    """One afp_speedtest run (Read for a download, Write for an upload); bytes per second by its own clock."""
    job = [FileCopy(scratch / "unused.bin", "unused.bin", size_mib << 20)]  # it reads and writes its own file
    (native.download_many if direction == "download" else native.upload_many)(job, lambda _n: None)
    seconds = native.timed_by_itself_s()
    assert seconds is not None and native.last_run is not None
    return native.last_run.size_bytes / seconds


def python_bytes_per_s(
    host: str, port: int, creds: Credentials, direction: str, root: Path, size_mib: int, quantum_bytes: int,
    in_flight: int, ns: str | None, scratch: Path,
) -> float:  # fmt: skip
    """One afp/python copy of a size_mib file; bytes per second from the first request to the last reply."""
    target = Target(host, creds, ports={"afp": port}, share="workbench")
    options = ClientOptions(block_size=quantum_bytes, requests_in_flight=in_flight)
    size = size_mib << 20
    source = root / "bench.bin"
    local = scratch / "bench.bin" if direction == "upload" else scratch / "got.bin"
    if direction == "download":
        local.unlink(missing_ok=True)  # a new file, as the runner's (see the docstring)
    else:
        (root / "up.bin").unlink(missing_ok=True)  # and a new one on the server (see the docstring)
    with netns.entered(ns) if ns else contextlib.nullcontext(), AfpPythonClient(target, options) as client:
        start = time.perf_counter()
        if direction == "download":
            client.download("bench.bin", local, lambda _n: None)
        else:
            client.upload(local, "up.bin", lambda _n: None)
        seconds = time.perf_counter() - start
    check = local if direction == "download" else root / "up.bin"
    if check.read_bytes() != source.read_bytes():
        raise RuntimeError(f"afp/python {direction}: the copy differs from its source")
    return size / seconds


def alternating(
    repeat: int, native: Callable[[], float], python: Callable[[], float]
) -> tuple[list[float], list[float]]:
    """`repeat` pairs of samples, the order swapped every pair; (native samples, python samples)."""
    natives: list[float] = []
    pythons: list[float] = []
    for i in range(repeat):
        if i % 2:
            pythons.append(python())
            natives.append(native())
        else:
            natives.append(native())
            pythons.append(python())
    return natives, pythons


def spread(samples: list[float], scale: float = 1.0, fmt: str = ",.0f") -> str:
    """The median of `samples` (times `scale`) and their range: '1,234 (1,100-1,300)'."""
    low, mid, high = (f"{x * scale:{fmt}}" for x in (min(samples), statistics.median(samples), max(samples)))
    return f"{mid} ({low}-{high})"


def compare(
    where: str, args: argparse.Namespace, bind: str, work: Path, ns: str | None = None, server_ns: str | None = None
) -> list[str]:
    """Both clients against one afpd (inside `server_ns` when given), the clients inside `ns` when given."""
    netatalk, why = find()
    if netatalk is None:
        raise SystemExit(f"no netatalk: {why}")
    creds = generate()  # afp/python's login (DHX2, in-process); afp_speedtest's is password-less, its own volume
    ctx = ServerContext(
        root=work / where / "root", bind=bind, state_dir=work / where / "state", credentials=creds,
        ports={"afp": free_ports(bind, 1)[0] if server_ns is None else 5548}, netns=server_ns, afp_reference=True,
    )  # fmt: skip
    ctx.root.mkdir(parents=True)
    scratch = work / where / "local"
    scratch.mkdir()
    payload = os.urandom(args.size_mib << 20)
    (ctx.root / "bench.bin").write_bytes(payload)
    (scratch / "bench.bin").write_bytes(payload)
    server = Afpd(ctx)
    server.start()
    lines = []
    try:
        target = Target(bind, creds, ports={"afp": ctx.ports["afp"]}, share="workbench")
        native = AfpSpeedtestClient(target, ClientOptions(requests_in_flight=args.in_flight))
        with netns.entered(ns) if ns else contextlib.nullcontext():
            native.connect()  # its own login, untimed; learns the server's quantum (capped at 1 MiB)
        quantum = native.row_details("download").request_bytes or 1 << 20
        port, size, flight = ctx.ports["afp"], args.size_mib, args.in_flight
        for direction in ("download", "upload"):

            def native_once(d: str = direction) -> float:
                with netns.entered(ns) if ns else contextlib.nullcontext():
                    return speedtest_bytes_per_s(native, d, size, scratch)

            def python_once(d: str = direction) -> float:
                return python_bytes_per_s(bind, port, creds, d, ctx.root, size, quantum, flight, ns, scratch)

            load_before = os.getloadavg()[0]
            natives, pythons = alternating(args.repeat, native_once, python_once)
            ratio = statistics.median(pythons) / statistics.median(natives)
            pairs = [p / n for p, n in zip(pythons, natives, strict=True)]
            lines.append(
                f"{where:9} {direction:8} afp_speedtest {spread(natives, 8e-6)} Mbit/s   afp/python "
                f"{spread(pythons, 8e-6)} Mbit/s   ratio {ratio:4.2f}, of pairs {spread(pairs, fmt='.2f')}   "
                f"({args.size_mib} MiB, {quantum >> 10} KiB x {args.in_flight} in flight, {args.repeat} pairs, "
                f"load {load_before:.1f}-{os.getloadavg()[0]:.1f})"
            )
    finally:
        server.stop()
    return lines


def lab_protocols(args: argparse.Namespace, work: Path) -> list[str]:
    """AFP against SMB and HTTP on wifi-ac, from one `workbench lab` run's JSON."""
    doc_path = work / "lab.json"
    argv = [sys.executable, "-m", "workbench", "lab", "--link", "wifi-ac", "--protocols",
            "afp/python,afp/afp_speedtest,smb/smbclient,http/curl", "--sizes", f"{args.size_mib}M", "--small", "none",
            "--repeat", str(args.repeat), "--json", str(doc_path)]  # fmt: skip
    env = {**os.environ, "WORKBENCH_HOME": str(work / "home"), "COLUMNS": "200"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, env=env, cwd=REPO)
    if done.returncode != 0:
        return [f"lab run failed (exit {done.returncode}): {done.stdout[-600:]}"]
    doc = json.loads(doc_path.read_text())
    lines = []
    for row in doc["results"]:
        if row["median_bytes_per_s"]:
            lines.append(
                f"wifi-ac   {row['direction']:8} {row['protocol']}/{row['client']:10} "
                f"{row['median_bytes_per_s'] * 8 / 1e6:7,.0f} Mbit/s  "
                f"{row.get('unverifiable') or 'verified ' + str(row['verified'])}"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size-mib", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--in-flight", type=int, default=4)
    parser.add_argument("--skip-lab", action="store_true")
    parser.add_argument("--skip-loopback", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="workbench-bench-afp-"))
    try:
        lines = [] if args.skip_loopback else compare("loopback", args, "127.0.0.1", work)
        if not args.skip_lab:
            with Lab(PRESETS["wifi-ac"]) as lab:
                lines += compare("wifi-ac", args, lab.server_addr, work, lab.client_ns, lab.server_ns)
            lines += lab_protocols(args, work)
        print("\n".join(lines))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""workbench's AFP client (afp/python) against netatalk's own AFP client (afp_speedtest), and AFP against SMB and HTTP.

Part 1, on loopback and on the lab's wifi-ac link: one netatalk afpd (workbench's, daemons/afpd.py); per
direction, afp_speedtest's timed Read or Write of its own SIZE-MiB file and afp/python's download or upload of a
SIZE-MiB file, with the same request size (the server's quantum) and requests in flight; medians of REPEAT
and the ratio python / native (goal: >= 0.9). What afp_speedtest measures: Read (-F) times FPReadExt requests
of the quantum over the bench's own file, -r at a time, from the first request to the last reply, the data
thrown away; Write times FPWriteExt requests of its own data into a temporary file of its own, and FPFlushFork
(left out with -a, as here: afp/python flushes nothing). afp_speedtest's figures cannot be verified (it keeps
no data it read, and what it wrote is its own); afp/python's copy is read back and compared here.

netatalk 4.2.3's afp_speedtest reads the name of the test to run from memory it has already freed (it frees
its copy of -f's value, then compares the token strtok gave it), so glibc's allocator overwrites the name and
every test prints "NOT TESTED". Sixteen commas before the name put the token past the bytes the allocator
reuses; the tool then runs. It logs in only by cleartext, with the password of -w or, without -w, an empty
one (it has no guest login). No password goes on a command line here: the tool logs in as afpd's
password-less unprivileged account (workbench-guest, on a server started with guest = True, for the bench
only, on loopback or inside the lab's namespace), which owns the volume's root and the bench's file so it may
read and write them; afp/python logs in as the served user with a generated password, by DHX2, in-process.

Part 2, on wifi-ac: `workbench lab --link wifi-ac` with afp/python, smb/smbclient and http/curl, the same
file: AFP against SMB and HTTP on the same link (Mbit/s, median).

Usage (root; netatalk prepared by scripts/afp_root.sh; about 3 minutes):
  python bench/bench_afp.py [--size-mib 64] [--repeat 3] [--in-flight 4] [--skip-lab]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
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
from workbench.protocols.base import ClientOptions
from workbench.server.daemons.afpd import GUEST_ACCOUNT, GUEST_UID, Afpd
from workbench.server.daemons.base import ServerContext
from workbench.server.daemons.netatalk_root import Netatalk, find
from workbench.shared.credentials import Credentials, generate
from workbench.shared.net import free_ports
from workbench.shared.target import Target

REPO = Path(__file__).resolve().parents[1]
SPEEDTEST_NAME_PAD = "," * 16  # past the freed bytes glibc reuses (see the docstring)
_RESULT_LINE = re.compile(r"^\s*\d+\s+(\d+)\s+[\d.]+\s*$")
TOOL_TIMEOUT_S = 300


class ReferenceAfpd(Afpd):
    """afpd with the password-less unprivileged account netatalk's afp_speedtest logs in as."""

    name = "afpd-reference"
    guest = True


def speedtest_bytes_per_s(
    netatalk: Netatalk, host: str, port: int, test: str, size_mib: int, quantum_kib: int, in_flight: int,
    ns: str | None,
) -> float:  # fmt: skip
    """One afp_speedtest run of `test` ("Read" of bench.bin, or "Write"); bytes per second from its own timing."""
    source = ["-F", "bench.bin"] if test == "Read" else []
    argv = netatalk.argv([
        "/usr/bin/afp_speedtest", "-h", host, "-p", str(port), "-s", "workbench", "-u", GUEST_ACCOUNT,
        "-f", SPEEDTEST_NAME_PAD + test, *source, "-d", str(size_mib), "-q", str(quantum_kib),
        "-r", str(in_flight), "-a",
    ])  # fmt: skip
    if ns:
        argv = ["ip", "netns", "exec", ns, *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    for line in done.stdout.splitlines():
        if found := _RESULT_LINE.match(line):
            return size_mib * (1 << 20) / (int(found.group(1)) / 1e6)
    raise RuntimeError(f"afp_speedtest {test}: no result (exit {done.returncode}): {done.stdout[-300:]!r}")


def python_bytes_per_s(
    host: str, port: int, creds: Credentials, direction: str, root: Path, size_mib: int, quantum_bytes: int,
    in_flight: int, ns: str | None, scratch: Path,
) -> float:  # fmt: skip
    """One afp/python copy of a size_mib file; bytes per second from the first request to the last reply."""
    target = Target(host, creds, ports={"afp": port}, share="workbench")
    options = ClientOptions(block_size=quantum_bytes, requests_in_flight=in_flight)
    size = size_mib << 20
    source = root / "bench.bin"
    local = scratch / "bench.bin"
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


def median_of(repeat: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(repeat))


def compare(
    where: str, args: argparse.Namespace, bind: str, work: Path, ns: str | None = None, server_ns: str | None = None
) -> list[str]:
    """Both clients against one afpd (inside `server_ns` when given), the clients inside `ns` when given."""
    netatalk, why = find()
    if netatalk is None:
        raise SystemExit(f"no netatalk: {why}")
    creds = generate()  # afp/python's login (DHX2, in-process); afp_speedtest logs in as GUEST_ACCOUNT
    ctx = ServerContext(
        root=work / where / "root", bind=bind, state_dir=work / where / "state", credentials=creds,
        ports={"afp": free_ports(bind, 1)[0] if server_ns is None else 5548}, netns=server_ns,
    )  # fmt: skip
    ctx.root.mkdir(parents=True)
    scratch = work / where / "local"
    scratch.mkdir()
    payload = os.urandom(args.size_mib << 20)
    (ctx.root / "bench.bin").write_bytes(payload)
    (scratch / "bench.bin").write_bytes(payload)
    for owned in (ctx.root, ctx.root / "bench.bin"):  # afp_speedtest reads the file and writes beside it
        os.chown(owned, GUEST_UID, GUEST_UID)
    server = ReferenceAfpd(ctx)
    server.start()
    lines = []
    try:
        probe = AfpPythonClient(Target(bind, creds, ports={"afp": ctx.ports["afp"]}, share="workbench"))
        with netns.entered(ns) if ns else contextlib.nullcontext(), probe:
            quantum = probe.request_bytes  # what the server announced, capped as the client caps it
        port, size, flight = ctx.ports["afp"], args.size_mib, args.in_flight
        for direction, test in (("download", "Read"), ("upload", "Write")):

            def native_once(t: str = test) -> float:
                return speedtest_bytes_per_s(netatalk, bind, port, t, size, quantum >> 10, flight, ns)

            def python_once(d: str = direction) -> float:
                return python_bytes_per_s(bind, port, creds, d, ctx.root, size, quantum, flight, ns, scratch)

            native = median_of(args.repeat, native_once)
            python = median_of(args.repeat, python_once)
            lines.append(
                f"{where:9} {direction:8} afp_speedtest {native * 8 / 1e6:9,.0f} Mbit/s   afp/python "
                f"{python * 8 / 1e6:9,.0f} Mbit/s   ratio {python / native:5.2f}   "
                f"({args.size_mib} MiB, {quantum >> 10} KiB x {args.in_flight} in flight, median of {args.repeat})"
            )
    finally:
        server.stop()
    return lines


def lab_protocols(args: argparse.Namespace, work: Path) -> list[str]:
    """AFP against SMB and HTTP on wifi-ac, from one `workbench lab` run's JSON."""
    doc_path = work / "lab.json"
    argv = [sys.executable, "-m", "workbench", "lab", "--link", "wifi-ac", "--protocols",
            "afp/python,smb/smbclient,http/curl", "--sizes", f"{args.size_mib}M", "--small", "none",
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
                f"{row['median_bytes_per_s'] * 8 / 1e6:7,.0f} Mbit/s  verified {row['verified']}"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size-mib", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
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

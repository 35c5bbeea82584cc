"""SMB signing and encryption against their ceilings: smbprotocol and smbclient, plain / signed / encrypted, on the
lab's gige link with and without a capped server CPU; each row's rate over its binding ceiling and over its
crypto ceiling, printed as ratios.

Usage (root; one lab per configuration, about a minute each; hold the lab lock):
    flock /tmp/wb-lab.lock python bench/bench_smb_crypto.py [--cap 0.25] [--dialect 3.0.2] [--only signed,...] [--why]

A ratio near 1.0 over the binding ceiling is an explained row (within 25 % is what workbench calls explained);
`rate/crypto` is the row's rate over what the signing or encryption alone (or with the rest of that host's CPU per
byte, see workbench.core.ceiling.crypto_bound) lets the limiting host carry: near 1.0 on a capped server when crypto
is the limit. `srv CPU/s` is the server host's CPU seconds per wall second over the copies (the lab's host_cpu),
`srv ns/B` the served copies' server CPU per byte: an encrypted row's less a plain one's is what the cipher
costs smbd, to hold against the cost per byte measured with OpenSSL (run.crypto).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CLIENTS = "smb/smbprotocol,smb/smbclient"
# configuration -> (the lab's Samba, the clients' options)
MODES: dict[str, tuple[str, list[str]]] = {
    "plain": ("signing=offered,encryption=offered", ["--smb-signing", "off"]),
    "signed": ("signing=required", ["--smb-signing", "required"]),
    "encrypted": ("encryption=required", ["--smb-encryption", "required"]),
}
LAB_TIMEOUT_S = 600  # one lab, however it goes


def _lab(
    mode: str, cap: float | None, size: str, repeat: int, dialect: str, out: Path
) -> tuple[list[dict[str, Any]], str | None]:
    """One lab run's JSON documents, or why there are none."""
    server, client_options = MODES[mode]
    argv = [sys.executable, "-m", "workbench", "lab", "--link", "gige", "--protocols", CLIENTS, "--sizes", size]
    argv += ["--smb-max-dialect", dialect]
    argv += ["--small", "none", "--repeat", str(repeat), "--warmup", "1", "--tcp-duration", "2"]
    argv += ["--smb-server", server, *client_options, "--json", str(out)]
    if cap is not None:
        argv += ["--server-cpu", f"{cap:g}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=LAB_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return [], f"no answer in {LAB_TIMEOUT_S} s"
    docs = [json.loads(p.read_text()) for p in sorted(out.parent.glob(f"{out.stem}*.json"))]
    if not docs:
        tail = (done.stderr or done.stdout).strip().splitlines()
        return [], tail[-1] if tail else f"exit {done.returncode}"
    return docs, None


def _cap(cap: float | None) -> str:
    return f"{cap:g}" if cap else "none"


def _ratio(rate: float | None, ceiling: float | None) -> str:
    return f"{rate / ceiling:.2f}" if rate and ceiling else "-"


def _session(details: dict[str, Any]) -> str:
    if details.get("encryption"):
        return f"enc {details.get('encryption_cipher') or '?'}"
    if details.get("signing"):
        return f"sign {details.get('signing_algorithm') or '?'}"
    return "plain" if details.get("signing") is False else "?"


def _rows(mode: str, cap: float | None, docs: list[dict[str, Any]], why: bool) -> list[str]:
    lines = []
    for doc in docs:
        host_cpu = (doc.get("link") or {}).get("host_cpu") or {}
        server_cpu = host_cpu.get("server_cpu_s_per_s")
        for row in doc.get("results", []):
            rate = row.get("median_bytes_per_s")
            details = row.get("details") or {}
            crypto = [b["bytes_per_s"] for b in details.get("bounds") or [] if b.get("label") == "crypto"]
            spent = sorted(x["server_cpu_s"] for x in row.get("samples") or [] if x.get("server_cpu_s") is not None)
            per_byte = f"{spent[len(spent) // 2] / row['bytes'] * 1e9:.2f}" if spent and row.get("bytes") else "-"
            lines.append(
                f"{mode:9} {_cap(cap):>5} {row['client']:13} {row['direction']:8} "
                f"{_session(details):18} {(rate or 0) / 1e6:8.1f} {row.get('bound')!s:12} "
                f"{_ratio(rate, row.get('ceiling_bytes_per_s')):>10} {_ratio(rate, min(crypto, default=None)):>11} "
                f"{server_cpu if server_cpu is not None else '-':>10} {per_byte:>9}"
                + (f"  {row['error'][:60]}" if row.get("error") else "")
            )
            if why and row.get("bound_explanation"):
                lines.append(f"{'':10}{row['bound_explanation']}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=0.25, help="the capped server's cores (default 0.25)")
    # 64M: a copy then spans several of the CPU cap's 100 ms periods; a copy of about one period can use two
    # periods' quota (the 16M copies of 0.2 s beat the capped ceiling by up to 22 %).
    parser.add_argument("--size", default="64M", help="the file copied (default 64M)")
    parser.add_argument("--repeat", type=int, default=2, help="timed copies per row (default 2)")
    parser.add_argument("--only", default=",".join(MODES), help=f"some of {','.join(MODES)}")
    parser.add_argument("--no-uncapped", action="store_true", help="only the capped server")
    # On 3.1.1 this Samba and both clients pick AES-128-GMAC and AES-128-GCM, which cost 0.05-0.1 ns/B here and
    # limit nothing; 3.0.2 signs with AES-128-CMAC and encrypts with AES-128-CCM, the costly ones a NAS meets.
    parser.add_argument("--dialect", default="3.0.2", help="the clients' highest SMB dialect (default 3.0.2)")
    parser.add_argument("--why", action="store_true", help="print each row's ceiling explanation under it")
    args = parser.parse_args()
    modes = [m for m in args.only.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown configuration {unknown[0]!r}: choose from {', '.join(MODES)}")
    caps: list[float | None] = [args.cap] if args.no_uncapped else [None, args.cap]
    print(
        f"{'mode':9} {'cap':>5} {'client':13} {'dir':8} {'session':18} {'MB/s':>8} {'bound':12} "
        f"{'rate/bound':>10} {'rate/crypto':>11} {'srv CPU/s':>10} {'srv ns/B':>9}"
    )
    with tempfile.TemporaryDirectory(prefix="wb-bench-crypto-") as work:
        for cap in caps:
            for mode in modes:
                out = Path(work) / f"{mode}-{cap or 0:g}" / "run.json"
                out.parent.mkdir()
                docs, why = _lab(mode, cap, args.size, max(1, min(args.repeat, 5)), args.dialect, out)
                if why:
                    print(f"{mode:9} {_cap(cap):>5} no rows: {why}")
                for line in _rows(mode, cap, docs, args.why):
                    print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

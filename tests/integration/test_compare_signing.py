"""`workbench compare` between an unsigned and a signed SMB run, both stored: the change beyond noise and the
session's signing named as its likely cause."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.synthetic_runs import host
from workbench.core.explain import explain
from workbench.core.results import Baseline, Result, Run, Sample
from workbench.core.store import Store
from workbench.protocols.details import ClientDetails

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20
LINK = {"rate_bits_per_s": 1e9, "expected_goodput_bytes_per_s": 117e6, "rtt_ms": 0.3, "server_cpu_cap_cores": 0.25}


def _run(seconds: tuple[float, ...], details: ClientDetails, signing: str) -> Run:
    nbytes = 64 * MIB
    samples = tuple(Sample(nbytes, s, verified=True, client_cpu_s=0.1, server_cpu_s=0.24 * s) for s in seconds)
    row = Result("smb", "smbprotocol", "download", "64M", nbytes, 1, samples=samples, warmup=1, details=details)
    meta = {
        "started_utc": "2026-11-26T08:00:00Z",
        "finished_utc": "2026-11-26T08:01:00Z",
        "client": host("lab-client"),
        "server": {**host("lab-server"), "kind": "served"},
        "target": {"host": "10.77.0.2", "ports": {"http": 8181}},
        "plan": {"protocols": ["smb/smbprotocol"], "sizes": [nbytes], "repeat": 5, "smb_signing": signing},
    }
    run = Run(None, meta, Baseline(up_bytes_per_s=117e6, down_bytes_per_s=117e6, rtt_ms=0.3), (row,), link=LINK)
    return run.explained(explain(run, "10.77.0.2"))


def _store(db: Path, run: Run) -> int:
    with Store(db) as store:
        run_id = store.begin_run(dict(run.meta), label="signing")
        store.save_baseline(run_id, run.baseline)
        store.save_extra(run_id, dict(run.link or {}), [])
        for idx, (row, why) in enumerate(run.explained_rows()):
            store.save_result(run_id, idx, row, why)
        store.finish_run(run_id, str(run.meta["finished_utc"]), [], verdict=None)
    return run_id


def test_compare_names_signing_as_the_cause_of_a_slower_signed_run(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    plain = ClientDetails(dialect="3.1.1", signing=False, request_bytes=MIB)
    signed = ClientDetails(dialect="3.1.1", signing=True, signing_algorithm="AES-128-CMAC", request_bytes=MIB)
    before = _store(db, _run((0.70, 0.72, 0.69, 0.71, 0.73), plain, "off"))
    after = _store(db, _run((1.10, 1.13, 1.08, 1.12, 1.11), signed, "required"))
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    md = tmp_path / "compare.md"
    done = subprocess.run(
        [sys.executable, "-m", "workbench", "compare", str(before), str(after), "--db", str(db), "--markdown", str(md)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "1 slower of 1 row" in done.stdout
    text = md.read_text(encoding="utf-8")
    assert "signing off → on (AES-128-CMAC): the likely cause" in text
    assert "the SMB settings differ (client signing off → required)" in text
    # the same sessions within noise of each other say so instead of naming a cause
    same = _store(db, _run((1.11, 1.10, 1.12, 1.09, 1.13), plain, "off"))
    again = subprocess.run(
        [sys.executable, "-m", "workbench", "compare", str(after), str(same), "--db", str(db), "--markdown", str(md)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr
    assert "signing on → off (AES-128-CMAC): no change beyond noise with it" in md.read_text(encoding="utf-8")

"""`workbench lab` end to end: real servers in the server namespace, every available client measured
over the emulated link, then nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from protocols import registry
from tests.helpers import assert_lab_rtt_honest

REPO = Path(__file__).resolve().parents[1]


def _lab_reason() -> str | None:
    try:
        from workbench.lab import check_available

        check_available()
    except Exception as exc:  # any reason the lab cannot run here is a reason to skip
        return str(exc)
    return None


@pytest.mark.lab
@pytest.mark.skipif(_lab_reason() is not None, reason=f"lab unavailable: {_lab_reason()}")
def test_lab_run_measures_every_available_client(tmp_path: Path) -> None:
    doc_path = tmp_path / "lab.json"
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    env.pop("WORKBENCH_PASSWORD", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "lab",
            "--link",
            "wifi-ac",
            "--protocols",
            "all",
            "--sizes",
            "2M",
            "--small",
            "10x8K",
            "--repeat",
            "1",
            "--warmup",
            "0",
            "--tcp-duration",
            "1",
            "--window-sweep",
            "64K,256K",
            "--json",
            str(doc_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(doc_path.read_text())
    link = doc["link"]
    assert link["mtu"] == 1500
    assert_lab_rtt_honest(link["rtt_ms"], 2.8, link["notes"])
    assert link["rate_bps"] == pytest.approx(533e6 / 8)
    assert 0 < link["emulator"]["cpu_fraction"] < 2 and link["emulator"]["drops"] >= 0
    assert 0.5 < doc["baseline"]["down_bps"] / link["expected_goodput_bps"] < 1.05
    assert [p["window_bytes"] for p in doc["window_sweep"]] == [65536, 262144]
    assert all(p["measured_bps"] > 0 and p["predicted_bps"] > 0 for p in doc["window_sweep"])

    available = [e.label for e in registry.KNOWN_CLIENTS if not isinstance(registry.load(e), str)]
    measured = {f"{r['protocol']}/{r['client']}" for r in doc["results"] if r["error"] is None and r["verified"]}
    failed = {f"{r['protocol']}/{r['client']}": r["error"] for r in doc["results"] if r["error"]}
    for label in available:
        assert label in measured, f"{label}: {failed.get(label)}"
    for row in doc["results"]:
        if row["error"] is None:
            assert row["bound"] in ("link", "window", "requests", "ssh-window", "cpu")
            assert row["ceiling_bps"] > 0
    pysmb = [r for r in doc["results"] if r["client"] == "pysmb" and r["error"] is None]
    if pysmb:
        assert all(r["bound"] in ("requests", "cpu") for r in pysmb if r["file_set"] == "2M")

    leftovers = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "wb-lab-" not in leftovers


@pytest.mark.lab
@pytest.mark.skipif(_lab_reason() is not None, reason=f"lab unavailable: {_lab_reason()}")
def test_ctrl_c_mid_run_tears_everything_down(tmp_path: Path) -> None:
    import shutil
    import signal
    import tempfile

    from tests.far_host import saved_rows, start_workbench, wait_for
    from workbench.store import Store

    # a short TMPDIR of this test's own: smbd's socket paths under a long pytest path overflow AF_UNIX's limit
    db, lab_tmp = tmp_path / "runs.sqlite", Path(tempfile.mkdtemp(prefix="wbt-"))
    proc = start_workbench(
        "lab",
        "--link",
        "wan",
        "--protocols",
        "http/aiohttp",
        "--directions",
        "upload",
        "--sizes",
        "1M,64M",
        "--small",
        "none",
        "--repeat",
        "3",
        "--warmup",
        "0",
        "--tcp-duration",
        "1",
        "--db",
        str(db),
        home=tmp_path / "home",
        tmp_dir=lab_tmp,  # the lab's far root lives here: its incoming/ shows the copy arriving
    )

    def big_copy_under_way() -> bool:  # the 1M row is saved and a 64M upload (~6 s over 100 Mbit/s) is landing
        landing = [p for p in lab_tmp.glob("workbench-lab-*/root/incoming/**/*64M*") if p.is_file()]
        return saved_rows(db) >= 1 and any(0 < p.stat().st_size < 64 << 20 for p in landing)

    try:
        wait_for("the 64M upload under way", big_copy_under_way, proc, timeout_s=300)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        left = list(lab_tmp.iterdir())
        shutil.rmtree(lab_tmp, ignore_errors=True)
    assert proc.returncode == 130, out[-3000:] + err[-3000:]
    assert "interrupted" in err and "Traceback" not in out + err
    with Store(db) as store:
        rows = store.load().results
    assert [(r.label, r.file_set, r.error, r.verified) for r in rows][:1] == [("http/aiohttp", "1M", None, True)]
    assert "wb-lab-" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    leftovers = subprocess.run(["pgrep", "-f", str(lab_tmp)], capture_output=True, text=True).stdout
    assert not leftovers.strip(), leftovers  # no server of this lab is left running
    assert str(lab_tmp) not in Path("/proc/mounts").read_text()
    assert left == []  # its root, state and keys are gone

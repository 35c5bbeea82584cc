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
    import signal
    import time

    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workbench",
            "lab",
            "--link",
            "wan",
            "--protocols",
            "http",
            "--sizes",
            "64M",
            "--repeat",
            "3",
            "--tcp-duration",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 120
    while "measuring the raw TCP limit" not in seen and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
    assert "measuring the raw TCP limit" in seen, seen
    time.sleep(3)  # into the copies (64 MiB over 100 Mbit/s takes ~6 s each)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, seen + rest
    assert "Traceback" not in rest
    assert "wb-lab-" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    leftovers = subprocess.run(["pgrep", "-f", "workbench-lab-"], capture_output=True, text=True).stdout
    assert not leftovers.strip(), leftovers

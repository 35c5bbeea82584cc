"""A path that breaks offloaded packets, in the lab: the broken-tso story's reduced form. With the server's TSO and GSO
on, raw TCP down collapses, most of what the server sends is sent again, and the verdict names the offloads and the
fix; with them off (switched on the server host's link device) the same line carries the download."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import lab_unavailable
from tests.schema_check import assert_valid_run_document

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.lab
@pytest.mark.skipif(lab_unavailable() is not None, reason=lab_unavailable() or "")
def test_a_sender_with_tso_on_collapses_on_a_line_that_breaks_offloads_and_recovers_with_them_off(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    env.pop("WORKBENCH_PASSWORD", None)
    # bounded: 64 KiB copies, one each, 1 s of raw TCP each way (a collapsed flow still ends: it moves a few KB/s)
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "lab", "--scenario", "broken-tso", "--quick", "--json",
         str(tmp_path / "story.json")],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    on = json.loads((tmp_path / "story-server-TSO-and-GSO-on.json").read_text())
    off = json.loads((tmp_path / "story-server-TSO-and-GSO-off.json").read_text())
    for doc in (on, off):
        assert_valid_run_document(doc)
        assert doc["link"]["breaks"] == "offloaded"
    # what the server host's link device had, as read back from its kernel
    assert off["link"]["offloads"]["server"]["offloads"]["tso"].startswith("off")
    assert on["link"]["offloads"]["server"]["offloads"]["tso"].startswith("on")
    down_on, down_off = on["baseline"]["down_bytes_per_s"], off["baseline"]["down_bytes_per_s"]
    assert down_off and down_on is not None and down_on < down_off / 20, (down_on, down_off)
    # most of what a collapsed sender sends is sent again: the probe's own counters, or the copy's
    probe = (on["baseline"].get("tcp") or {}).get("download") or {}
    shares = [probe.get("retrans_fraction") if probe.get("side") == "sender" else None]
    shares += [r.get("retransmitted_share") for r in on["results"]]
    assert max((s for s in shares if s is not None), default=0.0) > 0.1, shares
    verdict = " ".join(on["verdict"])
    assert "TSO" in verdict and "ethtool -K" in verdict and "tso off gso off" in verdict, on["verdict"]
    assert 3 <= len(on["verdict"]) <= 6
    print("TSO on :", on["baseline"]["down_bytes_per_s"], shares, on["verdict"])
    print("TSO off:", off["baseline"]["down_bytes_per_s"], [r.get("median_bytes_per_s") for r in off["results"]])

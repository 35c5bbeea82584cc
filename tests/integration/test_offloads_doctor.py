"""The send path's recorded state where users read it: `doctor` lists each interface's offloads as the kernel
reports them, `compare` warns when a host's differs between two stored runs, and the HTML report shows it."""

from __future__ import annotations

import dataclasses
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_html_report import store_run
from tests.schema_check import assert_valid_run_document
from tests.synthetic_runs import lab_run
from workbench.core.results import Run
from workbench.shared import offloads

REPO = Path(__file__).resolve().parents[2]


def workbench(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORKBENCH_HOME": str(home), "COLUMNS": "200"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    env.pop("WORKBENCH_PASSWORD", None)
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args], capture_output=True, text=True, env=env, timeout=120
    )


def _send_path(interface: str, tso: str, gso: str, gso_max_size_bytes: int = 65536) -> dict[str, Any]:
    record = offloads.Offloads(interface, "ethtool ioctl + rtnetlink", mtu_bytes=1500, qdisc="fq_codel").to_json()
    states = dict.fromkeys(offloads.GROUPS, "on")
    states.update(tso=tso, gso=gso, lro="off [fixed]")
    return {**record, "offloads": states, "gso_max_size_bytes": gso_max_size_bytes, "tx_queue_len": 500}


def _with_send_paths(run: Run, client: dict[str, Any], server: dict[str, Any]) -> Run:
    meta = dict(run.meta)
    meta["client"] = {**meta["client"], "offloads": client}
    meta["server"] = {**meta["server"], "offloads": server}
    return dataclasses.replace(run, meta=meta)


@pytest.mark.skipif(platform.system() != "Linux", reason="reads the Linux kernel")
def test_doctor_lists_each_interface_as_the_kernel_reports_it(tmp_path: Path) -> None:
    proc = workbench("doctor", home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    assert "send path per interface" in proc.stdout
    lo = offloads.read_offloads("lo")
    row = next(line for line in proc.stdout.splitlines() if line.strip("│ ").startswith("lo "))
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    assert cells[:7] == ["lo", *(lo.group_state(g) for g in ("tso", "gso", "gro", "lro", "tx_checksum", "rx_checksum"))]
    assert cells[7:] == [str(lo.gso_max_size_bytes), str(lo.mtu_bytes), str(lo.qdisc), str(lo.tx_queue_len)]


def test_compare_warns_when_a_hosts_send_path_differs(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    home = tmp_path / "home"
    client = _send_path("wbc0", "on", "on")
    tso_on = _with_send_paths(lab_run(None), client, _send_path("wbs0", "on", "on"))
    tso_off = _with_send_paths(lab_run(None), client, _send_path("wbs0", "off", "off", gso_max_size_bytes=16384))
    assert_valid_run_document(tso_off.to_json())
    before, after, same = store_run(db, tso_on), store_run(db, tso_off), store_run(db, tso_off)

    differs = workbench("compare", str(before), str(after), "--db", str(db), home=home)
    assert differs.returncode == 0, differs.stderr
    said = " ".join(differs.stdout.split())  # the terminal wraps long warnings
    assert "the server host's send path differs (tso on → off; gso on → off; gso_max_size_bytes 65536 → 16384)" in said
    assert "the client host's send path differs" not in said

    alike = workbench("compare", str(after), str(same), "--db", str(db), home=home)
    assert alike.returncode == 0, alike.stderr
    assert "send path differs" not in " ".join(alike.stdout.split())

    page = tmp_path / "report.html"
    shown = workbench("report", str(after), "--db", str(db), "--html", str(page), home=home)
    assert shown.returncode == 0, shown.stderr
    assert "server send path wbs0: tso off, gso off, gro on, lro off [fixed]" in page.read_text(encoding="utf-8")

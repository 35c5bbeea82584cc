"""The wire on the default lab link: the interface carrying the path and the connections' own count of what
went on the wire agree within the stated tolerance, for an HTTP copy each way (its sender on either host)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lab.test_lab_run import REPO, _lab_reason
from tests.schema_check import assert_valid_run_document
from workbench.core.results import Run
from workbench.shared.wire import IFACE_TOLERANCE

pytestmark = [pytest.mark.lab, pytest.mark.skipif(_lab_reason() is not None, reason=f"lab: {_lab_reason()}")]


def test_the_interface_and_the_connections_count_the_same_wire_bytes(tmp_path: Path) -> None:
    doc_path = tmp_path / "lab.json"
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    env.pop("WORKBENCH_PASSWORD", None)
    args = ["--protocols", "http/aiohttp", "--sizes", "16M", "--small", "none", "--repeat", "1", "--warmup", "0"]
    args += ["--tcp-duration", "1", "--json", str(doc_path)]
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "lab", *args], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(doc_path.read_text())
    assert_valid_run_document(doc)
    run = Run.from_json(doc)
    assert {r.direction for r in run.results} == {"upload", "download"}
    for row in run.results:
        tcp = row.tcp
        assert tcp is not None and tcp.side == "sender", row
        assert tcp.host == ("client" if row.direction == "upload" else "server")
        # the lab's link device on the sender's host, not loopback: its counters are compared
        assert tcp.iface_name and tcp.iface_kind != "loopback" and tcp.iface_bytes, tcp
        assert tcp.iface_to_wire is not None and abs(tcp.iface_to_wire - 1.0) <= IFACE_TOLERANCE, tcp
        per_file = row.wire_bytes_per_file_byte
        assert per_file is not None and 1.0 <= per_file < 1.2, tcp
    assert not any("connections' wire bytes (" in w for w in doc["warnings"]), doc["warnings"]
    assert any(w.startswith("wire bytes per file byte") and " http 1." in w for w in doc["warnings"])

"""netatalk's afp_speedtest as the lab's AFP reference row, end to end: the lab's afpd gives its password-less
account a volume of its own, the tool's own figures become the row's samples, and the row says "not verifiable"
in the JSON and the table without failing the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.schema_check import assert_valid_run_document
from workbench.protocols.afp_speedtest import UNVERIFIABLE, AfpSpeedtestClient
from workbench.server.daemons.afpd import Afpd

REPO = Path(__file__).resolve().parents[2]
SIZE_BYTES = 2 << 20


def _reason() -> str | None:
    try:
        from workbench.lab import check_available

        check_available()
    except Exception as exc:  # any reason the lab cannot run here is a reason to skip
        return str(exc)
    return Afpd.unavailable_reason() or AfpSpeedtestClient.unavailable_reason()


@pytest.mark.lab
@pytest.mark.skipif(_reason() is not None, reason=f"unavailable: {_reason()}")
def test_the_reference_row_is_its_own_figures_and_says_not_verifiable(tmp_path: Path) -> None:
    doc_path = tmp_path / "lab.json"
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "250"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "lab", "--protocols", "afp/afp_speedtest", "--sizes", "2M",
         "--small", "4x8K", "--repeat", "2", "--warmup", "0", "--tcp-duration", "0.5", "--goodput-duration", "0",
         "--skip-iperf3", "--json", str(doc_path)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    # a reference by design: its unverifiable rows and its unavailable small-file rows leave the exit code at 0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(doc_path.read_text())
    assert_valid_run_document(doc)
    rows = {(r["direction"], r["file_set"]): r for r in doc["results"] if r["client"] == "afp_speedtest"}
    for direction in ("download", "upload"):
        row = rows[(direction, "2M")]
        assert row["error"] is None and row["verified"] is False and row["unverifiable"] == UNVERIFIABLE
        assert len(row["samples"]) == 2
        for sample in row["samples"]:  # its own bytes and microseconds, nothing of the runner's clock
            assert sample["bytes"] == SIZE_BYTES and sample["seconds"] > 0 and sample["verified"] is None
            micros = sample["seconds"] * 1e6  # whole microseconds, as the tool prints them
            assert sample["intervals"] == [] and micros == pytest.approx(round(micros))
        test = "Read" if direction == "download" else "Write"
        assert row["details"]["measures"].startswith(f"afp_speedtest {test}:")
        assert row["details"]["request_bytes"] > 0 and row["details"]["requests_in_flight"] >= 1
        small = rows[(direction, "4x8K")]
        assert small["error"].startswith("unavailable: afp_speedtest times one file of whole MiB"), small["error"]
    table = proc.stdout
    assert table.count("not verifiable") >= 2 and UNVERIFIABLE in " ".join(table.split())

"""`workbench run` of a stock Samba share with the SMB client settings: the chosen protection reaches the
measured clients, a client that cannot honour it fails its rows as unavailable, and the run goes on."""

from __future__ import annotations

import json
from pathlib import Path

from tests.stock_urls import StockSite, run_workbench


def test_a_run_asking_for_encryption(site: StockSite, tmp_path: Path) -> None:
    site.start("smb")
    out = tmp_path / "run.json"
    done = run_workbench(
        site,
        "run",
        site.url("smb"),
        *("--protocols", "smb/pysmb,smb/smbprotocol", "--sizes", "1M", "--directions", "download"),
        *("--repeat", "1", "--warmup", "0", "--smb-encryption", "required", "--smb-max-dialect", "3.0.2"),
        *("--json", str(out)),
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    rows = {row["client"]: row for row in doc["results"]}
    assert rows["pysmb"]["error"].startswith("unavailable: pysmb cannot encrypt")
    details = rows["smbprotocol"]["details"]
    assert rows["smbprotocol"]["error"] is None and rows["smbprotocol"]["verified"] is True
    assert (details["dialect"], details["encryption"], details["encryption_cipher"]) == ("3.0.2", True, "AES-128-CCM")
    plan = doc["run"]["plan"]
    assert (plan["smb_encryption"], plan["smb_max_dialect"], plan["smb_signing"]) == ("required", "3.0.2", None)
    assert "negotiated: SMB 3.0.2, not signed, encrypted AES-128-CCM (required)" in done.stdout

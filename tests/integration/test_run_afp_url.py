"""`workbench run afp://user@host:port/volume/dir` end to end against a stock netatalk on loopback, nothing of
workbench on its side: the AFP clients copy both ways and verify, the scratch directory is made beneath the
URL's directory and removed at the end, and what lies beside it (files, folders, a link out of the volume)
is byte for byte as it was. The CLI runs as a user would: its own HOME with a 0600 ~/.netrc holding the
password, nowhere else.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.helpers import loopback_context, write_random
from tests.schema_check import assert_valid_run_document
from tests.stock_urls import StockSite, run_workbench
from workbench.server.stock.netatalk import StockAfpd

SMALL_RUN = ("--sizes", "1M", "--small", "4x4K", "--repeat", "1", "--warmup", "0")
URL_DIR = "runs here"


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[StockSite, StockAfpd]]:
    if reason := StockAfpd.unavailable_reason():
        pytest.skip(reason)
    (tmp_path / "site").mkdir()
    site = StockSite(tmp_path / "site")
    server = StockAfpd(loopback_context(tmp_path / "afp", "afp", site.credentials))
    site.servers["afp"] = server
    try:
        server.start()
        site._write_client_side()
        yield site, server
    finally:
        site.stop()


def _snapshot(top: Path) -> dict[str, str]:
    """Every entry beneath `top` (links not followed): a file's SHA-256, a link's target, 'dir' for a folder."""
    found: dict[str, str] = {}
    for path in sorted(top.rglob("*")):
        name = str(path.relative_to(top))
        if path.is_symlink():
            found[name] = "-> " + os.readlink(path)
        elif path.is_dir():
            found[name] = "dir"
        else:
            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def test_run_afp_url_copies_verifies_and_touches_nothing_beside_its_scratch(
    site: tuple[StockSite, StockAfpd], tmp_path: Path
) -> None:
    stock, server = site
    where = server.ctx.root / URL_DIR
    write_random(where / "theirs.bin", 300_000)
    write_random(where / "workbench-000000000000" / "not ours.bin", 1000)  # a name like a scratch's
    write_random(server.ctx.root / "elsewhere" / "keep.bin", 5000)
    outside = write_random(tmp_path / "outside" / "secret.bin", 4096)
    (where / "out").symlink_to(tmp_path / "outside")
    before = _snapshot(server.ctx.root)
    doc_path = tmp_path / "run.json"
    url = f"{server.url()}/{quote(URL_DIR)}"
    proc = run_workbench(
        stock, "run", url, *SMALL_RUN, "--protocols", "afp", "--files", str(tmp_path / "files"), "--json",
        str(doc_path),
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout[-4000:], proc.stderr[-4000:])
    assert "Traceback" not in proc.stderr + proc.stdout
    doc = json.loads(doc_path.read_text())
    assert_valid_run_document(doc)
    assert doc["run"]["server"]["kind"] == "stock" and doc["run"]["scratch_removed"] is True
    rows = [r for r in doc["results"] if r["protocol"] == "afp" and r["client"] == "python"]
    assert {r["direction"] for r in rows} == {"download", "upload"}, doc["results"]
    assert all(r["error"] is None for r in rows), [(r["direction"], r["error"]) for r in rows]
    others = [r for r in doc["results"] if r["client"] != "python"]
    assert all((r["error"] or "").startswith("unavailable:") for r in others), others  # mount_afp: macOS only
    assert _snapshot(server.ctx.root) == before
    assert (tmp_path / "outside" / "secret.bin").read_bytes() == outside

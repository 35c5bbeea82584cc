"""Wire bytes per file byte end to end: `workbench run` on loopback against a real `serve`, copying one large
file over HTTP and FTP both ways; each row says what its sender put on the wire, from the kernel's counters.

The serve listens on a loopback address of its own (127.x.y.z), so the watches (which count every connection
between the two addresses) see this run's connections only, whatever else this host runs on 127.0.0.1.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ensure_running, free_port
from tests.integration.test_run_cli import workbench
from tests.schema_check import assert_valid_run_document
from workbench.server.daemons.base import ServerContext
from workbench.server.daemons.serve_process import ServeProcess
from workbench.shared import credentials as creds_mod
from workbench.shared import inetdiag
from workbench.shared import target as target_mod
from workbench.shared.target import DEFAULT_PORTS

pytestmark = pytest.mark.skipif(inetdiag.available() is not None, reason="the TCP watch is Linux's")

SIZE = "32M"
SIZE_BYTES = 32 << 20


@pytest.fixture
def private_serve(tmp_path: Path) -> Iterator[ServerContext]:
    host = f"127.{random.randrange(90, 120)}.{random.randrange(1, 255)}.{random.randrange(1, 255)}"
    root = tmp_path / "root"
    root.mkdir()
    state = tmp_path / "state"
    creds = creds_mod.load_or_create(state / "credentials.json")
    ports = {**DEFAULT_PORTS, **{s: free_port(host) for s in ("http", "ftp", "tcp", "iperf3")}}
    ctx = ServerContext(root=root, bind=host, state_dir=state, credentials=creds, ports=ports)
    server = ServeProcess(ctx)
    try:
        ensure_running(server)
        target_mod.write(state, host, dict(ports), root.resolve(), ctx.share)
        yield ctx
    finally:
        server.stop()


def test_a_large_file_puts_a_little_more_than_its_bytes_on_the_wire_and_resends_none(
    private_serve: ServerContext, tmp_path: Path
) -> None:
    doc_path = tmp_path / "run.json"
    proc = workbench(
        "run",
        "--target",
        str(private_serve.state_dir / "target.json"),
        "--credentials",
        str(private_serve.state_dir / "credentials.json"),
        "--protocols",
        "http/aiohttp,ftp/ftplib",
        "--sizes",
        SIZE,
        "--small",
        "none",
        "--repeat",
        "1",
        "--warmup",
        "0",
        "--tcp-duration",
        "0.5",
        "--files",
        str(tmp_path / "files"),
        "--json",
        str(doc_path),
        home=tmp_path / "home",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(doc_path.read_text())
    assert_valid_run_document(doc)
    rows = doc["results"]
    assert len(rows) == 4
    for row in rows:
        tcp = row["tcp"]
        where = (row["client"], row["direction"], tcp)
        # the sender was watched: this host for an upload, serve for a download
        assert tcp["side"] == "sender" and tcp["host"] == ("client" if row["direction"] == "upload" else "server")
        assert 1.0 <= row["wire_bytes_per_file_byte"] < 1.2, where
        # ~0: loopback loses nothing on the wire, but a busy host's lo drops a segment when its backlog queue is
        # full (each up to 64 KiB, resent) and a late ACK sends a tail-loss probe: a few of them at most
        assert row["retransmitted_share"] is not None and row["retransmitted_share"] < 0.02, where
        # the raw numbers recompute the figure
        link = tcp["link_header_bytes"] or 0
        assert tcp["wire_bytes"] == tcp["bytes_sent"] + tcp["header_bytes"] + tcp["segs_out"] * link
        assert row["wire_bytes_per_file_byte"] == pytest.approx(tcp["wire_bytes"] / tcp["copy_bytes"])
        assert tcp["copy_bytes"] == SIZE_BYTES and tcp["data_segs_out"] <= tcp["segs_out"]
        assert tcp["header_bytes"] >= 40 * tcp["segs_out"]  # an IPv4 and a TCP header, at least, per segment
        # the interface carrying a loopback path is lo, which counted at least the file's bytes
        assert (tcp["iface_name"], tcp["iface_kind"], link) == ("lo", "loopback", 0), where
        assert tcp["iface_bytes"] >= SIZE_BYTES, where
    overhead = [w for w in doc["warnings"] if w.startswith("wire bytes per file byte")]
    assert len(overhead) == 1 and " http 1.0" in overhead[0] and " ftp 1.0" in overhead[0], doc["warnings"]
    assert any(w.startswith("loopback: its interface counters") for w in doc["warnings"])
    assert not any("counted" in w and "wire bytes (" in w for w in doc["warnings"])  # loopback: never compared
    assert "wire bytes per file byte" in " ".join(proc.stdout.split())  # the notes under the table

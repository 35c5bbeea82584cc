"""The TCP triage and the ceilings on the default wifi-ac lab (533 Mbit/s, 2.8 ms): the kernel's counters,
sampled from outside the clients, say what limited each copy, and the ceilings explain the rates they name. The
same lab's HTTP copies show the wire: the interface carrying the path and the connections' own count of what went
on the wire agree within the stated tolerance, for a copy each way (its sender on either host)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import lab_unavailable
from tests.lab.test_lab_run import REPO
from tests.schema_check import assert_valid_run_document
from workbench.core.ceiling import UNEXPLAINED
from workbench.core.explain import explain
from workbench.core.results import Run
from workbench.shared.wire import IFACE_TOLERANCE

FRACTIONS = ("app_limited", "rwnd_limited", "sndbuf_limited", "network_limited")


@pytest.fixture(scope="module")
def lab_doc(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("triage")
    doc_path = tmp / "lab.json"
    env = {**os.environ, "WORKBENCH_HOME": str(tmp / "home"), "COLUMNS": "200"}
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    env.pop("WORKBENCH_PASSWORD", None)
    args = ["--link", "wifi-ac", "--protocols", "http/aiohttp,http/curl,smb/pysmb", "--sizes", "16M"]
    # the probe's triage is read: a second each way is ~350 round trips, its start-up a few of them (network-limited
    # 0.95-0.99 of its time here, 0.98-0.99 over 2 s, against the 0.8 asked); the link's goodput meter is not read
    args += ["--small", "20x64K", "--repeat", "1", "--warmup", "0", "--tcp-duration", "1", "--goodput-duration", "0"]
    args += ["--skip-iperf3"]  # no figure of iperf3 is read
    args += ["--json", str(doc_path)]
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "lab", *args], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(doc_path.read_text())
    assert_valid_run_document(doc)
    return doc


def _row(doc: dict, label: str, direction: str, file_set: str) -> dict:
    (row,) = [
        r
        for r in doc["results"]
        if f"{r['protocol']}/{r['client']}" == label and r["direction"] == direction and r["file_set"] == file_set
    ]
    assert row["error"] is None and row["verified"], row["error"]
    return row


def _fractions_add_up(tcp: dict) -> None:
    assert sum(tcp[k] for k in FRACTIONS) == pytest.approx(1.0, abs=0.002), tcp
    assert all(0.0 <= tcp[k] <= 1.0 for k in FRACTIONS), tcp


pytestmark = [pytest.mark.lab, pytest.mark.skipif(lab_unavailable() is not None, reason=f"lab: {lab_unavailable()}")]


def test_the_probe_through_the_rate_limit_is_network_limited(lab_doc: dict) -> None:
    for direction, host in (("upload", "client"), ("download", "server")):
        tcp = lab_doc["baseline"]["tcp"][direction]
        assert tcp["side"] == "sender" and tcp["host"] == host  # a download's sender is serve, which samples itself
        assert tcp["limit"] == "network" and tcp["network_limited"] >= 0.8, tcp
        _fractions_add_up(tcp)
        # under load the queue adds to the 2.8 ms path; the kernel's minimum RTT has been seen below it (2.0 ms
        # once: the lab's delay line to explain, not the triage), but the median under load never
        assert tcp["rtt_ms"] >= 2.5 and 0 < tcp["min_rtt_ms"] <= tcp["rtt_ms"], tcp


def test_curl_is_sampled_from_outside_its_process(lab_doc: dict) -> None:
    for direction, host in (("upload", "client"), ("download", "server")):
        row = _row(lab_doc, "http/curl", direction, "16M")
        tcp = row["tcp"]
        assert tcp["side"] == "sender" and tcp["host"] == host and tcp["connections"] >= 1
        assert tcp["bytes_seen"] >= 0.5 * row["bytes"] and tcp["limit"] is not None, tcp
        _fractions_add_up(tcp)
        assert tcp["max_window_bytes"] > 64 * 1024 and tcp["retrans_fraction"] is not None


def test_pysmb_is_application_limited_and_its_request_ceiling_explains_it(lab_doc: dict) -> None:
    """pysmb keeps one 64 KiB request outstanding: its sender is application-limited (or, downloading, the row says
    that the counters name another limit than its ceiling). Its requests ceiling labels both directions, so it
    holds, and a copy takes no longer than that ceiling's time would be had the parts it takes to overlap (the bytes
    and the receiving side's CPU, ceiling.requests_s) run in turn, with 10 % to spare: what a request waits for is
    all in the model, whichever machine's CPU ran it."""
    run = Run.from_json(lab_doc)
    explained = explain(run, lab_doc["run"]["target"]["host"])
    for direction in ("upload", "download"):
        row = _row(lab_doc, "smb/pysmb", direction, "16M")
        if direction == "download" and row["tcp"]["limit"] == "network":
            # smbd's sockets: in two of five lab runs the kernel flagged none of a row's rate samples app-limited
            # (all its copies alike), so the counters say network; the row then says so beside its ceiling
            assert row["triage_note"].startswith("the sender's TCP counters say network"), row["triage_note"]
        else:
            assert row["tcp"]["limit"] == "application", row["tcp"]
        assert row["bound"] == "requests", row["bound_explanation"]
        (ceiling,) = [b for b in explained.rows[lab_doc["results"].index(row)].bounds if b.label == "requests"]
        assert ceiling.bytes_per_s == pytest.approx(row["ceiling_bytes_per_s"])
        assert ceiling.in_turn_s is not None and ceiling.in_turn_s > 0, ceiling
        requests = row["bytes"] / row["details"]["request_bytes"]
        took_s, modelled_s = row["bytes"] / row["median_bytes_per_s"], row["bytes"] / ceiling.bytes_per_s
        all_in_turn_s = modelled_s + requests * ceiling.in_turn_s
        assert took_s <= 1.1 * all_in_turn_s, (took_s, modelled_s, all_in_turn_s, row["bound_explanation"])


def test_aiohttp_downloads_are_network_limited(lab_doc: dict) -> None:
    row = _row(lab_doc, "http/aiohttp", "download", "16M")
    assert row["tcp"]["limit"] == "network", row["tcp"]
    assert row["bound"] in ("link", "raw-tcp")


def test_small_file_rows_are_explained_within_25_percent_or_say_they_are_not(lab_doc: dict) -> None:
    small = [r for r in lab_doc["results"] if r["file_set"] == "20x64K" and r["error"] is None]
    assert small
    for row in small:
        assert row["details"]["per_file_s"] >= 0
        if row["bound"] != UNEXPLAINED:
            assert abs(row["ceiling_bytes_per_s"] - row["median_bytes_per_s"]) <= 0.25 * row["median_bytes_per_s"], row
        else:
            assert "no ceiling within 25 %" in row["bound_explanation"] or "beats its" in row["bound_explanation"]
            assert "the model is missing" in row["bound_explanation"]


def test_the_verdict_is_three_to_six_sentences_from_the_rows(lab_doc: dict) -> None:
    verdict = lab_doc["verdict"]
    assert 3 <= len(verdict) <= 6 and all(s.endswith(".") for s in verdict)
    assert verdict[0].startswith("Raw TCP reached")
    said = [*verdict, *lab_doc["warnings"]]  # the verdict's worst client, or the notes' other shortfalls
    # pysmb's turn per request holds it, whether its sender's counters said application or, downloading, network
    assert any("smb/pysmb" in s and ("not the network" in s or "a client limit" in s) for s in said), said


def test_the_interface_and_the_connections_count_the_same_wire_bytes(lab_doc: dict) -> None:
    run = Run.from_json(lab_doc)
    http = [r for r in run.results if f"{r.protocol}/{r.client}" == "http/aiohttp" and r.file_set == "16M"]
    assert {r.direction for r in http} == {"upload", "download"}
    for row in http:
        tcp = row.tcp
        assert tcp is not None and tcp.side == "sender", row
        assert tcp.host == ("client" if row.direction == "upload" else "server")
        # the lab's link device on the sender's host, not loopback: its counters are compared
        assert tcp.iface_name and tcp.iface_kind != "loopback" and tcp.iface_bytes, tcp
        assert tcp.iface_to_wire is not None and abs(tcp.iface_to_wire - 1.0) <= IFACE_TOLERANCE, tcp
        per_file = row.wire_bytes_per_file_byte
        assert per_file is not None and 1.0 <= per_file < 1.2, tcp
    disagree = [w for w in lab_doc["warnings"] if w.startswith("http/aiohttp ") and "connections' wire bytes (" in w]
    assert not disagree, lab_doc["warnings"]
    assert any(w.startswith("wire bytes per file byte") and " http 1." in w for w in lab_doc["warnings"])

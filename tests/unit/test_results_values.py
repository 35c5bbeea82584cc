"""Results are values: frozen rows and runs, typed client details, the explanation as its own value, and the
JSON document that reads and writes all of them: schema 2, and schema 1 read as it always was."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.schema_check import assert_valid_run_document
from workbench.cli.report import render_run
from workbench.core.explain import explain
from workbench.core.results import Baseline, Explanation, Result, RowExplanation, Run, Sample
from workbench.core.schema import SCHEMA, upgrade_document
from workbench.core.store import Store
from workbench.protocols import registry
from workbench.protocols.details import ClientDetails
from workbench.shared.credentials import Credentials
from workbench.shared.target import Target

SERVER_PAGE_CACHE = "server reads from its page cache"
SSHFS_PAGE_CACHE = "sshfs without kernel_cache/auto_cache (FUSE drops a file's pages on open) + fadvise DONTNEED"


def _sample(nbytes: int, seconds: float, files: int = 1) -> dict[str, Any]:
    return {
        "bytes": nbytes,
        "seconds": seconds,
        "files": files,
        "verified": True,
        "client_cpu_s": 0.01,
        "server_cpu_s": 0.0,
        "intervals": [nbytes],
        "error": None,
        "stalls": [],
    }


def _unmeasured(protocol: str, client: str, direction: str, file_set: str, error: str) -> dict[str, Any]:
    return {
        "protocol": protocol,
        "client": client,
        "direction": direction,
        "file_set": file_set,
        "bytes": 0 if file_set == "-" else 1048576,
        "files": 0 if file_set == "-" else 1,
        "warmup": 0,
        "samples": [],
        "median_bps": None,
        "mean_bps": None,
        "stdev_bps": None,
        "min_bps": None,
        "max_bps": None,
        "files_per_s": None,
        "pct_of_tcp": None,
        "ceiling_bps": None,
        "bound": None,
        "bound_explanation": None,
        "stalls": 0,
        "stall_seconds": 0.0,
        "verified": False,
        "error": error,
        "details": {},
        "interval_s": 0.1,
    }


def old_document() -> dict[str, Any]:
    """A run document as the code before typed results wrote it (schema 1): explanation keys on each row and in
    its `details` dict beside the client's own keys, the explanation's notes among the warnings."""
    return {
        "schema": 1,
        "run": {"id": 3, "started_utc": "2026-11-20T10:00:00Z", "finished_utc": "2026-11-20T10:01:00Z"},
        "baseline": {
            "up_bps": 30000000.0,
            "down_bps": 40000000.0,
            "rtt_ms": 0.02,
            "connect_rtt_ms": 0.03,
            "window_bytes": 29360128,
            "iperf3_up_bps": None,
            "iperf3_down_bps": None,
            "details": {"rtt_min_ms": 0.015},
            "error": None,
        },
        "results": [
            {
                "protocol": "sftp",
                "client": "openssh",
                "direction": "download",
                "file_set": "1M",
                "bytes": 1048576,
                "files": 1,
                "warmup": 1,
                "samples": [_sample(1048576, 0.5)],
                "median_bps": 2097152.0,
                "mean_bps": 2097152.0,
                "stdev_bps": None,
                "min_bps": 2097152.0,
                "max_bps": 2097152.0,
                "files_per_s": None,
                "pct_of_tcp": 5.24288,
                "ceiling_bps": 104857600000.0,
                "bound": "requests",
                "bound_explanation": "requests ≤ 104857.6 MB/s (32 KiB × 64 requests / 0.02 ms)",
                "stalls": 0,
                "stall_seconds": 0.0,
                "verified": True,
                "error": None,
                "details": {
                    "request_bytes": 32768,
                    "requests_in_flight": 64,
                    "cipher": "aes128-gcm@openssh.com",
                    "timed_includes_setup": True,
                    "page_cache": SERVER_PAGE_CACHE,
                    "bounds": [
                        {"label": "window", "bps": 1468006400000.0, "explanation": "window 28 MiB / 0.02 ms"},
                        {"label": "requests", "bps": 104857600000.0, "explanation": "32 KiB × 64 requests / 0.02 ms"},
                    ],
                    "fixed_cost_s": 0.462,
                    "streaming_bps": 88694874,
                },
                "interval_s": 0.1,
            },
            {
                "protocol": "rsync",
                "client": "daemon",
                "direction": "upload",
                "file_set": "10x4K",
                "bytes": 40960,
                "files": 10,
                "warmup": 1,
                "samples": [_sample(40960, 0.16, files=10)],
                "median_bps": 256000.0,
                "mean_bps": 256000.0,
                "stdev_bps": None,
                "min_bps": 256000.0,
                "max_bps": 256000.0,
                "files_per_s": 62.5,
                "pct_of_tcp": 0.8533333333333334,
                "ceiling_bps": 1468006400000.0,
                "bound": "window",
                "bound_explanation": "window ≤ 1468006.4 MB/s (window 28 MiB / 0.02 ms)",
                "stalls": 0,
                "stall_seconds": 0.0,
                "verified": True,
                "error": None,
                "details": {
                    "timed_includes_setup": True,
                    "whole_file": True,
                    "compress": False,
                    "files_in_flight": None,
                    "page_cache": SERVER_PAGE_CACHE,
                    "bounds": [{"label": "window", "bps": 1468006400000.0, "explanation": "window 28 MiB / 0.02 ms"}],
                },
                "interval_s": 0.1,
            },
            {
                "protocol": "sftp",
                "client": "sshfs",
                "direction": "download",
                "file_set": "1M",
                "bytes": 1048576,
                "files": 1,
                "warmup": 1,
                "samples": [_sample(1048576, 0.25)],
                "median_bps": 4194304.0,
                "mean_bps": 4194304.0,
                "stdev_bps": None,
                "min_bps": 4194304.0,
                "max_bps": 4194304.0,
                "files_per_s": None,
                "pct_of_tcp": 10.48576,
                "ceiling_bps": 6553600000.0,
                "bound": "requests",
                "bound_explanation": "requests ≤ 6553.6 MB/s (32 KiB × 4 requests / 0.02 ms)",
                "stalls": 0,
                "stall_seconds": 0.0,
                "verified": True,
                "error": None,
                "details": {
                    "mount": "sshfs",
                    "block_size": 1048576,
                    "page_cache": SSHFS_PAGE_CACHE,
                    "timed_includes_setup": False,
                    "cipher": "aes128-gcm@openssh.com",
                    "request_bytes": 32768,
                    "requests_in_flight": 4,
                    "readahead_bytes": 131072,
                    "bounds": [
                        {"label": "window", "bps": 1468006400000.0, "explanation": "window 28 MiB / 0.02 ms"},
                        {"label": "requests", "bps": 6553600000.0, "explanation": "32 KiB × 4 requests / 0.02 ms"},
                    ],
                },
                "interval_s": 0.1,
            },
            {
                "protocol": "smb",
                "client": "pysmb",
                "direction": "upload",
                "file_set": "1M",
                "bytes": 1048576,
                "files": 1,
                "warmup": 1,
                "samples": [_sample(1048576, 0.5), _sample(1048576, 0.25)],
                "median_bps": 3145728.0,
                "mean_bps": 3145728.0,
                "stdev_bps": 1482910.4003789306,
                "min_bps": 2097152.0,
                "max_bps": 4194304.0,
                "files_per_s": None,
                "pct_of_tcp": 10.48576,
                "ceiling_bps": 3145728.0,
                "bound": "cpu",
                "bound_explanation": "cpu ≤ 3.1 MB/s (server CPU 100 % of a core)",
                "stalls": 0,
                "stall_seconds": 0.0,
                "verified": True,
                "error": None,
                "details": {
                    "requests_in_flight": 1,
                    "timed_includes_setup": False,
                    "dialect": "2.0.2",
                    "request_bytes": 65536,
                    "read_bytes": 65536,
                    "write_bytes": 65536,
                    "signing": False,
                    "encryption": False,
                    "page_cache": SERVER_PAGE_CACHE,
                    # a key no version of the clients wrote: read and written back untouched
                    "credits_granted": 512,
                    "bounds": [
                        {"label": "window", "bps": 1468006400000.0, "explanation": "window 28 MiB / 0.02 ms"},
                        {"label": "requests", "bps": 3276800000.0, "explanation": "64 KiB × 1 request / 0.02 ms"},
                        {"label": "cpu", "bps": 3145728.0, "explanation": "server CPU 100 % of a core"},
                    ],
                },
                "interval_s": 0.1,
            },
            _unmeasured("smb", "smbclient", "upload", "-", "connection refused by 127.0.0.1:4445"),
            _unmeasured("afp", "mount_afp", "download", "-", "unavailable: mount_afp is macOS only"),
        ],
        "warnings": [
            "loopback: no wire between client and server, so raw TCP is a memory-copy rate and the copies are "
            "bound by CPU on this host (client, server and kernel share its cores); use the lab or a second host "
            "for link-bound figures",
            "sftp/openssh download: ≈462 ms fixed per copy, 88.7 MB/s once streaming (98% of a 1M copy is the "
            "fixed part)",
        ],
    }


# What the table shows for each row of old_document(): MB/s, % TCP, bound MB/s, files/s, verified, notes.
EXPECTED_CELLS = {
    ("sftp/openssh", "down", "1M"): [
        "2.1",
        "5",
        "requests 104,858",
        "",
        "ok",
        "incl. session setup ≈462 ms; 32 KiB × 64 in flight; aes128-gcm@openssh.com",
    ],
    ("rsync/daemon", "up", "10x4K"): [
        "0.3",
        "1",
        "window 1,468,006",
        "62",
        "ok",
        "≈16 ms per file (≈1067 RTT); incl. session setup",  # of the least RTT, the probe's fastest ping (0.015 ms)
    ],
    ("sftp/sshfs", "down", "1M"): [
        "4.2",
        "10",
        "requests 6,554",
        "",
        "ok",
        "32 KiB × 4 in flight; readahead 128 KiB; aes128-gcm@openssh.com; local page cache bypassed",
    ],
    ("smb/pysmb", "up", "1M"): ["3.1", "10", "cpu 3", "", "ok", "64 KiB × 1 in flight; SMB 2.0.2"],
    ("smb/smbclient", "up", "-"): ["—", "—", "—", "", "failed", "connection refused by 127.0.0.1:4445"],
    ("afp/mount_afp", "down", "-"): ["—", "—", "—", "", "—", "unavailable: mount_afp is macOS only"],
}


def _table(run: Run) -> tuple[dict[tuple[str, str, str], list[str]], str]:
    """The rendered run, every column inline (--wide): (client, dir, set) -> [MB/s, % TCP, bound MB/s, files/s,
    verified, notes], and the text."""
    out = StringIO()
    render_run(Console(file=out, width=400, color_system=None), run, wide=True)
    text = out.getvalue()
    cells: dict[tuple[str, str, str], list[str]] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("│")]
        if len(parts) == 14 and "/" in parts[1]:
            client, direction, file_set, mb, _mbit, _spread, pct, bound, _tcp, fps, verified, notes = parts[1:13]
            cells[(client, direction, file_set)] = [mb, pct, bound, fps, verified, notes]
    return cells, text


def test_an_old_document_reads_back_and_renders_the_same_table() -> None:
    doc = old_document()
    run = Run.from_json(json.loads(json.dumps(doc)))
    cells, text = _table(run)
    assert cells == EXPECTED_CELLS
    flat = " ".join(text.split())  # the notes under the table, wrapped at the console's width
    assert all(" ".join(warning.split()) in flat for warning in doc["warnings"])
    # typed all the way: the client's keys, the explanation's, and a key this version does not know
    openssh, rsync, sshfs, pysmb = run.results[:4]
    assert openssh.details.timed_includes_setup is True and openssh.details.request_bytes == 32768
    assert rsync.details.streams_sets is True and rsync.details.files_in_flight is None
    assert sshfs.details.readahead_bytes == 131072 and sshfs.details.mount == "sshfs"
    assert pysmb.details.unknown == {"credits_granted": 512}
    why = run.explanation_of(0)
    assert why.fixed_cost_s == 0.462 and why.streaming_bytes_per_s == 88694874 and why.bound == "requests"
    assert why.bounds is not None and [b.label for b in why.bounds] == ["window", "requests"]
    assert run.explanation_of(4) == RowExplanation()  # the failed row: nothing to explain
    # written again, the document says exactly what it said (key for key, value for value) in schema 2's names,
    # plus only the keys this version adds, empty: an old run had no TCP triage and no verdict
    again = run.to_json()
    assert_valid_run_document(again)  # an old run, written again, is a valid schema-2 document
    assert again["schema"] == SCHEMA == 3
    assert _without_empty_new_keys(again) == upgrade_document(doc)
    assert not _keys_named_bps(again), _keys_named_bps(again)
    first = again["results"][0]
    assert first["median_bytes_per_s"] == doc["results"][0]["median_bps"]  # bytes/s then, bytes/s now
    assert first["stall_s"] == doc["results"][0]["stall_seconds"]
    assert first["details"]["bounds"][0]["bytes_per_s"] == doc["results"][0]["details"]["bounds"][0]["bps"]


def test_a_database_written_by_the_old_code_reports_the_same(tmp_path: Path) -> None:
    """`workbench report` of an old database: its rows are the old row JSON, loaded through the Store."""
    doc = old_document()
    with Store(tmp_path / "old.db") as store:
        run_id = store.begin_run({k: v for k, v in doc["run"].items() if k != "id"})
        # the run's rows, baseline and schema as the old code stored them
        store.db.execute("UPDATE runs SET schema = 1, baseline = ? WHERE id = ?", (json.dumps(doc["baseline"]), run_id))
        for idx, row in enumerate(doc["results"]):  # the doc column as the old code stored it
            store.db.execute(
                "INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, idx, row["protocol"], row["client"], row["direction"], row["file_set"], row["median_bps"],
                 json.dumps(row)),
            )  # fmt: skip
        store.db.commit()
        store.finish_run(run_id, doc["run"]["finished_utc"], doc["warnings"])
        loaded = store.load(run_id)
    cells, _ = _table(loaded)
    assert cells == EXPECTED_CELLS
    assert loaded.baseline.up_bytes_per_s == doc["baseline"]["up_bps"]
    expected = upgrade_document({**doc, "run": {**doc["run"], "id": run_id}})
    assert_valid_run_document(loaded.to_json())
    assert _without_empty_new_keys(loaded.to_json()) == expected


def _keys_named_bps(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [k for k in value if "bps" in k] + [b for v in value.values() for b in _keys_named_bps(v)]
    if isinstance(value, list):
        return [b for v in value for b in _keys_named_bps(v)]
    return []


def _without_empty_new_keys(doc: dict) -> dict:
    """`doc` less the keys added since schema 1's first documents, each checked to be empty (null or [])."""
    doc = copy.deepcopy(doc)
    assert doc.pop("verdict") == [] and doc["baseline"].pop("tcp") is None
    for row in doc["results"]:
        assert row.pop("tcp") is None and row.pop("triage_note") is None
        assert row.pop("wire_bytes_per_file_byte") is None and row.pop("retransmitted_share") is None
        assert row.pop("unverifiable") is None
        for sample in row["samples"]:
            assert sample.pop("tcp") is None and sample.pop("client_wait_s") is None
            assert sample.pop("server_wait_s") is None
    return doc


def _new_run() -> Run:
    """A run made the way the runner makes one: clients' typed details, then the explanation."""
    target = Target("127.0.0.1", Credentials("u", "p"))

    def details(label: str) -> ClientDetails:
        loaded = registry.load(registry.select(label)[0])
        assert not isinstance(loaded, str), loaded
        return dataclasses.replace(loaded(target).details(), page_cache=SERVER_PAGE_CACHE)

    mib = 1 << 20
    rows = (
        Result(
            "rsync",
            "daemon",
            "upload",
            "20x4K",
            20 * 4096,
            20,
            samples=(Sample(20 * 4096, 0.3, files=20, verified=True, client_cpu_s=0.02),),
            warmup=1,
            details=details("rsync/daemon"),
        ),
        *(
            Result(
                "sftp",
                "openssh",
                "download",
                name,
                size,
                1,
                samples=(Sample(size, seconds, verified=True, intervals=(size // 2, size // 2)),),
                warmup=1,
                details=details("sftp/openssh"),
            )
            for name, size, seconds in (("1M", mib, 0.47), ("16M", 16 * mib, 0.65))
        ),
        Result("smb", "pysmb", "upload", "-", 0, 0, error="connection refused by 127.0.0.1:4445"),
    )
    run = Run(
        id=None,
        meta={"started_utc": "2026-11-21T00:00:00Z", "finished_utc": "2026-11-21T00:01:00Z"},
        baseline=Baseline(
            up_bytes_per_s=3e9, down_bytes_per_s=3.5e9, rtt_ms=0.03, window_bytes=4 << 20, details={"rtt_min_ms": 0.02}
        ),
        results=rows,
    )
    return run.explained(explain(run, "127.0.0.1"))


def test_a_new_document_round_trips_key_for_key(tmp_path: Path) -> None:
    run = _new_run()
    doc = json.loads(json.dumps(run.to_json()))
    assert_valid_run_document(doc)
    assert Run.from_json(doc).to_json() == doc
    rsync, small, large, failed = doc["results"]
    assert rsync["details"]["files_in_flight"] is None  # schema 1's "streams the set"
    assert small["details"]["fixed_cost_s"] == large["details"]["fixed_cost_s"] > 0.4  # both sizes, one fit
    assert [b["label"] for b in small["details"]["bounds"]] == ["raw-tcp", "requests"]
    assert [b["label"] for b in rsync["details"]["bounds"]] == ["raw-tcp", "cpu"]  # streamed: no per-file bound
    small_rate = small["samples"][0]["bytes"] / small["samples"][0]["seconds"]
    # the fixed cost per copy (≈0.46 s) turns raw TCP into a ceiling of about the rate a 1 MiB copy reached
    assert "per copy" in small["bound_explanation"] and rsync["bound"] == "unexplained"
    assert small["bound"] == "raw-tcp" and small["pct_of_tcp"] == pytest.approx(100 * small_rate / 3.5e9)
    assert failed["details"] == {} and failed["bound"] is None and "bounds" not in failed["details"]
    assert doc["warnings"][0].startswith("loopback:") and any("fixed per copy" in w for w in doc["warnings"])
    # the database keeps the same document
    with Store(tmp_path / "new.db") as store:
        run_id = store.begin_run(dict(run.meta))
        store.save_baseline(run_id, run.baseline)
        for idx, row in enumerate(run.results):  # as measured, then again with the explanation
            store.save_result(run_id, idx, row)
        for idx, (row, why) in enumerate(run.explained_rows()):
            store.save_result(run_id, idx, row, why)
        assert run.explanation is not None and run.explanation.verdict
        store.finish_run(
            run_id, str(run.meta["finished_utc"]), list(run.warnings), verdict=list(run.explanation.verdict)
        )
        loaded = store.load(run_id)
    assert loaded.to_json() == {**doc, "run": {**doc["run"], "id": run_id}}
    assert loaded.results == run.results


def test_rows_and_runs_are_frozen_and_explaining_changes_nothing() -> None:
    run = _new_run()
    row = run.results[1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.error = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.explanation = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.details.cipher = "none"  # type: ignore[misc]
    assert isinstance(row.samples, tuple) and isinstance(run.results, tuple) and isinstance(run.warnings, tuple)
    # lists given by a caller become tuples: the caller's list can no longer change the run
    mine = list(run.results)
    listed = Run(id=1, meta={}, baseline=Baseline(), results=mine)  # type: ignore[arg-type]
    mine.clear()
    assert len(listed.results) == 4
    unexplained = dataclasses.replace(run, explanation=None, warnings=())
    before = copy.deepcopy(unexplained.to_json())
    again = explain(unexplained, "127.0.0.1")
    assert unexplained.to_json() == before  # nothing written onto the rows
    assert again == run.explanation and unexplained.explanation is None
    with pytest.raises(ValueError, match="3 rows for 4 rows"):
        dataclasses.replace(run, explanation=Explanation(rows=again.rows[:3]))


@pytest.mark.parametrize("label", [e.label for e in registry.select("all")])
def test_every_client_reports_typed_details_that_round_trip(label: str) -> None:
    # the class itself, also where this platform cannot run it (CIFS, macOS mounts): details() needs no server
    module_name, _, class_name = registry.select(label)[0].target.partition(":")
    client_class = getattr(importlib.import_module(module_name), class_name)
    client = client_class(Target("127.0.0.1", Credentials("u", "p")))
    try:
        details = client.details()
    finally:
        client.close()
    assert isinstance(details, ClientDetails) and details.unknown == {}
    doc = json.loads(json.dumps(details.to_json()))
    assert ClientDetails.from_json(doc) == details
    assert all(value is not None for key, value in doc.items() if key != "files_in_flight")


def test_details_of_another_version_are_kept_aside_never_misread() -> None:
    odd = {"request_bytes": "64K", "requests_in_flight": True, "cipher": "aes128-ctr", "streams_sets": True, "new": 1}
    details = ClientDetails.from_json(odd)
    assert details.request_bytes is None and details.requests_in_flight is None and details.streams_sets is False
    assert details.cipher == "aes128-ctr"
    assert details.unknown == {"request_bytes": "64K", "requests_in_flight": True, "streams_sets": True, "new": 1}
    assert details.to_json() == odd


def test_a_stock_runs_scratch_left_behind_is_found_again_until_removed(tmp_path: Path) -> None:
    # A run whose scratch directory could not be removed at its end says "the next run tries again": the store
    # must keep offering it to the next run, finished or not, until its meta says scratch_removed.
    stock = {"server": {"kind": "stock", "url": "sftp://nas/x", "scratch": "workbench-0123456789ab"}}
    with Store(tmp_path / "runs.db") as store:
        left = store.begin_run(copy.deepcopy(stock))
        store.finish_run(left, "2026-11-24T00:00:00Z", [], copy.deepcopy(stock))
        cleaned = store.begin_run(copy.deepcopy(stock))
        store.finish_run(cleaned, "2026-11-24T00:00:00Z", [], {**copy.deepcopy(stock), "scratch_removed": True})
        served = store.begin_run({"server": {"kind": "served"}})
        store.finish_run(served, "2026-11-24T00:00:00Z", [], {"server": {"kind": "served"}})
        going = store.begin_run({"server": {"kind": "served"}})
        assert [run_id for run_id, _ in store.unfinished_runs()] == [left, going]
        store.update_meta(left, {**stock, "scratch_removed": True})
        assert [run_id for run_id, _ in store.unfinished_runs()] == [going]

"""Unit tests for pure logic: sizes, statistics, results documents, the table model, config, credentials."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from pathlib import Path

import pytest

from tests.schema_check import assert_valid_run_document
from workbench.core.config import load_toml
from workbench.core.results import Baseline, Explanation, Result, RowExplanation, Run, Sample
from workbench.core.stats import find_stalls, summarize
from workbench.fixtures import generate
from workbench.fixtures.manifest import hash_file
from workbench.protocols.base import listed_name
from workbench.protocols.details import ClientDetails
from workbench.server.confine import ServedRoot
from workbench.shared import credentials as creds_mod
from workbench.shared.errors import AuthError, NotFoundError, UsageError, WorkbenchError
from workbench.shared.sizes import format_size, parse_duration_ms, parse_rate, parse_size, parse_sizes, parse_small_set


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4K", 4096), ("10M", 10 << 20), ("2G", 2 << 30), ("1.5K", 1536), ("512", 512), ("16MiB", 16 << 20)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "12Q", "-4K", "K", "0", "0.3", "1e3"])
def test_parse_size_rejects_garbage_with_a_hint(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_size(text)
    assert "e.g." in info.value.hint


def test_size_lists_sets_rates_and_times() -> None:
    assert parse_sizes("4K,10M,2G") == [4096, 10 << 20, 2 << 30]
    small = parse_small_set("1000x16K")
    assert (small.count, small.size, small.name, small.total) == (1000, 16384, "1000x16K", 1000 * 16384)
    assert format_size(16 << 20) == "16M" and format_size(1536) == "1.5K"
    assert parse_rate("533mbit") == 533_000_000 and parse_rate("1gbit") == 1_000_000_000
    assert parse_duration_ms("2.8ms") == pytest.approx(2.8) and parse_duration_ms("1s") == 1000
    with pytest.raises(UsageError):
        parse_small_set("x16K")
    with pytest.raises(UsageError):
        parse_rate("fast")


def test_summary_statistics() -> None:
    s = summarize([100.0, 200.0, 300.0])
    assert s is not None
    assert (s.n, s.median, s.mean, s.minimum, s.maximum) == (3, 200.0, 200.0, 100.0, 300.0)
    assert s.stdev == pytest.approx(100.0)
    one = summarize([5.0])
    assert one is not None and one.stdev is None  # one value has no spread
    assert summarize([]) is None


def test_stalls_are_mid_copy_quiet_runs_longer_than_the_clients_rhythm() -> None:
    steady = [100] * 10
    assert find_stalls([*steady, 0, 0, 0, 0, *steady]) == [(10, 4)]
    assert find_stalls([*steady, 0, *steady]) == []  # one quiet slot is noise
    assert find_stalls([0, 0, 0, *steady, 0, 0, 0]) == []  # ramp-up and the quiet tail are not stalls
    assert find_stalls([0, 0, 0, 0, 0, *steady]) == []  # nor is session set-up before the first bytes
    # a client reporting every third slot (large requests) is not stalling between its reports
    rhythm = [300, 0, 0] * 8
    assert find_stalls(rhythm) == []
    assert find_stalls([*rhythm, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, *rhythm]) == [(22, 12)]  # 2 rhythm zeros + 10


def _row() -> Result:
    samples = [
        Sample(bytes=100_000_000, seconds=2.0, verified=True, intervals=(5, 50, 50, 0, 0, 0, 50, 50, 5)),
        Sample(bytes=100_000_000, seconds=1.0, verified=True),
        Sample(bytes=100_000_000, seconds=4.0, verified=True),
    ]
    return Result("http", "aiohttp", "download", "16M", 100_000_000, 1, samples=samples)


def test_result_recomputes_from_raw_samples() -> None:
    row = _row()
    assert row.median_bytes_per_s == pytest.approx(50e6)
    doc = row.to_json()
    assert doc["median_bytes_per_s"] == pytest.approx(50e6)
    assert [s["bytes"] / s["seconds"] for s in doc["samples"]] == [50e6, 100e6, 25e6]
    assert doc["verified"] is True and doc["error"] is None and doc["stalls"] == 1
    again = Result.from_json(json.loads(json.dumps(doc)))
    assert again.median_bytes_per_s == row.median_bytes_per_s and again.samples[0].intervals == (
        5,
        50,
        50,
        0,
        0,
        0,
        50,
        50,
        5,
    )


def test_a_failed_sample_is_kept_but_not_counted() -> None:
    """The runner marking a row when a real copy fails: tests/test_run_faults_rows.py."""
    row = dataclasses.replace(_row(), samples=(*_row().samples, Sample(bytes=10, seconds=0.1, error="connection lost")))
    # counted, the 100 B/s sample would move the median of four to 37.5e6
    assert row.median_bytes_per_s == pytest.approx(50e6) and row.summary is not None and row.summary.n == 3
    doc = row.to_json()
    assert len(doc["samples"]) == 4 and doc["samples"][-1]["error"] == "connection lost"
    assert doc["verified"] is True  # the three good copies verified; the failed one is not a mismatch


def test_run_document_has_the_versioned_shape() -> None:
    run = Run(
        id=7,
        meta={"started_utc": "2026-11-21T00:00:00Z"},
        baseline=Baseline(up_bytes_per_s=1e8, down_bytes_per_s=2e8, rtt_ms=2.8),
        results=(_row(),),
    )
    doc = json.loads(json.dumps(run.to_json()))
    assert_valid_run_document(doc)
    assert isinstance(doc["schema"], int)
    assert doc["run"]["id"] == 7
    assert {"up_bytes_per_s", "down_bytes_per_s", "rtt_ms"} <= set(doc["baseline"])
    first = doc["results"][0]
    for key in (
        "protocol",
        "client",
        "direction",
        "file_set",
        "bytes",
        "samples",
        "median_bytes_per_s",
        "pct_of_tcp",
        "verified",
        "error",
        "ceiling_bytes_per_s",
        "bound",
    ):
        assert key in first
    assert Run.from_json(doc).results[0].median_bytes_per_s == pytest.approx(50e6)


def test_table_model_shows_failed_and_unavailable_rows() -> None:
    from io import StringIO

    from rich.console import Console

    from workbench.cli.report import render_run

    good = _row()
    bad = Result("smb", "pysmb", "upload", "16M", 1, 1, error="connection refused by 10.0.0.2:4445")
    gone = Result("afp", "mount_afp", "upload", "-", 0, 0, error="unavailable: mount_afp is macOS only")
    why = RowExplanation(pct_of_tcp=50.0, bound="requests", ceiling_bytes_per_s=23.4e6)
    run = Run(
        id=1,
        meta={},
        baseline=Baseline(up_bytes_per_s=1e8, down_bytes_per_s=1e8),
        results=(good, bad, gone),
        explanation=Explanation(rows=(why, RowExplanation(), RowExplanation())),
    )
    # the default shows Mbit/s (the ceiling too: 23.4 MB/s is 187 Mbit/s), --wide MB/s as well
    for wide, rate, bound in ((False, "400", "requests 187"), (True, "50.0", "requests 23")):
        out = StringIO()
        render_run(Console(file=out, width=250), run, wide=wide)
        text = out.getvalue()
        assert "http/aiohttp" in text and f" {rate} " in text and bound in text
        assert "connection refused" in text and "failed" in text
        assert "unavailable: mount_afp is macOS only" in text


def test_toml_config_errors_are_clean(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("protocols = [unclosed")
    with pytest.raises(UsageError, match="malformed config"):
        load_toml(bad)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('colour = "blue"\n')
    with pytest.raises(UsageError, match="unknown key"):
        load_toml(unknown)
    with pytest.raises(NotFoundError):
        load_toml(tmp_path / "missing.toml")
    good = tmp_path / "good.toml"
    good.write_text('host = "127.0.0.1"\nrepeat = 5\n[ports]\nhttp = 9000\n')
    assert load_toml(good) == {"host": "127.0.0.1", "repeat": 5, "ports": {"http": 9000}}


def test_credentials_file_is_private_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state" / "credentials.json"
    first = creds_mod.load_or_create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert creds_mod.load_or_create(path) == first
    assert first.password not in repr(first)  # never printed by accident
    monkeypatch.setenv(creds_mod.ENV_PASSWORD, "from-env")
    assert creds_mod.resolve(None, path).password == "from-env"
    assert creds_mod.for_server(tmp_path / "unused.json").password == "from-env"
    assert not (tmp_path / "unused.json").exists()  # a password from the environment is not written down
    monkeypatch.delenv(creds_mod.ENV_PASSWORD)
    with pytest.raises(AuthError):
        creds_mod.resolve(None, tmp_path / "nothing.json")


def test_confine_refuses_escapes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "files").mkdir(parents=True)
    os.symlink("/etc", root / "files" / "link")
    (root / "files" / "a.bin").write_bytes(b"a")
    with ServedRoot(root) as served:
        os.close(served.open_file("files/a.bin", os.O_RDONLY))
        for sneaky in ("../x", "files/../../x", "files/link/passwd", "a\x00b"):
            with pytest.raises(OSError):
                served.open_file(sneaky, os.O_RDONLY)


def test_files_make_is_deterministic_and_keeps_valid_files(tmp_path: Path) -> None:
    a = generate.make(tmp_path / "a", sizes=[100_000], small_sets=[parse_small_set("5x1K")], seed=3)
    b = generate.make(tmp_path / "b", sizes=[100_000], small_sets=[parse_small_set("5x1K")], seed=3)
    assert a.manifest.entries() == b.manifest.entries()  # same seed, same bytes, on every host
    entry = a.manifest.entries()["file-97.7K.bin"]
    assert hash_file(tmp_path / "a" / entry.name) == entry.xxh3_128
    again = generate.make(tmp_path / "a", sizes=[100_000], small_sets=[parse_small_set("5x1K")], seed=3)
    assert again.written_bytes == 0 and again.kept_bytes == a.written_bytes
    (tmp_path / "a" / entry.name).write_bytes(b"corrupt")
    healed = generate.make(tmp_path / "a", sizes=[100_000], small_sets=[parse_small_set("5x1K")], seed=3)
    assert healed.written_bytes == 100_000


def test_profiles_compress_as_documented(tmp_path: Path) -> None:
    import zlib

    for profile, low, high in (("random", 0.99, 1.01), ("text", 2.5, 4.0), ("zero", 100, 1e9)):
        report = generate.make(tmp_path / profile, sizes=[1 << 20], profile=profile)
        data = (tmp_path / profile / report.manifest.sets[0].files[0].name).read_bytes()
        ratio = len(data) / len(zlib.compress(data, 6))
        assert low <= ratio <= high, (profile, ratio)


def test_text_files_are_the_same_bytes_for_a_seed_and_name() -> None:
    """Both hosts make the same files from the seed: the text profile's bytes are pinned (its word pool is made
    once per seed and shared by every file, which must not change a byte)."""
    import hashlib

    from workbench.fixtures import profiles

    digest = hashlib.sha256()
    for name in ("a", "b"):
        for piece in profiles.chunks("text", 300_000, 7, name):
            digest.update(piece)
    assert digest.hexdigest() == "d343032c6db5883ef40e66758d23fa4306fc16a6443cee702f0266199ed88dcc"


def test_large_files_hash_as_written(tmp_path: Path) -> None:
    """Files larger than the writer's buffer ring (the bytes on disk are the bytes hashed)."""
    size = 10 * generate.CHUNK + 12345
    for seed in (1, 2):  # the second pass overwrites in place
        report = generate.make(tmp_path, sizes=[size], seed=seed)
        entry = report.manifest.sets[0].files[0]
        assert (tmp_path / entry.name).stat().st_size == size
        assert hash_file(tmp_path / entry.name) == entry.xxh3_128


def test_explain_fills_share_of_tcp_and_the_binding_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:

    from workbench.core.explain import explain
    from workbench.protocols import exchanges

    # the small set's ceiling here is the declared one (1 RTT per file), not ftplib's counted pattern
    monkeypatch.delitem(exchanges.COUNTED, ("ftp/ftplib", "upload"))

    pysmb = Result(
        "smb",
        "pysmb",
        "download",
        "128M",
        1,
        1,
        samples=[Sample(bytes=15_000_000, seconds=1.0)],
        details=ClientDetails(request_bytes=65536, requests_in_flight=1),
    )
    fast = Result("http", "aiohttp", "download", "128M", 1, 1, samples=[Sample(bytes=61_000_000, seconds=1.0)])
    small = Result(
        "ftp", "ftplib", "upload", "200x64K", 200 * 65536, 200, samples=[Sample(bytes=200 * 65536, seconds=4.0)]
    )
    streamed = Result(
        "rsync",
        "daemon",
        "upload",
        "200x64K",
        200 * 65536,
        200,
        samples=[Sample(bytes=13107200, seconds=0.4)],
        details=ClientDetails(streams_sets=True),
    )
    busy = Result(
        "smb", "smbprotocol", "upload", "16M", 1, 1, samples=[Sample(bytes=20e6, seconds=1.0, client_cpu_s=0.97)]
    )
    run = Run(
        id=1,
        meta={},
        baseline=Baseline(up_bytes_per_s=62e6, down_bytes_per_s=62e6, rtt_ms=2.9, window_bytes=6 << 20),
        results=(pysmb, fast, small, streamed, busy),
        link={"rate_bits_per_s": 533e6, "expected_goodput_bytes_per_s": 62.7e6},
    )
    before = run.to_json()
    explanation = explain(run, "10.77.0.2")
    assert run.to_json() == before and run.explanation is None  # the run is a value: explaining it changes nothing
    pysmb_why, fast_why, small_why, streamed_why, busy_why = explanation.rows
    assert pysmb_why.pct_of_tcp == pytest.approx(100 * 15 / 62)
    # one 64 KiB request per round trip plus its own serialisation at the path's rate (the lower of link and raw TCP)
    assert pysmb_why.bound == "requests"
    assert pysmb_why.ceiling_bytes_per_s == pytest.approx(65536 / (0.0029 + 65536 / 62e6))
    # the raw TCP measured this way (62 MB/s) is just under the link's expected goodput (62.7)
    assert fast_why.bound == "raw-tcp" and fast_why.ceiling_bytes_per_s == pytest.approx(62e6)
    # 3.3 MB/s against a per-file ceiling of 1 RTT + 64 KiB per file (16.6 MB/s): no ceiling within 25 %
    assert small_why.bound == "unexplained" and small_why.ceiling_bytes_per_s == pytest.approx(65536 / 0.003957, 1e-3)
    assert "per-file" in (small_why.bound_explanation or "") and "files/s" in (small_why.bound_explanation or "")
    assert small_why.per_file_s == pytest.approx((4.0 - 200 * 65536 / 62e6) / 200, abs=1e-6)
    # rsync streams a set: no per-file ceiling to blame; 33 MB/s is half the link, which explains nothing
    assert streamed_why.bound == "unexplained" and not any(b.label == "per-file" for b in streamed_why.bounds or ())
    assert busy_why.bound == "cpu"
    assert explanation.notes and "CPU-bound" in explanation.notes[0]
    explained = run.explained(explanation)
    assert explained.warnings == explanation.notes and explained.explanation_of(0) is pysmb_why
    assert explained.to_json()["results"][0]["bound"] == "requests"


def test_fixed_cost_fit_separates_session_start_from_streaming() -> None:
    from workbench.core import fixedcost

    mib = 1 << 20
    # 0.49 s per copy plus 58 MB/s, as OpenSSH sftp on the wifi-ac lab, with a little noise
    points = [(16 * mib, 0.49 + 16 * mib / 58e6 + d) for d in (0.01, -0.01)]
    points += [(128 * mib, 0.49 + 128 * mib / 58e6 + d) for d in (0.02, -0.02)]
    cost = fixedcost.fit(points)
    assert cost is not None and cost.sizes == (16 * mib, 128 * mib)
    assert cost.fixed_s == pytest.approx(0.49, abs=0.01)
    assert cost.streaming_bytes_per_s == pytest.approx(58e6, rel=0.01)
    assert cost.share_of(16 * mib) == pytest.approx(0.49 / (0.49 + 16 * mib / 58e6), rel=0.02)
    # nothing to claim: one size, sizes too close, a fixed part lost in noise, or a negative one
    assert fixedcost.fit([(16 * mib, 0.8), (16 * mib, 0.81)]) is None
    assert fixedcost.fit([(16 * mib, 0.8), (24 * mib, 1.0)]) is None
    assert fixedcost.fit([(16 * mib, 16 * mib / 60e6 + 0.005), (128 * mib, 128 * mib / 60e6)]) is None
    assert fixedcost.fit([(16 * mib, 0.2), (128 * mib, 2.5)]) is None


def test_explain_notes_the_fixed_cost_of_per_copy_clients() -> None:
    from workbench.cli.summary import notes as row_notes
    from workbench.core.explain import explain

    mib = 1 << 20
    setup = ClientDetails(timed_includes_setup=True)

    def row(size: int, name: str, seconds: float) -> Result:
        samples = [Sample(bytes=size, seconds=seconds)]
        return Result("sftp", "openssh", "upload", name, size, 1, samples=samples, details=setup)

    small, large = row(16 * mib, "16M", 0.773), row(128 * mib, "128M", 2.779)
    streaming = Result("http", "aiohttp", "upload", "16M", 16 * mib, 1, samples=[Sample(bytes=16 * mib, seconds=0.27)])
    run = Run(id=1, meta={}, baseline=Baseline(), results=(small, large, streaming))
    explanation = explain(run, "10.77.0.2")
    notes = [n for n in explanation.notes if "fixed per copy" in n]
    assert len(notes) == 1 and notes[0].startswith("sftp/openssh upload: ≈48")
    small_why, large_why, streaming_why = explanation.rows
    assert small_why.fixed_cost_s == large_why.fixed_cost_s == pytest.approx(0.486, abs=0.01)
    assert large_why.streaming_bytes_per_s == pytest.approx(58.5e6, rel=0.01)
    assert streaming_why.fixed_cost_s is None  # one size: nothing to fit
    assert "fixed_cost_s" not in run.explained(explanation).to_json()["results"][2]["details"]
    assert any(n.startswith("incl. session setup ≈48") for n in row_notes(small, small_why, 2.8))


def test_files_make_never_writes_through_a_planted_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"canary")
    directory = tmp_path / "files"
    directory.mkdir()
    (directory / generate.file_name(4096)).symlink_to(outside)
    (directory / "manifest.tmp").symlink_to(outside)
    with pytest.raises((OSError, WorkbenchError)):  # the test file's own name is refused (ELOOP)
        generate.make(directory, [4096], [], "random", 1)
    (directory / generate.file_name(4096)).unlink()
    generate.make(directory, [4096], [], "random", 1)  # the manifest's temporary name is replaced, not followed
    assert outside.read_bytes() == b"canary"
    assert not (directory / "manifest.tmp").exists()


def test_a_run_whose_copies_would_take_hours_is_refused_before_the_first_copy() -> None:
    from types import SimpleNamespace

    from rich.console import Console

    from workbench.cli.progress import RichObserver
    from workbench.core.runner import _check_copy_estimate
    from workbench.fixtures.manifest import FileEntry, FileSet, Manifest
    from workbench.protocols import registry

    both = ("upload", "download")
    plan = SimpleNamespace(
        entries=registry.select("http/aiohttp"), warmup=1, repeat=3, directions=both, copies_per_row=4
    )
    gigabyte = Manifest(1, "random", [FileSet("1G", (FileEntry("f1G.bin", 10**9, "random", "0" * 32),))])
    console = Console(record=True, width=200)
    observer = RichObserver(console)
    slow = Baseline(
        up_bytes_per_s=125_000.0, down_bytes_per_s=125_000.0
    )  # 1 Mbit/s: 8 copies of 1 GB take 17.8 h at least
    with pytest.raises(UsageError) as info:
        _check_copy_estimate(plan, gigabyte, slow, observer)  # type: ignore[arg-type]
    assert "17.8 h" in info.value.message and "8 copies" in info.value.message
    fast = Baseline(up_bytes_per_s=1e8, down_bytes_per_s=1e8)  # 800 Mbit/s: 80 s
    _check_copy_estimate(plan, gigabyte, fast, observer)  # type: ignore[arg-type]
    assert "at least 1 min" in console.export_text()


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "/etc", "../x", "nul\0byte"])
def test_a_listed_name_that_is_not_one_entry_is_refused(name: str) -> None:
    # remove_tree joins a server's listed names onto the directory it deletes: these would lead elsewhere
    with pytest.raises(WorkbenchError, match="not a plain name"):
        listed_name(name, "the server")


def test_listed_names_keep_what_a_file_name_may_hold() -> None:
    for name in ("a b", "star*", "q'uote", "ünï", "..hidden", "back\\slash"):
        assert listed_name(name, "the server") == name
    with pytest.raises(WorkbenchError):
        listed_name("back\\slash", "the SMB server", separators="\\/")

"""`workbench compare A B`: rows matched across two runs, each change tested against the copies' noise, the
run-level warnings (the network, the hosts or the plan changed), and the terminal, Markdown and CLI forms.

The runs are synthetic values: the comparison is pure logic over what two runs stored.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from workbench.cli import app as cli
from workbench.cli.compare import HEADERS, change_text, compare_markdown, render_compare
from workbench.core.comparison import NETWORK, RAW_TCP, RAW_TCP_TOLERANCE, compare_runs
from workbench.core.noise import FASTER, SLOWER, TOO_FEW, WITHIN_NOISE
from workbench.core.results import Baseline, Result, Run, Sample
from workbench.core.store import Store
from workbench.shared.errors import ExitCode

RATE = 60e6  # bytes per second
SIZE = 16 << 20
# Five copies scattered by a few per cent either way, as a lab row on a quiet machine is.
SCATTER = (0.0, 0.021, -0.018, 0.034, -0.027)
LINK: dict[str, Any] = {
    "preset": "wifi-ac",
    "rate_bits_per_s": 533_000_000,
    "rate_up_bits_per_s": 533_000_000,
    "rate_down_bits_per_s": 533_000_000,
    "rtt_ms": 2.81,
    "mtu": 1500,
    "loss": 0.0,
    "cc": "bbr",
    "client_window_bytes": None,
    "stall": None,
    "requested": {"host_buffers": "raised"},
}
HOST = {
    "hostname": "wb-client",
    "kernel": "6.1.0-18-amd64",
    "tcp": {"tcp_rmem": "4096\t131072\t6291456", "tcp_wmem": "4096\t16384\t4194304", "congestion_control": "bbr"},
}
META: dict[str, Any] = {
    "target": {"host": "10.77.0.2", "ports": {"http": 8080}},
    "client": HOST,
    "server": {**HOST, "hostname": "wb-server"},
    "plan": {"sizes": [SIZE], "small_sets": [], "profile": "random", "repeat": 5, "warmup": 1},
}


def _row(label: str, direction: str, rates: Sequence[float], file_set: str = "16M", error: str | None = None) -> Result:
    protocol, client = label.split("/")
    samples = tuple(Sample(bytes=SIZE, seconds=SIZE / rate, verified=True) for rate in rates)
    return Result(protocol, client, direction, file_set, SIZE, 1, samples=samples, error=error)


def _run(
    run_id: int,
    rows: Sequence[Result],
    up_bytes_per_s: float = 62e6,
    down_bytes_per_s: float = 63e6,
    link: Mapping[str, Any] | None = LINK,
    meta: Mapping[str, Any] = META,
) -> Run:
    baseline = Baseline(up_bytes_per_s=up_bytes_per_s, down_bytes_per_s=down_bytes_per_s, rtt_ms=2.9)
    return Run(run_id, dict(meta), baseline, tuple(rows), link=dict(link) if link is not None else None)


def _scattered(centre: float, scatter: Sequence[float] = SCATTER) -> list[float]:
    return [centre * (1.0 + s) for s in scatter]


def _by_key(comparison: Any) -> dict[tuple[str, str, str], Any]:
    return {(r.client, r.direction, r.file_set): r for r in comparison.rows}


# --- rows ----------------------------------------------------------------------------------------------------


def test_the_same_copies_in_another_order_are_within_noise() -> None:
    rates = _scattered(RATE)
    before = _run(1, [_row("http/aiohttp", "download", rates)])
    after = _run(2, [_row("http/aiohttp", "download", rates[::-1])])
    (row,) = compare_runs(before, after).rows
    assert row.verdict == WITHIN_NOISE
    assert row.change.ratio == pytest.approx(1.0)
    assert row.change.low is not None and row.change.high is not None
    assert row.change.low < 1.0 < row.change.high
    assert (row.change.n_before, row.change.n_after) == (5, 5)
    assert row.before_bytes_per_s == row.after_bytes_per_s == pytest.approx(RATE)


def test_rows_drawn_from_one_distribution_are_mostly_within_noise() -> None:
    rng = random.Random(7)
    labels = [f"http/client{i}" for i in range(20)]

    def draw() -> list[float]:
        return [RATE * rng.lognormvariate(0.0, 0.04) for _ in range(5)]

    before = _run(1, [_row(label, "upload", draw()) for label in labels])
    after = _run(2, [_row(label, "upload", draw()) for label in labels])
    comparison = compare_runs(before, after)
    counts = comparison.counts()
    # a 95 % test calls about one row in twenty changed when nothing changed; three of twenty is already rare
    assert counts[WITHIN_NOISE] >= 17, counts
    assert counts[WITHIN_NOISE] + counts[FASTER] + counts[SLOWER] == 20


def test_a_40_percent_drop_over_five_copies_is_slower() -> None:
    before = _run(1, [_row("ftp/ftplib", "upload", _scattered(RATE))])
    after = _run(2, [_row("ftp/ftplib", "upload", _scattered(0.6 * RATE, SCATTER[::-1]))])
    (row,) = compare_runs(before, after).rows
    assert row.verdict == SLOWER
    assert row.change.ratio == pytest.approx(0.6, rel=0.02)
    assert row.change.high is not None and row.change.high < 1.0  # the interval excludes no change
    assert row.change.low is not None and row.change.low < 0.6 < row.change.high
    text = change_text(row.change)
    assert text.startswith("-40.") and "…" in text, text


def test_the_same_drop_the_other_way_is_faster() -> None:
    before = _run(1, [_row("ftp/ftplib", "upload", _scattered(0.6 * RATE))])
    after = _run(2, [_row("ftp/ftplib", "upload", _scattered(RATE))])
    (row,) = compare_runs(before, after).rows
    assert row.verdict == FASTER and row.change.low is not None and row.change.low > 1.0


def test_rows_follow_the_later_run_then_the_rows_only_the_earlier_had() -> None:
    before = _run(
        1,
        [
            _row("smb/pysmb", "upload", _scattered(20e6)),
            _row("http/aiohttp", "upload", _scattered(RATE)),
        ],
    )
    after = _run(
        2,
        [
            _row("sftp/paramiko", "download", _scattered(30e6)),
            _row("http/aiohttp", "upload", _scattered(RATE)),
        ],
    )
    comparison = compare_runs(before, after)
    assert [(r.client, r.direction) for r in comparison.rows] == [
        ("sftp/paramiko", "download"),
        ("http/aiohttp", "upload"),
        ("smb/pysmb", "upload"),
    ]
    new, both, gone = comparison.rows
    assert new.before_bytes_per_s is None and new.after_bytes_per_s == pytest.approx(30e6)
    assert new.verdict == TOO_FEW and new.notes == ("not in run 1",)
    assert gone.after_bytes_per_s is None and gone.before_bytes_per_s == pytest.approx(20e6)
    assert gone.verdict == TOO_FEW and gone.notes == ("not in run 2",)
    assert both.notes == () and both.verdict == WITHIN_NOISE
    assert comparison.counts() == {FASTER: 0, SLOWER: 0, WITHIN_NOISE: 1, TOO_FEW: 2}
    assert comparison.summary() == "1 within noise, 2 too few samples of 3 rows"


def test_a_failed_row_is_compared_as_having_no_copies_and_says_why() -> None:
    before = _run(1, [_row("smb/pysmb", "download", _scattered(20e6))])
    after = _run(2, [_row("smb/pysmb", "download", [], error="connection refused by 10.77.0.2:445\nmore")])
    (row,) = compare_runs(before, after).rows
    assert row.verdict == TOO_FEW and row.change.ratio is None and row.after_bytes_per_s is None
    assert row.notes == ("failed in run 2: connection refused by 10.77.0.2:445",)


def test_rows_are_told_apart_by_file_set_and_direction() -> None:
    before = _run(
        1, [_row("http/curl", "upload", _scattered(RATE), "16M"), _row("http/curl", "upload", [5e6] * 3, "100x64K")]
    )
    after = _run(
        2, [_row("http/curl", "upload", _scattered(RATE), "16M"), _row("http/curl", "download", [5e6] * 3, "100x64K")]
    )
    keys = list(_by_key(compare_runs(before, after)))
    assert keys == [
        ("http/curl", "upload", "16M"),
        ("http/curl", "download", "100x64K"),
        ("http/curl", "upload", "100x64K"),
    ]


def test_raw_tcp_lines_give_the_ratio_of_one_probe_without_a_verdict() -> None:
    rows = [_row("http/aiohttp", "download", _scattered(RATE))]
    comparison = compare_runs(_run(1, rows, 62e6, 63e6), _run(2, rows, 31e6, 63e6))
    up, down = comparison.baseline_rows
    assert (up.client, up.direction, down.direction) == (RAW_TCP, "upload", "download")
    assert up.change.ratio == pytest.approx(0.5) and up.verdict == TOO_FEW  # one figure: nothing to test against
    assert (up.change.n_before, up.change.n_after) == (1, 1) and up.change.low is None
    assert down.change.ratio == pytest.approx(1.0)
    assert up.baseline and "no noise estimate" in up.notes[0]
    assert len(comparison.rows) == 1  # the raw-TCP lines are not rows: the counts leave them out


# --- warnings ------------------------------------------------------------------------------------------------


def _warnings(before: Run, after: Run) -> tuple[str, ...]:
    return compare_runs(before, after).warnings


ROWS = [_row("http/aiohttp", "download", _scattered(RATE))]


def test_nothing_changed_gives_no_warning() -> None:
    same_link = {**LINK, "rtt_ms": 2.83}  # the idle RTT is measured: 0.02 ms apart is the same link
    assert _warnings(_run(1, ROWS), _run(2, ROWS, 62e6 * 1.05, 63e6 * 0.96, link=same_link)) == ()
    assert _warnings(_run(1, ROWS, link=None), _run(2, ROWS, link=None)) == ()


@pytest.mark.parametrize("factor", [1 - RAW_TCP_TOLERANCE - 0.02, 1 + RAW_TCP_TOLERANCE + 0.02])
def test_raw_tcp_beyond_the_tolerance_is_warned_either_way(factor: float) -> None:
    (warning,) = _warnings(_run(1, ROWS), _run(2, ROWS, up_bytes_per_s=62e6 * factor))
    assert warning.startswith("raw TCP upload went from 62.0 to") and NETWORK in warning, warning
    assert f"{(factor - 1) * 100:+.1f} %" in warning


def test_a_baseline_only_one_run_has_is_warned() -> None:
    (warning,) = _warnings(_run(1, ROWS), _run(2, ROWS, down_bytes_per_s=None))  # type: ignore[arg-type]
    assert "run 1 has a raw-TCP download figure and run 2 none" in warning


def test_a_slower_link_is_warned_with_its_rates() -> None:
    slower = {**LINK, "rate_bits_per_s": 300_000_000, "rate_up_bits_per_s": 300_000_000}
    slower["rate_down_bits_per_s"] = 300_000_000
    warnings = _warnings(_run(1, ROWS), _run(2, ROWS, 35e6, 35e6, link=slower))
    link = [w for w in warnings if w.startswith("the lab link differs")]
    assert link == [f"the lab link differs (rate 533 → 300 Mbit/s): {NETWORK}."], warnings
    assert sum(w.startswith("raw TCP") for w in warnings) == 2  # and both directions' probes fell with it


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"rate_down_bits_per_s": 100_000_000}, "rate up 533 → 533, down 533 → 100 Mbit/s"),
        ({"rtt_ms": 40.2}, "idle RTT 2.81 → 40.20 ms"),
        ({"mtu": 9000}, "MTU 1500 → 9000"),
        ({"loss": 0.001}, "loss 0.0 → 0.001"),
        ({"cc": "cubic"}, "congestion control bbr → cubic"),
        ({"client_window_bytes": 65536}, "client window none → 64K"),
        ({"stall": "300 ms stalls, every 5 s, down"}, "stalls none → 300 ms stalls, every 5 s, down"),
        ({"preset": "wan"}, "preset wifi-ac → wan"),
        ({"requested": {"host_buffers": "default"}}, "host buffers raised → default"),
    ],
)
def test_each_link_setting_that_differs_is_named(change: dict[str, Any], needle: str) -> None:
    (warning,) = _warnings(_run(1, ROWS), _run(2, ROWS, link={**LINK, **change}))
    assert warning.startswith("the lab link differs (") and needle in warning and NETWORK in warning, warning


def test_a_link_setting_an_older_run_did_not_record_is_not_a_change() -> None:
    older = {k: v for k, v in LINK.items() if k not in ("stall", "client_window_bytes", "cc", "requested")}
    assert _warnings(_run(1, ROWS, link=older), _run(2, ROWS, link={**LINK, "cc": "cubic", "stall": "x"})) == ()


def test_one_run_in_the_lab_and_one_not_is_warned() -> None:
    (warning,) = _warnings(_run(1, ROWS, link=None), _run(2, ROWS))
    assert warning == f"run 2 ran in the lab and run 1 did not: {NETWORK}."


def test_another_far_host_is_warned() -> None:
    elsewhere = {**META, "target": {"host": "nas.local", "ports": {}}}
    (warning,) = _warnings(_run(1, ROWS, link=None), _run(2, ROWS, link=None, meta=elsewhere))
    assert "far host differs (10.77.0.2 → nas.local)" in warning and NETWORK in warning


def test_host_kernel_and_tcp_settings_are_warned_per_host() -> None:
    tuned = {**HOST, "tcp": {**HOST["tcp"], "tcp_rmem": "4096 131072 33554432", "congestion_control": "cubic"}}
    newer = {**HOST, "kernel": "6.1.0-21-amd64"}
    warnings = _warnings(_run(1, ROWS), _run(2, ROWS, meta={**META, "client": tuned, "server": newer}))
    client, server = warnings
    assert client.startswith("the client host changed (congestion_control bbr → cubic; tcp_rmem 4096 131072 6291456 →")
    assert "33554432" in client and "not the protocol" in client
    assert (
        server
        == "the server host changed (kernel 6.1.0-18-amd64 → 6.1.0-21-amd64): the host changed, not the protocol."
    )


def test_the_same_tcp_settings_written_with_other_whitespace_are_the_same() -> None:
    spaced = {**HOST, "tcp": {**HOST["tcp"], "tcp_rmem": "4096 131072 6291456"}}
    assert _warnings(_run(1, ROWS), _run(2, ROWS, meta={**META, "client": spaced})) == ()


def test_a_different_plan_is_warned() -> None:
    plan = {**META["plan"], "sizes": [8 << 20, 128 << 20], "profile": "text", "repeat": 3}
    (warning,) = _warnings(_run(1, ROWS), _run(2, ROWS, meta={**META, "plan": plan}))
    assert warning.startswith("the plans differ (sizes 16M → 8M,128M; profile random → text; repeat 5 → 3)")


# --- rendering -----------------------------------------------------------------------------------------------


def _mixed() -> tuple[Run, Run]:
    before = _run(
        1,
        [
            _row("http/aiohttp", "download", _scattered(RATE)),
            _row("ftp/ftplib", "upload", _scattered(RATE)),
            _row("smb/pysmb", "upload", _scattered(20e6)),
        ],
    )
    slower = {**LINK, "rate_bits_per_s": 300_000_000, "rate_up_bits_per_s": None, "rate_down_bits_per_s": None}
    after = _run(
        2,
        [
            _row("http/aiohttp", "download", _scattered(RATE, SCATTER[::-1])),
            _row("ftp/ftplib", "upload", _scattered(0.6 * RATE)),
            _row("http/curl", "download", _scattered(RATE)),
        ],
        up_bytes_per_s=35e6,
        link=slower,
    )
    return before, after


def test_markdown_has_one_table_line_per_compared_row() -> None:
    comparison = compare_runs(*_mixed())
    text = compare_markdown(comparison)
    table = [line for line in text.splitlines() if line.startswith("|")]
    compared = [*comparison.baseline_rows, *comparison.rows]
    assert len(table) == 2 + len(compared)  # the header, the alignment rule, then one line per row
    assert table[0].count("|") == len(HEADERS) + 1
    assert [cell.strip() for cell in table[1].strip("|").split("|")][2:5] == ["---", "---:", "---:"]  # figures right
    for line, row in zip(table[2:], compared, strict=True):
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells[0] == row.client and cells[6] == row.verdict and len(cells) == len(HEADERS)
    assert "| ftp/ftplib | up | 16M | 60.0 | 36.0 | -40.0 % (" in text
    for warning in comparison.warnings:
        assert f"- **warning:** {warning}" in text
    assert comparison.method in text and comparison.summary() in text


def test_the_terminal_shows_warnings_table_verdicts_and_the_method() -> None:
    comparison = compare_runs(*_mixed())
    console = Console(record=True, width=240, color_system="truecolor", file=io.StringIO())
    render_compare(console, comparison)
    text = console.export_text(clear=False)
    lines = text.splitlines()
    first_table_line = next(i for i, line in enumerate(lines) if "run 1 (before) → run 2 (after)" in line)
    warned = [i for i, line in enumerate(lines) if line.startswith("warning:")]
    assert len(warned) == len(comparison.warnings) >= 2 and max(warned) < first_table_line  # above the table
    ftp = next(line for line in lines if "ftp/ftplib" in line)
    assert "-40.0 % (" in ftp and SLOWER in ftp and "5/5" in ftp
    assert "Welch's t-test on log rates, 95 %" in text and "1 slower" in text
    styled = console.export_html(inline_styles=True)
    assert "slower</span>" in styled  # the verdict carries its colour


# --- the command ---------------------------------------------------------------------------------------------


def _store_run(store: Store, run: Run, schema: int = 2) -> int:
    run_id = store.begin_run(dict(run.meta))
    store.save_baseline(run_id, run.baseline)
    if run.link is not None:
        store.save_extra(run_id, link=dict(run.link))
    for idx, row in enumerate(run.results):
        store.save_result(run_id, idx, row)
    if schema == 1:  # rewritten as an older workbench stored it: every rate `*_bps`, in bytes per second
        baseline = _as_v1(run.baseline.to_json())
        link = {**_as_v1({k: v for k, v in (run.link or {}).items() if "bits" not in k})}
        link["rate_bps"] = (run.link or {})["rate_bits_per_s"] / 8
        store.db.execute(
            "UPDATE runs SET schema = 1, baseline = ?, link = ? WHERE id = ?",
            (json.dumps(baseline), json.dumps(link), run_id),
        )
        for idx, row in enumerate(run.results):
            store.db.execute(
                "UPDATE results SET doc = ? WHERE run_id = ? AND idx = ?",
                (json.dumps(_as_v1(row.to_json())), run_id, idx),
            )
        store.db.commit()
    store.finish_run(run_id, "2026-11-23T00:01:00Z", [])
    return run_id


def _as_v1(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k.replace("bytes_per_s", "bps").replace("stall_s", "stall_seconds"): _as_v1(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_as_v1(v) for v in value]
    return value


def test_the_command_prints_the_comparison_and_writes_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = _mixed()
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:
        first, second = _store_run(store, before, schema=1), _store_run(store, after)
    out = tmp_path / "compare.md"
    cli.main(["compare", str(first), str(second), "--db", str(db), "--markdown", str(out)])  # exit 0: no SystemExit
    printed = capsys.readouterr().out
    assert "ftp/ftplib" in printed and SLOWER in printed and "the lab link differs (rate 533 → 300" in printed
    markdown = out.read_text()
    assert markdown.startswith(f"## run {first} (before) → run {second} (after)")
    # the schema-1 run was read in schema 2: its rates and link compare with the new run's
    assert "| ftp/ftplib | up | 16M | 60.0 | 36.0 | -40.0 % (" in markdown
    assert "| raw TCP | up | mem | 62.0 | 35.0 | -43.5 % |" in markdown


def test_a_markdown_path_in_a_missing_directory_is_refused_before_comparing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["compare", "1", "2", "--db", str(tmp_path / "none.sqlite"), "--markdown", str(tmp_path / "no/x.md")])
    assert exited.value.code == ExitCode.NOT_FOUND
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "--markdown: directory" in err[0], err
    assert not (tmp_path / "none.sqlite").exists()  # refused before the database was opened

"""A fleet's pure logic: the barrier that starts steps, the aggregate and per-client rows built from what the
clients sent, their explanation, and the HOSTS file."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.core.fleet import (
    ALL_CLIENTS,
    Barrier,
    CopyEvent,
    MemberReport,
    aggregate_row,
    explain_fleet,
    fleet_rows,
    together_baseline,
)
from workbench.core.fleet_controller import read_inventory
from workbench.core.observe import COPY_STEP, STEP_BASELINE, STEP_PREPARE, TOGETHER_STEP
from workbench.core.results import INTERVAL_S, Baseline, Result, Sample
from workbench.shared.errors import NotFoundError, UsageError

T0 = 1_700_000_000.0
MB = 1_000_000


# ---------------------------------------------------------------- the barrier
def test_nothing_starts_until_every_live_member_waits() -> None:
    b = Barrier(["a", "b", "c"])
    b.wait("a", (COPY_STEP, 0, 0, 0, 0))
    b.wait("b", (COPY_STEP, 0, 0, 0, 0))
    assert b.release() is None  # c is still busy
    b.wait("c", (COPY_STEP, 0, 0, 0, 0))
    assert b.release() == ((COPY_STEP, 0, 0, 0, 0), ["a", "b", "c"])
    assert b.release() is None  # all three are running now


def test_preparing_files_and_the_baseline_alone_go_one_member_at_a_time_then_together_all_at_once() -> None:
    b = Barrier(["a", "b"])
    b.wait("a", STEP_PREPARE)
    b.wait("b", STEP_PREPARE)
    assert b.release() == (STEP_PREPARE, ["a"])
    assert b.release() is None  # a prepares; b waits for it
    b.wait("a", STEP_BASELINE)
    assert b.release() == (STEP_PREPARE, ["b"])  # the lower step first: b has not prepared yet
    b.wait("b", STEP_BASELINE)
    assert b.release() == (STEP_BASELINE, ["a"])
    b.wait("a", (TOGETHER_STEP, 0))
    assert b.release() == (STEP_BASELINE, ["b"])
    b.wait("b", (TOGETHER_STEP, 0))
    assert b.release() == ((TOGETHER_STEP, 0), ["a", "b"])


def test_a_member_that_skipped_steps_waits_ahead_until_the_others_get_there() -> None:
    b = Barrier(["a", "b"])
    b.wait("a", (COPY_STEP, 0, 0, 0, 1))
    b.wait("b", (COPY_STEP, 1, 0, 0, 0))  # b's row failed: it skipped the rest of row 0
    assert b.release() == ((COPY_STEP, 0, 0, 0, 1), ["a"])
    b.wait("a", (COPY_STEP, 1, 0, 0, 0))
    assert b.release() == ((COPY_STEP, 1, 0, 0, 0), ["a", "b"])


def test_a_member_that_is_gone_holds_nobody_back() -> None:
    b = Barrier(["a", "b"])
    b.wait("a", (COPY_STEP, 0, 0, 0, 0))
    assert b.release() is None
    b.gone("b")
    assert b.release() == ((COPY_STEP, 0, 0, 0, 0), ["a"])
    assert b.live == ["a"]


# ---------------------------------------------------------------- rows
def _copy(host: str, attempt: int, start_s: float, rate: float, seconds: float, error: str | None = None) -> CopyEvent:
    slots = round(seconds / INTERVAL_S)
    intervals = (round(rate * INTERVAL_S),) * slots
    sample = Sample(bytes=sum(intervals), seconds=seconds, verified=error is None, intervals=intervals, error=error)
    return CopyEvent(host, (COPY_STEP, 0, 1, 0, attempt), "http/aiohttp", "download", "16M", start_s, sample)


def _row(host: str, rate: float = 10 * MB, error: str | None = None) -> Result:
    samples = () if error else (Sample(bytes=int(rate), seconds=1.0, verified=True),)
    return Result("http", "aiohttp", "download", "16M", int(rate), 1, samples=samples, error=error)


def test_the_aggregate_counts_only_the_window_when_every_client_copied() -> None:
    # a runs 0-2 s at 10 MB/s, b starts 0.5 s late and runs to 2.5 s at 10 MB/s: the window is 0.5-2 s
    events = [_copy("a", 1, T0, 10 * MB, 2.0), _copy("b", 1, T0 + 0.5, 10 * MB, 2.0)]
    row = aggregate_row(("http/aiohttp", "download", "16M"), events, ["a", "b"], warmup=1)
    assert row.client_host == ALL_CLIENTS
    assert len(row.samples) == 1
    window = row.samples[0]
    assert window.seconds == pytest.approx(1.5)
    assert window.bytes == pytest.approx(2 * 10 * MB * 1.5, rel=1e-3)  # both clients, inside the window only
    assert row.median_bytes_per_s == pytest.approx(20 * MB, rel=1e-3)
    agg = row.aggregate
    assert agg is not None
    assert agg["jain_index"] == pytest.approx(1.0)
    assert agg["first_done_s"] == [pytest.approx(2.0)] and agg["last_done_s"] == [pytest.approx(2.5)]
    assert agg["per_client_bytes_per_s"] == {
        "a": pytest.approx(10 * MB, rel=1e-3),
        "b": pytest.approx(10 * MB, rel=1e-3),
    }
    assert agg["sum_of_rates_bytes_per_s"] == pytest.approx(20 * MB, rel=1e-3)


def test_warm_ups_and_failed_copies_stay_out_of_the_aggregate() -> None:
    events = [
        _copy("a", 0, T0, 50 * MB, 1.0),  # warm-up: not counted even though fast
        _copy("b", 0, T0, 50 * MB, 1.0),
        _copy("a", 1, T0 + 10, 10 * MB, 1.0),
        _copy("b", 1, T0 + 10, 0, 0.3, error="connection reset"),
    ]
    row = aggregate_row(("http/aiohttp", "download", "16M"), events, ["a", "b"], warmup=1)
    assert row.median_bytes_per_s == pytest.approx(10 * MB, rel=1e-3)  # a alone in that round
    assert row.aggregate is not None and any("failed" in note for note in row.aggregate["notes"])
    assert row.aggregate["jain_index"] is None  # one client: nothing shared


def test_clients_that_never_overlap_give_no_rate_and_say_why() -> None:
    events = [_copy("a", 0, T0, 10 * MB, 1.0), _copy("b", 0, T0 + 5, 10 * MB, 1.0)]
    row = aggregate_row(("http/aiohttp", "download", "16M"), events, ["a", "b"], warmup=0)
    assert row.median_bytes_per_s is None and row.samples == ()
    assert row.error is None  # not a failure: both clients' own rows stand
    assert row.aggregate is not None and any("no overlap" in note for note in row.aggregate["notes"])
    assert any("no aggregate" in note for note in row.aggregate["notes"])


def test_rows_come_as_each_steps_aggregate_then_every_clients_row_and_a_stopped_client_fails_only_its_own() -> None:
    a = MemberReport("a", rows=[_row("a")], copies=[_copy("a", 0, T0, 10 * MB, 1.0)])
    b = MemberReport("b", rows=[], copies=[], failure="the session ended mid-run: killed")
    rows = fleet_rows([a, b], warmup=0, planned=[("http/aiohttp", "download")])
    assert [r.client_host for r in rows] == [ALL_CLIENTS, "a", "b"]
    assert rows[1].error is None and rows[1].median_bytes_per_s == pytest.approx(10 * MB)
    assert rows[2].error is not None and "b stopped" in rows[2].error and "killed" in rows[2].error


def test_clients_that_never_started_fail_one_row_per_planned_client_and_direction() -> None:
    reports = [MemberReport("a", failure="ssh refused"), MemberReport("b", failure="ssh refused")]
    rows = fleet_rows(reports, warmup=0, planned=[("http/aiohttp", "upload"), ("http/aiohttp", "download")])
    assert len(rows) == 4 and all(r.error and "ssh refused" in r.error for r in rows)
    assert {r.client_host for r in rows} == {"a", "b"}


def test_aggregate_rows_compare_with_all_clients_at_once_and_client_rows_with_their_own_baseline() -> None:
    alone = Baseline(up_bytes_per_s=40 * MB, down_bytes_per_s=40 * MB, rtt_ms=3.0)
    # at once, each way: a moved 20 MB/s for 3 s, b 40 MB/s for 1.5 s inside a's span: the window is b's
    a = MemberReport("a", rows=[_row("a", 20 * MB)], baseline=alone, together={"download": (T0, 3.0, 60 * MB)})
    b = MemberReport("b", rows=[_row("b", 10 * MB)], baseline=alone, together={"download": (T0 + 1, 1.5, 60 * MB)})
    a.copies = [_copy("a", 0, T0, 20 * MB, 1.0)]
    b.copies = [_copy("b", 0, T0, 10 * MB, 1.0)]
    together, at_once = together_baseline([a, b])
    # not 20 + 40: a's bytes spread over 3 s count only for the 1.5 s both measured
    assert together.down_bytes_per_s == pytest.approx(60 * MB)
    assert together.up_bytes_per_s is None
    assert at_once["a"].down_bytes_per_s == pytest.approx(20 * MB) and at_once["b"].down_bytes_per_s == pytest.approx(
        40 * MB
    )
    rows = fleet_rows([a, b], warmup=0, planned=[])
    why = explain_fleet(rows, [a, b], together, None, "10.0.0.1")
    assert why.rows[0].pct_of_tcp == pytest.approx(50.0, abs=0.2)  # 30 of 60 MB/s
    assert why.rows[1].pct_of_tcp == pytest.approx(50.0, abs=0.2)  # a: 20 of its own 40
    assert why.rows[2].pct_of_tcp == pytest.approx(25.0, abs=0.2)  # b: 10 of 40
    assert any("Jain" in sentence for sentence in why.verdict)


def test_probes_that_never_ran_at_once_give_no_together_rate() -> None:
    a = MemberReport("a", together={"upload": (T0, 1.0, 10 * MB)})
    b = MemberReport("b", together={"upload": (T0 + 5, 1.0, 10 * MB)})
    together, at_once = together_baseline([a, b])
    assert together.up_bytes_per_s is None and together.error is not None
    assert at_once == {}


# ---------------------------------------------------------------- HOSTS
def test_a_hosts_file_lists_destinations_once_each_in_order(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("# desks\ndesk1\nalice@desk2  # Alice's\n\ndesk1\n")
    assert [(d.alias, d.user) for d in read_inventory(hosts)] == [("desk1", None), ("desk2", "alice")]


def test_an_ansible_inventory_gives_its_host_lines_and_skips_vars_and_children(tmp_path: Path) -> None:
    hosts = tmp_path / "inventory.ini"
    hosts.write_text(
        "[desktops]\ndesk1 ansible_user=bob\ndesk2\n\n[desktops:vars]\nansible_port=2222\n"
        "[office:children]\ndesktops\n; a comment\n[laptops]\nlap1\n"
    )
    assert [(d.alias, d.user) for d in read_inventory(hosts)] == [("desk1", "bob"), ("desk2", None), ("lap1", None)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("desk1 ansible_host=10.0.0.5\n", "ansible_host= is not read"),
        ("desk1 ansible_port=2222\n", "ansible_port= is not read"),
        ("", "names no host"),
        ("# nobody\n", "names no host"),
        ("web[1:3]\n", "ranges"),
        ("-oProxyCommand=x\n", "is not"),
    ],
)
def test_a_bad_hosts_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(text)
    with pytest.raises(UsageError, match=message.replace("[", r"\[")):
        read_inventory(hosts)


def test_a_missing_hosts_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="--clients"):
        read_inventory(tmp_path / "nope")


def test_a_client_sharing_the_path_is_explained_by_its_share_of_raw_tcp_at_once() -> None:
    alone = Baseline(up_bytes_per_s=60 * MB, down_bytes_per_s=60 * MB, rtt_ms=3.0)
    at_once = {"download": (T0, 3.0, 60 * MB)}  # 20 MB/s each at once: 60 MB/s in all, as each client alone
    reports = [
        MemberReport(
            h, rows=[_row(h, 20 * MB)], baseline=alone, together=at_once, copies=[_copy(h, 0, T0, 20 * MB, 1.0)]
        )
        for h in ("a", "b", "c")
    ]
    together, _ = together_baseline(reports)
    rows = fleet_rows(reports, warmup=0, planned=[])
    why = explain_fleet(rows, reports, together, None, "10.0.0.1")
    for index in (1, 2, 3):  # each client: 20 of its own 60 MB/s alone, which its share (60 / 3) explains
        assert why.rows[index].bound == "share"
        assert why.rows[index].ceiling_bytes_per_s == pytest.approx(20 * MB)
    # a client far below its share is not explained by it
    reports[0].rows[0] = _row("a", 5 * MB)
    rows = fleet_rows(reports, warmup=0, planned=[])
    assert explain_fleet(rows, reports, together, None, "10.0.0.1").rows[1].bound != "share"


def test_a_binary_hosts_file_is_one_line(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_bytes(b"\xff\xfe\x00desk1\n")
    with pytest.raises(UsageError, match="not a text file"):
        read_inventory(hosts)


def test_an_aggregate_names_only_the_clients_that_copied_and_says_who_was_missing() -> None:
    # c stopped before this step: the aggregate is a and b's, and says so; files/s is left to the clients' rows
    events = [_copy("a", 0, T0, 10 * MB, 1.0), _copy("b", 0, T0, 10 * MB, 1.0)]
    row = aggregate_row(("http/aiohttp", "download", "16M"), events, ["a", "b", "c"], warmup=0)
    assert row.aggregate is not None and row.aggregate["clients"] == ["a", "b"]
    assert any("2 of 3 clients copied (not c)" in note for note in row.aggregate["notes"])
    assert row.bytes == 2 * events[0].sample.bytes
    assert row.files_per_s is None

"""Ceiling maths: each bound's value and explanation, and which bound explains a rate."""

from __future__ import annotations

import dataclasses
import math

import pytest

from workbench.core import fixedcost
from workbench.core.ceiling import (
    DELAYED_ACK_S,
    NOISE_FLOOR,
    Bound,
    binding_bound,
    bounds,
    bounds_from_details,
    explaining_bound,
    format_bits,
    format_bound,
    format_bytes,
    format_ms,
    holds,
    noise_share,
    paced_burst_s,
    per_file_bound,
    per_file_s,
    with_fixed_cost,
)
from workbench.core.explain import explain
from workbench.core.results import Baseline, Result, RowExplanation, Run, Sample
from workbench.protocols import exchanges
from workbench.protocols.details import ClientDetails
from workbench.shared.triage import TcpTriage


def by_label(found: list[Bound]) -> dict[str, Bound]:
    return {b.label: b for b in found}


def test_no_inputs_no_bounds() -> None:
    assert bounds() == []
    assert binding_bound([]) is None


def test_window_bound_is_window_over_rtt() -> None:
    (bound,) = bounds(rtt_s=0.0028, window_bytes=128 * 1024)
    assert bound.label == "window"
    assert bound.bytes_per_s == pytest.approx(131072 / 0.0028)
    assert bound.explanation == "window 128 KiB / 2.8 ms"


def test_requests_bound_multiplies_requests_in_flight() -> None:
    one = by_label(bounds(rtt_s=0.0004, request_bytes=65536, requests_in_flight=1))["requests"]
    assert one.bytes_per_s == pytest.approx(65536 / 0.0004)
    assert one.explanation == "64 KiB × 1 request / 0.40 ms"
    eight = by_label(bounds(rtt_s=0.0004, request_bytes=1 << 20, requests_in_flight=8))["requests"]
    assert eight.bytes_per_s == pytest.approx(8 * (1 << 20) / 0.0004)
    assert eight.explanation == "1 MiB × 8 requests / 0.40 ms"


def test_requests_in_flight_defaults_to_one() -> None:
    bound = by_label(bounds(rtt_s=0.001, request_bytes=32768))["requests"]
    assert bound.bytes_per_s == pytest.approx(32768 / 0.001)


def test_ssh_window_and_link() -> None:
    found = by_label(bounds(link_bytes_per_s=125e6, rtt_s=0.002, ssh_window_bytes=2 << 20))
    assert found["link"].bytes_per_s == 125e6
    assert found["link"].explanation == "link 1 Gbit/s"
    assert found["ssh-window"].bytes_per_s == pytest.approx((2 << 20) / 0.002)
    assert found["ssh-window"].explanation == "SSH window 2 MiB / 2.0 ms"


def test_bounds_need_an_rtt_for_window_like_limits() -> None:
    assert bounds(window_bytes=65536, request_bytes=65536, ssh_window_bytes=65536) == []
    assert bounds(rtt_s=0.0, window_bytes=65536) == []


def test_labels_and_order() -> None:
    found = bounds(
        link_bytes_per_s=1e9,
        rtt_s=0.001,
        window_bytes=1 << 20,
        request_bytes=65536,
        ssh_window_bytes=1 << 21,
        client_cpu=0.5,
        measured_bytes_per_s=1e8,
    )
    assert [b.label for b in found] == ["link", "window", "requests", "ssh-window", "cpu"]


def test_cpu_bound_scales_measured_rate_to_one_core() -> None:
    (bound,) = bounds(client_cpu=0.25, server_cpu=0.5, measured_bytes_per_s=100e6)
    assert bound.label == "cpu"
    assert bound.bytes_per_s == pytest.approx(200e6)
    assert bound.explanation == "server CPU 50 % of a core"
    assert not bound.saturated


def test_cpu_bound_needs_a_measured_rate() -> None:
    assert bounds(client_cpu=0.95) == []


def test_multithreaded_process_past_one_core_is_bound_at_the_measured_rate() -> None:
    (bound,) = bounds(client_cpu=1.6, measured_bytes_per_s=300e6)
    assert bound.bytes_per_s == pytest.approx(300e6)
    assert bound.saturated


def test_binding_bound_is_the_lowest_ceiling() -> None:
    found = bounds(
        link_bytes_per_s=125e6, rtt_s=0.0004, request_bytes=65536, client_cpu=0.5, measured_bytes_per_s=100e6
    )
    # requests: 64 KiB / (0.4 ms + 64 KiB at 125 MB/s = 0.52 ms) = 70.9 MB/s; link 125 MB/s; cpu 200 MB/s
    assert binding_bound(found).label == "requests"
    assert binding_bound(found).bytes_per_s == pytest.approx(65536 / (0.0004 + 65536 / 125e6))
    # four 1 MiB requests in flight: 4 MiB / (0.4 ms + 21 ms to send one) = 196 MB/s, above a 50 MB/s link
    found = bounds(
        link_bytes_per_s=50e6,
        rtt_s=0.0004,
        request_bytes=1 << 20,
        requests_in_flight=4,
        client_cpu=0.5,
        measured_bytes_per_s=40e6,
    )
    assert binding_bound(found).label == "link"


def test_a_cpu_well_below_a_core_never_binds() -> None:
    found = bounds(link_bytes_per_s=125e6, client_cpu=0.4, measured_bytes_per_s=40e6)
    # extrapolated cpu ceiling 100 MB/s is below the link, but a 40 % busy core is not what held it back
    assert by_label(found)["cpu"].bytes_per_s < by_label(found)["link"].bytes_per_s
    assert binding_bound(found).label == "link"
    assert binding_bound(bounds(client_cpu=0.4, measured_bytes_per_s=40e6)) is None


def test_saturated_cpu_wins_over_a_lower_ceiling() -> None:
    found = bounds(link_bytes_per_s=50e6, client_cpu=0.93, measured_bytes_per_s=48e6)
    assert by_label(found)["cpu"].bytes_per_s > by_label(found)["link"].bytes_per_s
    assert binding_bound(found).label == "cpu"


def test_bounds_from_client_details() -> None:
    details = ClientDetails(request_bytes=65536, requests_in_flight=1, cipher="x")
    found = by_label(bounds_from_details(details, rtt_s=0.0004))
    assert set(found) == {"requests"}
    assert found["requests"].bytes_per_s == pytest.approx(65536 / 0.0004)
    # a document's junk value is set aside when it is read, never fed to the maths
    assert bounds_from_details(ClientDetails.from_json({"request_bytes": "junk"}), rtt_s=0.001) == []
    ssh = by_label(bounds_from_details(ClientDetails(ssh_window_bytes=2 << 20), rtt_s=0.002))
    assert set(ssh) == {"ssh-window"} and ssh["ssh-window"].bytes_per_s == pytest.approx((2 << 20) / 0.002)


def test_formatting() -> None:
    assert format_bytes(65536) == "64 KiB"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(100) == "100 B"
    assert format_bytes(3 << 30) == "3 GiB"
    assert format_ms(0.0004) == "0.40 ms"
    assert format_ms(0.0028) == "2.8 ms"
    assert format_ms(0.031) == "31 ms"
    assert format_bits(12.5e6) == "100 Mbit/s"
    assert format_bits(1.25e9) == "10 Gbit/s"
    assert format_bits(312.5e6) == "2.5 Gbit/s"
    bound = Bound("window", 46.8e6, "window 128 KiB / 2.8 ms")
    assert format_bound(bound) == "window ≤ 46.8 MB/s (window 128 KiB / 2.8 ms)"


def test_a_request_waits_its_round_trip_then_its_serialisation_beside_the_servers_cpu() -> None:
    # pysmb on the wifi-ac lab: 64 KiB per request at 62.5 MB/s is 1.05 ms, a third of the 2.8 ms RTT; no direction
    # named, no side takes a turn: the server's 0.2 ms runs beside the bytes
    found = by_label(bounds(rtt_s=0.0028, request_bytes=65536, raw_tcp_bytes_per_s=62.5e6, server_turnaround_s=0.0002))
    assert found["requests"].bytes_per_s == pytest.approx(65536 / (0.0028 + 65536 / 62.5e6))
    assert found["requests"].explanation == "64 KiB × 1 request / (2.8 ms + 1.0 ms to send, overlapping 0.20 ms server)"
    assert found["raw-tcp"].bytes_per_s == 62.5e6


@pytest.mark.parametrize(
    ("direction", "in_turn", "beside"),
    [("upload", "0.40 ms client in turn", "0.90 ms server"), ("download", "0.90 ms server in turn", "0.40 ms client")],
)
def test_one_request_outstanding_has_its_data_sender_take_a_turn(direction: str, in_turn: str, beside: str) -> None:
    # the sender of the data (the client of a write, the server of a read) produces each request after the last one's
    # answer; the receiver consumes the bytes as they arrive, so of its CPU and the bytes the longer is charged
    turn = {"server_turnaround_s": 0.0009, "client_turnaround_s": 0.0004, "direction": direction}
    (bound,) = bounds(rtt_s=0.0028, request_bytes=65536, **turn)  # no path rate: the receiver's CPU is the longest
    sender_s, receiver_s = (0.0004, 0.0009) if direction == "upload" else (0.0009, 0.0004)
    assert bound.bytes_per_s == pytest.approx(65536 / (0.0028 + sender_s + receiver_s))
    with_path = by_label(bounds(rtt_s=0.0028, request_bytes=65536, raw_tcp_bytes_per_s=62.5e6, **turn))["requests"]
    assert with_path.bytes_per_s == pytest.approx(65536 / (0.0028 + sender_s + 65536 / 62.5e6))
    assert with_path.explanation == f"64 KiB × 1 request / (2.8 ms + {in_turn} + 1.0 ms to send, overlapping {beside})"
    # what the overlapping parts would add run in turn: the shorter of the bytes and the receiver's CPU
    assert with_path.in_turn_s == pytest.approx(min(receiver_s, 65536 / 62.5e6))


def test_a_paced_sender_sends_each_request_in_a_paced_burst_only_one_request_at_a_time() -> None:
    # the wan lab: 40 ms RTT, 64 KiB would take 5.6 ms at the path's goodput but BBR in start-up paces it over ~21 ms
    one = bounds(rtt_s=0.040, request_bytes=65536, raw_tcp_bytes_per_s=11.7e6, direction="upload", paced=True)
    paced_s = paced_burst_s(0.040, 65536)
    assert paced_s > 65536 / 11.7e6
    assert by_label(one)["requests"].bytes_per_s == pytest.approx(65536 / (0.040 + paced_s))
    assert "paced by BBR" in by_label(one)["requests"].explanation
    # with requests outstanding the flow is not idle after each answer: its bytes go at the path's rate, and no side
    # takes a turn (each works on one request while others wait)
    kept = bounds(
        rtt_s=0.040,
        request_bytes=65536,
        requests_in_flight=4,
        raw_tcp_bytes_per_s=11.7e6,
        direction="upload",
        paced=True,
        server_turnaround_s=0.001,
        client_turnaround_s=0.002,
    )
    assert by_label(kept)["requests"].bytes_per_s == pytest.approx(4 * 65536 / (0.040 + 65536 / 11.7e6))
    assert "in turn" not in by_label(kept)["requests"].explanation


def test_the_window_bound_uses_the_rtt_it_was_seen_under() -> None:
    found = by_label(bounds(rtt_s=0.0028, window_bytes=1 << 20, window_rtt_s=0.006))
    assert found["window"].bytes_per_s == pytest.approx((1 << 20) / 0.006)


def test_per_file_bound_adds_round_trips_to_the_longest_of_bytes_and_either_sides_cpu() -> None:
    # 64 KiB at 62.5 MB/s is 1.05 ms: the server's 1.5 ms of CPU on the file outlasts it and the client's 0.5 ms,
    # and the three overlap (the bytes are produced and consumed as they cross), so only the longest is charged
    bound = per_file_bound(
        50 * 65536, 50, 4, 0.0028, 62.5e6, server_per_file_s=0.0015, client_per_file_s=0.0005, direction=None
    )
    file_s = 4 * 0.0028 + 0.0015
    assert bound.label == "per-file" and bound.bytes_per_s == pytest.approx(65536 / file_s)
    assert bound.explanation == (
        f"≤ {1 / file_s:,.0f} files/s: 4 RTT + 1.5 ms server per file (overlapping 64 KiB on the path and 0.50 ms "
        "client)"
    )
    # the sum a strict ping-pong would take is longer than the model's time: the ceiling is higher than that sum's
    summed_s = 4 * 0.0028 + 65536 / 62.5e6 + 0.0015 + 0.0005
    assert bound.bytes_per_s > 65536 / summed_s * 1.1
    # a client's CPU longer than the rest is what is charged, whichever side it is on
    client_bound = per_file_bound(
        50 * 65536, 50, 4, 0.0028, 62.5e6, server_per_file_s=0.0015, client_per_file_s=0.003, direction=None
    )
    assert client_bound.bytes_per_s == pytest.approx(65536 / (4 * 0.0028 + 0.003))
    assert "4 RTT + 3.0 ms client per file" in client_bound.explanation
    # CPU shorter than the bytes' time costs nothing: the bytes are charged
    light = per_file_bound(
        50 * 65536, 50, 4, 0.0028, 62.5e6, server_per_file_s=0.0002, client_per_file_s=0.0004, direction=None
    )
    assert light.bytes_per_s == pytest.approx(65536 / (4 * 0.0028 + 65536 / 62.5e6))
    assert "4 RTT + 64 KiB per file (overlapping 0.20 ms server and 0.40 ms client)" in light.explanation
    parallel = per_file_bound(50 * 65536, 50, 4, 0.0028, 62.5e6, files_in_flight=4, direction=None)
    assert parallel.bytes_per_s == pytest.approx(4 * 65536 / (4 * 0.0028 + 65536 / 62.5e6))
    assert "4 at a time" in parallel.explanation


def test_a_fixed_cost_per_copy_lowers_every_ceiling_but_a_cpu_one() -> None:
    link = Bound("link", 62.5e6, "link 500 Mbit/s")
    fixed = with_fixed_cost(link, 0.12, 16 << 20)
    assert fixed.bytes_per_s == pytest.approx(
        (16 << 20) / (0.12 + (16 << 20) / 62.5e6)
    )  # smbclient: ≈43 MB/s, not 62.5
    assert fixed.label == "link" and fixed.explanation.endswith("+ 120 ms per copy")
    cpu = Bound("cpu", 40e6, "client CPU 95 % of a core", saturated=True)
    assert with_fixed_cost(cpu, 0.12, 16 << 20) == cpu
    assert with_fixed_cost(link, 0.0, 16 << 20) == link


def test_a_ceiling_explains_a_rate_only_within_25_percent() -> None:
    found = [Bound("link", 62.5e6, "link"), Bound("requests", 20e6, "requests")]
    assert explaining_bound(found, 16.5e6) == (found[1], True)  # 21 % above the rate
    assert explaining_bound(found, 15.0e6) == (found[1], False)  # 33 % above: unexplained
    assert explaining_bound(found, 27.0e6) == (found[1], False)  # measured far above the ceiling: a wrong model
    assert explaining_bound([], 1e6) == (None, False)


def test_ceilings_that_agree_name_the_more_specific_cause() -> None:
    # a raw-TCP probe held by the same 64 KiB window: 22.6 MB/s both ways of reading it, 3 % apart
    found = bounds(
        raw_tcp_bytes_per_s=22.0e6, window_bytes=65536, window_rtt_s=0.0029, rtt_s=0.0028, link_bytes_per_s=62.6e6
    )
    assert by_label(found)["window"].bytes_per_s == pytest.approx(22.6e6, rel=0.01)
    assert binding_bound(found).label == "window"
    # 10 % apart is two limits: the lower binds, whatever its name
    found = bounds(
        raw_tcp_bytes_per_s=20.0e6, window_bytes=65536, window_rtt_s=0.0029, rtt_s=0.0028, link_bytes_per_s=62.6e6
    )
    assert binding_bound(found).label == "raw-tcp"


def test_per_file_s_is_round_trips_then_the_longest_overlapping_part() -> None:
    assert per_file_s(3, 0.04, 0.005) == pytest.approx(0.125)
    assert per_file_s(3, 0.04, 0.005, server_s=0.002, client_s=0.007) == pytest.approx(0.127)
    assert per_file_s(3, 0.04, 0.005, server_s=0.009, client_s=0.007) == pytest.approx(0.129)
    assert per_file_s(0, 0.04, 0.0, server_s=None, client_s=None) == 0.0
    # the bytes' part is a duration on the path, named so
    assert per_file_s(round_trips=1, rtt_s=0.01, wire_s=0.004, client_s=0.003) == pytest.approx(0.014)


def test_waits_for_a_core_are_added_on_top_and_named() -> None:
    bound = per_file_bound(
        10 * 65536, 10, 1, 0.01, 62.5e6, server_per_file_s=0.002, waited_per_file_s=0.003, direction=None
    )
    assert bound.bytes_per_s == pytest.approx(65536 / (0.01 + 0.002 + 0.003))
    assert "1 RTT + 2.0 ms server + 3.0 ms waiting for a core per file" in bound.explanation


def test_a_set_pays_its_own_round_trips_once() -> None:
    bound = per_file_bound(10 * 65536, 10, 3, 0.04, 12.5e6, set_round_trips=5, direction=None)
    assert bound.bytes_per_s == pytest.approx(10 * 65536 / (5 * 0.04 + 10 * (3 * 0.04 + 65536 / 12.5e6)))
    assert bound.explanation.endswith("+ 5 RTT per set")


def test_a_rows_noise_is_its_own_spread_and_never_under_five_percent() -> None:
    assert noise_share([10e6, 10.1e6, 9.9e6], 10e6) == pytest.approx(NOISE_FLOOR)
    assert noise_share([10e6, 12e6, 9e6], 10e6) == pytest.approx(0.2)
    link = Bound("link", 10e6, "link")
    assert holds(link, 10.4e6, 0.05) and not holds(link, 10.6e6, 0.05)
    assert holds(Bound("cpu", 5e6, "client CPU"), 10e6, 0.05)  # scaled from the rate: never beaten


def _set_row(
    label: str,
    direction: str,
    seconds: list[float],
    server_cpu_s: float,
    client_cpu_s: float,
    client_wait_s: float | None = None,
    server_wait_s: float | None = None,
) -> Result:
    protocol, client = label.split("/")
    samples = tuple(
        Sample(
            bytes=50 * 65536,
            seconds=s,
            files=50,
            verified=True,
            client_cpu_s=client_cpu_s,
            server_cpu_s=server_cpu_s,
            client_wait_s=client_wait_s,
            server_wait_s=server_wait_s,
        )
        for s in seconds
    )
    return Result(protocol, client, direction, "50x64K", 50 * 65536, 50, samples=samples, details=ClientDetails())


def _explained(row: Result) -> RowExplanation:
    run = Run(
        id=1, meta={}, baseline=Baseline(up_bytes_per_s=62.5e6, down_bytes_per_s=62.5e6, rtt_ms=2.8), results=(row,)
    )
    return explain(run, "10.77.0.2").rows[0]


def test_the_per_file_ceiling_is_the_round_trip_the_senders_turn_and_the_longest_overlapping_part_whatever_the_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(exchanges.COUNTED, ("http/aiohttp", "upload"), exchanges.Exchanges(per_file=1, per_set=0))
    # 1 RTT, the sending client's 0.8 ms of CPU per file in turn, then the server's 2 ms (the per-copy allowance
    # left out), longer than the file's 1.05 ms on the path, which it overlaps: 5.6 ms per file, and a copy at 6 ms
    # per file is bound by it. Summed (6.65 ms), the same copy would beat its ceiling by 11 %.
    row = _set_row("http/aiohttp", "upload", [0.3, 0.3, 0.3], server_cpu_s=0.11, client_cpu_s=0.05)
    why = _explained(row)
    per_file = next(b for b in why.bounds if b.label == "per-file")
    assert (
        "1 RTT + 0.80 ms client in turn + 2.0 ms server per file (overlapping 64 KiB on the path)"
        in per_file.explanation
    )
    assert per_file.bytes_per_s == pytest.approx(65536 / (0.0028 + 0.0008 + 0.002))
    assert why.bound == "per-file"
    # 4 ms of server CPU per file makes the ceiling 7.6 ms per file, which the same copy beats: the row is
    # unexplained, not met by a looser ceiling (the wire alone would hold)
    fast = _set_row("http/aiohttp", "upload", [0.3, 0.3, 0.3], server_cpu_s=0.21, client_cpu_s=0.05)
    fast_why = _explained(fast)
    assert fast_why.bound == "unexplained" and fast_why.bound_explanation is not None
    assert "beats its per-file ceiling" in fast_why.bound_explanation
    assert [b.label for b in fast_why.bounds or ()].count("per-file") == 1


def test_a_copy_that_beats_every_per_file_ceiling_is_unexplained_and_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(exchanges.COUNTED, ("ftp/ftplib", "download"), exchanges.Exchanges(per_file=8, per_set=0))
    row = _set_row("ftp/ftplib", "download", [0.5, 0.5, 0.5], server_cpu_s=0.0, client_cpu_s=0.0)  # 10 ms per file
    why = _explained(row)
    assert why.bound == "unexplained"
    assert why.bound_explanation is not None
    assert "beats its per-file ceiling" in why.bound_explanation and "count_exchanges" in why.bound_explanation
    # the model's own overlaps are among what it may be missing, and a faster copy is never said to run in turn
    assert "round trips that overlap its bytes" in why.bound_explanation
    assert "may have run in turn" not in why.bound_explanation
    # the row's label is never a ceiling the copy beats
    assert why.ceiling_bytes_per_s is not None and why.ceiling_bytes_per_s < row.median_bytes_per_s


def test_counted_exchanges_make_the_per_file_ceiling_and_a_far_one_says_how_much_time_is_off_the_wire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(exchanges.COUNTED, ("ftp/curl", "upload"), exchanges.Exchanges(per_file=2, per_set=0))
    # 2 RTT + 1.05 ms = 6.65 ms per file on the wire; the copy takes 20 ms per file
    row = _set_row("ftp/curl", "upload", [1.0, 1.0, 1.0], server_cpu_s=0.0, client_cpu_s=0.0)
    why = _explained(row)
    assert why.bound == "unexplained" and why.bound_explanation is not None
    assert "2 RTT + 64 KiB per file" in why.bound_explanation
    # with no CPU measured its bytes are the one part charged: nothing that overlapped may have run in turn, so the
    # time off the wire comes first
    assert (
        "per file (≈4.8 RTT): time the client or server spends off the wire and off its CPU"
    ) in why.bound_explanation


def test_waits_for_a_core_are_not_charged_and_a_set_that_misses_its_ceiling_says_how_long_each_side_waited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(exchanges.COUNTED, ("sftp/paramiko", "upload"), exchanges.Exchanges(per_file=1, per_set=0))
    # 1 RTT, the sending client's 2 ms of CPU per file in turn (a tick left out), then its bytes' 1.05 ms over the
    # server's 0.4 ms: 5.85 ms per file; the copies take 11 ms per file, 6 ms of it the client's wait, 5 ms the
    # server's
    starved = dict(server_cpu_s=0.03, client_cpu_s=0.11, client_wait_s=0.3, server_wait_s=0.25)
    why = _explained(_set_row("sftp/paramiko", "upload", [0.55, 0.55, 0.55], **starved))
    per_file = next(b for b in why.bounds or () if b.label == "per-file")
    wire_s, cpu_s = 0.0028 + 65536 / 62.5e6, 0.1 / 50
    assert per_file.bytes_per_s == pytest.approx(65536 / (wire_s + cpu_s))  # the waits overlap: no charge
    assert why.bound == "unexplained"
    said = why.bound_explanation or ""
    assert "waiting for a core (the client ≈6.0 ms and the server ≈5.0 ms per file, measured" in said
    assert 0 <= said.index("may have run in turn") < said.index("waiting for a core")
    unread = _explained(_set_row("sftp/paramiko", "upload", [0.55, 0.55, 0.55], server_cpu_s=0.0, client_cpu_s=0.11))
    assert unread.bound == "unexplained" and "CPU wait is not measured" in (unread.bound_explanation or "")


def test_a_client_that_keeps_files_in_flight_is_charged_its_sets_round_trips_and_no_round_trip_per_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # counted at 0.4 round trips per file (its own pace on the counting link, not a wait) and 2 per set
    monkeypatch.setitem(exchanges.COUNTED, ("smb/smbprotocol", "upload"), exchanges.Exchanges(per_file=0.4, per_set=2))
    wire_s = 65536 / 62.5e6  # 1.05 ms per file on the path
    in_flight = ClientDetails(files_in_flight=8)
    row = _set_row("smb/smbprotocol", "upload", [0.06, 0.06, 0.06], server_cpu_s=0.0, client_cpu_s=0.0)
    why = _explained(dataclasses.replace(row, details=in_flight))
    per_file = next(b for b in why.bounds or () if b.label == "per-file")
    # 2 RTT for the set and each file's bytes: 58 ms for 50 files, which the copy's 60 ms is bound by; a round trip
    # per file (at least one, as for a client one file at a time) would make it 198 ms, and the copy would beat it
    assert per_file.bytes_per_s == pytest.approx(50 * 65536 / (2 * 0.0028 + 50 * wire_s))
    assert "+ 2 RTT per set" in per_file.explanation
    assert why.bound == "per-file"
    one_at_a_time = _explained(row)
    assert next(b for b in one_at_a_time.bounds or () if b.label == "per-file").bytes_per_s == pytest.approx(
        50 * 65536 / (2 * 0.0028 + 50 * (0.0028 + wire_s))
    )
    assert one_at_a_time.bound == "unexplained" and "beats its per-file ceiling" in (
        one_at_a_time.bound_explanation or ""
    )
    # the server's CPU per file, where longer than the bytes' time, is what each file is charged: 2 ms (a tick left
    # out)
    busy = _set_row("smb/smbprotocol", "upload", [0.11, 0.11, 0.11], server_cpu_s=0.11, client_cpu_s=0.0)
    busy_why = _explained(dataclasses.replace(busy, details=in_flight))
    busy_bound = next(b for b in busy_why.bounds or () if b.label == "per-file")
    assert busy_bound.bytes_per_s == pytest.approx(50 * 65536 / (2 * 0.0028 + 50 * 0.002))
    assert "2.0 ms server per file" in busy_bound.explanation


def test_a_set_with_nothing_known_to_charge_per_file_has_no_per_file_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stock server's row (no raw-TCP rate, no server CPU) of a client that keeps files in flight and counted no
    round trip per set: the per-file model has nothing to charge, so there is no such ceiling (it once divided by
    the zero time it came to)."""
    monkeypatch.setitem(exchanges.COUNTED, ("smb/smbprotocol", "upload"), exchanges.Exchanges(per_file=0.9, per_set=0))
    row = _set_row("smb/smbprotocol", "upload", [0.06, 0.06, 0.06], server_cpu_s=0.0, client_cpu_s=0.0)
    row = dataclasses.replace(row, details=ClientDetails(files_in_flight=8))
    run = Run(id=1, meta={}, baseline=Baseline(None, None, rtt_ms=0.05), results=(row,))
    [why] = explain(run, "127.0.0.1").rows
    assert not [b for b in why.bounds or () if b.label == "per-file"], why.bounds


def test_a_single_copy_that_waited_for_a_core_says_it_was_cpu_starved_and_the_run_says_the_host_was_loaded() -> None:
    sample = Sample(bytes=64 << 20, seconds=2.0, verified=True, client_cpu_s=0.5, client_wait_s=0.6, server_wait_s=0.1)
    row = Result("smb", "pysmb", "download", "64M", 64 << 20, 1, samples=(sample,) * 3, details=ClientDetails())
    run = Run(id=1, meta={}, baseline=Baseline(62.5e6, 62.5e6, rtt_ms=2.8), results=(row,))
    said = explain(run, "10.77.0.2")
    why = said.rows[0]
    # 33.5 MB/s against a 62.5 MB/s raw TCP: no ceiling within reach, and the row says what it lost
    assert why.bound == "unexplained" and "CPU-starved: the client waited for a core 30% of the copy" in (
        why.bound_explanation or ""
    )
    assert "the server waited" not in (why.bound_explanation or "")  # 5 %: not starved
    (note,) = [n for n in said.notes if n.startswith("a loaded host")]
    assert "the client's 30% (up to 30%), the server's 5% (up to 5%)" in note
    quiet = Run(id=1, meta={}, baseline=run.baseline, results=(dataclasses.replace(row, samples=(
        dataclasses.replace(sample, client_wait_s=0.01),) * 3),))  # fmt: skip
    assert not any(n.startswith("a loaded host") for n in explain(quiet, "10.77.0.2").notes)


def test_a_goodput_meter_off_raw_tcp_by_more_than_two_percent_is_said_and_which_fell_short() -> None:
    base = Baseline(up_bytes_per_s=498e6 / 8, down_bytes_per_s=500e6 / 8, rtt_ms=2.8)
    agreeing = Run(id=1, meta={}, baseline=base, results=(), link={"goodput_bytes_per_s": 492e6 / 8})
    assert not any("goodput meter" in n for n in explain(agreeing, "10.77.0.2").notes)
    low = Run(id=1, meta={}, baseline=base, results=(), link={"goodput_bytes_per_s": 483e6 / 8})
    (note,) = [n for n in explain(low, "10.77.0.2").notes if "goodput meter" in n]
    assert "read 483 Mbit/s and raw TCP 498 Mbit/s up" in note and "the meter's round met CPU contention" in note


def test_a_start_up_that_dwarfs_the_streaming_does_not_make_the_window_the_limit() -> None:
    from workbench.core.ceiling import Bound, binding_bound, with_fixed_cost

    # rsync over SSH: 419 ms of login per 2 MiB copy brings a 150 MB/s window within 5 % of a 62.7 MB/s link
    link, window = Bound("link", 62.7e6, "link"), Bound("window", 150e6, "window 646 KiB / 4.3 ms")
    paid = [with_fixed_cost(b, 0.419, 2 << 20) for b in (link, window)]
    assert paid[1].bytes_per_s <= paid[0].bytes_per_s * 1.05  # within TIE once both pay the start-up
    chosen = binding_bound(paid)
    assert chosen is not None and chosen.label == "link"
    # a window that ties the link as streamed is still named: the same limit, with its cause
    close = [with_fixed_cost(b, 0.419, 2 << 20) for b in (link, Bound("window", 64e6, "window 64 KiB / 1 ms"))]
    tied = binding_bound(close)
    assert tied is not None and tied.label == "window"


def test_a_bbr_sender_paces_each_burst_in_about_half_a_round_trip() -> None:
    """A burst per round trip keeps BBR in start-up: it paces each at 2/ln 2 times what a round delivered, whose
    fixed point is RTT / (g - 1) whatever the burst's size, but never slower than start-up's first rate."""
    from workbench.core.ceiling import paced_burst_s

    gain = 2 / math.log(2)
    assert paced_burst_s(0.04, 65536) == pytest.approx(0.04 / (gain - 1))
    assert 0.52 < paced_burst_s(1.0, 1 << 20) < 0.54
    # 16 KiB: at most 16384 bytes at g x 10 segments per RTT, under the fixed point
    assert paced_burst_s(0.04, 16384) == pytest.approx(16384 * 0.04 / (gain * 10 * 1448))
    assert paced_burst_s(0.04, 16384) < paced_burst_s(0.04, 65536)


def test_a_prediction_charges_a_paced_burst_where_it_is_longer_than_the_bytes() -> None:
    from workbench.core.ceiling import paced_burst_s

    rtt_s, path = 0.04, 12.5e6  # wan: 64 KiB take 5.2 ms on the path, 21 ms paced
    paced_s = paced_burst_s(rtt_s, 65536)
    paced = per_file_bound(10 * 65536, 10, 2, rtt_s, path, paced=True, direction=None)
    plain = per_file_bound(10 * 65536, 10, 2, rtt_s, path, direction=None)
    assert 10 * 65536 / paced.bytes_per_s == pytest.approx(10 * (2 * rtt_s + paced_s))
    assert 10 * 65536 / plain.bytes_per_s == pytest.approx(10 * (2 * rtt_s + 65536 / path))
    assert "paced by BBR" in paced.explanation and "paced" not in plain.explanation
    # files in flight, or no round trip per file: no burst waits for a turn, nothing paced is charged
    in_flight = per_file_bound(10 * 65536, 10, 2, rtt_s, path, files_in_flight=4, paced=True, direction=None)
    assert in_flight.bytes_per_s == pytest.approx(
        per_file_bound(10 * 65536, 10, 2, rtt_s, path, 4, direction=None).bytes_per_s
    )
    streamed = per_file_bound(10 * 65536, 10, 0, rtt_s, path, paced=True, direction=None)
    assert streamed.bytes_per_s == pytest.approx(
        per_file_bound(10 * 65536, 10, 0, rtt_s, path, direction=None).bytes_per_s
    )
    # a short round trip: the bytes on the path take longer than the paced burst, and they are charged
    gige = per_file_bound(10 * 65536, 10, 2, 0.0002, 125e6, paced=True, direction=None)
    assert gige.bytes_per_s == pytest.approx(
        per_file_bound(10 * 65536, 10, 2, 0.0002, 125e6, direction=None).bytes_per_s
    )


@pytest.mark.parametrize(
    ("link", "direction", "paces"),
    [
        ({"cc": "bbr"}, "upload", True),
        ({"cc": "bbr"}, "download", True),
        ({"cc": "bbr", "cc_server": "cubic"}, "download", False),  # a download's sender is the server
        ({"cc": "bbr", "cc_server": None}, "download", True),  # the server's not recorded: the lab sets both alike
        ({"cc": "cubic", "cc_server": "bbr"}, "upload", False),
        ({"cc": "cubic (per-route congctl on the lab link)"}, "upload", False),
        ({"cc": None}, "upload", False),
        (None, "download", False),
        ({"cc": 5}, "upload", False),
    ],
)
def test_only_a_sender_running_bbr_paces_bursts(link: dict | None, direction: str, paces: bool) -> None:
    from workbench.core.ceiling import sender_paces_bursts

    assert sender_paces_bursts(link, direction) is paces


@pytest.mark.parametrize("cc", ["bbr", "cubic"])
def test_a_rows_own_ceiling_charges_bbrs_paced_burst_only_where_the_sender_runs_bbr(cc: str) -> None:
    """On wan (40 ms, 12.5 MB/s) a 64 KiB file after a turn: 61 ms a file as measured with BBR, whose paced burst
    (21 ms against 5.2 ms on the path) the row's ceiling charges; with CUBIC the same time is 1.35x its ceiling."""
    row = _set_row("http/aiohttp", "upload", [50 * 0.061] * 3, server_cpu_s=0.05, client_cpu_s=0.05)
    link = {"cc": cc, "rtt_ms": 40.0, "expected_goodput_bytes_per_s": 12.5e6}
    base = Baseline(up_bytes_per_s=12.5e6, down_bytes_per_s=12.5e6, rtt_ms=40.0)
    [explained] = explain(Run(id=1, meta={}, baseline=base, results=(row,), link=link), "10.77.0.2").rows
    said = explained.bound_explanation or ""
    if cc == "bbr":
        assert explained.bound == "per-file" and "paced by BBR in 21 ms" in said, explained
    else:
        assert explained.bound == "unexplained" and "paced" not in said, explained


@pytest.mark.parametrize(
    ("cc", "startup_bytes", "known_bytes", "paced"),
    [
        ("bbr", 0, 3_000_000, False),  # a session a bulk copy took out of start-up: bursts at the path's rate
        ("bbr", 3_000_000, 3_000_000, True),
        ("cubic", 3_000_000, 3_000_000, True),  # the sockets' own state says BBR, whatever the run recorded
        (None, 3_000_000, 3_000_000, True),  # a run outside the lab records no congestion control; the sockets did
        ("bbr", 0, 100_000, True),  # read for too few of the bytes (short connections): the link's record decides
        ("cubic", 0, 100_000, False),
    ],
)
def test_the_paced_burst_is_charged_where_the_senders_sockets_were_in_bbr_start_up(
    monkeypatch: pytest.MonkeyPatch, cc: str | None, startup_bytes: int, known_bytes: int, paced: bool
) -> None:
    """aiohttp on wan after its 64 MiB copy on the same session: 48 ms a file, which the paced ceiling (62.6 ms)
    would be beaten by; BBR had left start-up. The sender's sockets decide, over the link's record."""
    monkeypatch.setitem(exchanges.COUNTED, ("http/aiohttp", "upload"), exchanges.Exchanges(per_file=1, per_set=0))
    tcp = TcpTriage(
        side="sender", host="client", elapsed_s=2.4, connections=1, bytes_seen=50 * 65536,
        cc_known_bytes=known_bytes, bbr_startup_bytes=startup_bytes,
    )  # fmt: skip
    row = _set_row("http/aiohttp", "upload", [50 * 0.048] * 3, server_cpu_s=0.05, client_cpu_s=0.05)
    row = dataclasses.replace(row, samples=tuple(dataclasses.replace(s, tcp=tcp) for s in row.samples))
    link = {"cc": cc, "rtt_ms": 40.0, "expected_goodput_bytes_per_s": 12.5e6}
    base = Baseline(up_bytes_per_s=12.5e6, down_bytes_per_s=12.5e6, rtt_ms=40.0)
    [explained] = explain(Run(id=1, meta={}, baseline=base, results=(row,), link=link), "10.77.0.2").rows
    per_file = next(b for b in explained.bounds or () if b.label == "per-file")
    assert ("paced by BBR" in per_file.explanation) is paced, per_file
    # 1 RTT + 0.8 ms of the client's CPU in turn + the file: paced (21 ms) the copy at 48 ms a file beats its
    # 62 ms ceiling and is unexplained; at the path's rate (5.2 ms) it is bound by its 46 ms
    assert explained.bound == ("unexplained" if paced else "per-file"), explained


def test_counted_waits_for_delayed_acks_are_charged_the_shortest_timer_per_file_and_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """scp logs in once per file it downloads, and each login waits twice for a delayed ACK: 2 × 40 ms per file
    beyond the round trips, charged and named; a set's own waits where no fixed cost holds its login."""
    per_file_waits = exchanges.Exchanges(per_file=20, per_set=0, delayed_acks_per_file=2)
    monkeypatch.setitem(exchanges.COUNTED, ("scp/openssh", "download"), per_file_waits)
    # 20 RTT (56 ms) + 80 ms of delayed ACKs + the sending server's 2 ms per file in turn + the file's 1.05 ms on the
    # path: 139 ms per file; the copies took 150
    row = _set_row("scp/openssh", "download", [7.5, 7.5, 7.5], server_cpu_s=0.11, client_cpu_s=0.0)
    why = _explained(row)
    per_file = next(b for b in why.bounds or () if b.label == "per-file")
    file_s = 20 * 0.0028 + 0.002 + 65536 / 62.5e6 + 2 * DELAYED_ACK_S
    assert per_file.bytes_per_s == pytest.approx(50 * 65536 / (50 * file_s))
    assert "80 ms waiting for delayed ACKs" in per_file.explanation
    assert why.bound == "per-file"  # 139 ms of the 150: within the ceiling's reach
    without = dataclasses.replace(per_file_waits, delayed_acks_per_file=0)
    monkeypatch.setitem(exchanges.COUNTED, ("scp/openssh", "download"), without)
    assert _explained(row).bound == "unexplained"  # 59 ms against 150: the waits were what it missed
    # a set's own waits (sftp's login), with no fixed cost fitted: once per set
    per_set_waits = exchanges.Exchanges(per_file=4, per_set=17, delayed_acks_per_set=2)
    monkeypatch.setitem(exchanges.COUNTED, ("sftp/openssh", "upload"), per_set_waits)
    login = _set_row("sftp/openssh", "upload", [0.9, 0.9, 0.9], server_cpu_s=0.11, client_cpu_s=0.0)
    set_bound = next(b for b in _explained(login).bounds or () if b.label == "per-file")
    file_s = 4 * 0.0028 + 0.002
    assert set_bound.bytes_per_s == pytest.approx(50 * 65536 / (17 * 0.0028 + 50 * file_s + 2 * DELAYED_ACK_S))
    assert set_bound.explanation.endswith(", + 80 ms waiting for delayed ACKs per set")
    # where a fixed cost per copy was fitted (a single file's copies by the same client), the set's login, its
    # waits among it, is in that cost: charged once, as the fixed cost
    singles = tuple(
        Result("sftp", "openssh", "upload", f"{size >> 20}M", size, 1, samples=(copy,) * 3)
        for size in (1 << 20, 8 << 20)
        for copy in [Sample(bytes=size, seconds=0.3 + size / 60e6, verified=True, server_cpu_s=0.0, client_cpu_s=0.0)]
    )
    base = Baseline(up_bytes_per_s=62.5e6, down_bytes_per_s=62.5e6, rtt_ms=2.8)
    rows = explain(Run(id=1, meta={}, baseline=base, results=(*singles, login)), "10.77.0.2").rows
    fixed_s = rows[2].fixed_cost_s
    assert fixed_s == pytest.approx(0.3, abs=0.01)
    fitted = next(b for b in rows[2].bounds or () if b.label == "per-file")
    assert "waiting for delayed ACKs" not in fitted.explanation
    assert fitted.bytes_per_s == pytest.approx(50 * 65536 / (fixed_s + 50 * file_s), rel=1e-3)


def test_a_per_file_bound_says_what_its_overlapping_parts_would_add_in_turn_and_keeps_it_with_a_fixed_cost() -> None:
    from workbench.core.ceiling import per_file_bound, with_fixed_cost

    # 64 KiB at 62.5 MB/s (1.05 ms), the server's 1 ms and the client's 3 ms: the client's is charged, the other
    # two would add 2.05 ms per file run in turn
    bound = per_file_bound(
        30 * 65536, 30, 3, 0.0028, 62.5e6, server_per_file_s=0.001, client_per_file_s=0.003, direction=None
    )
    assert bound.in_turn_s == pytest.approx(65536 / 62.5e6 + 0.001)
    assert with_fixed_cost(bound, 0.2, 30 * 65536).in_turn_s == bound.in_turn_s
    # the bytes alone: nothing overlaps them
    assert per_file_bound(30 * 65536, 30, 3, 0.0028, 62.5e6, direction=None).in_turn_s == 0.0


def test_the_sending_side_is_charged_in_turn_only_for_a_client_that_takes_a_turn_per_file() -> None:
    from workbench.core.ceiling import per_file_bound, sending_side

    assert sending_side("upload", 1, 1) == "client" and sending_side("download", 1, 4) == "server"
    assert sending_side("upload", 4, 3) is None  # files in flight: the sender works beside the last file's bytes
    assert sending_side("download", 1, 0) is None  # no turn between files (a set streamed whole)
    # 10 ms RTT, the bytes' 1 ms, the server's 3 ms and the client's 2 ms: the sender's CPU in turn, then the
    # longer of the bytes and the receiver's
    assert per_file_s(1, 0.01, 0.001, server_s=0.003, client_s=0.002, sender="client") == pytest.approx(0.015)
    assert per_file_s(1, 0.01, 0.001, server_s=0.003, client_s=0.002, sender="server") == pytest.approx(0.015)
    assert per_file_s(1, 0.01, 0.001, server_s=0.0005, client_s=0.002, sender="server") == pytest.approx(0.0125)
    assert per_file_s(1, 0.01, 0.001, server_s=0.003, client_s=0.002) == pytest.approx(0.013)  # all overlap
    # a download one file at a time: the server sends, in turn; the client's CPU and the bytes overlap, and what
    # they would add in turn is the shorter of the two, the sender's never among it
    down = per_file_bound(10 * 65536, 10, 2, 0.01, 62.5e6, server_per_file_s=0.003, client_per_file_s=0.002,
                          direction="download")  # fmt: skip
    assert down.bytes_per_s == pytest.approx(65536 / (0.02 + 0.003 + 0.002))
    assert "2 RTT + 3.0 ms server in turn + 2.0 ms client per file (overlapping 64 KiB on the path)" in down.explanation
    assert down.overlapping == ("its bytes", "the client's CPU")
    assert down.in_turn_s == pytest.approx(65536 / 62.5e6)
    # the same set with files in flight: no turn, the server's CPU overlaps the rest
    flight = per_file_bound(10 * 65536, 10, 2, 0.01, 62.5e6, files_in_flight=2, server_per_file_s=0.003,
                            direction="download")  # fmt: skip
    assert "in turn" not in flight.explanation
    assert flight.bytes_per_s == pytest.approx(10 * 65536 / (10 * (0.02 + 0.003) / 2))
    assert flight.overlapping == ("its bytes", "the server's CPU")


def _pysmb_row(
    direction: str, seconds: float, client_cpu_s: float, server_cpu_s: float, startup_bytes: int | None = None
) -> Result:
    """pysmb's 16 MiB copy, 64 KiB × 1 request outstanding: 256 requests, each side's CPU on them `*_cpu_s` (the
    per-copy allowance added to what it used); its sender's sockets read in BBR's start-up for `startup_bytes` of its
    16 MiB, or not read (None)."""
    tcp = None
    if startup_bytes is not None:
        tcp = TcpTriage(
            side="sender", host="client" if direction == "upload" else "server", elapsed_s=seconds, connections=1,
            bytes_seen=16 << 20, cc_known_bytes=16 << 20, bbr_startup_bytes=startup_bytes,
        )  # fmt: skip
    sample = Sample(
        bytes=16 << 20,
        seconds=seconds,
        verified=True,
        client_cpu_s=client_cpu_s + fixedcost.PER_COPY_CPU_S,
        server_cpu_s=server_cpu_s + fixedcost.PER_COPY_CPU_S,
        tcp=tcp,
    )
    details = ClientDetails(request_bytes=65536, requests_in_flight=1, timed_includes_setup=False)
    return Result("smb", "pysmb", direction, "16M", 16 << 20, 1, samples=(sample,) * 3, details=details)


@pytest.mark.parametrize(
    ("direction", "in_turn", "beside"),
    [("upload", "0.50 ms client in turn", "0.90 ms server"), ("download", "0.30 ms server in turn", "0.90 ms client")],
)
@pytest.mark.parametrize("startup_bytes", [16 << 20, 0, None])
def test_a_rows_requests_ceiling_charges_its_data_senders_cpu_in_turn_and_a_paced_burst_seen(
    direction: str, in_turn: str, beside: str, startup_bytes: int | None
) -> None:
    """pysmb on the wifi-ac lab with BBR recorded: RTT, the data sender's CPU per request in turn, then the longer of
    the data's time and the receiver's CPU; each side's CPU per request is its CPU over the copy's 256 requests. The
    data's time is BBR's paced burst (1.5 ms against 1.05 on the path) only where the sender's sockets were read in
    start-up: not where they had left it, nor where they were not read (the link's record is not enough)."""
    sender_s, receiver_s = (0.0005, 0.0009) if direction == "upload" else (0.0003, 0.0009)
    client_s, server_s = (sender_s, receiver_s) if direction == "upload" else (receiver_s, sender_s)
    paced = bool(startup_bytes)
    data_s = paced_burst_s(0.0028, 65536) if paced else 65536 / 62.5e6
    request_s = 0.0028 + sender_s + max(data_s, receiver_s)
    row = _pysmb_row(direction, 256 * request_s * 1.1, 256 * client_s, 256 * server_s, startup_bytes)
    link = {"cc": "bbr", "rtt_ms": 2.8, "expected_goodput_bytes_per_s": 62.5e6}
    base = Baseline(up_bytes_per_s=62.5e6, down_bytes_per_s=62.5e6, rtt_ms=2.8)
    [explained] = explain(Run(id=1, meta={}, baseline=base, results=(row,), link=link), "10.77.0.2").rows
    assert explained.bound == "requests", explained
    assert explained.ceiling_bytes_per_s == pytest.approx(65536 / request_s)
    data = "1.5 ms paced by BBR" if paced else "1.0 ms to send"
    said = explained.bound_explanation or ""
    assert f"(2.8 ms + {in_turn} + {data}, overlapping {beside})" in said, said


def test_a_row_slower_than_its_requests_ceiling_says_what_running_its_parts_in_turn_would_add() -> None:
    # no link record, no congestion state: the bytes go at the path's rate (1.05 ms), beside the server's 0.9 ms
    request_s = 0.0028 + 0.0005 + 65536 / 62.5e6
    row = _pysmb_row("upload", 256 * request_s * 1.5, 256 * 0.0005, 256 * 0.0009)
    base = Baseline(up_bytes_per_s=62.5e6, down_bytes_per_s=62.5e6, rtt_ms=2.8)
    [explained] = explain(Run(id=1, meta={}, baseline=base, results=(row,)), "10.77.0.2").rows
    assert explained.bound == "unexplained", explained
    said = explained.bound_explanation or ""
    assert "the parts charged as overlapping (its bytes and the server's CPU) may have run in turn" in said, said
    # the shorter of the two, the server's 0.90 ms, over 256 requests
    assert "(in turn they would add ≈0.90 ms per request, ≈230 ms per copy)" in said, said


def test_with_requests_outstanding_what_in_turn_would_add_is_said_per_round() -> None:
    # 4 × 1 MiB outstanding, no path rate known: a round waits its RTT and the longer of the server's 5 ms and the
    # client's 2 ms per request; in turn the client's 2 ms would add per round of 4, 4 rounds in a 16 MiB copy
    sample = Sample(bytes=16 << 20, seconds=1.0, verified=True, client_cpu_s=0.032 + 0.01, server_cpu_s=0.08 + 0.01)
    details = ClientDetails(request_bytes=1 << 20, requests_in_flight=4, timed_includes_setup=False)
    row = Result("afp", "python", "upload", "16M", 16 << 20, 1, samples=(sample,) * 3, details=details)
    [why] = explain(Run(id=1, meta={}, baseline=Baseline(rtt_ms=2.8), results=(row,)), "10.77.0.2").rows
    assert why.bound == "unexplained", why
    requests = next(b for b in why.bounds or () if b.label == "requests")
    assert requests.bytes_per_s == pytest.approx(4 * (1 << 20) / (0.0028 + 0.005))
    said = why.bound_explanation or ""
    assert "(in turn they would add ≈2.0 ms per round of 4 requests, ≈8.0 ms per copy)" in said, said

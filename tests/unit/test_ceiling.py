"""Ceiling maths: each bound's value and explanation, and which bound explains a rate."""

from __future__ import annotations

import pytest

from workbench.core.ceiling import (
    Bound,
    binding_bound,
    bounds,
    bounds_from_details,
    format_bits,
    format_bound,
    format_bytes,
    format_ms,
)
from workbench.protocols.details import ClientDetails


def by_label(found: list[Bound]) -> dict[str, Bound]:
    return {b.label: b for b in found}


def test_no_inputs_no_bounds() -> None:
    assert bounds() == []
    assert binding_bound([]) is None


def test_window_bound_is_window_over_rtt() -> None:
    (bound,) = bounds(rtt_s=0.0028, window_bytes=128 * 1024)
    assert bound.label == "window"
    assert bound.bps == pytest.approx(131072 / 0.0028)
    assert bound.explanation == "window 128 KiB / 2.8 ms"


def test_requests_bound_multiplies_requests_in_flight() -> None:
    one = by_label(bounds(rtt_s=0.0004, request_bytes=65536, requests_in_flight=1))["requests"]
    assert one.bps == pytest.approx(65536 / 0.0004)
    assert one.explanation == "64 KiB × 1 request / 0.40 ms"
    eight = by_label(bounds(rtt_s=0.0004, request_bytes=1 << 20, requests_in_flight=8))["requests"]
    assert eight.bps == pytest.approx(8 * (1 << 20) / 0.0004)
    assert eight.explanation == "1 MiB × 8 requests / 0.40 ms"


def test_requests_in_flight_defaults_to_one() -> None:
    bound = by_label(bounds(rtt_s=0.001, request_bytes=32768))["requests"]
    assert bound.bps == pytest.approx(32768 / 0.001)


def test_ssh_window_and_link() -> None:
    found = by_label(bounds(link_bps=125e6, rtt_s=0.002, ssh_window_bytes=2 << 20))
    assert found["link"].bps == 125e6
    assert found["link"].explanation == "link 1 Gbit/s"
    assert found["ssh-window"].bps == pytest.approx((2 << 20) / 0.002)
    assert found["ssh-window"].explanation == "SSH window 2 MiB / 2.0 ms"


def test_bounds_need_an_rtt_for_window_like_limits() -> None:
    assert bounds(window_bytes=65536, request_bytes=65536, ssh_window_bytes=65536) == []
    assert bounds(rtt_s=0.0, window_bytes=65536) == []


def test_labels_and_order() -> None:
    found = bounds(
        link_bps=1e9,
        rtt_s=0.001,
        window_bytes=1 << 20,
        request_bytes=65536,
        ssh_window_bytes=1 << 21,
        client_cpu=0.5,
        measured_bps=1e8,
    )
    assert [b.label for b in found] == ["link", "window", "requests", "ssh-window", "cpu"]


def test_cpu_bound_scales_measured_rate_to_one_core() -> None:
    (bound,) = bounds(client_cpu=0.25, server_cpu=0.5, measured_bps=100e6)
    assert bound.label == "cpu"
    assert bound.bps == pytest.approx(200e6)
    assert bound.explanation == "server CPU 50 % of a core"
    assert not bound.saturated


def test_cpu_bound_needs_a_measured_rate() -> None:
    assert bounds(client_cpu=0.95) == []


def test_multithreaded_process_past_one_core_is_bound_at_the_measured_rate() -> None:
    (bound,) = bounds(client_cpu=1.6, measured_bps=300e6)
    assert bound.bps == pytest.approx(300e6)
    assert bound.saturated


def test_binding_bound_is_the_lowest_ceiling() -> None:
    found = bounds(link_bps=125e6, rtt_s=0.0004, request_bytes=65536, client_cpu=0.5, measured_bps=100e6)
    # requests: 64 KiB / (0.4 ms + 64 KiB at 125 MB/s = 0.52 ms) = 70.9 MB/s; link 125 MB/s; cpu 200 MB/s
    assert binding_bound(found).label == "requests"
    assert binding_bound(found).bps == pytest.approx(65536 / (0.0004 + 65536 / 125e6))
    # four 1 MiB requests in flight: 4 MiB / (0.4 ms + 21 ms to send one) = 196 MB/s, above a 50 MB/s link
    found = bounds(
        link_bps=50e6, rtt_s=0.0004, request_bytes=1 << 20, requests_in_flight=4, client_cpu=0.5, measured_bps=40e6
    )
    assert binding_bound(found).label == "link"


def test_a_cpu_well_below_a_core_never_binds() -> None:
    found = bounds(link_bps=125e6, client_cpu=0.4, measured_bps=40e6)
    # extrapolated cpu ceiling 100 MB/s is below the link, but a 40 % busy core is not what held it back
    assert by_label(found)["cpu"].bps < by_label(found)["link"].bps
    assert binding_bound(found).label == "link"
    assert binding_bound(bounds(client_cpu=0.4, measured_bps=40e6)) is None


def test_saturated_cpu_wins_over_a_lower_ceiling() -> None:
    found = bounds(link_bps=50e6, client_cpu=0.93, measured_bps=48e6)
    assert by_label(found)["cpu"].bps > by_label(found)["link"].bps
    assert binding_bound(found).label == "cpu"


def test_bounds_from_client_details() -> None:
    details = ClientDetails(request_bytes=65536, requests_in_flight=1, cipher="x")
    found = by_label(bounds_from_details(details, rtt_s=0.0004))
    assert set(found) == {"requests"}
    assert found["requests"].bps == pytest.approx(65536 / 0.0004)
    # a document's junk value is set aside when it is read, never fed to the maths
    assert bounds_from_details(ClientDetails.from_json({"request_bytes": "junk"}), rtt_s=0.001) == []
    ssh = by_label(bounds_from_details(ClientDetails(ssh_window_bytes=2 << 20), rtt_s=0.002))
    assert set(ssh) == {"ssh-window"} and ssh["ssh-window"].bps == pytest.approx((2 << 20) / 0.002)


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

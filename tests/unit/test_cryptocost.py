"""The measured CPU cost per byte of SMB's signing and encryption algorithms (workbench.shared.cryptocost)."""

from __future__ import annotations

import ctypes.util

from workbench.shared import cryptocost
from workbench.shared.cryptocost import ALGORITHMS, CryptoCosts


def test_every_algorithm_is_measured_in_cpu_seconds_per_byte_within_the_budget() -> None:
    costs = cryptocost.measure(message_bytes=1 << 16)
    assert sorted(costs.cpu_s_per_byte) == sorted(ALGORITHMS)
    for name, per_byte in costs.cpu_s_per_byte.items():
        # Between a thousandth of a nanosecond and a microsecond per byte: anything else is a unit slip.
        assert 1e-12 < per_byte < 1e-6, (name, per_byte)
    # The budget is checked between rounds, so one round more than MAX_CPU_S at most.
    assert 0 < costs.measure_cpu_s < cryptocost.MAX_CPU_S + 2 * cryptocost.ROUNDS * cryptocost.ROUND_CPU_S
    assert "OpenSSL" in costs.library
    # Samba's library is timed too wherever it is installed (Samba depends on it), never guessed where it is not
    if ctypes.util.find_library("gnutls") is not None:
        assert sorted(costs.gnutls_cpu_s_per_byte) == sorted(ALGORITHMS)
        assert all(1e-12 < v < 1e-6 for v in costs.gnutls_cpu_s_per_byte.values())
        assert (costs.gnutls_library or "").startswith("GnuTLS ")
    else:
        assert not costs.gnutls_cpu_s_per_byte and costs.gnutls_library is None


def test_the_server_pays_gnutls_and_the_client_the_cheaper_library() -> None:
    gnutls = {"AES-128-CCM": 1.3e-9}
    both = CryptoCosts({"AES-128-CCM": 7e-10}, "OpenSSL x", gnutls_cpu_s_per_byte=gnutls, gnutls_library="GnuTLS 3.7.9")
    assert both.for_side("AES-128-CCM", "server") == 1.3e-9  # smbd signs and encrypts with GnuTLS
    assert both.for_side("AES-128-CCM", "client") == 7e-10  # a ceiling that holds for either client library
    openssl_only = CryptoCosts({"AES-128-CCM": 7e-10}, "OpenSSL x")
    assert openssl_only.for_side("AES-128-CCM", "server") == 7e-10
    assert openssl_only.for_side("AES-256-GCM", "client") is None
    assert CryptoCosts.from_json(both.to_json()) == both


def test_costs_read_back_and_garbage_reads_as_not_known() -> None:
    costs = CryptoCosts({"AES-128-CMAC": 9e-10, "AES-128-GCM": 1e-10}, "OpenSSL x", 1 << 18, 0.05)
    assert CryptoCosts.from_json(costs.to_json()) == costs
    assert CryptoCosts.from_json(None) is None
    assert CryptoCosts.from_json({"cpu_s_per_byte": "fast"}) is None
    # unknown names, non-numbers, booleans and non-positive figures are dropped, never guessed
    odd_doc = {"ROT13": 1e-9, "AES-128-CCM": True, "AES-256-GCM": -1, "AES-128-GCM": 2e-10}
    odd = CryptoCosts.from_json({"cpu_s_per_byte": odd_doc})
    assert odd is not None and dict(odd.cpu_s_per_byte) == {"AES-128-GCM": 2e-10}


def test_the_run_record_says_why_the_server_is_not_known() -> None:
    client = CryptoCosts({"AES-128-CMAC": 9e-10}, "OpenSSL x")
    record = cryptocost.run_record(client, None, "a stock server")
    assert record["server"] is None and record["server_not_known"] == "a stock server"
    assert cryptocost.from_run({"crypto": record}, "client") == client
    assert cryptocost.from_run({"crypto": record}, "server") is None
    both = cryptocost.run_record(client, client.to_json())
    assert cryptocost.from_run({"crypto": both}, "server") == client and "server_not_known" not in both
    assert cryptocost.ns_per_byte(9e-10) == "0.90 ns/B"

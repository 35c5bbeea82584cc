"""The crypto ceiling of signed or encrypted SMB rows: its arithmetic, the row it explains, and the verdict."""

from __future__ import annotations

from workbench.core.ceiling import (
    CPU_SATURATED,
    Bound,
    CryptoSide,
    CryptoUse,
    binding_bound,
    bounds,
    crypto_bound,
    crypto_in_use,
)
from workbench.core.explain import explain
from workbench.core.results import Baseline, Result, Run, Sample
from workbench.protocols.details import ClientDetails
from workbench.shared import cryptocost
from workbench.shared.cryptocost import CryptoCosts

MIB = 1 << 20
CMAC = CryptoUse("signing", "AES-128-CMAC")


def test_a_host_mostly_doing_crypto_is_bound_by_its_cores_over_all_it_spends_per_byte() -> None:
    # 0.25 core; 8 ns of CPU per byte, 3 of them CMAC: 0.25 / 8e-9 = 31.25 MB/s, the cap used (24 %) is saturated.
    side = CryptoSide("server", 0.25, 3e-9, cpu_s_per_byte=8e-9, cpu_fraction=0.24)
    bound = crypto_bound(CMAC, [side])
    assert bound is not None and bound.label == "crypto"
    assert abs(bound.bytes_per_s - 31.25e6) < 1
    assert bound.saturated and "38%" in bound.explanation and bound.explanation.startswith("server 0.25 core")
    # the same host below CPU_SATURATED of its cap is a ceiling, not a saturated one
    idle = CryptoSide("server", 0.25, 3e-9, cpu_s_per_byte=8e-9, cpu_fraction=0.25 * CPU_SATURATED - 0.01)
    assert not crypto_bound(CMAC, [idle]).saturated  # type: ignore[union-attr]


def test_crypto_alone_where_the_host_spends_little_on_it_or_was_not_measured() -> None:
    # GMAC at 0.05 ns/B of 8 ns/B is no limit's name: the ceiling is the algorithm alone, one core / 0.05 ns/B.
    small = crypto_bound(CryptoUse("signing", "AES-128-GMAC"), [CryptoSide("server", 1.0, 5e-11, 8e-9, 0.99)])
    assert small is not None and abs(small.bytes_per_s - 2e10) < 1e3 and not small.saturated
    unmeasured = crypto_bound(CMAC, [CryptoSide("client", 1.0, 2e-9)])
    assert unmeasured is not None and abs(unmeasured.bytes_per_s - 5e8) < 1
    assert "client 1 core" in unmeasured.explanation
    # the host that limits is the one with the lower rate
    both = crypto_bound(CMAC, [CryptoSide("client", 1.0, 2e-9), CryptoSide("server", 0.5, 2e-9)])
    assert both is not None and both.bytes_per_s == 0.5 / 2e-9 and both.explanation.startswith("server")
    assert crypto_bound(CMAC, []) is None


def test_what_a_row_pays_for_encryption_first_else_signing_else_the_dialects_usual() -> None:
    assert crypto_in_use(ClientDetails()) is None
    assert crypto_in_use(ClientDetails(signing=False, encryption=False, dialect="3.1.1")) is None
    assert crypto_in_use(ClientDetails(signing=True, dialect="2.0.2")) == CryptoUse("signing", "HMAC-SHA256", True)
    assert crypto_in_use(ClientDetails(signing=True, dialect="SMB3_00")) == CryptoUse("signing", "AES-128-CMAC", True)
    # an encrypted message is not signed too: only its cipher costs
    assert crypto_in_use(ClientDetails(signing=True, encryption=True, dialect="3.0.2")) == CryptoUse(
        "encryption", "AES-128-CCM", True
    )
    assert crypto_in_use(ClientDetails(signing=True, dialect=None)) is None  # nothing to tell the algorithm by


def test_the_cpu_ceiling_knows_the_servers_cap_and_a_saturated_crypto_names_it() -> None:
    capped = bounds(server_cpu=0.24, measured_bytes_per_s=30e6, server_cores=0.25)
    assert capped[0].label == "cpu" and capped[0].saturated and abs(capped[0].bytes_per_s - 31.25e6) < 1
    uncapped = bounds(server_cpu=0.24, measured_bytes_per_s=30e6)
    assert not uncapped[0].saturated and uncapped[0].bytes_per_s == 125e6
    crypto = Bound("crypto", 31.5e6, "server 0.25 core / …", saturated=True)
    assert binding_bound([*capped, crypto]) is crypto  # the same full CPU, named for what it spends on
    assert binding_bound([*capped, Bound("crypto", 60e6, "client …", saturated=True)]) is capped[0]


def _row(seconds: float, server_cpu_s: float, client_cpu_s: float, details: ClientDetails) -> Result:
    nbytes = 64 * MIB
    samples = tuple(
        Sample(nbytes, s, verified=True, client_cpu_s=client_cpu_s, server_cpu_s=server_cpu_s)
        for s in (seconds * 0.98, seconds, seconds * 1.02)
    )
    return Result("smb", "smbprotocol", "download", "64M", nbytes, 1, samples=samples, warmup=1, details=details)


def _run(rows: tuple[Result, ...], server: CryptoCosts | None, client: CryptoCosts, cap: float | None) -> Run:
    link = {"rate_bits_per_s": 1e9, "expected_goodput_bytes_per_s": 117e6}
    if cap is not None:
        link["server_cpu_cap_cores"] = cap
    meta = {"crypto": cryptocost.run_record(client, server.to_json() if server else None, "a stock server")}
    return Run(1, meta, Baseline(up_bytes_per_s=117e6, down_bytes_per_s=117e6, rtt_ms=0.3), results=rows, link=link)


SIGNED = ClientDetails(signing=True, signing_algorithm="AES-128-CMAC", dialect="3.1.1", request_bytes=MIB)


def test_a_signed_row_on_a_capped_server_is_bound_by_crypto_and_the_verdict_names_it() -> None:
    # 64 MiB in 2 s (33.6 MB/s); the server spent 0.48 s of its 0.25 core (7.2 ns/B, 3 of them CMAC)
    costs = CryptoCosts({"AES-128-CMAC": 3e-9}, "OpenSSL test")
    run = _run((_row(2.0, 0.48, 0.2, SIGNED),), costs, costs, cap=0.25)
    why = explain(run, "10.0.0.2")
    row = why.rows[0]
    assert row.bound == "crypto", row.bound_explanation
    assert row.ceiling_bytes_per_s is not None
    assert abs(row.ceiling_bytes_per_s - 64 * MIB / 0.48 * 0.25) / row.ceiling_bytes_per_s < 1e-6
    sentence = [s for s in why.verdict if s.startswith("SMB signing")]
    assert sentence == [
        "SMB signing (AES-128-CMAC) costs the server 0.3 core per 100 MB/s, 42% of its CPU per byte: "
        "smb/smbprotocol download 64M is held at 33.6 MB/s by the server's CPU (capped at 0.25 core), not the network."
    ]
    assert 3 <= len(why.verdict) <= 6


def test_a_row_faster_than_its_crypto_alone_allows_says_unexplained() -> None:
    # the client measured CMAC at 50 ns/B: one core carries 20 MB/s of it, and the copy ran at 33.6 MB/s
    slow = CryptoCosts({"AES-128-CMAC": 5e-8}, "OpenSSL test")
    why = explain(_run((_row(2.0, 0.1, 0.2, SIGNED),), None, slow, cap=None), "10.0.0.2").rows[0]
    assert why.bound == "unexplained" and why.bound_explanation is not None
    assert "crypto ceiling" in why.bound_explanation and "cheaper there than OpenSSL" in why.bound_explanation


def test_an_unexplained_signed_row_still_has_its_measured_crypto_cost_said_and_no_holding_claim() -> None:
    # the same row as above: the cost the client measured is a fact, the row's limit is not known
    slow = CryptoCosts({"AES-128-CMAC": 5e-8}, "OpenSSL test")
    why = explain(_run((_row(2.0, 0.1, 0.2, SIGNED),), None, slow, cap=None), "10.0.0.2")
    assert why.rows[0].bound == "unexplained"
    said = [s for s in why.verdict if s.startswith("SMB signing")]
    assert len(said) == 1, why.verdict
    assert said[0].startswith("SMB signing (AES-128-CMAC) costs the client 5 core per 100 MB/s")
    assert said[0].endswith("on the client's CPU; no ceiling explains it.") and "held" not in said[0]
    assert 3 <= len(why.verdict) <= 6
    assert not [n for n in why.notes if n.startswith("SMB signing")]  # said once, in the verdict
    # a verdict with no room left for it (loopback, stalls and the rest said first) leaves it to the notes
    from workbench.core.verdict import verdict_notes

    kept = verdict_notes(_run((_row(2.0, 0.1, 0.2, SIGNED),), None, slow, cap=None), why.rows, [])
    assert said[0] in kept


def test_an_unsigned_row_or_a_run_without_costs_has_no_crypto_ceiling() -> None:
    costs = CryptoCosts({"AES-128-CMAC": 3e-9}, "OpenSSL test")
    plain = ClientDetails(signing=False, dialect="3.1.1", request_bytes=MIB)
    why = explain(_run((_row(2.0, 0.48, 0.2, plain),), costs, costs, cap=0.25), "10.0.0.2").rows[0]
    assert all(b.label != "crypto" for b in why.bounds or ())
    assert why.bound == "cpu"  # the capped server's full CPU, with no crypto in it
    base = Baseline(up_bytes_per_s=117e6, down_bytes_per_s=117e6, rtt_ms=0.3)
    bare = Run(1, {}, base, results=(_row(2.0, 0.48, 0.2, SIGNED),))
    assert all(b.label != "crypto" for b in explain(bare, "10.0.0.2").rows[0].bounds or ())


def test_a_signed_row_held_by_the_servers_other_work_says_so() -> None:
    # CMAC at 1 ns/B of the server's 7.2 ns/B: the capped CPU binds, and the crypto is 14 % of it
    costs = CryptoCosts({"AES-128-CMAC": 1e-9}, "OpenSSL test")
    why = explain(_run((_row(2.0, 0.48, 0.2, SIGNED),), costs, costs, cap=0.25), "10.0.0.2")
    assert why.rows[0].bound == "cpu"
    crypto = next(b for b in why.rows[0].bounds or () if b.label == "crypto")
    assert abs(crypto.bytes_per_s - 0.25 / 1e-9) < 1  # the algorithm alone: 250 MB/s on a quarter core
    said = [s for s in why.verdict if s.startswith("SMB signing")]
    assert len(said) == 1 and "14% of its CPU per byte" in said[0] and said[0].endswith("but by its other work.")


def test_a_cpu_bound_row_whose_crypto_weighs_little_gets_no_crypto_sentence() -> None:
    # GMAC at 0.05 ns/B of the server's 7.2 ns/B: under a tenth of that CPU, the verdict leaves the crypto out
    costs = CryptoCosts({"AES-128-GMAC": 5e-11}, "OpenSSL test")
    gmac = ClientDetails(signing=True, signing_algorithm="AES-128-GMAC", dialect="3.1.1", request_bytes=MIB)
    why = explain(_run((_row(2.0, 0.48, 0.2, gmac),), costs, costs, cap=0.25), "10.0.0.2")
    assert why.rows[0].bound == "cpu"
    assert not [s for s in why.verdict if s.startswith("SMB signing")]


def test_a_crypto_ceiling_takes_no_fixed_cost_on_top_of_the_cpu_it_was_made_from() -> None:
    # the CPU per byte was taken over whole copies, logins included: adding the login's time again would put the
    # ceiling under copies that met it (smbclient's encrypted download beat such a ceiling by 11 % in the lab)
    from workbench.core.ceiling import with_fixed_cost

    bound = crypto_bound(CMAC, [CryptoSide("server", 0.25, 1.2e-9, 4e-9, 0.24)])
    assert bound is not None and with_fixed_cost(bound, 0.14, 16 * MIB) is bound


def test_a_cap_above_one_core_leaves_a_copys_server_at_one_core() -> None:
    from workbench.core.ceiling import _cpu_bound

    bound = _cpu_bound(0.2, 1.0, 50e6, server_cores=2.0)
    assert bound is not None and bound.saturated and bound.bytes_per_s == 50e6
